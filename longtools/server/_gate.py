"""The HTTP edge of ``POST /mcp``: which era a request belongs to, and what it may carry. API process.

A request with a 2026-07-28 ``MCP-Protocol-Version`` goes to the SDK's handlers (the JSON-response
one when it cannot stream). A 2025-era request (``initialize``, a handshake-era version header, or
an ``Mcp-Session-Id``) goes to ``_legacy.py``. A request with neither is a modern request missing
its header, answered as the spec asks. The gate also writes the one log event per request.

A ``subscriptions/listen`` stream outlives its request: once the SDK's handler has acknowledged it,
the handler may leave the rest of the stream in the request's ``Handoff`` and return. The gate then
carries the stream on itself, on the same response, after the SDK's whole request (its parsed
body, models, task group and context) is gone: an open stream then holds only its connection and
what it follows, and its request's task only waits for the client to go (bench/README.md, B8).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Final, Protocol

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from longtools._logging import bind_request_info, log_request, request_info

_VERSION_HEADER: Final = b"mcp-protocol-version"
_SESSION_HEADER: Final = b"mcp-session-id"
_LISTEN: Final = "subscriptions/listen"
_OPENINGS: Final = 16
"""Listen requests in the SDK at once (a body read, an acknowledgement not yet sent). Each holds
the SDK's request (about 45 KiB) only until its stream is handed off; a burst of streams opened at
once would otherwise hold all of theirs together, and the process keeps the pages of that peak
(bench/README.md, B8). Enough to keep the API's core busy while Temporal answers the reads."""
_SCREENED: Final = frozenset({b"host", b"origin", b"content-type"})
"""The headers the SDK's transport security reads (``TransportSecurityMiddleware.validate_request``)."""
_SCREENS_KEPT: Final = 64
HANDOFF: Final = "longtools.handoff"
"""The ASGI scope key of a 2026-era ``subscriptions/listen`` request's ``Handoff``."""


Streams = Callable[[str | None, str | None, bytes], bool]
"""Whether a request (its ``Mcp-Method`` and ``Mcp-Name`` headers, and its body) may need a
streamed (SSE) response."""


_OWS = (b" ", b"\t")

Write = Callable[[bytes], Awaitable[None]]
"""Writes one frame (an SSE event, or a comment) on a stream's response."""


class Rest(Protocol):
    """The rest of a stream, for the gate to carry on once the SDK has answered its request."""

    def carry_on(self, write: Write, end: Callable[[], None]) -> None:
        """Start the stream: it writes its frames with ``write`` as they come, from tasks of its
        own, and calls ``end`` once it has ended."""
        ...

    def close(self, last: bytes) -> bytes:
        """Stop the stream (it ended, the client went away, or it never started) and let go of it;
        return its last frame: ``last``, the SDK's own, or one of its own instead."""
        ...


class Handoff:
    """Where a listen handler leaves the rest of its stream (``rest``), and where the gate keeps
    the SDK's last frame (``last``) from going out until the stream has really ended."""

    __slots__ = ("last", "rest")

    def __init__(self) -> None:
        self.rest: Rest | None = None
        self.last: bytes | None = None


