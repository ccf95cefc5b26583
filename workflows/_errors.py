"""The two ways a tool may fail on purpose. Shared by quick tools, workflows and activities.

Both are Temporal ``ApplicationError``s marked non-retryable, so raised in an activity they end
the activity at once and, unless caught, the workflow too; the API reads the failure's ``type``
from the closed workflow and answers the task as the spec says (a tool error is a *completed*
task whose result has ``isError: true``; only a protocol error makes it *failed*).
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

TOOL_ERROR = "longtools.ToolError"
PROTOCOL_ERROR = "longtools.ProtocolError"


class ToolError(ApplicationError):
    """A tool's own, expected failure: the client gets a result with ``isError: true`` and this text."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type=TOOL_ERROR, non_retryable=True)


class ProtocolError(ApplicationError):
    """End the call with a JSON-RPC error instead of a result (a task becomes ``failed``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message, code, type=PROTOCOL_ERROR, non_retryable=True)
        self.code = code
