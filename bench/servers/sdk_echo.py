"""The official ``mcp`` SDK's ``MCPServer``, one app for both protocol eras.

``echo(text) -> str`` for B1 and B1L. ``confirm(text)`` asks one form question the way of the
client's era. A 2026-07-28 client (B2): it returns an ``InputRequiredResult`` and reads
``ctx.input_responses`` on the retry, as tests/sdk_server.py does; the SDK seals ``requestState``
with its per-process ephemeral key. A 2025-era client (B2L): ``ctx.elicit`` sends
``elicitation/create`` on the call's SSE stream and waits for the client's answer.

The SDK sends a request to the 2026-07-28 path when its ``MCP-Protocol-Version`` header names a
2026-era version, and to its 2025-era transport otherwise (``initialize`` carries no header). By
default stateless with JSON answers (B1, B2): a 2025-era client still initializes but gets no
session id, each of its requests gets a transport and a server task of its own, and no server
request can reach it. ``--stateful`` (the 2025-era transport only) keeps each session, its
transport and server task, in this process: the fastest shape for a 2025-era client (B1L).
``--sse`` answers with SSE streams (in both eras), which can carry a session's server requests:
with ``--stateful``, the shape in which a 2025-era tool can ask (B2L).
"""

from __future__ import annotations

from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel

from bench.servers._uvicorn import http_shape, serve

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


# ``CONFIRM_SCHEMA`` as ``ctx.elicit`` takes it. No docstring: it would go out as the schema's
# description, which the other servers' question does not have.
class ConfirmForm(BaseModel):
    confirm: bool


def build() -> MCPServer:
    server = MCPServer("bench-sdk")

    @server.tool(description="Return the text unchanged.")
    async def echo(text: str) -> str:
        return text

    @server.tool(description="Return the text after the user confirms.")
    async def confirm(text: str, ctx: Context) -> str | InputRequiredResult:
        if ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            # A 2025-era session: the SDK pushes the question on this call's stream, and the
            # tool waits here for the answer, which the client POSTs on the same session.
            asked = await ctx.elicit(f"Echo {text}?", ConfirmForm)
            return text if isinstance(asked, AcceptedElicitation) and asked.data.confirm else "declined"
        answer = (ctx.input_responses or {}).get("confirm")
        if not isinstance(answer, ElicitResult):
            params = ElicitRequestFormParams(message=f"Echo {text}?", requested_schema=CONFIRM_SCHEMA)
            asks = {"confirm": ElicitRequest(params=params)}
            return InputRequiredResult(input_requests=asks, request_state="asked")
        if answer.action == "accept" and (answer.content or {}).get("confirm"):
            return text
        return "declined"

    return server


def main() -> None:
    json_response, stateless_http = http_shape(__doc__)
    app = build().streamable_http_app(json_response=json_response, stateless_http=stateless_http)
    serve(app, "sdk")


if __name__ == "__main__":
    main()
