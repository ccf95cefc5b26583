"""A recording HTTP proxy between an MCP host and `longtools serve`: every request, every response and
every server-sent event, as they pass, one JSON line each (``wire.jsonl``).

Runs in a thread of the harness (uvicorn on a loopback port). Nothing is changed on the way through
but the hop-by-hop headers and ``Host`` (so the server's answer links name the server itself, which
is where the person's browser goes) and ``Accept-Encoding`` (asked as ``identity``, so the log reads
as text).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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
    "accept-encoding",
    "content-encoding",
}
_KEPT_HEADERS = ("mcp-protocol-version", "mcp-session-id", "content-type", "accept", "mcp-method", "mcp-name")


def _json_or_text(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


class WireTap:
    """``start()`` it with the upstream MCP URL; hosts connect to ``url``; ``entries()`` reads the log."""

    def __init__(self, upstream: str, log: Path) -> None:
        self.upstream = upstream.rstrip("/")
        self.origin = self.upstream.rsplit("/mcp", 1)[0]
        self.log = log
        self.url = ""
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._served: InThread | None = None
        self._t0 = time.monotonic()

    def start(self) -> WireTap:
        self._served = serve_in_thread(self._forward, methods=("GET", "POST", "DELETE", "PUT", "PATCH"))
        self.url = f"http://127.0.0.1:{self._served.port}/mcp"
        return self

    def close(self) -> None:
        if self._served is not None:
            self._served.close(force=True)

    def _write(self, entry: dict[str, Any]) -> None:
        entry = {"t": round(time.monotonic() - self._t0, 3), **entry}
        with self._lock, self.log.open("a") as out:
            out.write(json.dumps(entry) + "\n")

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        with self._lock:
            lines = self.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    async def _forward(self, request: Request) -> Response:
        rid = next(self._ids)
        body = await request.body()
        headers = {key: value for key, value in request.headers.items() if key.lower() not in _HOP_BY_HOP}
        headers["accept-encoding"] = "identity"
        self._write(
            {
                "rid": rid,
                "dir": "c2s",
                "http": request.method,
                "path": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
                "headers": {k: v for k, v in request.headers.items() if k.lower() in _KEPT_HEADERS},
                "auth": "bearer"
                if request.headers.get("authorization", "").lower().startswith("bearer ")
                else None,
                "body": _json_or_text(body) if body else None,
            }
        )
        client = httpx.AsyncClient(timeout=httpx.Timeout(10, read=None))
        target = self.origin + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            response = await client.send(
                client.build_request(request.method, target, headers=headers, content=body), stream=True
            )
        except httpx.HTTPError as exc:
            await client.aclose()
            self._write({"rid": rid, "dir": "s2c", "error": repr(exc)})
            return Response("upstream unreachable", status_code=502)
        kept = {key: value for key, value in response.headers.items() if key.lower() not in _HOP_BY_HOP}
        ctype = response.headers.get("content-type", "")
        self._write(
            {
                "rid": rid,
                "dir": "s2c",
                "status": response.status_code,
                "headers": {k: v for k, v in response.headers.items() if k.lower() in _KEPT_HEADERS},
                "stream": ctype.startswith("text/event-stream"),
            }
        )

        async def relay() -> AsyncIterator[bytes]:
            pending = b""
            whole = b""
            try:
                async for chunk in response.aiter_bytes():
                    if ctype.startswith("text/event-stream"):
                        pending += chunk.replace(b"\r\n", b"\n")
                        while b"\n\n" in pending:
                            event, pending = pending.split(b"\n\n", 1)
                            self._log_event(rid, event)
                    else:
                        whole += chunk
                    yield chunk
            except httpx.HTTPError as exc:
                self._write({"rid": rid, "dir": "s2c", "error": repr(exc)})
                return
            finally:
                if pending.strip():
                    self._log_event(rid, pending)
                if whole:
                    self._write({"rid": rid, "dir": "s2c", "body": _json_or_text(whole)})
                self._write({"rid": rid, "dir": "s2c", "end": True})

        async def done() -> None:
            await response.aclose()
            await client.aclose()

        return StreamingResponse(
            relay(), status_code=response.status_code, headers=kept, background=BackgroundTask(done)
        )

    def _log_event(self, rid: int, event: bytes) -> None:
        data = [line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")]
        if not data:
            return  # a comment or a keep-alive
        self._write({"rid": rid, "dir": "s2c", "sse": _json_or_text(b"\n".join(data))})
