"""How the API learns that a workflow changed: the one way every waiting path waits. API process.

A held MRTR round, a ``tasks/update`` waiting for its answers to be taken, a duplicate waiting
for a run-once outcome: each reads what it needs (a describe, a history), and when that is not
what it waits for, waits here for the next change, then reads again.

One watch per workflow per process, shared by all its waiters, long-polls the workflow's history
(``GetWorkflowExecutionHistory`` with ``wait_new_event``). Temporal answers such a poll when an
event is appended, with no worker involved, so waiting costs neither side anything between
changes, and works with every worker down. A reader's ``Mark`` (the run and the number of events
it had read) tells the watch what the reader has seen, so a change that lands between the read
and the wait is never missed: the watch knows the id of every change it has seen.

Only events that may change what a reader sees count as changes: the workflow's memo upserts
(what ``tasks/get`` shows), signals (answers, run-once outcomes) and the end of a run. A run
that continues as new is followed into its successor.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import structlog
from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

log = structlog.get_logger("longtools.changes")

__all__ = ["Changes", "Completion", "Mark"]

_CHANGES = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    }
)
_PAGE = 1000
_POLL_TIMEOUT = timedelta(seconds=70)
"""Longer than Temporal holds a history long poll (20 s by default), so the server ends it."""
_RETRY_S = 1.0
_MAX_WATCHES = 10_000
"""Past this many, the watches of ended workflows are forgotten once idle (each is about 1 KB)."""


@dataclass(frozen=True)
class Mark:
    """How far a reader has seen a workflow: the run it read and that run's number of events."""

    run_id: str
    events: int


@dataclass(frozen=True)
class Completion:
    """A run's completion as its close event has it: its result (still encoded), and when."""

    mark: Mark
    result: Payloads
    at: datetime


class _Watch:
    """The long poll of one workflow's history, and the last change it has seen."""

    def __init__(self, run_id: str) -> None:
        self.runs = [run_id]
        """The runs followed, oldest first; the last is the one being read."""
        self.changed_at = 0
        """Event id (in the current run) of the last change seen."""
        self.memo: Mapping[str, Payload] = {}
        """What the last change upserted into the memo, when it was a memo upsert."""
        self.completion: Completion | None = None
        """The run's result, when the last change was its completion."""
        self.caught_up = False
        """Whether the watch has read the current run's history to its end and waits for more."""
        self.closed = False
        """The workflow has ended: no change will follow."""
        self.ended = False
        """The watch has stopped: the workflow ended, is gone, or nobody wanted it any more."""
        self.waiters = 0
        self.idle_since = 0.0
        self._generation = asyncio.Event()

    def changed_since(self, seen: Mark) -> bool:
        if seen.run_id == self.runs[-1]:
            return self.changed_at > seen.events
        if seen.run_id in self.runs:
            return True  # the run the reader saw has ended since
        # A run this watch does not know: a later one it has not reached yet, or one before it
        # started. Once it has read its own run, read again: at worst once more than needed.
        return self.caught_up or self.ended

    def notify(self) -> None:
        generation, self._generation = self._generation, asyncio.Event()
        generation.set()

    async def next_notice(self) -> None:
        await self._generation.wait()


