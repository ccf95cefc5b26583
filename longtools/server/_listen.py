"""``subscriptions/listen`` with the tasks extension's ``notifications.taskIds``: task status
pushed to a 2026-era client as it changes. API process.

One listen request is one stream. It is acknowledged first, with only the ids the caller owns
(another principal's and unknown ids are left out without a word: they read the same); then each
acknowledged task as ``tasks/get`` shows it (a snapshot, so a change between the start and the
listen is never missed); then the task again after every change; and the result, a graceful close,
once every acknowledged task has ended. Every frame carries the subscription id.

The events come from Temporal itself, through ``Changes``: one long poll of a workflow's history
per process, shared by every stream and held round that follows it. Any replica serves a stream,
with nothing new to run, and a stream on a task that does not change costs nothing but that poll.

Past the acknowledgement and the snapshots, a stream needs none of its request: so the handler
hands the rest (``_Rest``) to the gate (``_gate.Handoff``) and returns, and the SDK lets go of
everything it built for the request while the gate writes the stream's later frames itself, in
the SDK's own framing, with its keep-alive pings. A stream at rest runs no coroutine of its own:
it waits on ``Changes`` as a callback (``Tasks.when_changed``), its pings come from one timer for
every stream (``_Pings``), and a task of its own runs only while it has a change to read or a
frame to write. Held that way, an open stream costs the API its connection, the request's task
waiting for the client to go, and a few small objects (bench/README.md, B8, has the figures). A
request that did not come through the gate is followed the same way, awaited in its handler.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final, Protocol

import structlog
from mcp.server.context import ServerRequestContext
from mcp.server.runner import modern_error_data
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    INVALID_PARAMS,
    JSONRPCError,
    JSONRPCNotification,
    RequestId,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from prometheus_client import Gauge
from temporalio.service import RPCError

from longtools._logging import request_info
from longtools._settings import Settings
from longtools.auth import principal_of
from longtools.server._gate import Write, handoff_of
from longtools.server._limits import limit_reached
from longtools.server._people import Audience, People
from longtools.server._wire import declares_tasks, raw_notification, temporal_errors
from longtools.tasks import TERMINAL, TaskNotFound, Tasks, TaskView
from longtools.temporal import unreachable

log = structlog.get_logger("longtools.listen")

__all__ = ["TaskListens"]

_NOTIFICATION: Final = "notifications/tasks"
_RETRY_S: Final = 1.0
PING_S: Final = 15.0
"""Seconds of silence after which a stream the gate carries gets a ``: ping`` comment, as the
SDK's transport does for the streams it carries (``_SSE_PING_INTERVAL``), so that a proxy's idle
timeout does not cut it."""
PING: Final = b": ping\r\n\r\n"
_EARLY_S: Final = 0.005
"""A ping due this soon is due now: the event loop runs a timer up to its clock's resolution early."""


