"""fastmcp 4.1.4, stateless HTTP with JSON responses; it speaks 2026-07-28 (on the SDK's transport).

``echo(text) -> str`` for B1; ``confirm(text)`` for B2 uses fastmcp's guard pattern: it returns an
``InputRequiredResult`` and reads ``ctx.input_responses`` when re-run with the answer. fastmcp seals
``requestState`` with the SDK's boundary under a per-process ephemeral key.
"""

from __future__ import annotations

from fastmcp import Context, FastMCP
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from bench.servers._uvicorn import serve

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def build() -> FastMCP:
    server = FastMCP("bench-fastmcp")

    @server.tool
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    async def confirm(text: str, ctx: Context) -> str | InputRequiredResult:
        """Return the text after the user confirms."""
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
    serve(build().http_app(path="/mcp", json_response=True, stateless_http=True), "fastmcp")
