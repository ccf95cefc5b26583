"""The HTTP edge of ``POST /mcp``: which era a request belongs to, and what it may carry. API process.

A request with a 2026-07-28 ``MCP-Protocol-Version`` goes to the SDK's handlers (the JSON-response
one when it cannot stream). A 2025-era request (``initialize``, a handshake-era version header, or
an ``Mcp-Session-Id``) goes to ``_legacy.py``. A request with neither is a modern request missing
its header, answered as the spec asks. The gate also writes the one log event per request.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import structlog
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service._logging import bind_request_info, request_info

log = structlog.get_logger("longtools.http")

_VERSION_HEADER: Final = b"mcp-protocol-version"
_SESSION_HEADER: Final = b"mcp-session-id"


Streams = Callable[[str | None, Mapping[str, Any]], bool]
"""Whether a request (its ``Mcp-Method`` and params) may need a streamed (SSE) response."""


_OWS = (b" ", b"\t")


class McpGate:
    """Pure ASGI wrapper around the SDK's streamable-HTTP handlers for one endpoint.

    With ``plain`` and ``streams`` given, a request that cannot stream (no progress token, not a
    round held open while a long tool works) goes to ``plain``, the SDK's JSON-response handler:
    it answers in the request's own task, where the SSE-capable handler (``app``) spawns a task
    group and events per request, about 40% of a plain ``tools/call``'s cost.
    """

    def __init__(
        self,
        app: ASGIApp,
        security: TransportSecuritySettings,
        *,
        max_body_bytes: int,
        legacy: ASGIApp,
        plain: ASGIApp | None = None,
        streams: Streams | None = None,
    ) -> None:
        self._app = app
        self._legacy = legacy
        self._security = TransportSecurityMiddleware(security)
        self._max_body = max_body_bytes
        self._plain = plain
        self._streams = streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        raw = scope["headers"]
        if any(value[:1] in _OWS or value[-1:] in _OWS for _, value in raw):
            # RFC 9110 section 5.5: a field value excludes its leading and trailing whitespace. h11
            # strips it, httptools does not, and the SDK compares Mcp-* values as they come.
            raw = scope["headers"] = [(name, value.strip(b" \t")) for name, value in raw]
        headers = dict(raw)
        method = _latin1(headers.get(b"mcp-method"))
        # Mcp-Name is the tool for tools/call and the task for tasks/* (the handlers add the task id
        # a tools/call creates).
        named = "task_id" if method is not None and method.startswith("tasks/") else "tool"
        info: dict[str, Any] = {"method": method, named: _latin1(headers.get(b"mcp-name"))}
        bind_request_info(info)
        started = time.perf_counter()
        status: list[int] = [0]

        async def send_and_watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body" and status[0] >= 400 and "outcome" not in info:
                info["outcome"] = _error_outcome(message.get("body", b""))
            await send(message)

        try:
            await self._dispatch(scope, receive, send_and_watch, headers)
        finally:
            log.info(
                "mcp_request",
                http_method=scope["method"],
                status=status[0],
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
                **{key: value for key, value in info.items() if value is not None},
            )

    async def _dispatch(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        request = Request(scope, receive)
        is_post = scope["method"] == "POST"
        rejection = await self._security.validate_request(request, is_post=is_post)
        if rejection is not None:
            await rejection(scope, receive, send)
            return
        if not is_post:
            # Modern Streamable HTTP is POST only: no GET stream, no DELETE of a session.
            await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send)
            return
        asgi = (scope, receive, send)
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_body:
            await _too_large(asgi, self._max_body)
            return
        version = headers.get(_VERSION_HEADER)
        legacy = version is not None and version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
        if version is None or legacy:
            body, receive = await _buffer_body(receive, self._max_body)
            asgi = (scope, receive, send)
            if body is None:
                await _too_large(asgi, self._max_body)
                return
            if legacy or _SESSION_HEADER in headers or _is_initialize(body):
                await self._legacy(*asgi)
                return
            # Any other request without the header is a modern request missing it: an empty value
            # keeps it on the SDK's modern path, whose ladder answers -32602 or -32020 as the spec says.
            scope = {**scope, "headers": [*scope["headers"], (_VERSION_HEADER, b"")]}
            await self._app(scope, receive, send)
            return
        request_info()["era"] = _latin1(version)
        if self._plain is None or self._streams is None:
            await self._app(scope, receive, send)
            return
        client_receive = receive
        body, receive = await _buffer_body(receive, self._max_body)
        if body is None:
            await _too_large((scope, receive, send), self._max_body)
            return
        if self._streams(_latin1(headers.get(b"mcp-method")), _params(body)):
            await self._app(scope, receive, send)
        else:
            await _while_connected(self._plain, (scope, receive, send), client_receive)


async def _while_connected(app: ASGIApp, asgi: tuple[Scope, Receive, Send], client_receive: Receive) -> None:
    """Run ``app`` on a request whose body has been read, and stop it if the client leaves first.

    The SDK's JSON-response handler does not watch the connection, and some plain requests wait
    (a paced ``tasks/get``, ``task_status``, a settle): a client that gave up must release its
    waiter and its place under the held-request bounds at once. The watch starts only once the
    handler waits (a loop callback runs when the request's task yields), so a request answered
    without waiting, as most are, spawns no task.
    """
    loop = asyncio.get_running_loop()
    watching: list[asyncio.Task[None]] = []
    try:
        async with asyncio.timeout(None) as held:

            async def until_disconnect() -> None:
                while (await client_receive())["type"] != "http.disconnect":
                    pass
                held.reschedule(loop.time())  # ends the request's wait at once

            waits = loop.call_soon(lambda: watching.append(loop.create_task(until_disconnect())))
            try:
                await app(*asgi)
            finally:
                waits.cancel()
                for task in watching:
                    task.cancel()
    except TimeoutError:
        if not held.expired():
            raise
        request_info()["outcome"] = "client left"


def _params(body: bytes) -> Mapping[str, Any]:
    """The request's params, or nothing for a body the SDK will refuse anyway."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    params = decoded.get("params") if isinstance(decoded, dict) else None
    return params if isinstance(params, dict) else {}


def _latin1(value: bytes | None) -> str | None:
    # Client-chosen header values go to the log: bounded, so a huge one cannot flood it.
    return value[:200].decode("latin-1") if value is not None else None


def _error_outcome(body: bytes) -> str:
    try:
        code = json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return "rejected"
    return f"error {code}"


async def _jsonrpc_error(
    asgi: tuple[Scope, Receive, Send],
    status: int,
    code: int,
    message: str,
    *,
    data: Any = None,
    request_id: str | int | None = None,
) -> None:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    await JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=status)(*asgi)


async def _too_large(asgi: tuple[Scope, Receive, Send], limit: int) -> None:
    await _jsonrpc_error(asgi, 413, INVALID_REQUEST, f"Request body too large: at most {limit} bytes")


def _is_initialize(body: bytes) -> bool:
    """Whether the body is an ``initialize`` request: the first request of a 2025-era client."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(decoded, dict) and decoded.get("method") == "initialize" and "id" in decoded


async def _buffer_body(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """Read the whole body (None past ``limit``) and return a receive that replays it."""
    chunks = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.extend(message.get("body", b""))
        if len(chunks) > limit:
            return None, receive
        if not message.get("more_body", False):
            break
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": bytes(chunks), "more_body": False}
        return await receive()

    return bytes(chunks), replay
