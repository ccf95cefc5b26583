"""Serve an ASGI app the same way for every Python peer: uvicorn on a free loopback port.

Every peer gets the same uvicorn settings: the asyncio loop and the h11 parser, as the peers
install by default (``bench/.venv`` has neither uvloop nor httptools; longtools installs httptools
and runs uvicorn in its own asyncio loop), no access log, warnings only. The socket is bound
with ``IPPROTO_TCP`` so that asyncio sets ``TCP_NODELAY`` on accepted connections, as it does for
a socket uvicorn binds itself.
"""

from __future__ import annotations

import argparse
import socket

import uvicorn
from starlette.types import ASGIApp


class _Server(uvicorn.Server):
    """uvicorn that prints the endpoint once it accepts connections."""

    def __init__(self, config: uvicorn.Config, label: str, port: int) -> None:
        super().__init__(config)
        self._label = label
        self._port = port

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"{self._label} serving MCP at http://127.0.0.1:{self._port}/mcp", flush=True)  # noqa: T201


def serve(app: ASGIApp, label: str) -> None:
    """Bind 127.0.0.1:0, print ``<label> serving MCP at URL`` when ready, serve until SIGTERM/SIGINT."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, loop="asyncio", http="h11", log_level="warning", access_log=False)
    _Server(config, label, sock.getsockname()[1]).run(sockets=[sock])


def http_shape(description: str | None) -> tuple[bool, bool]:
    """The MCP peers' command line, ``--stateful`` and ``--sse``: returns ``(json_response,
    stateless_http)`` for the SDK's app. By default stateless with JSON answers (B1, B2); B1L's and
    B2L's 2025-era shapes keep sessions, and B2L's answers with SSE streams."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--stateful", action="store_true", help="keep 2025-era sessions in this process (default: stateless)"
    )
    parser.add_argument(
        "--sse", action="store_true", help="answer with SSE streams, which can carry the session's requests"
    )
    args = parser.parse_args()
    return not args.sse, not args.stateful
