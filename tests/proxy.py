"""A round-robin HTTP proxy for tests: each request goes to the next upstream, streams included.

The harshest load balancer a session can meet: no stickiness at all, so consecutive requests of one
2025-era session, and a pushed question's answer, land on another replica than the request before.
An upstream that refuses the connection (killed) is skipped, as a balancer's health check would.
Runs in a thread of the test process and stops with ``close()`` (or with the process).
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
}


@dataclass
class Routed:
    """One request the proxy forwarded: where to, and what it was."""

    upstream: str
    http_method: str
    session: str | None
    body: bytes


@dataclass
class RoundRobin:
    upstreams: list[str]
    routed: list[Routed] = field(default_factory=list)
    url: str = ""
    _turn: itertools.count[int] = field(default_factory=itertools.count)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    def start(self) -> RoundRobin:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)  # connections wait in the backlog until the server accepts them
        port = sock.getsockname()[1]
        app = Starlette(routes=[Route("/{path:path}", self._forward, methods=["GET", "POST", "DELETE"])])
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the proxy never started"
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    def close(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)

    def upstreams_of(self, session: str) -> list[str]:
        return [routed.upstream for routed in self.routed if routed.session == session]

    async def _forward(self, request: Request) -> Response:
        body = await request.body()
        headers = {key: value for key, value in request.headers.items() if key.lower() not in _HOP_BY_HOP}
        client = httpx.AsyncClient(timeout=httpx.Timeout(10, read=None))
        for _ in range(len(self.upstreams)):
            upstream = self.upstreams[next(self._turn) % len(self.upstreams)]
            target = upstream.rsplit("/mcp", 1)[0] + request.url.path
            try:
                sent = client.build_request(request.method, target, headers=headers, content=body)
                response = await client.send(sent, stream=True)
            except httpx.ConnectError:
                continue
            self.routed.append(Routed(upstream, request.method, request.headers.get("mcp-session-id"), body))
            kept = {key: value for key, value in response.headers.items() if key.lower() not in _HOP_BY_HOP}

            async def relay(response: httpx.Response = response) -> AsyncIterator[bytes]:
                try:
                    async for chunk in response.aiter_raw():
                        yield chunk
                except httpx.HTTPError:
                    return  # the upstream died mid-stream: the client sees the stream end

            async def done(response: httpx.Response = response) -> None:
                await response.aclose()
                await client.aclose()

            return StreamingResponse(
                relay(), status_code=response.status_code, headers=kept, background=BackgroundTask(done)
            )
        await client.aclose()
        return Response("no upstream is up", status_code=502)
