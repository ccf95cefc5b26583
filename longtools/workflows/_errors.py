"""The two ways a tool may fail on purpose. Shared by quick tools, workflows and activities.

Both are Temporal ``ApplicationError``s marked non-retryable, so raised in an activity they end
the activity at once and, unless caught, the workflow too; the API reads the failure's ``type``
from the closed workflow and answers the task as the spec says (``task_ending``): a tool error is
a *completed* task whose result has ``isError: true``; a protocol error makes it *failed* with that
error, and so does any other failure (a terminated workflow, an activity out of retries).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory, CancelledError, FailureError

TOOL_ERROR = "longtools.ToolError"
PROTOCOL_ERROR = "longtools.ProtocolError"
_MAX_KINDS = 10

TaskEnd = Literal["completed", "failed", "cancelled"]


class ToolError(ApplicationError):
    """A tool's own, expected failure: the client gets a result with ``isError: true`` and this text."""

    def __init__(self, message: str) -> None:
        # BENIGN: an outcome, not a fault; the worker logs it as one (no warning, no traceback).
        super().__init__(
            message, type=TOOL_ERROR, non_retryable=True, category=ApplicationErrorCategory.BENIGN
        )


class ProtocolError(ApplicationError):
    """End the call with a JSON-RPC error instead of a result (a task becomes ``failed``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(
            message, code, type=PROTOCOL_ERROR, non_retryable=True, category=ApplicationErrorCategory.BENIGN
        )
        self.code = code


def run_ending(exc: BaseException) -> TaskEnd | None:
    """How the task ends when its workflow's run raises ``exc``, or None if it goes on.

    The SDK turns a cancel into a cancelled workflow and any FailureError or TimeoutError into a
    failed one (a ToolError failure is a *completed* task with ``isError``).
    Any other exception is a bug that fails only the workflow task: Temporal retries it and the
    task continues once fixed code runs, so it is not an end.
    """
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"  # a requested cancel, or one raised by hand: both read as cancelled
    if not isinstance(exc, FailureError | TimeoutError):
        return None
    return task_ending(exc)[0]


def task_ending(failure: BaseException | None) -> tuple[TaskEnd, ApplicationError | None]:
    """How a task whose workflow failed with ``failure`` ends, as ``tasks/get`` reports it.

    The one classification, used by the API (a task's status and result) and by workflow code (the
    task metrics), so the two never disagree. A cancel anywhere in the chain of causes makes the
    task ``cancelled``; a ToolError ``completed`` and a ProtocolError ``failed``, each returned for
    its message (and code); anything else ``failed``, with no error of ours to show.
    """
    cause = failure
    while cause is not None:
        if isinstance(cause, CancelledError):
            return "cancelled", None
        if isinstance(cause, ApplicationError) and cause.type == TOOL_ERROR:
            return "completed", cause
        if isinstance(cause, ApplicationError) and cause.type == PROTOCOL_ERROR:
            return "failed", cause
        cause = cause.cause if isinstance(cause, FailureError) else None
    return "failed", None


def failure_kinds(failure: BaseException | None) -> list[str]:
    """The chain of a failure's types (an ApplicationError's own ``type``), without messages: what
    a log may say of a failure whose text may quote a tool's arguments or results."""
    kinds: list[str] = []
    cause = failure
    while cause is not None and len(kinds) < _MAX_KINDS:
        kinds.append(
            cause.type or "ApplicationError" if isinstance(cause, ApplicationError) else type(cause).__name__
        )
        cause = cause.cause if isinstance(cause, FailureError) else None
    return kinds
