"""The 2025 protocol era on ``POST /mcp``, with no session kept in any replica. API process.

A 2025-era client opens with ``initialize`` and then sends ``Mcp-Session-Id`` on every request.
The SDK's own transport for that era keeps each session (and the stream its server requests ride)
in one process's memory, so its users must route a session to one replica. Here the session id
is a sealed token (``_sessions.py``) and each request is served on its own, like a 2026-era one:
the same SDK server, handlers and middleware, with a connection built from the session.

What the 2025 era adds on the wire:

- a request may be answered on an SSE stream, which carries its progress and log notifications
  and the questions the server asks while it runs (``elicitation/create``, ``sampling/createMessage``,
  ``roots/list``), related to that request;
- the client answers such a question with a separate POST whose body is a JSON-RPC response; its
  id (sealed) names the box where the asking call waits, so any replica can deliver it.

There is no standalone GET stream (405, which the spec allows): nothing here notifies outside a
request, since the tool list never changes while a process runs and resources never change.
There is no DELETE (405, which the spec allows too): a sealed session cannot be revoked without
a store, and one that is dropped simply expires.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.abc
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, check_accept_headers
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    ProgressToken,
    RequestId,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from longtools._logging import request_info
from longtools.auth import principal_of_scope
from longtools.server._legacy_tasks import TASK_CALL, TASKS_CAPABILITY, TASKS_VERSION
from longtools.server._sessions import LegacySession, Seals
from longtools.server._wire import temporal_errors
from longtools.tasks import Mailboxes, QuestionClosed

log = structlog.get_logger("longtools.legacy")

__all__ = ["LegacyEra"]

_SSE_PING_INTERVAL_S: Final = 15.0
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
_SESSION_HEADER: Final = MCP_SESSION_ID_HEADER.lower()
_QUESTION_CLOSED: Final = (
    "This question is no longer open: it was answered, or the call that asked it has ended"
)


@dataclass
class _Request:
    """The SDK's ``DispatchContext`` for one 2025-era request: notifications and server requests
    ride its response stream (``sink``), and a server request's answer comes back through a box."""

    transport: TransportContext
    request_id: RequestId
    message_metadata: MessageMetadata
    principal: str
    seals: Seals
    mailboxes: Mailboxes
    question_ttl_s: float
    progress_token: ProgressToken | None = None
    sink: MemoryObjectSendStream[bytes] | None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = True

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        box = secrets.token_hex(16)
        question_id = self.seals.question(box, self.principal, self.question_ttl_s)
        await self._emit(
            JSONRPCRequest(jsonrpc="2.0", id=question_id, method=method, params=dict(params or {}))
        )
        answer = await self.mailboxes.take(box, ttl_s=self.question_ttl_s)
        error = answer.get("error")
        if isinstance(error, dict):  # the client's own words, bounded: they reach the tool result
            code = error.get("code")
            raise MCPError(
                code=code if isinstance(code, int) else INVALID_REQUEST,
                message=str(error.get("message", ""))[:200],
            )
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        await self._emit(
            JSONRPCNotification(
                jsonrpc="2.0", method=method, params=dict(params) if params is not None else None
            )
        )

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    async def _emit(self, message: JSONRPCRequest | JSONRPCNotification) -> None:
        if self.sink is None:
            return
        try:
            await self.sink.send(_sse_event(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("dropped_on_closed_stream", method=message.method)


class LegacyEra:
    """ASGI handler of one 2025-era ``POST /mcp`` (the gate sends it here, body buffered)."""

    def __init__(
        self, server: Server[Any], seals: Seals, mailboxes: Mailboxes, *, question_ttl_s: float
    ) -> None:
        self._server = server
        self._seals = seals
        self._mailboxes = mailboxes
        self._question_ttl_s = question_ttl_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        asgi = (scope, receive, send)
        request = Request(scope, receive)
        content_type = request.headers.get("content-type", "")
        if not content_type.lower().startswith("application/json"):
            await _reply(asgi, _error(None, INVALID_REQUEST, "Content-Type must be application/json"), 415)
            return
        try:
            decoded = json.loads(await request.body())
        except (ValueError, RecursionError):
            await _reply(asgi, _error(None, PARSE_ERROR, "Parse error"), 400)
            return
        if not isinstance(decoded, dict):
            # JSON-RPC batches were dropped in 2025-06-18; they are not accepted for 2025-03-26 either.
            await _reply(asgi, _error(None, INVALID_REQUEST, "Body must be one JSON-RPC message"), 400)
            return
        principal = principal_of_scope(scope)
        info = request_info()
        info["method"] = _logged(decoded.get("method"))
        params = decoded.get("params")
        if info["method"] == "tools/call" and isinstance(params, dict):
            info["tool"] = _logged(params.get("name"))
        if decoded.get("method") == "initialize" and "id" in decoded:
            await self._initialize(asgi, decoded, principal)
            return
        token = request.headers.get(_SESSION_HEADER)
        if token is None:
            await _reply(
                asgi,
                _error(decoded.get("id"), INVALID_REQUEST, "Missing Mcp-Session-Id: send initialize first"),
                400,
            )
            return
        session = self._seals.open_session(token, principal)
        if session is None:
            # Unknown, expired, tampered or another principal's: the client must initialize again.
            await _reply(asgi, _error(decoded.get("id"), INVALID_REQUEST, "Session not found"), 404)
            return
        info["era"] = session.version
        if "method" not in decoded:
            await self._answer(asgi, decoded, principal)
            return
        if "id" not in decoded:
            # Notifications (initialized, cancelled, roots changed) need nothing kept: acknowledged.
            await Response(status_code=202)(*asgi)
            return
        try:
            message = JSONRPCRequest.model_validate(decoded)
        except ValueError:
            await _reply(asgi, _error(None, INVALID_REQUEST, "Invalid JSON-RPC request"), 400)
            return
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            await _reply(
                asgi,
                _error(
                    message.id, INVALID_REQUEST, "Accept must list application/json and text/event-stream"
                ),
                406,
            )
            return
        if (
            message.method == "tools/call"
            and session.version == TASKS_VERSION
            and isinstance((message.params or {}).get("task"), dict)
        ):
            message = message.model_copy(update={"method": TASK_CALL})
        await self._serve(asgi, request, message, session, principal)

    async def _initialize(
        self, asgi: tuple[Scope, Receive, Send], decoded: dict[str, Any], principal: str
    ) -> None:
        params = decoded.get("params")
        params = params if isinstance(params, dict) else {}
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        request_info()["era"] = version
        request_id = decoded.get("id")
        dctx = self._context(Request(asgi[0], asgi[1]), request_id, principal, None)
        connection = Connection.from_envelope(version, None, None)
        reply = await _outcome(
            request_id,
            serve_one(self._server, dctx, "initialize", params, connection=connection, lifespan_state=None),
        )
        if isinstance(reply, JSONRPCError):
            await _reply(asgi, reply, 200)
            return
        if version == TASKS_VERSION:  # the SDK's initialize result is the same for every version
            reply.result["capabilities"]["tasks"] = TASKS_CAPABILITY
        capabilities = params.get("capabilities")
        info = params.get("clientInfo")
        session = LegacySession(
            version=version,
            capabilities=capabilities if isinstance(capabilities, dict) else {},
            client_info=_short_info(info),
        )
        token = self._seals.session(session, principal)
        await _reply(asgi, reply, 200, headers={MCP_SESSION_ID_HEADER: token})

    async def _answer(
        self, asgi: tuple[Scope, Receive, Send], decoded: dict[str, Any], principal: str
    ) -> None:
        """A client's answer to a question pushed on some call's stream: into that call's box."""
        box = self._seals.open_question(decoded.get("id"), principal)
        if box is None or not ("result" in decoded or "error" in decoded):
            await _reply(asgi, _error(None, INVALID_REQUEST, "Unknown or expired request id"), 400)
            return
        answer = {"result": decoded["result"]} if "result" in decoded else {"error": decoded["error"]}
        try:
            async with temporal_errors("answer"):
                await self._mailboxes.post(box, answer, ttl_s=self._question_ttl_s)
        except QuestionClosed:
            await _reply(asgi, _error(None, INVALID_REQUEST, _QUESTION_CLOSED), 400)
            return
        except MCPError as exc:  # Temporal is unreachable: the client may send the answer again
            await _reply(asgi, JSONRPCError(jsonrpc="2.0", id=None, error=exc.error), 503)
            return
        await Response(status_code=202)(*asgi)

    def _context(
        self, request: Request, request_id: Any, principal: str, params: Mapping[str, Any] | None
    ) -> _Request:
        return _Request(
            transport=TransportContext(
                kind="streamable-http", can_send_request=True, headers=request.headers
            ),
            request_id=request_id,
            message_metadata=ServerMessageMetadata(request_context=request),
            principal=principal,
            seals=self._seals,
            mailboxes=self._mailboxes,
            question_ttl_s=self._question_ttl_s,
            progress_token=progress_token_from_params(params),
        )

    async def _serve(
        self,
        asgi: tuple[Scope, Receive, Send],
        request: Request,
        message: JSONRPCRequest,
        session: LegacySession,
        principal: str,
    ) -> None:
        """Answer with JSON when the handler is done before it has anything to stream; otherwise
        commit to SSE, which then carries its notifications and questions, keep-alive comments
        while it is silent, and finally the response."""
        _, receive, send = asgi
        connection = Connection.from_envelope(session.version, session.client_info, session.capabilities)
        dctx = self._context(request, message.id, principal, message.params)
        sending, events = anyio.create_memory_object_stream[bytes](0)
        dctx.sink = sending
        outcome: list[JSONRPCResponse | JSONRPCError] = []
        streaming = False

        async def stream(cancel_scope: anyio.CancelScope) -> None:
            event, done = await _next_event(events)
            if done:
                await _reply(asgi, outcome[0], 200)
            else:
                await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
                while not done:
                    await send(
                        {"type": "http.response.body", "body": event or b": ping\r\n\r\n", "more_body": True}
                    )
                    event, done = await _next_event(events)
                await send({"type": "http.response.body", "body": _sse_event(outcome[0]), "more_body": False})
            cancel_scope.cancel()  # the response is out: stop watching for a disconnect

        async def watch_disconnect(cancel_scope: anyio.CancelScope) -> None:
            while (await receive()).get("type") != "http.disconnect":
                pass
            cancel_scope.cancel()

        def start_streaming(tg: anyio.abc.TaskGroup) -> None:
            nonlocal streaming
            streaming = True
            tg.start_soon(stream, tg.cancel_scope)
            tg.start_soon(watch_disconnect, tg.cancel_scope)

        async with events, anyio.create_task_group() as tg:
            # The handler runs in this task. A loop callback runs only once this task yields to the
            # loop, that is once the handler waits (for an event to be taken, an answer, a
            # workflow): only then are the stream of events, its pings and the disconnect watch
            # started. A handler that finishes without waiting, as most quick tools do, is answered
            # with no task spawned, which is most of what the SSE machinery costs a call.
            waits = asyncio.get_running_loop().call_soon(start_streaming, tg)
            async with sending:
                work = serve_one(
                    self._server,
                    dctx,
                    message.method,
                    message.params,
                    connection=connection,
                    lifespan_state=None,
                )
                outcome.append(await _outcome(message.id, work))
            waits.cancel()
            if not streaming:
                await _reply(asgi, outcome[0], 200)


async def _next_event(events: MemoryObjectReceiveStream[bytes]) -> tuple[bytes | None, bool]:
    """The handler's next event within a keep-alive interval (None when it sent none), and whether
    it has finished."""
    with anyio.move_on_after(_SSE_PING_INTERVAL_S):
        try:
            return await events.receive(), False
        except anyio.EndOfStream:
            return None, True
    return None, False


def _logged(value: object) -> str | None:
    # Client-chosen values go to the log: bounded, so a huge one cannot flood it.
    return value[:200] if isinstance(value, str) else None


def _short_info(info: object) -> dict[str, Any] | None:
    """The client's name, title and version: all a session id carries of ``clientInfo`` (icons and
    the like would only make every request's header longer)."""
    if not isinstance(info, dict):
        return None
    kept = {key: info[key] for key in ("name", "title", "version") if isinstance(info.get(key), str)}
    return {key: value[:200] for key, value in kept.items()} if "name" in kept and "version" in kept else None


async def _outcome(request_id: Any, work: Awaitable[dict[str, Any]]) -> JSONRPCResponse | JSONRPCError:
    try:
        result = await work
    except Exception as exc:
        return JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc))
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)


def _error(request_id: Any, code: int, message: str) -> JSONRPCError:
    valid = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return JSONRPCError(
        jsonrpc="2.0", id=request_id if valid else None, error=ErrorData(code=code, message=message)
    )


def _wire(message: JSONRPCRequest | JSONRPCNotification | JSONRPCResponse | JSONRPCError) -> str:
    body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(message, JSONRPCError) and message.id is None:
        body["id"] = None
    return json.dumps(body, separators=(",", ":"))


def _sse_event(message: JSONRPCRequest | JSONRPCNotification | JSONRPCResponse | JSONRPCError) -> bytes:
    return f"event: message\r\ndata: {_wire(message)}\r\n\r\n".encode()


async def _reply(
    asgi: tuple[Scope, Receive, Send],
    message: JSONRPCResponse | JSONRPCError,
    status: int,
    *,
    headers: Mapping[str, str] | None = None,
) -> None:
    await Response(_wire(message), status_code=status, media_type="application/json", headers=headers)(*asgi)
