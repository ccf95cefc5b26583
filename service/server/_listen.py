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
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import Any, Final

import anyio
import structlog
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    INVALID_PARAMS,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from prometheus_client import Gauge
from temporalio.service import RPCError

from service._logging import request_info
from service._settings import Settings
from service.auth import principal_of
from service.server._limits import limit_reached
from service.server._wire import declares_tasks, raw_notification, temporal_errors
from service.tasks import TERMINAL, TaskNotFound, Tasks, TaskView
from service.temporal import unreachable

log = structlog.get_logger("longtools.listen")

__all__ = ["TaskListens"]

_NOTIFICATION: Final = "notifications/tasks"
_RETRY_S: Final = 1.0
_WAIT_S: Final = 300.0
"""One wait for a task's next change; a stream waits as many times as it takes."""


class TaskListens:
    def __init__(
        self,
        settings: Settings,
        tasks: Tasks,
        poll_interval_ms: Callable[[TaskView], int],
        missing_extension: Callable[[], MCPError],
        gauge: Gauge,
    ) -> None:
        self._settings = settings
        self._tasks = tasks
        self._poll_interval_ms = poll_interval_ms
        self._missing_extension = missing_extension
        self._gauge = gauge
        self._open: Counter[str] = Counter()

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
        with self._holding(principal):
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
                async with anyio.create_task_group() as tg:
                    for view in views:
                        tg.start_soon(self._follow, ctx, view, principal, meta)
                    if not views:  # list changes only: none ever comes, so the stream waits for the stop
                        tg.start_soon(self._tasks.until_stopping)
        return SubscriptionsListenResult(_meta=meta)

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

    @contextmanager
    def _holding(self, principal: str) -> Iterator[None]:
        limit = self._settings.max_listens_per_principal
        if self._open[principal] >= limit:
            raise limit_reached(
                "max_listens_per_principal", limit, "You have too many subscriptions open on this server"
            )
        self._open[principal] += 1
        self._gauge.inc()
        try:
            yield
        finally:
            self._gauge.dec()
            self._open[principal] -= 1
            if not self._open[principal]:
                del self._open[principal]

    async def _owned(self, task_ids: list[str], principal: str) -> list[TaskView]:
        async def one(task_id: str) -> TaskView | None:
            try:
                return await self._tasks.get(task_id, principal)
            except TaskNotFound:
                return None

        found = await asyncio.gather(*(one(task_id) for task_id in task_ids))
        return [view for view in found if view is not None]

    async def _follow(
        self, ctx: ServerRequestContext[Any, Any], view: TaskView, principal: str, meta: dict[str, Any]
    ) -> None:
        """Send the task now and after each change, until it ends (or expires, or the process stops)."""
        await self._send(ctx, view, meta)
        shown = _shown(view.wire(0))
        while view.status not in TERMINAL and not self._tasks.stopping:
            try:
                view = await self._tasks.wait(
                    view.task_id,
                    principal,
                    partial(_differs, shown),
                    _WAIT_S,
                    since=view,
                )
            except TaskNotFound:
                return  # its TTL ran out: nothing more will be shown of it
            except (RPCError, RuntimeError) as exc:
                if not (isinstance(exc, RPCError) or unreachable(exc)):
                    raise
                log.warning("listen_read_failed", task_id=view.task_id, detail=str(exc))
                await anyio.sleep(_RETRY_S)
                view = replace(view, mark=None)  # read afresh next time
                continue
            now = _shown(view.wire(0))
            if now != shown:
                shown = now
                await self._send(ctx, view, meta)

    async def _send(self, ctx: ServerRequestContext[Any, Any], view: TaskView, meta: dict[str, Any]) -> None:
        params = {**view.wire(self._poll_interval_ms(view)), "_meta": meta}
        await ctx.session.send_notification(
            raw_notification(_NOTIFICATION, params), related_request_id=ctx.request_id
        )


def _differs(shown: dict[str, Any], now: TaskView) -> bool:
    return _shown(now.wire(0)) != shown


def _shown(task: dict[str, Any]) -> dict[str, Any]:
    """What a change is judged by: everything but the suggested poll interval, which grows with age."""
    return {key: value for key, value in task.items() if key != "pollIntervalMs"}
