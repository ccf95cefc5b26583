"""Test a long tool: start it, see its questions, answer them by key, read its progress and result.

Two ways, one ``Task`` handle with the same methods:

- ``embedded(tools)``: the tools' workflows and activities on longtools' worker, in a Temporal of
  the test's own (the dev server of the installed ``temporal`` CLI; Temporal's time-skipping test
  server when you pass its binary as ``test_server=``). No API, no HTTP: quick to start.
- ``serve(*args)``: a real ``longtools serve`` on a free loopback port, driven over MCP
  2026-07-28 with the Tasks extension, as any client would.

::

    from longtools.testing import embedded, replay

    async def test_approve() -> None:
        async with embedded("my_tools") as env:
            task = await env.start("approve_expense", {"expense_id": "E-1"})
            question = await task.question()           # waits, bounded: NoQuestion otherwise
            assert question.message == "Approve E-1: ...?"
            await task.answer(question.key, {"approve": True})   # or task.decline(question.key)
            result = await task.result()               # TaskFailed / TaskCancelled / NotFinished
            assert result.structured == {...}
            await replay(await task.history(), env.registry)

Every wait takes ``within=`` seconds and fails with an error that names the task and what it
showed last. ``embedded`` needs Temporal's SDK; ``serve`` needs ``httpx`` only, and neither is
imported before it is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from longtools.testing._common import (
    AnswerRejected,
    InvalidArguments,
    NoQuestion,
    NotAsked,
    NotATask,
    NotAuthorized,
    NotFinished,
    Question,
    RequestFailed,
    ServeFailed,
    Task,
    TaskCancelled,
    TaskEnded,
    TaskFailed,
    TaskState,
    TestingError,
    ToolResult,
    UnknownTool,
    WaitTimedOut,
)

if TYPE_CHECKING:
    from longtools.testing._embedded import (
        Embedded,
        EmbeddedTask,
        TimeSkippingUnavailable,
        WorkflowHistory,
        embedded,
        replay,
    )
    from longtools.testing._served import Served, ServedTask, serve

_HOME = {
    "Embedded": "longtools.testing._embedded",
    "EmbeddedTask": "longtools.testing._embedded",
    "TimeSkippingUnavailable": "longtools.testing._embedded",
    "WorkflowHistory": "longtools.testing._embedded",
    "embedded": "longtools.testing._embedded",
    "replay": "longtools.testing._embedded",
    "Served": "longtools.testing._served",
    "ServedTask": "longtools.testing._served",
    "serve": "longtools.testing._served",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'longtools.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "AnswerRejected",
    "Embedded",
    "EmbeddedTask",
    "InvalidArguments",
    "NoQuestion",
    "NotATask",
    "NotAsked",
    "NotAuthorized",
    "NotFinished",
    "Question",
    "RequestFailed",
    "ServeFailed",
    "Served",
    "ServedTask",
    "Task",
    "TaskCancelled",
    "TaskEnded",
    "TaskFailed",
    "TaskState",
    "TestingError",
    "TimeSkippingUnavailable",
    "ToolResult",
    "UnknownTool",
    "WaitTimedOut",
    "WorkflowHistory",
    "embedded",
    "replay",
    "serve",
]
