"""A server written with the official SDK's ``MCPServer`` (not longtools), for the CLI's tests.

Its ``release`` tool asks for a confirmation the 2026-07-28 way: it returns an InputRequiredResult
and reads the answer on the retry, as the SDK's own MRTR example does. Run as a script it serves
on a free loopback port and prints the endpoint.
"""

from __future__ import annotations

import socket

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Ship it?"}},
    "required": ["confirm"],
}


def build() -> MCPServer:
    server = MCPServer("sdk-release-example")

    @server.tool(description="Release a version after a confirmation.")
    async def release(version: str, ctx: Context) -> str | InputRequiredResult:
        answer = (ctx.input_responses or {}).get("confirm")
        if not isinstance(answer, ElicitResult):
            params = ElicitRequestFormParams(message=f"Release {version}?", requested_schema=CONFIRM)
            return InputRequiredResult(
                input_requests={"confirm": ElicitRequest(params=params)}, request_state="asked"
            )
        if answer.action == "accept" and (answer.content or {}).get("confirm"):
            return f"released {version}"
        return f"release of {version} called off"

    return server


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    app = build().streamable_http_app()
    print(f"sdk server at http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)  # noqa: T201
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