class TaskListens:
    def __init__(
        self,
        settings: Settings,
        tasks: Tasks,
        poll_interval_ms: Callable[[TaskView], int],
        missing_extension: Callable[[], MCPError],
        gauge: Gauge,
        people: People,
    ) -> None:
        self._people = people
        self._settings = settings
        self._tasks = tasks
        self._poll_interval_ms = poll_interval_ms
        self._missing_extension = missing_extension
        self._gauge = gauge
        self._open: Counter[str] = Counter()
        self._opened: dict[str, deque[float]] = {}
        """Per principal: when its streams of the last minute were opened (monotonic)."""
        self.pings = _Pings()

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        # The core filters (list changes, resources) are acknowledged as asked and never fire:
        # nothing of that kind changes while a process runs.
        filters = params.notifications.model_dump(by_alias=True, exclude_none=True)
        wanted = filters.pop("taskIds", None)
        task_ids = self._checked_ids(ctx, wanted)
        principal = principal_of(ctx)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        rest = _Rest(self, principal, ctx.request_id, self._people.audience(ctx))  # counted from here
        handed = False
        try:
            async with temporal_errors("subscriptions/listen"):
                views = await self._owned(task_ids, principal)
            owned = [view.task_id for view in views]
            honored = SubscriptionFilter.model_validate(
                {**filters, **({"taskIds": owned} if wanted is not None else {})}
            )
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=ctx.request_id,
            )
            request_info()["task_id"] = ",".join(owned)[:200]
            if views or any(filters.values()):
                session = _Session(ctx, rest)
                for view in views:
                    await session.task(view)  # the snapshots, before the SDK's last frame
                rest.views = views
                handoff = handoff_of(getattr(ctx.request, "scope", None))
                if handoff is not None:
                    handoff.rest, handed = rest, True  # the gate carries it on, and releases it
                else:
                    await rest.follow(session)
        finally:
            if not handed:
                rest.release()
        return SubscriptionsListenResult(_meta=meta)

    def task_params(self, view: TaskView, meta: dict[str, Any], audience: Audience) -> dict[str, Any]:
        task = audience.wire(view, self._poll_interval_ms(view))
        return {**task, "_meta": {**task.get("_meta", {}), **meta}}

    def _checked_ids(self, ctx: ServerRequestContext[Any, Any], wanted: Any) -> list[str]:
        if wanted is None:
            return []
        if not declares_tasks(ctx.session.client_capabilities):
            raise self._missing_extension()
        if not isinstance(wanted, list) or not all(isinstance(i, str) and 0 < len(i) <= 200 for i in wanted):
            raise MCPError(code=INVALID_PARAMS, message="notifications.taskIds must be a list of task ids")
        unique = list(dict.fromkeys(wanted))
        limit = self._settings.max_listen_task_ids
        if len(unique) > limit:
            raise limit_reached("max_listen_task_ids", limit, "This stream cannot follow that many tasks")
        return unique

    def hold(self, principal: str) -> None:
        """Count an open stream of ``principal``'s; -32600 past ``max_listens_per_principal``, or
        past ``max_listen_opens_per_minute`` streams opened in the last minute (one that closes at
        once does not hold a place, but its reads cost Temporal all the same)."""
        limit = self._settings.max_listens_per_principal
        if self._open[principal] >= limit:
            raise limit_reached(
                "max_listens_per_principal", limit, "You have too many subscriptions open on this server"
            )
        now = time.monotonic()
        opened = self._opened.setdefault(principal, deque())
        while opened and now - opened[0] >= 60:
            opened.popleft()
        rate = self._settings.max_listen_opens_per_minute
        if len(opened) >= rate:
            raise limit_reached(
                "max_listen_opens_per_minute",
                rate,
                "You have opened too many subscriptions in the last minute",
            )
        if len(self._opened) > 10_000:  # bounded: forget the principals with no recent open
            self._opened = {key: times for key, times in self._opened.items() if times}
        opened.append(now)
        self._open[principal] += 1
        self._gauge.inc()

    def release(self, principal: str) -> None:
        self._gauge.dec()
        self._open[principal] -= 1
        if not self._open[principal]:
            del self._open[principal]

    async def _owned(self, task_ids: list[str], principal: str) -> list[TaskView]:
        """The caller's own tasks among ``task_ids``, read (from memory, or a read each from
        Temporal). An id whose tag is not the caller's costs nothing, and so does an id without a
        tag (a task from before ids carried one is not followed): only a task the caller may see
        is read."""
        ids = self._tasks.ids
        task_ids = [
            task_id for task_id in task_ids if ids.tagged(task_id) and ids.may_belong(task_id, principal)
        ]

        async def one(task_id: str) -> TaskView | None:
            try:
                return await self._tasks.get(task_id, principal)
            except TaskNotFound:
                return None

        found = await asyncio.gather(*(one(task_id) for task_id in task_ids))
        return [view for view in found if view is not None]

    @property
    def tasks(self) -> Tasks:
        return self._tasks


class _Out(Protocol):
    """Where a stream's frames go."""

    async def task(self, view: TaskView) -> None: ...

    async def ping_if_due(self) -> bool:
        """Write a ping when the stream has been silent ``PING_S``; whether it did."""
        ...

    def failed(self, exc: Exception) -> None:
        """The stream fails with ``exc``; called where it was caught."""
        ...


class _Follow:
    """One task a stream follows: the view shown last, and how its next change is waited for.
    Called (as ``Tasks.when_changed``'s callback) when that change may have come."""

    __slots__ = ("cancel", "due", "stream", "view")

    def __init__(self, stream: _Rest, view: TaskView) -> None:
        self.stream = stream
        self.view = view
        self.due = False
        self.cancel: Callable[[], None] = _nothing

    def __call__(self) -> None:
        self.due = True
        self.stream.wake()


