"""A round-robin HTTP proxy for tests: each request goes to the next upstream, streams included.

The harshest load balancer a session can meet: no stickiness at all, so consecutive requests of one
2025-era session, and a pushed question's answer, land on another replica than the request before.
An upstream that refuses the connection (killed) is skipped, as a balancer's health check would.
Runs in a thread of the test process and stops with ``close()`` (or with the process).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tests.threaded import InThread, serve_in_thread

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
    _served: InThread | None = None

    def start(self) -> RoundRobin:
        self._served = serve_in_thread(self._forward)
        self.url = f"http://127.0.0.1:{self._served.port}/mcp"
        return self

    def close(self) -> None:
        if self._served is not None:
            self._served.close()

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
