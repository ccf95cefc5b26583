"""Terminate a task that did not stop within its grace after a cancel (``longtools.End``). Worker process."""

from __future__ import annotations

import structlog
from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

log = structlog.get_logger("longtools.ending")

CANCEL_REASON = "longtools: cancelled, and still running after LONGTOOLS_CANCEL_GRACE_S"
"""The terminate reason Temporal records in the task's history (for operators: the API reads the
cancel request, not this text)."""


@activity.defn(name="longtools.terminate_cancelled")
async def terminate_cancelled(task_id: str) -> bool:
    """Terminate ``task_id``'s workflow if it is still running; whether it was."""
    handle = activity.client().get_workflow_handle(task_id)
    try:
        await handle.terminate(reason=CANCEL_REASON)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:  # it ended (or is gone): nothing to do
            return False
        raise
    log.warning("task_terminated_after_cancel", task_id=task_id)
    return True
