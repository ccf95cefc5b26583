"""What a long tool's workflow uses: ask the person, report progress, fail on purpose.

Workflow code is deterministic (no I/O, no clocks, no randomness; side effects go in activities)
and runs inside the Temporal worker's sandbox. A long tool in full::

    from temporalio import workflow
    from longtools import ask_form, report, ToolError

    @workflow.defn(name="bulk_close_tickets")
    class BulkCloseTickets:
        @workflow.run
        async def run(self, args: BulkCloseInput) -> BulkCloseOutput:
            count = await workflow.execute_activity(...)
            answer = await ask_form(f"Close {count} tickets?", Confirm)   # task: input_required
            ...
"""

from temporalio import workflow

# Temporal's sandbox imports a workflow's module afresh for every new workflow, and its package
# first: this one. What it holds is deterministic and keeps no per-workflow state, so the sandbox
# takes it from the worker, instead of building its models again for every task.
with workflow.unsafe.imports_passed_through():
    from longtools.workflows._ask import (
        ANSWER_SIGNAL,
        HOST_WORD_SIGNAL,
        PROGRESS_DETAIL,
        TASK_MEMO,
        Progress,
        Published,
        ask,
        ask_form,
        report,
    )
    from longtools.workflows._errors import PROTOCOL_ERROR, TOOL_ERROR, ProtocolError, ToolError
    from longtools.workflows._inputs import (
        ANSWER_META,
        REASK_META,
        Elicited,
        FieldError,
        InputRequest,
        InputResponse,
        Marking,
        Reask,
        elicit,
        free_text,
        list_roots,
        marking_of,
        reask_of,
        sample,
    )

__all__ = [
    "ANSWER_META",
    "ANSWER_SIGNAL",
    "HOST_WORD_SIGNAL",
    "PROGRESS_DETAIL",
    "PROTOCOL_ERROR",
    "REASK_META",
    "TASK_MEMO",
    "TOOL_ERROR",
    "Elicited",
    "FieldError",
    "InputRequest",
    "InputResponse",
    "Marking",
    "Progress",
    "ProtocolError",
    "Published",
    "Reask",
    "ToolError",
    "ask",
    "ask_form",
    "elicit",
    "free_text",
    "list_roots",
    "marking_of",
    "reask_of",
    "report",
    "sample",
]
