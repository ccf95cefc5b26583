"""A task tells its people: the notices a task's workflow starts (``longtools.notify``). Workflow code.

Only a task whose memo has :data:`NOTIFY_MEMO` tells anyone: the API writes it at the start when the
deployment notifies people, with the base of links and the reminder intervals. So what a task does
is fixed by its own history (a task started before, or without, notifications replays as it ran),
and a deployment that notifies no one pays nothing.

Each notice is a child workflow (``NotifyWorkflow``) the task starts and does not wait for; its
outcome, when it comes back while the task still runs, goes into the task's ledger.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from longtools.decisions import EXIT_MEMO, DecisionState
    from longtools.notify import NOTIFY_MEMO, NOTIFY_WORKFLOW, Notice, NoticeKind, Notified
    from longtools.workflows._ledger import recorder

__all__ = ["Announcer", "TellEnd", "announcer"]

_MAX_REMINDERS = 20


class Announcer:
    """This run's notices: whether the task tells anyone, and when it reminds."""

    def __init__(self, settings: Mapping[str, Any] | None) -> None:
        self.enabled = settings is not None
        self.base = str((settings or {}).get("base") or "")
        remind = (settings or {}).get("remind")
        self.remind = [float(s) for s in remind if isinstance(s, int | float) and s > 0] if remind else []
        self.pending: list[asyncio.Task[None]] = []
        """The waits for notices' outcomes (held here: a task nothing refers to may be collected)."""

    def reminder_due(self, since: datetime, sent: int) -> datetime | None:
        """When the reminder after ``sent`` earlier ones is due, for a question waiting since ``since``."""
        if not self.enabled or not self.remind or sent >= _MAX_REMINDERS:
            return None
        steps = [*self.remind, *[self.remind[-1]] * max(0, sent + 1 - len(self.remind))]
        return since + timedelta(seconds=sum(steps[: sent + 1]))

    async def announce(
        self,
        kind: NoticeKind,
        *,
        question: str | None = None,
        state: DecisionState | None = None,
        reminder: int = 0,
        exit: str | None = None,
        widened: Sequence[str] = (),
    ) -> None:
        """Start the notice's workflow (once: its id is the task's and the notice's)."""
        if not self.enabled:
            return
        info = workflow.info()
        notice_id = f"{info.workflow_id}/{kind}/{question or ''}/{reminder}"
        timeout = info.execution_timeout or timedelta(days=1)
        # What the task is, as its question's proposal says it (the same memo, read once there).
        proposal = recorder().proposal(None) if state is None else state.proposal
        notice = Notice(
            id=notice_id,
            kind=kind,
            task_id=info.workflow_id,
            tool=proposal.tool,
            title=proposal.title,
            requester=proposal.requester,
            base=self.base,
            created_at=datetime.fromisoformat(proposal.started_at),
            ttl_ms=int(timeout.total_seconds() * 1000),
            at=workflow.now().isoformat(),
            summary=proposal.summary,
            question=question,
            deadline=None if state is None else state.deadline,
            rule=None if state is None or state.rule is None else state.rule.wire(),
            voted=[] if state is None else [ballot.principal for ballot in state.votes],
            widened=list(widened),
            exit=exit,
            reminder=reminder,
        )
        try:
            handle = await workflow.start_child_workflow(
                NOTIFY_WORKFLOW,
                notice,
                id=notice_id.replace("/", "."),
                result_type=Notified,
                parent_close_policy=ParentClosePolicy.ABANDON,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            return  # told already (a task reset to before it runs this again): not twice, not a failure
        if kind == "ended":
            return  # the task ends now: what became of it is in its own workflow

        async def recorded() -> None:
            try:
                done: Notified = await handle
            except ChildWorkflowError:
                return
            recorder().append(
                "notified",
                {"notice": kind, "question": question, "sent": done.sent, "failed": done.failed},
            )

        self.pending.append(asyncio.create_task(recorded()))


def announcer() -> Announcer:
    """This run's announcer (one that tells no one outside a task with :data:`NOTIFY_MEMO`)."""
    found: Announcer | None = getattr(workflow.instance(), "_longtools_announcer", None)
    if found is None:
        settings = workflow.memo_value(NOTIFY_MEMO, None)
        found = Announcer(settings if isinstance(settings, Mapping) else None)
        workflow.instance()._longtools_announcer = found
    return found


class TellEnd(Interceptor):
    """Worker interceptor: the requester hears how their task ended. It goes before ``RecordLedger``
    in the worker's list, so it runs once the ledger has recorded the exit state (``EXIT_MEMO``)."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _TellEndInbound


class _TellEndInbound(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        if workflow.memo_value(NOTIFY_MEMO, None) is None:
            return await super().execute_workflow(input)
        try:
            result = await super().execute_workflow(input)
        except (Exception, asyncio.CancelledError):
            await _tell_end()
            raise
        await _tell_end()
        return result


async def _tell_end() -> None:
    ended = workflow.memo_value(EXIT_MEMO, None)
    if isinstance(ended, str):
        await announcer().announce("ended", exit=ended)
