"""Requests that take effect once: a replayed final round, a repeated idempotency key. API process.

A claim is a ``longtools.Once`` workflow started under an id derived from the request (see
``longtools/workflows/_once.py``). Temporal accepts one start per id, so of any number of concurrent or
later duplicates, on any replica, exactly one runs the work; it records the outcome as a signal,
and the others answer with that record, read from the workflow's history (no worker needed).

The work and its record outlive the request that claimed it: a client that leaves mid-way (which
cancels its request) or a failed signal must not lose the outcome, or a replay would hear "not
known". A claim that is never recorded (the process died mid-work) is never run again either:
its duplicates are told the outcome is unknown, for as long as Temporal keeps the claim.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import structlog
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from longtools._settings import Settings
from longtools.tasks._changes import Changes, Mark
from longtools.tools import as_wire
from longtools.workflows._once import ONCE_WORKFLOW, OUTCOME_SIGNAL

log = structlog.get_logger("longtools.once")

ARGS_MEMO = "longtools.args"
"""Memo key of the digest of the arguments a claim, or a task started under an idempotency key, was
made for: a repeat with other arguments is refused, not answered with another call's outcome."""
_RECORD_PAUSE_S = (0.1, 0.5, 1.0, 2.0, 5.0)
"""Pauses between attempts to record an outcome while Temporal does not take it (the last repeats)."""


class KeyReused(Exception):
    """The key was first used for a request with other arguments."""


def key_reused() -> MCPError:
    return MCPError(
        code=INVALID_PARAMS, message="This idempotency key was used for other arguments; use a new key"
    )


def state_used() -> MCPError:
    return MCPError(
        code=INVALID_PARAMS,
        message="This requestState was already used with other answers; call the tool again",
    )