class _Rest:
    """An acknowledged stream past its snapshots: who listens, to what, and its place under the
    per-principal bound (taken when made, given back once by ``release``). Holds nothing of the
    request, so the gate can carry it on after the SDK has let go of the request.

    Carried on, it waits with no coroutine: each task it follows waits as a ``_Follow`` on its
    watch, and its pings are due by ``_Pings``. A wake (a change, a ping due, a retry) runs
    ``_run`` in a task, which reads what changed and writes, then ends: at rest, nothing runs.
    """

    __slots__ = (
        "_audience",
        "_busy",
        "_context",
        "_end",
        "_follows",
        "_held",
        "_listens",
        "_out",
        "_principal",
        "_request_id",
        "_stopping",
        "views",
    )

    def __init__(
        self,
        listens: TaskListens,
        principal: str,
        request_id: RequestId | None,
        audience: Audience,
    ) -> None:
        listens.hold(principal)
        self._audience = audience
        self._listens = listens
        self._principal = principal
        self._request_id = request_id
        self._held = True
        self.views: list[TaskView] = []
        self._out: _Out | None = None
        self._end: Callable[[], None] | None = None
        """Tells whoever carries the stream that it has ended; None once it has, or was closed."""
        self._follows: list[_Follow] = []
        self._busy: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._context: contextvars.Context | None = None

    @property
    def request_id(self) -> RequestId | None:
        return self._request_id

    def release(self) -> None:
        if self._held:
            self._held = False
            self._listens.release(self._principal)

    def task_params(self, view: TaskView) -> dict[str, Any]:
        # Its ``_meta`` is made for each frame: a dict per stream kept for its life costs 0.2 KiB.
        meta = {SUBSCRIPTION_ID_META_KEY: self._request_id}
        return self._listens.task_params(view, meta, self._audience)

    def carry_on(self, write: Write, end: Callable[[], None]) -> None:
        """The stream on the gate's response: frames as the SDK frames them, written by ``write``,
        with a ping after ``PING_S`` of silence; ``end`` is called once it has ended."""
        self._start(_Frames(write, self, self._listens.pings), end)

    def close(self, last: bytes) -> bytes:
        """Stop the stream (it ended, or its client went away) and give its place back; the frame
        to end it with: ``last``, or an error as the SDK's handler boundary would have ended it."""
        self._end = None
        for follow in self._follows:
            follow.cancel()
        self._follows = []
        for task in (self._busy, self._stopping):
            if task is not None:
                task.cancel()
        out, self._out = self._out, None
        self.release()
        if isinstance(out, _Frames):
            return out.stop(last)
        return last

    async def follow(self, session: _Session) -> None:
        """The stream in its handler's task, until it ends (or the process stops); an error is
        raised there, for the SDK's handler boundary."""
        ended = asyncio.Event()
        self._start(session, ended.set)
        try:
            await ended.wait()
        finally:
            self.close(b"")
        if session.failure is not None:
            raise session.failure

    def wake(self) -> None:
        """Something may be due (a change, a ping, a retry): look in a task, unless one looks already
        (it looks again before it ends)."""
        if self._end is not None and self._busy is None:
            self._busy = asyncio.get_running_loop().create_task(self._run(), context=self._context)

    def _start(self, out: _Out, end: Callable[[], None]) -> None:
        self._out, self._end = out, end
        # Its tasks run in the request's context (its log fields), as the stream did in the request.
        self._context = contextvars.copy_context()
        tasks = self._listens.tasks
        views, self.views = self.views, []
        self._follows = [_Follow(self, view) for view in views if view.status not in TERMINAL]
        if tasks.stopping or (views and not self._follows):
            self._finish()
            return
        for follow in self._follows:
            self._wait(follow)
        if not views:  # list changes only: none ever comes, so the stream waits for the stop
            self._stopping = asyncio.get_running_loop().create_task(self._until_stopping())

    def _wait(self, follow: _Follow) -> None:
        if follow.view.mark is None:  # read afresh after a failed read
            follow.cancel = asyncio.get_running_loop().call_later(_RETRY_S, follow).cancel
        else:
            follow.cancel = self._listens.tasks.when_changed(follow.view, follow)

    async def _until_stopping(self) -> None:
        await self._listens.tasks.until_stopping()
        self._finish()

    def _finish(self) -> None:
        end, self._end = self._end, None
        for follow in self._follows:
            follow.cancel()
        if end is not None:
            end()

    async def _run(self) -> None:
        """What is due, until nothing is: each change read and shown, a ping if one is due."""
        assert self._out is not None
        tasks = self._listens.tasks
        try:
            while self._end is not None:
                if tasks.stopping:
                    self._finish()
                    return
                follow = next((follow for follow in self._follows if follow.due), None)
                if follow is None:
                    if not await self._out.ping_if_due():
                        return
                    continue
                follow.due = False
                await self._next(follow, self._out)
                if not self._follows:  # every task it followed has ended
                    self._finish()
        except Exception as exc:
            self._out.failed(exc)
            self._finish()
        finally:
            self._busy = None

    async def _next(self, follow: _Follow, out: _Out) -> None:
        """Read the task after a change (or afresh); show it if it differs; wait for the next."""
        tasks = self._listens.tasks
        view = follow.view
        try:
            if view.mark is None:
                changed = await tasks.read(view.task_id, self._principal)
            else:
                changed = await tasks.changed(view, self._principal)
        except TaskNotFound:
            self._follows.remove(follow)  # its TTL ran out: nothing more will be shown of it
            return
        except (RPCError, RuntimeError) as exc:
            if not (isinstance(exc, RPCError) or unreachable(exc)):
                raise
            log.warning("listen_read_failed", task_id=view.task_id, detail=str(exc))
            follow.view = replace(view, mark=None)
            self._wait(follow)
            return
        # ``follow.view`` always shows what was sent last (``_shown``): the stream keeps it, and
        # no copy of its wire form, while the task does not change.
        follow.view = changed
        if _differs(view, changed):
            await out.task(changed)
        if changed.status in TERMINAL:
            self._follows.remove(follow)
        elif self._end is not None:
            self._wait(follow)


