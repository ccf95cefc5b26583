"""The 2025-11-25 tasks API, for 2025-era clients that use it, over the same tasks. API process.

In 2025-11-25, tasks were part of core (experimental): the client asks for one with ``params.task``
on ``tools/call`` and gets ``CreateTaskResult {task}``; it follows it with ``tasks/get`` (status
only), collects the outcome with ``tasks/result`` (which blocks until the end, and is where the
server asks its questions, pushed on that request's stream and tied to the task by
``_meta["io.modelcontextprotocol/related-task"]``), lists its tasks with ``tasks/list`` and
cancels with ``tasks/cancel``. VS Code and the MCP Inspector use it.

Here it is another view of the same Temporal workflows as the 2026 extension's, with the same
owner check, TTL and answer checks. The differences are on the wire only: ``ttl`` and
``pollInterval`` for ``ttlMs`` and ``pollIntervalMs``; a tool result with ``isError`` is a
``failed`` task (the extension calls it ``completed``); questions are pushed, not listed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

import structlog
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from pydantic import TypeAdapter

from longtools._settings import Settings
from longtools.auth import caller_of, principal_of
from longtools.server._limits import HeldRounds, answers_too_large
from longtools.server._people import Audience, People, complete_urls, deliver
from longtools.server._pushed import RELATED_TASK_META, Unanswered, ask, is_legacy
from longtools.server._wire import (
    NOT_AUTHORIZED,
    cancel_task,
    poll_task,
    raw_notification,
    read_task,
    temporal_errors,
)
from longtools.tasks import TERMINAL, AnswerNotAuthorized, AnswersTooLarge, TaskNotFound, Tasks, TaskView
from longtools.tools import Tool, as_wire, kind_supported, tool_error_result
from longtools.workflows import InputRequest

log = structlog.get_logger("longtools.legacy_tasks")

__all__ = ["TASKS_VERSION", "TASK_CALL", "LegacyTasks", "legacy_task_wire", "speaks_tasks"]

TASKS_VERSION: Final = "2025-11-25"
"""The one handshake-era revision that has tasks."""
TASK_CALL: Final = "longtools/task-augmented-tools/call"
"""The method a 2025-11-25 ``tools/call`` with ``params.task`` is served under. The SDK checks a
``tools/call`` result against ``CallToolResult`` at that version, which a ``CreateTaskResult`` is
not; the 2025-era path renames the request so its result passes as it is."""
TASKS_CAPABILITY: Final[dict[str, Any]] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
"""What ``initialize`` at 2025-11-25 offers: own tasks listed and cancelled, ``tools/call`` as a task."""
IMMEDIATE_RESPONSE_META: Final = "io.modelcontextprotocol/model-immediate-response"
_STATUS_NOTIFICATION: Final = "notifications/tasks/status"
_requests_adapter: TypeAdapter[InputRequest] = TypeAdapter(InputRequest)


def speaks_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request comes from a 2025-era session at the revision that has tasks."""
    return is_legacy(ctx) and ctx.protocol_version >= TASKS_VERSION


_URL_ANSWER_GRACE_S: Final = 5.0
"""How long a pushed URL request the page has already answered still waits for its host's answer."""


def legacy_task_wire(view: TaskView, poll_interval_ms: int, audience: Audience) -> dict[str, Any]:
    """``view`` as a 2025-11-25 ``Task``, shown to ``audience``."""
    status: str = view.status
    message = audience.status_message(view)
    if status == "completed" and view.result is not None and view.result.get("isError"):
        status = "failed"  # 2025-11-25: a tool result with isError is a failed task
        message = message or _first_text(view.result)
    if status == "failed" and view.error is not None:
        message = message or str(view.error.get("message", ""))
    modern = view.wire(poll_interval_ms)
    body: dict[str, Any] = {
        "taskId": view.task_id,
        "status": status,
        "createdAt": modern["createdAt"],
        "lastUpdatedAt": modern["lastUpdatedAt"],
        "ttl": view.ttl_ms,
        "pollInterval": poll_interval_ms,
    }
    if message:
        body["statusMessage"] = message
    return body


