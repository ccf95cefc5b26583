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
import contextvars
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

import structlog
from prometheus_client import Gauge
from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

log = structlog.get_logger("longtools.changes")

__all__ = ["Changes", "Completion", "Mark"]

_CHANGES = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        # An activity that may report() from its heartbeat: readers take up reading it (TaskView.live).
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
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
"""Past this many, the watches of ended workflows are forgotten once idle."""


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

    def __init__(self, run_id: str, wanted_until: float) -> None:
        self.runs = [run_id]
        """The runs followed, oldest first; the last is the one being read."""
        self.changed_at = 0
        """Event id (in the current run) of the last change seen."""
        self.memo: Mapping[str, bytes] = {}
        """What the last change upserted into the memo (each value a serialized ``Payload``), when
        it was a memo upsert, or the run's completion in the workflow task that upserted it."""
        self.completion: Completion | None = None
        """The run's result, when the last change was its completion."""
        self.kept = 0
        """Bytes of payloads held in ``memo`` and ``completion`` (counted against the budget)."""
        self.caught_up = False
        """Whether the watch has read the current run's history to its end and waits for more."""
        self.closed = False
        """The workflow has ended: no change will follow."""
        self.ended = False
        """The watch has stopped: the workflow ended, is gone, or nobody wanted it any more."""
        self.waiters = 0
        """Readers waiting: in ``after``, and the callbacks in ``called``."""
        self.called: list[_Callback] = []
        """``Changes.when_changed``'s callbacks not called yet."""
        self.wanted_until = wanted_until
        """Event-loop time until which the watch runs with nobody waiting, for readers to come."""
        self.follower: asyncio.Task[None] | None = None
        self.expiry: asyncio.TimerHandle | None = None
        self._generation: asyncio.Event | None = None

    @property
    def generation(self) -> asyncio.Event:
        """Set (and replaced) on every notice. A waiter takes it *before* it checks for a change,
        so a notice that lands between its check and its wait is never missed. Made when first
        taken: a watch whose readers are all callbacks has none (an event is 0.9 KiB)."""
        if self._generation is None:
            self._generation = asyncio.Event()
        return self._generation

    def changed_since(self, seen: Mark) -> bool:
        if seen.run_id == self.runs[-1]:
            return self.changed_at > seen.events
        if seen.run_id in self.runs:
            return True  # the run the reader saw has ended since
        # A run this watch does not know: a later one it has not reached yet, or one before it
        # started. Once it has read its own run, read again: at worst once more than needed.
        return self.caught_up or self.ended

    def notify(self) -> None:
        generation, self._generation = self._generation, None
        if generation is not None:
            generation.set()


class _Callback:
    """A reader waiting with no coroutine of its own (``Changes.when_changed``)."""

    __slots__ = ("callback", "seen")

    def __init__(self, seen: Mark, callback: Callable[[], None]) -> None:
        self.seen = seen
        self.callback = callback