def handoff_of(scope: Mapping[str, Any] | None) -> Handoff | None:
    """The ``Handoff`` of a request's scope: only a modern listen request that passed the gate has one."""
    handoff = scope.get(HANDOFF) if scope is not None else None
    return handoff if isinstance(handoff, Handoff) else None


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
        self._passed: set[tuple[object, ...]] = set()
        self._max_body = max_body_bytes
        self._plain = plain
        self._streams = streams
        self._openings = asyncio.Semaphore(_OPENINGS)

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
        handoff = Handoff() if method == _LISTEN else None

        async def send_and_watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body":
                if status[0] >= 400 and "outcome" not in info:
                    info["outcome"] = _error_outcome(message.get("body", b""))
                elif handoff is not None and handoff.rest is not None and not message.get("more_body", False):
                    handoff.last = message.get("body", b"")  # sent once the stream has really ended
                    return
            await send(message)

        try:
            await self._dispatch(scope, receive, send_and_watch, headers, handoff, info)
            if handoff is not None and handoff.rest is not None:
                # Nothing of the request is needed any more while the stream lasts: its headers go
                # too (the connection keeps their list until its next request).
                scope["headers"].clear()
                del raw, headers
                await _carry_on(handoff, receive, send)
        finally:
            line = {
                "http_method": scope["method"],
                "status": status[0],
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
            }
            for key, value in info.items():
                if value is not None:
                    line[key] = value
            log_request(line)

    async def _dispatch(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[bytes, bytes],
        handoff: Handoff | None,
        info: dict[str, Any],
    ) -> None:
        is_post = scope["method"] == "POST"
        rejection = await self._screen(scope, receive, is_post)
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
        info["era"] = _latin1(version)
        if handoff is not None:
            scope[HANDOFF] = handoff
        if self._plain is None or self._streams is None:
            await self._app(scope, receive, send)
            return
        client_receive = receive
        body, receive = await _buffer_body(receive, self._max_body)
        if body is None:
            await _too_large((scope, receive, send), self._max_body)
            return
        if self._streams(_header(headers, b"mcp-method"), _header(headers, b"mcp-name"), body):
            if handoff is None:
                await self._app(scope, receive, send)
            else:
                async with self._openings:
                    # In a task of its own, which ends at the hand-off: what anyio ties to the task
                    # that enters the SDK's task group (its task state, a cancel message) would
                    # otherwise stay with the stream's task for the stream's life (bench/README.md, B8).
                    await asyncio.ensure_future(self._app(scope, receive, send))
        else:
            await _while_connected(self._plain, (scope, receive, send), client_receive)

    async def _screen(self, scope: Scope, receive: Receive, is_post: bool) -> Response | None:
        """The SDK's check of a request's Host, Origin and Content-Type (DNS rebinding protection),
        or its refusal.

        The verdict depends on those headers alone (the first of each, as Starlette reads them), so
        a set of them that passed once passes again without being checked again; a refusal is
        never remembered (it is logged each time). Clients send a handful of such sets; a table
        filled with made-up ones is emptied.
        """
        key = (is_post, *[(name, value) for name, value in scope["headers"] if name in _SCREENED])
        if key in self._passed:
            return None
        rejection = await self._security.validate_request(Request(scope, receive), is_post=is_post)
        if rejection is None:
            if len(self._passed) >= _SCREENS_KEPT:
                self._passed.clear()
            self._passed.add(key)
        return rejection


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
                await _disconnect(client_receive)
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


async def _carry_on(handoff: Handoff, receive: Receive, send: Send) -> None:
    """Carry a handed-off stream on until it ends, then send its last frame; or until the client
    goes away (an ``http.disconnect``), which ends it with nothing more sent, as the SDK would.
    The stream writes its frames itself: this task only waits for the client to go."""
    rest, last = handoff.rest, handoff.last
    handoff.rest = handoff.last = None
    assert rest is not None
    if last is None:  # the SDK never got to its last frame: the client went away meanwhile
        rest.close(b"")
        return

    async def write(frame: bytes) -> None:
        await send({"type": "http.response.body", "body": frame, "more_body": True})

    try:
        # As _while_connected, but leaner: this frame lasts as long as the stream. The stream's
        # end ends the wait for the client at once.
        async with asyncio.timeout(None) as held:
            rest.carry_on(write, partial(_expire, held))
            await _disconnect(receive)
        request_info()["outcome"] = "client left"
        return
    except TimeoutError:
        if not held.expired():
            raise
    finally:
        last = rest.close(last)
    await send({"type": "http.response.body", "body": last, "more_body": False})


def _expire(timeout: asyncio.Timeout) -> None:
    timeout.reschedule(asyncio.get_running_loop().time())


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _header(headers: Mapping[bytes, bytes], name: bytes) -> str | None:
    # Whole, unlike _latin1's copy for the log: a tool's name decides whether its call streams.
    value = headers.get(name)
    return value.decode("latin-1") if value is not None else None


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
    body = bytes(chunks)
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    def replay() -> Awaitable[Message]:
        # Not a coroutine of its own: after the body, it hands out the server's receive itself, so
        # a request that waits for the client to go (a stream) keeps no frame or copy of the body here.
        if pending:
            return _ready(pending.pop())
        return receive()

    return body, replay


async def _ready(message: Message) -> Message:
    return message
