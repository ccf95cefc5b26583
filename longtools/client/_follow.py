"""The client side of the Tasks extension (``io.modelcontextprotocol/tasks``), on the SDK's client.
CLI process.

The SDK's ``Client`` has no Tasks support, but it lets an extension claim a result shape: a
``tools/call`` answered with ``resultType: "task"`` is handed to ``TasksExtension``, which follows
the task (``tasks/get`` every ``pollIntervalMs``), answers its input requests through the same
``answer`` function the MRTR path uses (``tasks/update``), and returns the final
``CallToolResult``, so ``client.call_tool`` looks the same whether the server made a task or not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict

from longtools._protocol import TASKS_EXTENSION

DEFAULT_POLL_MS = 1000

Answer = Callable[[str, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""``answer(key, input request as wire JSON)`` returns the wire response (e.g. an ElicitResult)."""


class TaskFailed(Exception):
    """The task ended ``failed``; carries its JSON-RPC error."""

    def __init__(self, task_id: str, error: Mapping[str, Any]) -> None:
        super().__init__(f"task {task_id} failed: {error.get('message', 'no message')}")
        self.task_id = task_id
        self.error = dict(error)


class Detached(Exception):
    """The caller asked for the task id only (``--detach``); the task keeps running."""

    def __init__(self, task_id: str) -> None:
        super().__init__(task_id)
        self.task_id = task_id


class TaskCancelled(Exception):
    """The task ended ``cancelled``."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} was cancelled")
        self.task_id = task_id


class CreatedTask(Result):
    """``CreateTaskResult``: the task a ``tools/call`` started (flat, per the extension)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class TaskState(Result):
    """A task as ``tasks/get`` shows it (``DetailedTask``)."""

    model_config = ConfigDict(extra="allow")
    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    input_requests: dict[str, dict[str, Any]] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Ack(Result):
    model_config = ConfigDict(extra="allow")
    result_type: str | None = None


class TaskParams(RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"  # SEP-2663: tasks/* carry the task id in Mcp-Name


class UpdateTask(Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> TaskState:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), TaskState)


async def update_task(session: ClientSession, task_id: str, responses: Mapping[str, Any]) -> None:
    params = UpdateParams(task_id=task_id, input_responses=dict(responses))
    await session.send_request(UpdateTask(params=params), Ack)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), Ack)


@dataclass
class Follower:
    """Follows one task to its end, answering what it asks."""

    answer: Answer
    on_update: Callable[[TaskState], None] = lambda task: None
    detach: bool = False
    """Stop at the task's creation (raise ``Detached``) instead of following it."""
    current: str | None = field(default=None, init=False)
    """The task being followed (set until it ends), so an interrupted CLI can name it."""

    async def follow(
        self, session: ClientSession, task_id: str, poll_ms: int | None = None
    ) -> CallToolResult:
        """The task's final result.

        Raises:
            TaskFailed: it ended ``failed``.
            TaskCancelled: it ended ``cancelled``.
            MCPError: the server refused a request (e.g. the task expired).
        """
        self.current = task_id
        answered: set[str] = set()
        while True:
            task = await get_task(session, task_id)
            self.on_update(task)
            if task.status == "completed":
                self.current = None
                return CallToolResult.model_validate(task.result or {"content": []})
            if task.status == "failed":
                self.current = None
                raise TaskFailed(task_id, task.error or {})
            if task.status == "cancelled":
                self.current = None
                raise TaskCancelled(task_id)
            # A server may list an answered key until its workflow takes the answer: ask once.
            pending = {
                key: request for key, request in (task.input_requests or {}).items() if key not in answered
            }
            if task.status == "input_required" and pending:
                responses = {key: await self.answer(key, request) for key, request in pending.items()}
                await update_task(session, task_id, responses)
                answered |= set(responses)
                continue
            interval = task.poll_interval_ms or poll_ms or DEFAULT_POLL_MS
            await asyncio.sleep(min(interval, 5000) / 1000)


class TasksExtension(ClientExtension):
    """Declares the Tasks extension and resolves a ``resultType: "task"`` by following the task."""

    identifier = TASKS_EXTENSION

    def __init__(self, follower: Follower) -> None:
        self.follower = follower

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        if self.follower.detach:
            raise Detached(created.task_id)
        return await self.follower.follow(ctx.session, created.task_id, created.poll_interval_ms)


def is_not_found(exc: MCPError) -> bool:
    """Whether a ``tasks/*`` refusal says the task is unknown (or expired, or someone else's)."""
    return exc.error.code == -32602 and "task" in exc.error.message.lower()
