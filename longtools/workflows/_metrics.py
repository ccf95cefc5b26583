"""Task metrics recorded from workflow code: how each task ended, how long it ran. Worker process.

Everything here runs inside the Temporal workflow sandbox and is deterministic: it reads only the
workflow's own memo, ``workflow.info()`` and ``workflow.now()``, and records only through
``workflow.metric_meter()``, which records nothing while history is replayed (so a worker restart
or a cache eviction never counts a task twice). The meter belongs to the worker client's Temporal
``Runtime``; ``longtools/_metrics.py`` gives that runtime a buffer and moves the updates into
Prometheus. A workflow is a longtools task when its memo names the tool (``TOOL_MEMO``, set by the
API when it starts the task); any other workflow is not counted.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from longtools.workflows._errors import run_ending

__all__ = [
    "CARRIED_MEMO",
    "CREATED_MEMO",
    "FIRST_INPUT",
    "OWNER_MEMO",
    "TASKS_FINISHED",
    "TASK_DURATION",
    "TITLE_MEMO",
    "TOOL_MEMO",
    "TaskMetricsInterceptor",
    "first_input_requested",
    "task_start_time",
]

TOOL_MEMO = "longtools.tool"
"""Memo key naming the task's tool; the API sets it when it starts the workflow (``longtools.tasks``)."""
OWNER_MEMO = "longtools.owner"
"""Memo key of the principal who started the task (the API sets it; only they may read the task)."""
CREATED_MEMO = "longtools.created_at"
"""Memo key of when the API created the task (ISO 8601): what ``createdAt`` shows, on every replica."""
TITLE_MEMO = "longtools.title"
"""Memo key of the tool's title at the task's start, for the proposal people decide on."""
CARRIED_MEMO = "longtools.carried"
"""Memo key of what a task carries into the next run when its workflow continues as new
(``longtools/workflows/_ask.py``): its first run's start, the question keys it used, its progress."""

TASKS_FINISHED = "longtools_tasks_finished_total"
"""Counter ``{tool, status}``: a task's workflow ended; status as ``tasks/get`` reports it."""
TASK_DURATION = "longtools_task_duration_seconds"
"""Histogram ``{tool, status}``: seconds from the workflow's start to its end."""
FIRST_INPUT = "longtools_task_first_input_seconds"
"""Histogram ``{tool}``: seconds from the workflow's start to its first question to the client."""


class TaskMetricsInterceptor(Interceptor):
    """Worker interceptor counting every longtools task's end by tool and status, with its duration.

    It assumes no ``failure_exception_types`` (``build_worker`` and the workflows set none), so only
    FailureError and TimeoutError fail a workflow.
    """

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _TaskMetricsInbound


class _TaskMetricsInbound(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        try:
            result = await super().execute_workflow(input)
        except (Exception, asyncio.CancelledError) as exc:
            # ContinueAsNewError and the SDK's eviction error are BaseExceptions and pass untouched:
            # the run goes on (the next run counts) or the worker only dropped it from its cache.
            _record_end(exc)
            raise
        _record_end(None)
        return result


def first_input_requested() -> None:
    """Record the time to a task's first question (called by ``ask`` when it first publishes one)."""
    if workflow.unsafe.is_replaying():
        return
    try:
        tool = _tool()
        if tool is not None:
            meter = workflow.metric_meter()
            histogram = meter.create_histogram_float(FIRST_INPUT, "Seconds until a task first asked", "s")
            histogram.record(_since_start(), {"tool": tool})
    except Exception:
        _not_recorded()


def _record_end(exc: BaseException | None) -> None:
    """Count the end of the run that ``exc`` ends (None: it returned), if it ends a longtools task."""
    if workflow.unsafe.is_replaying():
        return  # the meter would drop it anyway; an eviction counts as replaying too
    try:
        tool = _tool()
        ended = "completed" if exc is None else run_ending(exc)
        if tool is None or ended is None:
            return
        meter = workflow.metric_meter()
        attributes = {"tool": tool, "status": ended}
        meter.create_counter(TASKS_FINISHED, "Tasks that ended, by status").add(1, attributes)
        duration = meter.create_histogram_float(TASK_DURATION, "Seconds from a task's start to its end", "s")
        duration.record(_since_start(), attributes)
    except Exception:
        _not_recorded()


def _not_recorded() -> None:
    # Deny-on-error boundary: metrics never change how a task runs. Raised from workflow code, an
    # exception would fail the workflow task, which Temporal retries forever: the task would stall.
    workflow.logger.exception("longtools task metric not recorded")


def _tool() -> str | None:
    tool = workflow.memo_value(TOOL_MEMO, None)
    return tool if isinstance(tool, str) and tool else None


def task_start_time() -> datetime:
    """When the task started: its first run's start event, also after it continued as new.

    ``workflow_start_time`` is the run's start event, which tasks/get shows as createdAt;
    ``info().start_time`` would be this worker's first workflow task, later if no worker was up.
    """
    carried = workflow.memo_value(CARRIED_MEMO, None)
    started = carried.get("started_at") if isinstance(carried, dict) else None
    if isinstance(started, str):
        return datetime.fromisoformat(started)
    return workflow.info().workflow_start_time


def _since_start() -> float:
    elapsed = workflow.now() - task_start_time()
    return max(0.0, elapsed.total_seconds())
