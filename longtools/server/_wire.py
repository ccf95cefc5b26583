"""What several wire paths share: a Temporal failure as the one -32603, a tool's own check
refusing in the same words on each, and notifications the SDK has no type for. API process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

import structlog
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    ClientCapabilities,
    InputRequiredResult,
    ServerNotification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError
from temporalio.service import RPCError

from longtools._logging import request_info
from longtools._protocol import TASKS_EXTENSION
from longtools.auth import principal_of
from longtools.server._limits import HeldRounds
from longtools.tasks import TaskNotFound, Tasks, TaskView
from longtools.temporal import PayloadDecryptError, unreachable
from longtools.tools import as_wire, tool_error_result
from longtools.workflows import marking_of

__all__ = [
    "NOT_AUTHORIZED",
    "UNAVAILABLE",
    "asks_a_person",
    "declares_tasks",
    "follows_by_tools",
    "invalid_arguments",
    "poll_task",
    "raw_notification",
    "read_task",
    "temporal_errors",
    "told_in_words",
]

log = structlog.get_logger("longtools.long")

UNAVAILABLE = "The task service is unavailable; try again shortly"
NOT_AUTHORIZED = "Not authorized to use this tool"
"""What a tool's ``authorize=`` check refusing says on every path: a call's round, an answer."""


def asks_a_person(what: str, result: InputRequiredResult) -> str | None:
    """Why ``what`` may not ask what ``result`` asks, if it asks a person's question or a secret
    outside a long tool's workflow (a quick tool, a long tool's ``before=`` round, a prompt, a
    resource): such a question is answered on its answer page, which belongs to a task, and
    nothing else could keep it from the client. The tool's author reads why, here and in the log."""
    marked = sorted(
        key for key, asked in (result.input_requests or {}).items() if marking_of(as_wire(asked)).marked
    )
    if not marked:
        return None
    log.error("person_question_outside_a_task", asked_by=what, keys=marked)
    return (
        f"{what} asks a person's question (elicit(by='person') or sensitive=True), which only a long "
        "tool's workflow can ask: its answer page belongs to a task"
    )


@asynccontextmanager
async def temporal_errors(what: str) -> AsyncIterator[None]:
    """Temporal unreachable or failing is the server's problem: -32603, detail in the log only.

    So is a stored payload this process cannot decrypt (a key missing from its ring): the codec
    has logged which key it needs.
    """
    try:
        yield
    except PayloadDecryptError:
        raise MCPError(code=INTERNAL_ERROR, message=UNAVAILABLE) from None
    except (RPCError, RuntimeError) as exc:
        if not (isinstance(exc, RPCError) or unreachable(exc)):
            raise
        log.error("temporal_error", operation=what, detail=str(exc))
        raise MCPError(code=INTERNAL_ERROR, message=UNAVAILABLE) from None


class _Notification(BaseModel):
    method: str
    params: dict[str, Any]


def raw_notification(method: str, params: Mapping[str, Any]) -> ServerNotification:
    """A notification outside the SDK's union (the tasks' own): ``ServerSession.send_notification``
    only dumps what it is given, so any model with a method and params goes out as it is."""
    return cast(ServerNotification, _Notification(method=method, params=dict(params)))


def declares_tasks(caps: ClientCapabilities | None) -> bool:
    """Whether a 2026-era request declares the tasks extension."""
    return bool(caps and caps.extensions and TASKS_EXTENSION in caps.extensions)


def follows_by_tools(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this client follows its long tools through the task tools: it declared neither a
    way to follow tasks (the 2026 extension; 2025-11-25 tasks) nor elicitation."""
    caps = ctx.session.client_capabilities or ClientCapabilities()
    if caps.elicitation is not None:
        return False
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return not declares_tasks(caps)
    return caps.tasks is None and not isinstance((ctx.params or {}).get("task"), dict)


def told_in_words(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this 2026-era client follows tasks but declared no elicitation (the MCP Inspector
    CLI, which prints a task's result and nothing else): a question could never reach anyone
    through it, so a task that asks is told to it in words, as the task tools tell it, and the task
    tools are listed for it to follow on."""
    caps = ctx.session.client_capabilities or ClientCapabilities()
    return (
        ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and declares_tasks(caps) and caps.elicitation is None
    )


def invalid_arguments(tool: str, exc: ValidationError) -> CallToolResult:
    """Bad arguments are the caller's to correct, so they are a tool error the model can read,
    naming each field."""
    problems = "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
    )
    return tool_error_result(f"Invalid arguments for tool {tool}: {problems}")


async def read_task(
    ctx: ServerRequestContext[Any, Any], tasks: Tasks, task_id: str, *, to_answer: bool = False
) -> TaskView:
    """The task of a ``tasks/*`` request, as its caller may see it (``to_answer``: as an answer to
    it must, ``Tasks.to_answer``).

    Raises:
        MCPError: -32602 for an unknown, expired or another principal's task (one answer for all).
    """
    request_info()["task_id"] = task_id
    read = tasks.to_answer if to_answer else tasks.get
    try:
        async with temporal_errors(ctx.method):
            return await read(task_id, principal_of(ctx))
    except TaskNotFound as exc:
        raise _not_found(exc) from None


async def poll_task(
    ctx: ServerRequestContext[Any, Any],
    tasks: Tasks,
    task_id: str,
    poll_interval_ms: Callable[[TaskView], int],
    held: HeldRounds,
) -> tuple[TaskView, int]:
    """The task of a ``tasks/get``, paced (``Tasks.paced``), and the poll interval to suggest. A
    poll that would be held counts against the held-request bounds; at a bound it is answered at
    once instead.

    Raises:
        MCPError: as ``read_task``.
    """
    view = await read_task(ctx, tasks, task_id)
    principal = principal_of(ctx)
    try:
        async with temporal_errors(ctx.method):
            with held.hold_if_free(principal) as may_wait:
                return await tasks.paced(view, principal, poll_interval_ms, may_wait=may_wait)
    except TaskNotFound as exc:  # expired while the poll waited
        raise _not_found(exc) from None


async def cancel_task(
    tasks: Tasks, held: HeldRounds, view: TaskView, principal: str, settle_s: float
) -> TaskView:
    """Cancel ``view``'s task and wait up to ``settle_s`` for it to end (``Tasks.cancel_and_wait``)
    when a place under the held-request bounds is free: the wait is a courtesy, so at a bound the
    cancel is answered at once instead of refused."""
    with held.hold_if_free(principal) as may_wait:
        return await tasks.cancel_and_wait(view, principal, settle_s if may_wait else 0)


def _not_found(exc: TaskNotFound) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=f"Failed to retrieve task: {exc}")
