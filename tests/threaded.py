"""A small server beside longtools in a test (a proxy, a stand-in model API): every path answered
by one handler, on a free loopback port, by uvicorn in a thread of this process (httpx's
``serve_in_thread``), stopped by ``close()``."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["InThread", "serve_in_thread"]


@dataclass
class InThread:
    port: int
    _server: uvicorn.Server
    _thread: threading.Thread

    def close(self, *, force: bool = False) -> None:
        """Stop it (``force``: without waiting for open connections, a stream among them)."""
        self._server.should_exit = True
        self._server.force_exit = force
        self._thread.join(timeout=10)


def serve_in_thread(
    handler: Callable[[Request], Awaitable[Response]],
    *,
    methods: Sequence[str] = ("GET", "POST", "DELETE"),
    within: float = 10,
) -> InThread:
    """Serve every path with ``handler``; returns once it accepts connections (bounded by ``within``).

    Raises:
        RuntimeError: it did not start within ``within`` seconds.
    """
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on a socket it knows to be TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until the server accepts them
    app = Starlette(routes=[Route("/{path:path}", handler, methods=list(methods))])
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + within
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server of {handler.__qualname__} did not start within {within} s")
        time.sleep(0.01)
    return InThread(sock.getsockname()[1], server, thread)