class LegacyTasks:
    """``tasks/get``, ``tasks/result``, ``tasks/list`` and ``tasks/cancel`` at 2025-11-25."""

    def __init__(
        self,
        settings: Settings,
        tasks: Tasks,
        *,
        poll_interval_ms: Callable[[TaskView], int],
        held: HeldRounds,
        people: People,
    ) -> None:
        self._settings = settings
        self._tasks = tasks
        self._people = people
        # One per ring key, first key first: a cursor is sealed with the first, opened with any (a
        # rotation does not break a listing half-way).
        self._cursor_keys = [
            hmac.new(secret, b"longtools tasks/list cursors", hashlib.sha256).digest()
            for secret in tasks.ids.secrets
        ]
        self._poll_interval_ms = poll_interval_ms
        self._held = held

    def created(self, ctx: ServerRequestContext[Any, Any], tool: Tool, view: TaskView) -> dict[str, Any]:
        """The ``CreateTaskResult`` of a task-augmented ``tools/call`` that started ``view``."""
        said = (
            f"{tool.name} is running as task {view.task_id}; its result will come when it is done, "
            "and any question it has will be asked."
        )
        return {
            "task": legacy_task_wire(view, self._poll_interval_ms(view), self._people.audience(ctx)),
            "_meta": {IMMEDIATE_RESPONSE_META: said},
        }

    async def get(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> dict[str, Any]:
        view, interval = await poll_task(ctx, self._tasks, task_id, self._poll_interval_ms, self._held)
        return legacy_task_wire(view, interval, self._people.audience(ctx))

    async def cancel(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> dict[str, Any]:
        """Cancel, and answer with the task once it has ended (the cancellation is durable at once;
        a workflow takes it at its next step, so a task with no worker running reads as cancelled
        here and ends so when one starts)."""
        view = await read_task(ctx, self._tasks, task_id)
        if view.status in TERMINAL:
            shown = legacy_task_wire(view, 0, self._people.audience(ctx))["status"]
            raise MCPError(
                code=INVALID_PARAMS, message=f"Cannot cancel task: already in terminal status {shown!r}"
            )
        settle_s = self._settings.answer_settle_s
        async with temporal_errors("tasks/cancel"):
            view = await cancel_task(self._tasks, self._held, view, principal_of(ctx), settle_s)
        body = legacy_task_wire(view, self._poll_interval_ms(view), self._people.audience(ctx))
        if view.status not in TERMINAL:
            body["status"] = "cancelled"
        return body

    async def list(self, ctx: ServerRequestContext[Any, Any], cursor: str | None) -> dict[str, Any]:
        """The caller's own tasks, newest first, a page at a time."""
        principal = principal_of(ctx)
        audience = self._people.audience(ctx)
        token = self._opened_cursor(cursor, principal) if cursor is not None else b""
        async with temporal_errors("tasks/list"):
            ids, following = await self._tasks.owned(principal, self._settings.task_list_page_size, token)
            shown: list[dict[str, Any]] = []
            for task_id in ids:  # the page is small; each read is usually answered from memory
                try:
                    view = await self._tasks.get(task_id, principal)
                except TaskNotFound:
                    continue  # expired, or (through a hash collision) another principal's
                shown.append(legacy_task_wire(view, self._poll_interval_ms(view), audience))
        body: dict[str, Any] = {"tasks": shown}
        if following:
            body["nextCursor"] = self._sealed_cursor(following, principal)
        return body

    async def result(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> dict[str, Any]:
        """Wait for the task's end, pushing each question it asks meanwhile, and answer with what
        ``tools/call`` would have: its result, or its JSON-RPC error.

        A pushed question waits for its answer only while the task asks it: once the task ends, or
        its questions are answered another way (``task_answer``, another client), the push is
        withdrawn and the wait goes on. A question asked again (its answer did not fit) counts as a
        round; ``max_rounds`` of them end the request.
        """
        principal = principal_of(ctx)
        audience = self._people.audience(ctx)
        view = await read_task(ctx, self._tasks, task_id)
        answered: set[str] = set()
        """Keys not to push again: answered, spoken of by the host, or only the page's to show."""
        completing: set[str] = set()
        """URL requests the person went to, whose notifications/elicitation/complete is due."""
        pushed: set[str] = set()
        reasked = 0
        try:
            with self._held.hold(principal):
                while view.status not in TERMINAL:
                    shown = audience.questions(view)
                    # Those not shown, only the person answers, on the page (the status says where).
                    answered |= set(view.input_requests or {}) - set(shown)
                    waiting = {k: q for k, q in shown.items() if k not in answered}
                    if waiting:
                        if waiting.keys() & pushed:
                            reasked += 1
                            if reasked > self._settings.max_rounds:
                                raise MCPError(
                                    code=INVALID_PARAMS,
                                    message="The answers to this task's questions did not fit them; "
                                    "call tasks/result again, or cancel the task",
                                )
                        pushed |= waiting.keys()
                        delivered, words, moved = await self._ask(ctx, audience, view, principal, waiting)
                        answered |= delivered | words.keys()
                        completing |= {key for key, action in words.items() if action == "accept"}
                        if any(action != "accept" for action in words.values()):
                            # The host's decline or cancel is not its person's answer: the task
                            # waits for the page, and its status, sent now, says where.
                            await _notify_status(
                                ctx, legacy_task_wire(view, self._poll_interval_ms(view), audience)
                            )
                        if moved is not None:
                            view = moved
                            continue
                    before = view
                    async with temporal_errors("tasks/result"):
                        view = await self._tasks.wait(
                            task_id,
                            principal,
                            partial(_moved, before, frozenset(answered)),
                            self._settings.mrtr_wait_s,
                            since=view,
                        )
                    completing = await complete_urls(ctx, view, completing)
                    if view.status != before.status or view.status_message != before.status_message:
                        shown = legacy_task_wire(view, self._poll_interval_ms(view), audience)
                        await _notify_status(ctx, shown)
                    if self._tasks.stopping and view.status not in TERMINAL:
                        raise MCPError(
                            code=INTERNAL_ERROR,
                            message="This server is restarting; the task goes on: call tasks/result again",
                        )
        except TaskNotFound as exc:  # its TTL ran out while the request waited
            raise MCPError(code=INVALID_PARAMS, message=f"Failed to retrieve task: {exc}") from None
        return _outcome(view)

    async def _ask(
        self,
        ctx: ServerRequestContext[Any, Any],
        audience: Audience,
        view: TaskView,
        principal: str,
        waiting: Mapping[str, Any],
    ) -> tuple[set[str], dict[str, str], TaskView | None]:
        """Push the task's open questions as ``waiting`` shows them (``Audience.questions``: a
        person's as a URL request) and deliver the answers that fit: the keys delivered (an answer
        that does not fit leaves its question open, to be asked again) and what the host said of
        the URL requests. When the task ends or stops asking them first, the push is withdrawn:
        nothing delivered, and the task then."""
        questions = {key: _requests_adapter.validate_python(question) for key, question in waiting.items()}
        caps = ctx.session.client_capabilities
        unanswerable = [q.method for q in questions.values() if caps is None or not kind_supported(q, caps)]
        if unanswerable:
            raise MCPError(
                code=INVALID_REQUEST,
                message=f"Task {view.task_id} asks through {', '.join(sorted(set(unanswerable)))}, which "
                "this client did not declare; answer it with the task_answer tool, or cancel it",
            )
        keys = set(waiting)
        urls = {key for key in waiting if audience.as_url((view.input_requests or {})[key])}

        def moved_on(now: TaskView) -> bool:
            return now.status in TERMINAL or not keys & set(now.input_requests or {})

        lives_s = view.created_at.timestamp() + view.ttl_ms / 1000 - time.time()
        asking = asyncio.ensure_future(ask(ctx, questions, related_task=view.task_id))
        watching = asyncio.ensure_future(
            self._tasks.wait(view.task_id, principal, moved_on, lives_s, since=view)
        )
        try:
            async with temporal_errors("tasks/result"):
                await asyncio.wait({asking, watching}, return_when=asyncio.FIRST_COMPLETED)
                if not asking.done():
                    now = watching.result()
                    if moved_on(now):
                        # The page may have answered a URL request before its host answers it
                        # (a host whose prompt waits for its person to come back): it is complete,
                        # and the host's answer, only its word that its person went there, is
                        # awaited a moment, to be taken rather than refused as late.
                        await complete_urls(ctx, now, urls)
                        if urls == keys:
                            with contextlib.suppress(TimeoutError, Unanswered):
                                async with asyncio.timeout(_URL_ANSWER_GRACE_S):
                                    await asyncio.shield(asking)
                        return set(), {}, now
                    await asking  # the task lives on only as long as its TTL: asked till then
                answers = asking.result()
        except Unanswered as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        finally:
            for pending in (asking, watching):
                pending.cancel()
            await asyncio.gather(asking, watching, return_exceptions=True)
        try:
            async with temporal_errors("tasks/result"):
                delivered, words = await deliver(
                    self._tasks,
                    audience,
                    view,
                    answers,
                    caller=caller_of(ctx),
                    via="pushed",
                    skip_invalid=True,
                )
                if not delivered and not words:  # none fitted, or the task ended meanwhile
                    return set(), {}, await self._tasks.read(view.task_id, principal)
        except AnswerNotAuthorized:
            # An error, not a tool result: this request's result is the task's outcome, and the
            # task goes on. -32602 with a refused call's words, as tasks/update says it.
            raise MCPError(code=INVALID_PARAMS, message=NOT_AUTHORIZED) from None
        except AnswersTooLarge:
            raise answers_too_large(self._settings.max_task_answer_bytes) from None
        return delivered, words, None

    def _sealed_cursor(self, token: bytes, principal: str) -> str:
        body = base64.urlsafe_b64encode(token).decode()
        return f"{body}.{_cursor_tag(self._cursor_keys[0], body, principal)}"

    def _opened_cursor(self, cursor: str, principal: str) -> bytes:
        body, _, tag = cursor.rpartition(".")
        if body and any(
            hmac.compare_digest(tag, _cursor_tag(key, body, principal)) for key in self._cursor_keys
        ):
            try:
                return base64.urlsafe_b64decode(body)
            except (binascii.Error, ValueError):
                pass
        raise MCPError(code=INVALID_PARAMS, message="Invalid cursor")


def _cursor_tag(key: bytes, body: str, principal: str) -> str:
    message = f"{principal}\x00{body}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:32]


def method_not_found() -> MCPError:
    return MCPError(code=METHOD_NOT_FOUND, message="Method not found")


def _outcome(view: TaskView) -> dict[str, Any]:
    related = {RELATED_TASK_META: {"taskId": view.task_id}}
    if view.status == "failed" and view.error is not None:
        # What the tools/call would have answered: the same JSON-RPC error (it carries no _meta).
        raise MCPError(code=int(view.error["code"]), message=str(view.error["message"]))
    if view.status == "completed" and view.result is not None:
        result = {key: value for key, value in view.result.items() if key != "resultType"}  # 2026 only
    else:
        result = as_wire(tool_error_result(f"Task {view.task_id} was cancelled"))
    result["_meta"] = {**result.get("_meta", {}), **related}
    return result


def _moved(before: TaskView, sent: frozenset[str], now: TaskView) -> bool:
    """Whether ``now`` shows something ``before`` did not: another status or message, or a question
    not yet pushed."""
    fresh = set(now.input_requests or {}) - sent
    return now.status != before.status or now.status_message != before.status_message or bool(fresh)


def _first_text(result: Mapping[str, Any]) -> str | None:
    for block in result.get("content") or ():
        if isinstance(block, Mapping) and block.get("type") == "text":
            return str(block.get("text", ""))[:500]
    return None


async def _notify_status(ctx: ServerRequestContext[Any, Any], task: dict[str, Any]) -> None:
    """``notifications/tasks/status`` on this request's stream (a raw notification: the SDK's types
    leave this one out)."""
    await ctx.session.send_notification(
        raw_notification(_STATUS_NOTIFICATION, task), related_request_id=ctx.request_id
    )
