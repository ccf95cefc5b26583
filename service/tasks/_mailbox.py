"""Where the answer to a pushed question waits until the call that asked takes it. API process.

A 2025-era client answers a question the server pushed on a ``tools/call`` stream with a separate
POST, which a load balancer may send to any replica. The replica holding the call waits for the
answer in its box: when the answer reaches that same replica it is handed over in memory, and
Temporal is not involved; when it reaches another replica, that replica records it as the outcome
of a ``longtools.Once`` record named after the box (signal-with-start), and the holder, which
starts or finds the same record once the answer is not there at once, reads it from the record's
history, waiting through ``Changes`` like every other waiter.
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

from service._settings import Settings
from service.tasks._changes import Changes, Mark
from service.tasks._run_once import signalled_outcome
from service.temporal import unreachable
from workflows._once import ONCE_WORKFLOW, OUTCOME_SIGNAL

log = structlog.get_logger("longtools.mailbox")

__all__ = ["Mailboxes"]

LOCAL_FIRST_S: Final = 0.5
"""How long a holder waits for an answer in memory before it also looks in Temporal: an answer
from a program (a test, an agent's auto-approval) is usually here by then, and costs no record."""


class Mailboxes:
    def __init__(self, settings: Settings, connection: Callable[[], Client], changes: Changes) -> None:
        self._settings = settings
        self._connection = connection
        self._changes = changes
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._rpc_timeout = timedelta(seconds=settings.temporal_rpc_timeout_s)

    async def take(self, box: str, *, ttl_s: float) -> dict[str, Any]:
        """Wait for the answer posted to ``box`` (on any replica), for as long as the caller waits.

        ``ttl_s`` bounds how long Temporal keeps the box's record.
        """
        arrived: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[box] = arrived
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOCAL_FIRST_S):
                    return await asyncio.shield(arrived)
            try:
                return await self._from_record(box, arrived, ttl_s)
            except (RPCError, RuntimeError) as exc:
                if not (isinstance(exc, RPCError) or unreachable(exc)):
                    raise
                # Temporal is out of reach: an answer can still come to this process (one posted
                # elsewhere is refused there with 503, and the client may send it again).
                log.warning("answer_box_unreachable", box=box, detail=str(exc))
                return await arrived
        finally:
            del self._waiting[box]

    async def post(self, box: str, answer: dict[str, Any], *, ttl_s: float) -> None:
        """Deliver ``answer`` to ``box``: in memory when its holder is this process, else to its record."""
        arrived = self._waiting.get(box)
        if arrived is not None:
            if not arrived.done():
                arrived.set_result(answer)
            return
        try:
            await self._start_record(box, ttl_s, start_signal=OUTCOME_SIGNAL, start_signal_args=[answer])
        except WorkflowAlreadyStartedError:
            log.info("answer_already_given", box=box)  # the record closed on a first answer

    async def _from_record(
        self, box: str, arrived: asyncio.Future[dict[str, Any]], ttl_s: float
    ) -> dict[str, Any]:
        client = self._connection()
        handle: WorkflowHandle[Any, Any]
        try:
            handle = await self._start_record(box, ttl_s)
        except WorkflowAlreadyStartedError:
            handle = client.get_workflow_handle(_workflow_id(box))
        run_id = handle.result_run_id or ""
        while not arrived.done():
            try:
                outcome, events = await signalled_outcome(client, handle, self._rpc_timeout)
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                outcome, events = None, 0
            if outcome is not None:
                return outcome
            changed = asyncio.ensure_future(self._changes.after(handle.id, Mark(run_id, events), ttl_s))
            watching: set[asyncio.Future[Any]] = {changed, arrived}
            await asyncio.wait(watching, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
        return arrived.result()

    async def _start_record(self, box: str, ttl_s: float, **signal: Any) -> WorkflowHandle[Any, Any]:
        """Start the box's record, or join it while it runs (with ``signal``: signal-with-start).

        Raises:
            WorkflowAlreadyStartedError: the record has closed: a worker has seen its answer.
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