class Changes:
    """Every watch of one API process. ``connection`` gives the Temporal client (see
    ``temporal.Connection``); ``following`` counts the watches running. A watch nobody waits on
    runs ``linger_s`` more for readers to come, then stops (its long poll cancelled). The
    payloads watches keep, so that a reader need not read a change again, take at most
    ``max_bytes``; past it the oldest idle ones are dropped (a reader then reads Temporal)."""

    def __init__(
        self,
        connection: Callable[[], Client],
        namespace: str,
        *,
        linger_s: float = 30.0,
        max_bytes: int = 32 * 1024 * 1024,
        following: Gauge | None = None,
    ) -> None:
        self._connection = connection
        self._namespace = namespace
        self._stop = asyncio.Event()
        self._linger_s = linger_s
        self._max_bytes = max_bytes
        self._kept = 0
        self._watches: dict[str, _Watch] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._following = following

    async def after(
        self, workflow_id: str, seen: Mark, within_s: float, *, linger_s: float | None = None
    ) -> bool:
        """Wait until the workflow changes after ``seen``, ``within_s`` seconds pass or the process
        stops; True if it changed (read it again), False otherwise. The watch then runs
        ``linger_s`` more (default: the process's) for the next reader."""
        watch = self._watch(workflow_id, seen.run_id)
        watch.waiters += 1
        try:
            # Changed, or gone (past retention): the next read tells.
            return await self._until(watch, partial(self._due, watch, seen), within_s)
        finally:
            watch.waiters -= 1
            self._keep(watch, self._linger_s if linger_s is None else linger_s)

    async def _until(self, watch: _Watch, ready: Callable[[], bool], within_s: float) -> bool:
        """Wait until ``ready()``, ``within_s`` seconds pass or the process stops; whether ready."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while True:
            notice = watch.generation  # before the check: a notice after it sets this one
            if ready():
                return True
            left = deadline - loop.time()
            if left <= 0 or self._stop.is_set():
                return False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await notice.wait()  # stop() notifies every watch too

    def when_changed(self, workflow_id: str, seen: Mark, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once, when ``after`` would have returned True (the workflow changed
        after ``seen``, or is gone) or the process stops; unless the function returned is called
        first. ``after`` without a coroutine: a reader waiting this way holds only this (a listen
        stream at rest). It is called from the watch's task: it must not block."""
        watch = self._watch(workflow_id, seen.run_id)
        waiting = _Callback(seen, callback)
        watch.called.append(waiting)
        watch.waiters += 1
        if self._stop.is_set() or self._due(watch, seen):
            asyncio.get_running_loop().call_soon(self._call_back, watch)
        return partial(self._forget, watch, waiting)

    def _due(self, watch: _Watch, seen: Mark) -> bool:
        return watch.changed_since(seen) or (watch.ended and not watch.closed)

    def _notify(self, watch: _Watch) -> None:
        """Wake the watch's readers: those in ``after`` check again, callbacks due are called."""
        watch.notify()
        if watch.called:
            self._call_back(watch)

    def _call_back(self, watch: _Watch) -> None:
        stopping = self._stop.is_set()
        due = [waiting for waiting in watch.called if stopping or self._due(watch, waiting.seen)]
        for waiting in due:
            self._forget(watch, waiting)
            waiting.callback()

    def _forget(self, watch: _Watch, waiting: _Callback) -> None:
        if waiting in watch.called:
            watch.called.remove(waiting)
            watch.waiters -= 1
            self._keep(watch, self._linger_s)

    def unchanged(self, workflow_id: str, seen: Mark) -> bool:
        """Whether a live watch has read the workflow to its end with no change after ``seen``:
        what was read then is what a read now would give (to within the moment a change takes to
        reach the watch). Keeps the watch going a while longer, for the next reader."""
        watch = self._watches.get(workflow_id)
        if watch is None or not (watch.caught_up or watch.closed):
            return False
        self._keep(watch, self._linger_s)
        return not watch.changed_since(seen)

    async def caught_up(self, workflow_id: str, within_s: float) -> None:
        """Wait until a running watch of the workflow has read it to its end (it does at its
        first read), ``within_s`` seconds pass or the process stops: a reader that would read the
        workflow itself meanwhile makes Temporal serve the same read twice."""
        watch = self._watches.get(workflow_id)
        if watch is not None:
            await self._until(watch, lambda: watch.caught_up or watch.closed or watch.ended, within_s)

    def upserted(self, workflow_id: str, seen: Mark, key: str) -> tuple[Mark, Payload] | None:
        """When the workflow's last change after ``seen`` upserted ``key`` into its memo: where that
        change stands and the value upserted (still encoded), so a reader that knows the rest of
        the memo need not read the workflow again. None otherwise: read it."""
        watch = self._watches.get(workflow_id)
        if watch is None or watch.runs[-1] != seen.run_id or watch.changed_at <= seen.events:
            return None
        value = watch.memo.get(key)
        return (Mark(seen.run_id, watch.changed_at), Payload.FromString(value)) if value is not None else None

    def completed(self, workflow_id: str, seen: Mark) -> Completion | None:
        """When the workflow's last change after ``seen`` completed the run ``seen`` is of: its
        result from the close event, so a reader need not fetch the history again. None
        otherwise (it failed, was cancelled, continued as new...): read it."""
        watch = self._watches.get(workflow_id)
        if watch is None or watch.runs[-1] != seen.run_id or watch.changed_at <= seen.events:
            return None
        return watch.completion

    def follow(self, workflow_id: str, seen: Mark, for_s: float | None = None) -> None:
        """Watch the workflow (if no watch is running) for readers to come within ``for_s``
        seconds (default: the process's linger); each reader keeps it going a while longer."""
        self._keep(self._watch(workflow_id, seen.run_id), self._linger_s if for_s is None else for_s)

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
        for watch in list(self._watches.values()):
            self._notify(watch)

    async def aclose(self) -> None:
        self.stop()
        for task in list(self._running):
            task.cancel()
        for task in list(self._running):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _watch(self, workflow_id: str, run_id: str) -> _Watch:
        watch = self._watches.get(workflow_id)
        if watch is not None and watch.ended and (not watch.closed or run_id not in watch.runs):
            # Gone, or ended while a newer run began (a reset, or the id used again after
            # retention): the closed run's watch would say "changed" for ever. Watch the new one.
            self._drop(workflow_id, watch)
            watch = None
        if watch is None:
            if len(self._watches) >= _MAX_WATCHES:
                self._forget_idle()
            # Wanted while someone waits, or for as long as whoever asked for it keeps it (_keep).
            watch = _Watch(run_id, asyncio.get_running_loop().time())
            self._watches[workflow_id] = watch
            # In a context of its own: the watch outlives the request that made it, whose context
            # (its log fields, its span) it must not keep.
            watch.follower = asyncio.create_task(
                self._follow(workflow_id, watch), context=contextvars.Context()
            )
            self._running.add(watch.follower)
            watch.follower.add_done_callback(self._running.discard)
        return watch

    def _keep(self, watch: _Watch, for_s: float) -> None:
        """Keep ``watch`` running ``for_s`` from now at least; once nobody waits on it and that time
        is over, its long poll is cancelled (Temporal then holds nothing for it)."""
        loop = asyncio.get_running_loop()
        watch.wanted_until = max(watch.wanted_until, loop.time() + for_s)
        if watch.waiters or watch.ended or watch.expiry is not None:
            return
        # In a context of its own, as the watch's task: not the context of the request that asked.
        watch.expiry = loop.call_at(watch.wanted_until, self._expire, watch, context=contextvars.Context())

    def _expire(self, watch: _Watch) -> None:
        watch.expiry = None
        if watch.waiters or watch.ended:
            return
        if asyncio.get_running_loop().time() < watch.wanted_until:
            self._keep(watch, 0)
        elif watch.follower is not None:
            watch.follower.cancel()

    def _forget_idle(self) -> None:
        """Drop the watches of ended workflows nobody has read for a while (bounded memory)."""
        now = asyncio.get_running_loop().time()
        for workflow_id, watch in list(self._watches.items()):
            if watch.ended and watch.waiters == 0 and now >= watch.wanted_until:
                self._drop(workflow_id, watch)

    def _drop(self, workflow_id: str, watch: _Watch) -> None:
        if self._watches.get(workflow_id) is watch:
            del self._watches[workflow_id]
        self._hold(watch, {}, None)

    def _hold(self, watch: _Watch, memo: Mapping[str, bytes], completion: Completion | None) -> None:
        """Keep what the watch's last change published, within the byte budget: past it, the
        payloads of idle watches are dropped, oldest first (their readers read Temporal instead)."""
        size = sum(len(value) for value in memo.values())
        if completion is not None:
            size += completion.result.ByteSize()
        self._kept += size - watch.kept
        watch.memo, watch.completion, watch.kept = memo, completion, size
        if self._kept <= self._max_bytes:
            return
        for other in list(self._watches.values()):
            if self._kept <= self._max_bytes:
                break
            if other.kept and other is not watch and other.waiters == 0:
                self._kept -= other.kept
                other.memo, other.completion, other.kept = {}, None, 0
        if self._kept > self._max_bytes:  # this one alone is past the budget: keep nothing of it
            self._kept -= watch.kept
            watch.memo, watch.completion, watch.kept = {}, None, 0

    def _took(self, watch: _Watch, events: Sequence[HistoryEvent]) -> tuple[bool, EventType.ValueType | None]:
        """Read one page of the watch's history: whether it changed, and its last event's type.

        What the watch keeps of a change is copied out of the page: a message read from a page (an
        event, a memo field) holds the whole page's protobuf arena, 10 KiB for a five-event
        history, which an idle watch otherwise kept for as long as it waited (bench/README.md, B8).
        """
        changed = False
        memo, completion = watch.memo, watch.completion
        upserted_by = None  # the workflow task that made the memo upsert in ``memo``
        for event in events:
            if event.event_type in _CHANGES:
                watch.changed_at = event.event_id
                completed = event.workflow_execution_completed_event_attributes
                if not (
                    event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
                    and completed.workflow_task_completed_event_id == upserted_by
                ):
                    # An end in the workflow task that upserted (the ledger's exit state) keeps it.
                    memo = {}
                completion = None
                changed = True
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
                modified = event.workflow_properties_modified_event_attributes
                memo = {
                    key: value.SerializeToString() for key, value in modified.upserted_memo.fields.items()
                }
                upserted_by = modified.workflow_task_completed_event_id
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                result = event.workflow_execution_completed_event_attributes.result
                at = event.event_time.ToDatetime(tzinfo=UTC)
                completion = Completion(
                    Mark(watch.runs[-1], event.event_id), Payloads.FromString(result.SerializeToString()), at
                )
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                successor = event.workflow_execution_continued_as_new_event_attributes
                watch.runs.append(successor.new_execution_run_id)
                watch.changed_at = 0
                memo = {}
        if changed:
            self._hold(watch, memo, completion)
        return changed, events[-1].event_type if events else None

    def _wanted(self, watch: _Watch) -> bool:
        return watch.waiters > 0 or asyncio.get_running_loop().time() < watch.wanted_until

    async def _follow(self, workflow_id: str, watch: _Watch) -> None:
        token = b""
        if self._following is not None:
            self._following.inc()
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
                        # Not retried inside the client: while Temporal is out of reach the watch
                        # must say so at once (readers then read Temporal, and hear it is
                        # unavailable), not pass for caught up through the client's retries.
                        retry=False,
                        timeout=_POLL_TIMEOUT,
                    )
                except RPCError as exc:
                    if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                        return  # gone (past retention) or not a workflow: readers find out by reading
                    if watch.caught_up:  # once per outage, not once a second
                        log.warning("watch_failed", workflow_id=workflow_id, status=exc.status.name)
                    watch.caught_up = False
                    self._notify(watch)
                    await asyncio.sleep(_RETRY_S)
                    continue
                changed, last = self._took(watch, response.history.events)
                token = response.next_page_token
                caught_up = len(response.history.events) < _PAGE and bool(token)
                del response  # not kept while the next poll waits (``_took``)
                if changed or caught_up != watch.caught_up:
                    watch.caught_up = caught_up
                    self._notify(watch)
                if not token and last != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                    watch.closed = True  # kept (until idle) so readers know it will not change
                    return
                # With no token after a continue-as-new: follow the new run from its start.
        finally:
            if self._following is not None:
                self._following.dec()
            watch.ended = True
            if watch.expiry is not None:
                watch.expiry.cancel()
                watch.expiry = None
            self._notify(watch)
            if not watch.closed:
                self._drop(workflow_id, watch)
