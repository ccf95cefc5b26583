"""fastmcp 4.1.4 on the SDK's transport, so one app for both protocol eras, as the SDK's.

``echo(text) -> str`` for B1 and B1L. ``confirm(text)`` asks the way of the client's era. A
2026-07-28 client (B2): fastmcp's guard pattern, it returns an ``InputRequiredResult`` and reads
``ctx.input_responses`` when re-run with the answer; fastmcp seals ``requestState`` with the SDK's
boundary under a per-process ephemeral key. A 2025-era client (B2L): ``ctx.elicit`` pushes
``elicitation/create`` on the call's SSE stream and waits for the answer (fastmcp refuses it to a
2026-era client, which has no such channel).

The flags are the SDK's (``bench.servers.sdk_echo``): by default stateless with JSON answers (B1,
B2), ``--stateful`` for B1L, ``--stateful --sse`` for B2L.
"""

from __future__ import annotations

from fastmcp import Context, FastMCP
from fastmcp.server.elicitation import AcceptedElicitation
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


def build() -> FastMCP:
    server = FastMCP("bench-fastmcp")

    @server.tool
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    async def confirm(text: str, ctx: Context) -> str | InputRequiredResult:
        """Return the text after the user confirms."""
        era = ctx.request_context
        if era is not None and era.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            # A 2025-era session: the question goes out on this call's stream, and the tool
            # waits here for the answer, which the client POSTs on the same session.
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
    app = build().http_app(path="/mcp", json_response=json_response, stateless_http=stateless_http)
    serve(app, "fastmcp")


if __name__ == "__main__":
    main()
