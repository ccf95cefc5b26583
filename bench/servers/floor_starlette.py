"""The HTTP floor: a bare Starlette endpoint that answers the same JSON-RPC as an MCP server would.

It parses the body, builds the result dict and returns a ``JSONResponse``; nothing else (no header
checks, no validation, no sealing). ``echo`` answers like the SDK's ``echo(text: str) -> str``;
``confirm`` answers the first round with an elicitation and a fixed opaque ``requestState``, and the
second with the text, so B2's floor is two bare HTTP exchanges.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.servers._uvicorn import serve

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def _text_result(text: str) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"result": text},
        "isError": False,
        "resultType": "complete",
    }


async def mcp(request: Request) -> JSONResponse:
    body = await request.json()
    params = body.get("params") or {}
    arguments = params.get("arguments") or {}
    text = str(arguments.get("text", ""))
    if params.get("name") == "confirm" and "inputResponses" not in params:
        result: dict[str, Any] = {
            "inputRequests": {
                "confirm": {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": f"Echo {text}?", "requestedSchema": CONFIRM_SCHEMA},
                }
            },
            "requestState": "floor-state",
            "resultType": "input_required",
        }
    else:
        result = _text_result(text)
    return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "result": result})


def build() -> Starlette:
    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])


if __name__ == "__main__":
    serve(build(), "floor")