class _Session:
    """Frames through the SDK's transport, which pings the stream itself."""

    __slots__ = ("_ctx", "_rest", "failure")

    def __init__(self, ctx: ServerRequestContext[Any, Any], rest: _Rest) -> None:
        self._ctx = ctx
        self._rest = rest
        self.failure: Exception | None = None

    async def task(self, view: TaskView) -> None:
        await self._ctx.session.send_notification(
            raw_notification(_NOTIFICATION, self._rest.task_params(view)),
            related_request_id=self._ctx.request_id,
        )

    async def ping_if_due(self) -> bool:
        return False

    def failed(self, exc: Exception) -> None:
        self.failure = exc


class _Frames:
    """Frames written on the gate's response, with a ping after ``PING_S`` of silence."""

    __slots__ = ("_error", "_last", "_pings", "_rest", "_write")

    def __init__(self, write: Write, rest: _Rest, pings: _Pings) -> None:
        self._write = write
        self._rest = rest
        self._pings = pings
        self._error: bytes | None = None
        self._last = 0.0
        self._sent()  # the SDK's last frame (a snapshot) has just gone

    async def task(self, view: TaskView) -> None:
        # Dumped as the SDK's session and transport dump a notification, so the frame is the same.
        notification = raw_notification(_NOTIFICATION, self._rest.task_params(view))
        data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        await self._send(
            _sse(JSONRPCNotification(jsonrpc="2.0", method=data["method"], params=data["params"]))
        )

    async def ping_if_due(self) -> bool:
        if asyncio.get_running_loop().time() < self._last + PING_S - _EARLY_S:
            return False
        await self._send(PING)
        return True

    def failed(self, exc: Exception) -> None:
        error = JSONRPCError(jsonrpc="2.0", id=self._rest.request_id, error=modern_error_data(exc))
        self._error = _sse(error)

    def stop(self, last: bytes) -> bytes:
        self._pings.forget(self._rest)
        return last if self._error is None else self._error

    async def _send(self, frame: bytes) -> None:
        self._sent()
        await self._write(frame)

    def _sent(self) -> None:
        self._last = asyncio.get_running_loop().time()
        self._pings.sent(self._rest, self._last)


class _Pings:
    """When the streams the gate carries are due a ping, from one timer for them all (the SDK's
    transport runs a loop per stream): a stream silent for ``PING_S`` is woken to write one."""

    __slots__ = ("_quiet", "_timer")

    def __init__(self) -> None:
        self._quiet: OrderedDict[_Rest, float] = OrderedDict()
        """Every carried stream by when it last wrote (the event loop's clock), longest silent first."""
        self._timer: asyncio.TimerHandle | None = None

    def sent(self, stream: _Rest, at: float) -> None:
        self._quiet[stream] = at
        self._quiet.move_to_end(stream)
        if self._timer is None:
            self._arm()

    def forget(self, stream: _Rest) -> None:
        self._quiet.pop(stream, None)

    def _arm(self) -> None:
        if not self._quiet:
            self._timer = None
            return
        first = next(iter(self._quiet.values()))
        self._timer = asyncio.get_running_loop().call_at(first + PING_S, self._due)

    def _due(self) -> None:
        """Wake every stream due a ping (streams that fell silent together are woken together)."""
        now = asyncio.get_running_loop().time()
        while self._quiet:
            stream, at = next(iter(self._quiet.items()))
            if at + PING_S - _EARLY_S > now:
                break
            del self._quiet[stream]  # back once it has written its ping
            stream.wake()
        self._arm()


def _nothing() -> None:
    return


def _sse(message: JSONRPCNotification | JSONRPCError) -> bytes:
    """One SSE ``message`` event, byte for byte as the SDK's transport writes it."""
    body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    data = json.dumps(body, separators=(",", ":"))
    return f"event: message\r\ndata: {data}\r\n\r\n".encode()


def _differs(before: TaskView, now: TaskView) -> bool:
    return now is not before and _shown(now.wire(0)) != _shown(before.wire(0))


def _shown(task: dict[str, Any]) -> dict[str, Any]:
    """What a change is judged by: everything but the suggested poll interval, which grows with age."""
    return {key: value for key, value in task.items() if key != "pollIntervalMs"}