class Changes:
    """Every watch of one API process. ``connection`` gives the Temporal client (see
    ``temporal.Connection``); a watch nobody waits on is kept ``linger_s`` for readers to come."""

    def __init__(self, connection: Callable[[], Client], namespace: str, *, linger_s: float = 30.0) -> None:
        self._connection = connection
        self._namespace = namespace
        self._stop = asyncio.Event()
        self._linger_s = linger_s
        self._watches: dict[str, _Watch] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def after(self, workflow_id: str, seen: Mark, within_s: float) -> bool:
        """Wait until the workflow changes after ``seen``, ``within_s`` seconds pass or the process
        stops; True if it changed (read it again), False otherwise."""
        watch = self._watch(workflow_id, seen.run_id)
        watch.waiters += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        try:
            while True:
                if watch.changed_since(seen) or (watch.ended and not watch.closed):
                    return True  # changed, or gone (past retention): the next read tells
                left = deadline - loop.time()
                if left <= 0 or self._stop.is_set():
                    return False
                notice = asyncio.ensure_future(watch.next_notice())
                stopping = asyncio.ensure_future(self._stop.wait())
                try:
                    await asyncio.wait({notice, stopping}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    notice.cancel()
                    stopping.cancel()
        finally:
            watch.waiters -= 1
            watch.idle_since = loop.time()

    def unchanged(self, workflow_id: str, seen: Mark) -> bool:
        """Whether a live watch has read the workflow to its end with no change after ``seen``:
        what was read then is what a read now would give (to within the moment a change takes to
        reach the watch). Keeps the watch going a while longer, for the next reader."""
        watch = self._watches.get(workflow_id)
        if watch is None or not (watch.caught_up or watch.closed):
            return False
        watch.idle_since = asyncio.get_running_loop().time()
        return not watch.changed_since(seen)

    def upserted(self, workflow_id: str, seen: Mark, key: str) -> tuple[Mark, Payload] | None:
        """When the workflow's last change after ``seen`` upserted ``key`` into its memo: where that
        change stands and the value upserted (still encoded), so a reader that knows the rest of
        the memo need not read the workflow again. None otherwise: read it."""
        watch = self._watches.get(workflow_id)
        if watch is None or watch.runs[-1] != seen.run_id or watch.changed_at <= seen.events:
            return None
        value = watch.memo.get(key)
        return (Mark(seen.run_id, watch.changed_at), value) if value is not None else None

    def completed(self, workflow_id: str, seen: Mark) -> Completion | None:
        """When the workflow's last change after ``seen`` completed the run ``seen`` is of: its
        result from the close event, so a reader need not fetch the history again. None
        otherwise (it failed, was cancelled, continued as new...): read it."""
        watch = self._watches.get(workflow_id)
        if watch is None or watch.runs[-1] != seen.run_id or watch.changed_at <= seen.events:
            return None
        return watch.completion

    def follow(self, workflow_id: str, seen: Mark) -> None:
        """Start watching the workflow (if no watch is running) for readers to come."""
        self._watch(workflow_id, seen.run_id).idle_since = asyncio.get_running_loop().time()

    @property
    def stopping(self) -> bool:
        """Whether the process is stopping (``stop()`` was called): no wait waits any more."""
        return self._stop.is_set()

    async def until_stopping(self) -> None:
        """Return once ``stop()`` is called."""
        await self._stop.wait()

    def stop(self) -> None:
        """End every wait now (the process is stopping): a held round then answers "not yet", and
        its client retries on another replica, or here after the restart."""
        self._stop.set()

    async def aclose(self) -> None:
        self.stop()
        for task in list(self._running):
            task.cancel()
        for task in list(self._running):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _watch(self, workflow_id: str, run_id: str) -> _Watch:
        watch = self._watches.get(workflow_id)
        if watch is None or (watch.ended and not watch.closed):
            if len(self._watches) >= _MAX_WATCHES:
                self._forget_idle()
            watch = _Watch(run_id)
            watch.idle_since = asyncio.get_running_loop().time()
            self._watches[workflow_id] = watch
            task = asyncio.create_task(self._follow(workflow_id, watch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        return watch

    def _forget_idle(self) -> None:
        """Drop the watches of ended workflows nobody has read for a while (bounded memory)."""
        now = asyncio.get_running_loop().time()
        for workflow_id, watch in list(self._watches.items()):
            if watch.ended and watch.waiters == 0 and now - watch.idle_since >= self._linger_s:
                del self._watches[workflow_id]

    def _wanted(self, watch: _Watch) -> bool:
        idle = asyncio.get_running_loop().time() - watch.idle_since
        return watch.waiters > 0 or idle < self._linger_s

    async def _follow(self, workflow_id: str, watch: _Watch) -> None:
        token = b""
        try:
            while self._wanted(watch) and not self._stop.is_set():
                try:
                    response = await self._connection().workflow_service.get_workflow_execution_history(
                        GetWorkflowExecutionHistoryRequest(
                            namespace=self._namespace,
                            execution=WorkflowExecution(workflow_id=workflow_id, run_id=watch.runs[-1]),
                            maximum_page_size=_PAGE,
                            next_page_token=token,
                            wait_new_event=True,
                            skip_archival=True,
                        ),
                        retry=True,
                        timeout=_POLL_TIMEOUT,
                    )
                except RPCError as exc:
                    if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                        self._watches.pop(workflow_id, None)
                        return  # gone (past retention) or not a workflow: readers find out by reading
                    log.warning("watch_failed", workflow_id=workflow_id, status=exc.status.name)
                    watch.caught_up = False
                    watch.notify()
                    await asyncio.sleep(_RETRY_S)
                    continue
                events = response.history.events
                changed = False
                for event in events:
                    if event.event_type in _CHANGES:
                        watch.changed_at = event.event_id
                        watch.memo = {}
                        watch.completion = None
                        changed = True
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
                        watch.memo = event.workflow_properties_modified_event_attributes.upserted_memo.fields
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                        result = event.workflow_execution_completed_event_attributes.result
                        at = event.event_time.ToDatetime(tzinfo=UTC)
                        watch.completion = Completion(Mark(watch.runs[-1], event.event_id), result, at)
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                        successor = event.workflow_execution_continued_as_new_event_attributes
                        watch.runs.append(successor.new_execution_run_id)
                        watch.changed_at = 0
                        watch.memo = {}
                token = response.next_page_token
                caught_up = len(events) < _PAGE and bool(token)
                if changed or caught_up != watch.caught_up:
                    watch.caught_up = caught_up
                    watch.notify()
                if not token:
                    last = events[-1].event_type if events else None
                    if last != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                        watch.closed = True  # kept (until idle) so readers know it will not change
                        return
                    # Otherwise follow the run it continued as, from its start (token is empty).
        finally:
            watch.ended = True
            watch.notify()
            if not watch.closed and self._watches.get(workflow_id) is watch:
                del self._watches[workflow_id]