def args_digest(arguments: Any) -> str:
    """A digest of a call's arguments, to tell a repeated key from a reused one."""
    canonical = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class RunOnce:
    def __init__(
        self,
        settings: Settings,
        connection: Callable[[], Client],
        changes: Changes | None = None,
        *,
        eager: bool = False,
    ) -> None:
        self._settings = settings
        self.connection = connection
        self._changes = changes if changes is not None else Changes(connection, settings.temporal_namespace)
        self.eager = eager  # a worker shares the client in this process (see Tasks.eager)
        self._recording: set[asyncio.Task[dict[str, Any]]] = set()
        self._rpc_timeout = timedelta(seconds=settings.temporal_rpc_timeout_s)

    async def run(
        self,
        claim_id: str,
        args_digest: str,
        work: Callable[[], Awaitable[dict[str, Any]]],
        *,
        ttl_s: float,
        wait_s: float,
    ) -> dict[str, Any]:
        """``work()``'s wire outcome, run at most once for ``claim_id`` within ``ttl_s``.

        A duplicate gets the first outcome (an ``MCPError`` the first run raised is raised again),
        waiting up to ``wait_s`` while the first run is still going.

        Raises:
            KeyReused: the claim was made for other arguments.
            MCPError: the first run's error again, or -32602 when its outcome is not known yet.
        """
        workflow_id = f"longtools-once-{claim_id}"
        client = self.connection()
        try:
            handle: WorkflowHandle[Any, Any] = await client.start_workflow(
                ONCE_WORKFLOW,
                id=workflow_id,
                task_queue=self._settings.task_queue,
                execution_timeout=timedelta(seconds=ttl_s),
                memo={ARGS_MEMO: args_digest},
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                # One claim per id for as long as Temporal keeps it, recorded or not: a claim whose
                # holder died before recording must not let a duplicate run the work a second time.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                request_eager_start=self.eager,
                rpc_timeout=self._rpc_timeout,
            )
        except WorkflowAlreadyStartedError:
            return await self._recorded(client, client.get_workflow_handle(workflow_id), args_digest, wait_s)
        # Shielded: a request cancelled mid-way (its client left) leaves the work and its record to
        # finish here; the task is held until it has, so it is not collected half-way.
        recording = asyncio.create_task(self._run_and_record(handle, work, ttl_s))
        self._recording.add(recording)
        recording.add_done_callback(self._recording.discard)
        return _replay(await asyncio.shield(recording))

    async def drain(self) -> None:
        """Wait for work whose request has gone to finish and be recorded (at shutdown)."""
        if self._recording:
            await asyncio.wait(set(self._recording))

    async def _run_and_record(
        self, handle: WorkflowHandle[Any, Any], work: Callable[[], Awaitable[dict[str, Any]]], ttl_s: float
    ) -> dict[str, Any]:
        try:
            outcome: dict[str, Any] = {"result": await work()}
        except MCPError as exc:
            outcome = {"error": as_wire(exc.error)}
        except Exception:  # a bug in the work: recorded as such, so duplicates do not wait on it
            log.exception("once_work_failed", claim=handle.id)
            outcome = {"error": {"code": -32603, "message": "Internal error"}}
        await self._record(handle, outcome, ttl_s)
        return outcome

    async def _record(self, handle: WorkflowHandle[Any, Any], outcome: dict[str, Any], ttl_s: float) -> None:
        """Signal ``outcome`` to the claim, retrying while Temporal does not take it, until the
        claim itself lapses (its duplicates are then told the outcome is unknown)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ttl_s
        for attempt in itertools.count():
            try:
                await handle.signal(OUTCOME_SIGNAL, outcome, rpc_timeout=self._rpc_timeout)
                return
            except RPCError as exc:
                if exc.status == RPCStatusCode.NOT_FOUND:  # the claim lapsed before it could be recorded
                    break
                pause = _RECORD_PAUSE_S[min(attempt, len(_RECORD_PAUSE_S) - 1)]
                if loop.time() + pause >= deadline:
                    break
                log.warning("once_record_retrying", claim=handle.id, status=exc.status.name)
                await asyncio.sleep(pause)
        log.error("once_record_lost", claim=handle.id)

    async def _recorded(
        self, client: Client, handle: WorkflowHandle[Any, Any], args_digest: str, wait_s: float
    ) -> dict[str, Any]:
        description = await handle.describe(rpc_timeout=self._rpc_timeout)
        if (await description.memo()).get(ARGS_MEMO) != args_digest:
            raise KeyReused
        # A claim that closed unrecorded stays unknown; an open one may still be recorded.
        within = wait_s if description.status == WorkflowExecutionStatus.RUNNING else 0
        deadline = asyncio.get_running_loop().time() + within
        outcome, events = await signalled_outcome(client, handle, self._rpc_timeout)
        while outcome is None and within:
            left = deadline - asyncio.get_running_loop().time()
            if not await self._changes.after(handle.id, Mark(description.run_id, events), left):
                break
            outcome, events = await signalled_outcome(client, handle, self._rpc_timeout)
        if outcome is None and within:
            raise MCPError(
                code=INVALID_PARAMS,
                message="An identical request is still in progress; retry shortly for its outcome",
            )
        if outcome is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message="An identical request did not finish and its outcome is not known; "
                "it will not run again: start a new call",
            )
        log.info("duplicate_answered_from_record", claim=handle.id)
        return _replay(outcome)


async def signalled_outcome(
    client: Client, handle: WorkflowHandle[Any, Any], rpc_timeout: timedelta
) -> tuple[dict[str, Any] | None, int]:
    """The recorded outcome, if any, and how many events of the record were read."""
    events = 0
    async for event in handle.fetch_history_events(rpc_timeout=rpc_timeout):
        events = event.event_id
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            continue
        attributes = event.workflow_execution_signaled_event_attributes
        if attributes.signal_name != OUTCOME_SIGNAL:
            continue
        [value] = await client.data_converter.decode(attributes.input.payloads, [dict])
        return (value if isinstance(value, dict) else None), events
    return None, events


def _replay(outcome: dict[str, Any]) -> dict[str, Any]:
    error = outcome.get("error")
    if isinstance(error, dict):
        raise MCPError(code=int(error["code"]), message=str(error["message"]), data=error.get("data"))
    result = outcome.get("result")
    return result if isinstance(result, dict) else {}
