"""Tasks that end: a cancel carried out on a task that does not stop, and an MRTR exchange whose
client left. API process.

Both are a ``longtools.End`` workflow (``longtools/workflows/_ending.py``), started under an id
derived from the task's: Temporal holds it durably, and a worker runs it, whichever API replica
started it and whether or not that replica still lives. When it runs it asks the task to cancel,
waits ``cancel_grace_s``, and terminates the task if it still runs (a task terminated after a cancel
request reads ``cancelled``).

- A cancel starts one at once (``after_cancel``); a second cancel of the task keeps the first.
- An MRTR exchange keeps one armed with a delayed start (``start_delay``): each round of the exchange
  (``keep_exchange``) that finds less than its client's allowance left (``mrtr_abandon_s`` after the
  round answers) starts it again later, under the same id, which drops the one armed before
  (``TERMINATE_EXISTING``). It is armed for one and a half allowances, so a busy exchange starts it
  once per half allowance, not once per round: the deadline it is armed for travels in the
  exchange's sealed ``requestState``, and the API keeps nothing between rounds.

An exchange whose call ended while its task waits for a person on a page (``release_exchange``)
gives the task up for good: its ending is replaced by a released one, which fires, if ever, only
after the task's TTL and does nothing. A round of that exchange replayed later finds it and arms
nothing, whatever deadline its sealed state still names: the task is the person's now.

An ending that fires after its task has ended does nothing (the cancel of a closed workflow is a
no-op, its termination is refused as not found).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta

import structlog
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from longtools._settings import Settings
from longtools.workflows._ending import END_WORKFLOW, Ending

log = structlog.get_logger("longtools.ending")

_RELEASED_MEMO = "longtools.released"
"""Memo of an exchange's ending that was released (``release_exchange``): read by a describe."""
_ARMED_FOR = 1.5
"""How many allowances (``mrtr_abandon_s``) past a round's answer an exchange's ending is armed for:
re-armed when less than one is left, once per half allowance of a busy exchange."""


class Endings:
    def __init__(self, settings: Settings, connection: Callable[[], Client]) -> None:
        self._settings = settings
        self._connection = connection
        self._rpc_timeout = timedelta(seconds=settings.temporal_rpc_timeout_s)

    async def after_cancel(self, task_id: str) -> None:
        """Make a cancel of ``task_id`` end it: terminated if still running ``cancel_grace_s`` from
        now. Durable once this returns; a second cancel keeps the first one's deadline."""
        await self._start(f"longtools-cancel-{task_id}", task_id, 0.0, WorkflowIDConflictPolicy.USE_EXISTING)

    async def keep_exchange(self, task_id: str, armed: float | None, hold_s: float) -> float | None:
        """The deadline (Unix time) an MRTR exchange's ending is armed for, for a round of it that
        starts now and holds up to ``hold_s``: ``armed`` while that leaves the client its allowance
        after the round's answer, else a new one, armed now (None: exchanges never end so).

        Shielded: a round whose client leaves while the ending is armed still arms it.
        """
        allowance = self._settings.mrtr_abandon_s
        if not allowance:
            return armed
        now = time.time()
        if armed is not None and armed - now >= hold_s + allowance:
            return armed
        if await self._released(task_id):
            return None  # its call ended with the task given to a person: never the exchange's again
        delay = hold_s + _ARMED_FOR * allowance
        await asyncio.shield(
            self._start(_abandon_id(task_id), task_id, delay, WorkflowIDConflictPolicy.TERMINATE_EXISTING)
        )
        log.info("exchange_ending_armed", task_id=task_id, in_s=round(delay, 1))
        return now + delay

    async def release_exchange(self, task_id: str) -> None:
        """Disarm the ending of ``task_id``'s MRTR exchange for good: its call has ended, and the
        task now waits for a person, however long its TTL lets them take."""
        if not self._settings.mrtr_abandon_s:
            return
        await self._start(
            _abandon_id(task_id),
            task_id,
            self._settings.task_ttl_s,
            WorkflowIDConflictPolicy.TERMINATE_EXISTING,
            released=True,
        )
        log.info("exchange_released", task_id=task_id)

    async def _released(self, task_id: str) -> bool:
        """Whether ``task_id``'s exchange has given it to a person (``release_exchange``)."""
        handle = self._connection().get_workflow_handle(_abandon_id(task_id))
        try:
            desc = await handle.describe(rpc_timeout=self._rpc_timeout)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return bool((await desc.memo()).get(_RELEASED_MEMO))

    async def _start(
        self,
        ending_id: str,
        task_id: str,
        delay_s: float,
        conflict: WorkflowIDConflictPolicy,
        *,
        released: bool = False,
    ) -> None:
        grace_s = self._settings.cancel_grace_s
        await self._connection().start_workflow(
            END_WORKFLOW,
            Ending(task_id=task_id, grace_s=grace_s, released=released),
            id=ending_id,
            memo={_RELEASED_MEMO: True} if released else None,
            task_queue=self._settings.task_queue,
            start_delay=timedelta(seconds=delay_s) if delay_s else None,
            # Bounded, for a worker that never comes: past its TTL the task has timed out anyway.
            execution_timeout=timedelta(seconds=delay_s + grace_s + self._settings.task_ttl_s),
            id_conflict_policy=conflict,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            rpc_timeout=self._rpc_timeout,
        )


def _abandon_id(task_id: str) -> str:
    """The id of the ending that cancels ``task_id`` once its MRTR exchange is left."""
    return f"longtools-abandon-{task_id}"
