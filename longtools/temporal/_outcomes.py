"""One log line per activity that ends with a tool's own error: an outcome, not a fault. Worker process.

A ``ToolError`` (or ``ProtocolError``) raised in an activity is how a tool says "no" on purpose;
Temporal's worker logs such a BENIGN failure only at debug level, so without this line nothing
would say that the step ended that way. Other failures are Temporal's own warning, with the
traceback (messages only under ``LONGTOOLS_LOG_EXCEPTION_MESSAGES``).
"""

from __future__ import annotations

from typing import Any

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from longtools.workflows import PROTOCOL_ERROR, TOOL_ERROR

log = structlog.get_logger("longtools.worker")
_OUTCOMES = {TOOL_ERROR: "tool_error", PROTOCOL_ERROR: "protocol_error"}


class ActivityOutcomes(Interceptor):
    """Worker interceptor: logs ``activity_outcome`` for an activity ending in a tool's own error."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Outcomes(next)


class _Outcomes(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except ApplicationError as exc:
            outcome = _OUTCOMES.get(exc.type or "")
            if outcome is not None:
                info = activity.info()
                log.info(
                    "activity_outcome",
                    outcome=outcome,
                    activity=info.activity_type,
                    task_id=info.workflow_id,
                    attempt=info.attempt,
                )
            raise
