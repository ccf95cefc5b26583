"""The client side of the Tasks extension (``io.modelcontextprotocol/tasks``). CLI process.

A ``tools/call`` answered with ``resultType: "task"`` (a flat ``CreateTaskResult``) is followed
here: ``tasks/get`` every ``pollIntervalMs``, its input requests answered through the same
``answer`` function the MRTR rounds use (``tasks/update``), until the task ends with its
``CallToolResult``. A URL-mode request is not answered here: its page takes the answer, and the
task moves on once it has it (``idle`` is where the caller waits meanwhile). Tasks are the wire's
JSON objects (``DetailedTask``), read where they are used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from longtools._protocol import TASKS_EXTENSION
from longtools.client._wire import Connection, RpcError

DEFAULT_POLL_MS = 1000
MAX_POLL_MS = 5000
FINAL = ("completed", "failed", "cancelled")
TASKS_CAPABILITY: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}

Task = dict[str, Any]
Answer = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]
"""``answer(key, input request as wire JSON)`` returns the wire response (an ElicitResult)."""


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


def get_task(connection: Connection, task_id: str, capabilities: Mapping[str, Any]) -> Task:
    task = connection.request("tasks/get", {"taskId": task_id}, capabilities)
    if not isinstance(task.get("status"), str):
        raise RpcError(-32603, f"tasks/get answered without a status for task {task_id}")
    return task


def update_task(
    connection: Connection, task_id: str, responses: Mapping[str, Any], capabilities: Mapping[str, Any]
) -> None:
    connection.request("tasks/update", {"taskId": task_id, "inputResponses": dict(responses)}, capabilities)


def cancel_task(connection: Connection, task_id: str, capabilities: Mapping[str, Any]) -> None:
    connection.request("tasks/cancel", {"taskId": task_id}, capabilities)


def poll_seconds(task: Mapping[str, Any], fallback_ms: int | None = None) -> float:
    interval = task.get("pollIntervalMs")
    if not isinstance(interval, int | float) or interval <= 0:
        interval = fallback_ms or DEFAULT_POLL_MS
    return min(float(interval), MAX_POLL_MS) / 1000


@dataclass
class Follower:
    """Follows one task to its end, answering what it asks."""

    answer: Answer
    on_update: Callable[[Task], None] = lambda task: None
    idle: Callable[[float], None] = time.sleep
    """Waits the seconds until the next ``tasks/get``: a terminal watches its keys meanwhile."""
    detach: bool = False
    """Stop at the task's creation (raise ``Detached``) instead of following it."""
    current: str | None = field(default=None, init=False)
    """The task being followed (set until it ends), so an interrupted CLI can name it."""

    def follow(
        self,
        connection: Connection,
        task_id: str,
        capabilities: Mapping[str, Any],
        poll_ms: int | None = None,
    ) -> dict[str, Any]:
        """The task's final ``CallToolResult``.

        Raises:
            TaskFailed: it ended ``failed``.
            TaskCancelled: it ended ``cancelled``.
            RpcError: the server refused a request (e.g. the task expired).
        """
        self.current = task_id
        answered: set[str] = set()
        while True:
            task = get_task(connection, task_id, capabilities)
            self.on_update(task)
            status = task["status"]
            if status == "completed":
                self.current = None
                result = task.get("result")
                return result if isinstance(result, dict) else {"content": []}
            if status == "failed":
                self.current = None
                error = task.get("error")
                raise TaskFailed(task_id, error if isinstance(error, dict) else {})
            if status == "cancelled":
                self.current = None
                raise TaskCancelled(task_id)
            # A server may list an answered key until its workflow takes the answer: ask once.
            # A URL request is answered on its page, never here (the task moves on once it is).
            asked = task.get("inputRequests")
            pending = {
                key: request
                for key, request in (asked if isinstance(asked, dict) else {}).items()
                if key not in answered and isinstance(request, dict) and not on_a_page(request)
            }
            if status == "input_required" and pending:
                responses = {key: self.answer(key, request) for key, request in pending.items()}
                update_task(connection, task_id, responses, capabilities)
                answered |= set(responses)
                continue
            self.idle(poll_seconds(task, poll_ms))


def on_a_page(request: Mapping[str, Any]) -> bool:
    """Whether an input request is a URL-mode elicitation: answered where its link leads."""
    params = request.get("params")
    return (
        request.get("method") == "elicitation/create"
        and isinstance(params, dict)
        and params.get("mode") == "url"
    )


def is_not_found(exc: RpcError) -> bool:
    """Whether a ``tasks/*`` refusal says the task is unknown (or expired, or someone else's)."""
    return exc.code == -32602 and "task" in exc.message.lower()
