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
the SDK's own framing, with its keep-alive pings. Held that way, an open stream costs the API its
connection, one task waiting for the client to go, and its wait on ``Changes`` (bench/README.md,
B8, has the figures). A request that did not come through the gate is followed in the handler.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Final, Protocol

import anyio
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
_WAIT_S: Final = 300.0
"""One wait for a task's next change; a stream waits as many times as it takes."""
PING_S: Final = 15.0
"""Seconds of silence after which a stream the gate carries gets a ``: ping`` comment, as the
SDK's transport does for the streams it carries (``_SSE_PING_INTERVAL``), so that a proxy's idle
timeout does not cut it."""
PING: Final = b": ping\r\n\r\n"


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
        rest = _Rest(self, principal, meta, ctx.request_id, self._people.audience(ctx))  # counted from here
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
    """Where a followed task's frames go, and when the stream needs a ping."""

    async def task(self, view: TaskView) -> None: ...

    def quiet_s(self) -> float:
        """How long a wait may last before the stream needs a ping."""
        ...

    async def ping_if_due(self) -> None: ...


class _Rest:
    """An acknowledged stream past its snapshots: who listens, to what, and its place under the
    per-principal bound (taken when made, given back once by ``release``). Holds nothing of the
    request, so the gate can carry it on after the SDK has let go of the request."""

    __slots__ = ("_audience", "_held", "_listens", "_meta", "_principal", "_request_id", "views")

    def __init__(
        self,
        listens: TaskListens,
        principal: str,
        meta: dict[str, Any],
        request_id: RequestId | None,
        audience: Audience,
    ) -> None:
        listens.hold(principal)
        self._audience = audience
        self._listens = listens
        self._principal = principal
        self._meta = meta
        self._request_id = request_id
        self._held = True
        self.views: list[TaskView] = []

    def release(self) -> None:
        if self._held:
            self._held = False
            self._listens.release(self._principal)

    def task_params(self, view: TaskView) -> dict[str, Any]:
        return self._listens.task_params(view, self._meta, self._audience)

    def drop(self) -> None:
        self.release()

    async def carry_on(self, write: Write, last: bytes) -> bytes:
        """The stream on the gate's response: frames as the SDK frames them, then ``last``; an
        error ends it as the SDK's handler boundary would have (logged, -32603 on the wire)."""
        try:
            await self.follow(_Frames(write, self))
        except Exception as exc:
            error = JSONRPCError(jsonrpc="2.0", id=self._request_id, error=modern_error_data(exc))
            return _sse(error)
        finally:
            self.release()
        return last

    async def follow(self, out: _Out) -> None:
        """Until every task has ended (or expired), or the process stops."""
        tasks = self._listens.tasks
        views, self.views = self.views, []  # each follow keeps the view it has got to, and only that
        if len(views) == 1:
            await self._follow(views.pop(), out)  # the usual stream: no task group for one task
        elif views:
            async with anyio.create_task_group() as tg:
                for view in views:
                    tg.start_soon(self._follow, view, out)
        else:  # list changes only: none ever comes, so the stream waits for the stop
            while not tasks.stopping:
                with anyio.move_on_after(out.quiet_s()):
                    await tasks.until_stopping()
                await out.ping_if_due()

    async def _follow(self, view: TaskView, out: _Out) -> None:
        """Send the task after each change, until it ends (or expires, or the process stops)."""
        tasks = self._listens.tasks
        # ``view`` always shows what was sent last (``_shown``): the stream keeps it, and no copy of
        # its wire form, while the task does not change.
        while view.status not in TERMINAL and not tasks.stopping:
            try:
                changed = await tasks.wait(
                    view.task_id,
                    self._principal,
                    partial(_differs, view),
                    out.quiet_s(),
                    since=view,
                )
            except TaskNotFound:
                return  # its TTL ran out: nothing more will be shown of it
            except (RPCError, RuntimeError) as exc:
                if not (isinstance(exc, RPCError) or unreachable(exc)):
                    raise
                log.warning("listen_read_failed", task_id=view.task_id, detail=str(exc))
                await anyio.sleep(_RETRY_S)
                await out.ping_if_due()
                view = replace(view, mark=None)  # read afresh next time
                continue
            differs = _differs(view, changed)
            view = changed
            if differs:
                await out.task(view)
            else:
                await out.ping_if_due()


class _Session:
    """Frames through the SDK's transport, which pings the stream itself."""

    __slots__ = ("_ctx", "_rest")

    def __init__(self, ctx: ServerRequestContext[Any, Any], rest: _Rest) -> None:
        self._ctx = ctx
        self._rest = rest

    async def task(self, view: TaskView) -> None:
        await self._ctx.session.send_notification(
            raw_notification(_NOTIFICATION, self._rest.task_params(view)),
            related_request_id=self._ctx.request_id,
        )

    def quiet_s(self) -> float:
        return _WAIT_S

    async def ping_if_due(self) -> None:
        return


class _Frames:
    """Frames written on the gate's response, with a ping after ``PING_S`` of silence."""

    __slots__ = ("_last", "_loop", "_rest", "_write")

    def __init__(self, write: Write, rest: _Rest) -> None:
        self._write = write
        self._rest = rest
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()  # the SDK's last frame (a snapshot) has just gone

    async def task(self, view: TaskView) -> None:
        # Dumped as the SDK's session and transport dump a notification, so the frame is the same.
        notification = raw_notification(_NOTIFICATION, self._rest.task_params(view))
        data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        await self._send(
            _sse(JSONRPCNotification(jsonrpc="2.0", method=data["method"], params=data["params"]))
        )

    def quiet_s(self) -> float:
        return min(_WAIT_S, max(0.0, self._last + PING_S - self._loop.time()))

    async def ping_if_due(self) -> None:
        if self._loop.time() >= self._last + PING_S:
            await self._send(PING)

    async def _send(self, frame: bytes) -> None:
        self._last = self._loop.time()
        await self._write(frame)


def _sse(message: JSONRPCNotification | JSONRPCError) -> bytes:
    """One SSE ``message`` event, byte for byte as the SDK's transport writes it."""
    body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    data = json.dumps(body, separators=(",", ":"))
    return f"event: message\r\ndata: {data}\r\n\r\n".encode()


def _differs(before: TaskView, now: TaskView) -> bool:
    # A wait that saw no change gives back the view it started from: the check a stream makes at
    # each ping then costs nothing.
    return now is not before and _shown(now.wire(0)) != _shown(before.wire(0))


def _shown(task: dict[str, Any]) -> dict[str, Any]:
    """What a change is judged by: everything but the suggested poll interval, which grows with age."""
    return {key: value for key, value in task.items() if key != "pollIntervalMs"}
