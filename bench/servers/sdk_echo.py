"""The official ``mcp`` SDK's ``MCPServer``, stateless with JSON responses (its fastest HTTP shape).

``echo(text) -> str`` for B1; ``confirm(text)`` for B2 asks one form question the 2026-07-28 way
(returns an ``InputRequiredResult``, reads ``ctx.input_responses`` on the retry), as
tests/sdk_server.py does. The SDK seals ``requestState`` with its per-process ephemeral key.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from bench.servers._uvicorn import serve

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def build() -> MCPServer:
    server = MCPServer("bench-sdk")

    @server.tool(description="Return the text unchanged.")
    async def echo(text: str) -> str:
        return text

    @server.tool(description="Return the text after the user confirms.")
    async def confirm(text: str, ctx: Context) -> str | InputRequiredResult:
        answer = (ctx.input_responses or {}).get("confirm")
        if not isinstance(answer, ElicitResult):
            params = ElicitRequestFormParams(message=f"Echo {text}?", requested_schema=CONFIRM_SCHEMA)
            asks = {"confirm": ElicitRequest(params=params)}
            return InputRequiredResult(input_requests=asks, request_state="asked")
        if answer.action == "accept" and (answer.content or {}).get("confirm"):
            return text
        return "declined"

    return server


if __name__ == "__main__":
    serve(build().streamable_http_app(json_response=True, stateless_http=True), "sdk")
