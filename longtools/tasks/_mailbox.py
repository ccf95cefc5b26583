"""Where the answer to a pushed question waits until the call that asked takes it. API process.

A 2025-era client answers a question the server pushed on a ``tools/call`` stream with a separate
POST, which a load balancer may send to any replica. The replica holding the call waits for the
answer in its box: when the answer reaches that same replica it is handed over in memory, and
Temporal is not involved; when it reaches another replica, that replica records it as the outcome
of a ``longtools.Once`` record named after the box (signal-with-start), and the holder, which
starts or finds the same record once the answer is not there at once, reads it from the record's
history, waiting through ``Changes`` like every other waiter.

However the holder's wait ends, it leaves no record running: one it started is closed when the
answer reaches it in memory, or when it stops waiting (its client left, the task it asks for
ended); one never started is started closed when it stops waiting unanswered. A later answer to
that box is refused, so its client hears that nobody will read it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final

import structlog
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from longtools._settings import Settings
from longtools.tasks._changes import Changes, Mark
from longtools.tasks._run_once import signalled_outcome
from longtools.temporal import unreachable
from longtools.workflows._once import ONCE_WORKFLOW, OUTCOME_SIGNAL

log = structlog.get_logger("longtools.mailbox")

__all__ = ["Mailboxes", "QuestionClosed"]

LOCAL_FIRST_S: Final = 0.5
"""How long a holder waits for an answer in memory before it also looks in Temporal: an answer
from a program (a test, an agent's auto-approval) is usually here by then, and costs no record."""


_RETRY_S: Final = 1.0


class QuestionClosed(Exception):
    """Nobody waits for an answer in this box any more: it was answered, or its call has ended."""


class Mailboxes:
    def __init__(self, settings: Settings, connection: Callable[[], Client], changes: Changes) -> None:
        self._settings = settings
        self._connection = connection
        self._changes = changes
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._rpc_timeout = timedelta(seconds=settings.temporal_rpc_timeout_s)

    async def take(self, box: str, *, ttl_s: float) -> dict[str, Any]:
        """Wait for the answer posted to ``box`` (on any replica), for as long as the caller waits.

        ``ttl_s`` bounds how long Temporal keeps the box's record. However the wait ends (an
        answer, or the caller leaving), no record is left open: a later answer to the box is
        refused (``QuestionClosed``), and nothing waits in Temporal for one.
        """
        arrived: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[box] = arrived
        record: WorkflowHandle[Any, Any] | None = None
        recorded = unreached = False
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOCAL_FIRST_S):
                    return await asyncio.shield(arrived)
            while True:
                try:
                    record = record or await self._record(box, ttl_s)
                    answer, recorded = await self._from_record(record, arrived, ttl_s)
                    return answer
                except (RPCError, RuntimeError) as exc:
                    if not (isinstance(exc, RPCError) or unreachable(exc)):
                        raise
                    # Temporal is out of reach: the answer may come to this process meanwhile, or
                    # have been recorded from another replica just before: look again shortly.
                    if not unreached:
                        log.warning("answer_box_unreachable", box=box, detail=str(exc)[:200])
                    unreached = True
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_RETRY_S):
                        return await asyncio.shield(arrived)
        finally:
            del self._waiting[box]
            # A recorded answer's record closes by itself once a worker has seen it; an answer
            # taken at once needs none. Otherwise (answered here after the record was started, or
            # left unanswered) it is closed, apart from this request, which may be cancelled at
            # any await.
            if not recorded and (record is not None or not arrived.done()):
                closing = asyncio.create_task(self._close(box, ttl_s, started=record is not None))
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)

    async def post(self, box: str, answer: dict[str, Any], *, ttl_s: float) -> None:
        """Deliver ``answer`` to ``box``: in memory when its holder is this process, else to its record.

        Raises:
            QuestionClosed: the box has had its answer, or its holder no longer waits.
        """
        arrived = self._waiting.get(box)
        if arrived is not None:
            if arrived.done():
                raise QuestionClosed
            arrived.set_result(answer)
            return
        try:
            await self._start_record(box, ttl_s, start_signal=OUTCOME_SIGNAL, start_signal_args=[answer])
        except WorkflowAlreadyStartedError:
            raise QuestionClosed from None

    async def aclose(self) -> None:
        """Let the records being closed be closed (at shutdown), for a bounded time."""
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=self._rpc_timeout.total_seconds())

    async def _record(self, box: str, ttl_s: float) -> WorkflowHandle[Any, Any]:
        """The box's record: started now, or the one an answer from another replica started."""
        try:
            return await self._start_record(box, ttl_s)
        except WorkflowAlreadyStartedError:
            return self._connection().get_workflow_handle(_workflow_id(box))

    async def _from_record(
        self, handle: WorkflowHandle[Any, Any], arrived: asyncio.Future[dict[str, Any]], ttl_s: float
    ) -> tuple[dict[str, Any], bool]:
        """The answer, from the record or from memory, and whether it came from the record."""
        client = self._connection()
        run_id = handle.result_run_id or ""
        while not arrived.done():
            try:
                outcome, events = await signalled_outcome(client, handle, self._rpc_timeout)
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                outcome, events = None, 0
            if outcome is not None:
                return outcome, True
            # Nobody reads a box's record after its holder: the watch stops with this wait.
            changed = asyncio.ensure_future(
                self._changes.after(handle.id, Mark(run_id, events), ttl_s, linger_s=0)
            )
            watching: set[asyncio.Future[Any]] = {changed, arrived}
            try:
                await asyncio.wait(watching, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
        return arrived.result(), False

    async def _close(self, box: str, ttl_s: float, *, started: bool) -> None:
        """Close the box's record, starting it first if it never was, so that a late answer finds
        it closed instead of waiting in a record nobody reads."""
        client = self._connection()
        try:
            if not started:
                with contextlib.suppress(WorkflowAlreadyStartedError):
                    await self._start_record(box, ttl_s)
            await client.get_workflow_handle(_workflow_id(box)).terminate(
                reason="the question's call has its answer or has ended", rpc_timeout=self._rpc_timeout
            )
        except (RPCError, RuntimeError) as exc:
            # Already closed (its answer recorded and seen), or Temporal is out of reach: the record
            # then ends at its execution timeout.
            if isinstance(exc, RuntimeError) and not unreachable(exc):
                raise
            log.info("answer_box_not_closed", box=box, detail=str(exc)[:200])

    async def _start_record(self, box: str, ttl_s: float, **signal: Any) -> WorkflowHandle[Any, Any]:
        """Start the box's record, or join it while it runs (with ``signal``: signal-with-start).

        Raises:
            WorkflowAlreadyStartedError: the record has closed: a worker has seen its answer, or
                its holder closed it.
        """
        return await self._connection().start_workflow(
            ONCE_WORKFLOW,
            id=_workflow_id(box),
            task_queue=self._settings.task_queue,
            execution_timeout=timedelta(seconds=ttl_s),
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # The record closes as soon as a worker sees its answer: find that one (from either
            # side), never start a second, empty one.
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            rpc_timeout=self._rpc_timeout,
            **signal,
        )


def _workflow_id(box: str) -> str:
    return f"longtools-answer-{box}"
