"""The task generator (B3, B4, B6): ``tools/call`` → task → ``tasks/get`` until ``completed``.

Run as ``python -m bench.task_load`` with a JSON spec on stdin (see `TaskSpec`); it prints one JSON
object. Standard library only, like ``bench/load.py``, whose HTTP client and CPU readers it uses.

One *flow* is one task from start to end, on one keep-alive connection: a ``tools/call`` that
declares the Tasks extension; the answer is a ``CreateTaskResult`` (``resultType: "task"``), or a
plain ``CallToolResult``, which a server MAY send instead and which counts as completed at once
(the generator counts both kinds). Then ``tasks/get`` (``Mcp-Name`` = the task id) until the
status is ``completed``, every ``poll_s`` seconds (0: back to back). An ``input_required`` status
is answered at once with one ``tasks/update`` carrying an accepting answer for every key of
``inputRequests`` not answered yet. The final result must be a successful ``CallToolResult`` whose
``structuredContent`` is ``expect``; anything else (``failed``, ``cancelled``, an error, another
``resultType``) fails the flow. Every answer is validated this way, in the timed runs too.

Kinds:

- ``latency`` (B3): one connection, flows one after another; ``warmup_ops`` flows, then ``ops``
  measured flows. Figures: p50, p99, mean, polls per task.
- ``input`` (B4): ``ops`` flows one after another (the task asks its questions); figure: seconds
  from the ``tools/call`` to the ``completed`` answer.
- ``throughput`` (B6): ``connections`` flows at a time, each starting the next task when its task
  completes (closed loop); after ``warmup_s`` it counts the tasks completed within ``duration_s``.

Each kind also reads the server's CPU (and the backend's, ``aux_pids``) over what it measures,
and its own CPU, as ``bench/load.py`` does.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from bench.load import (
    Connection,
    Failed,
    busy_seconds,
    cpu_seconds,
    http_request,
    meta,
    own_cpu,
    percentile,
    result_of,
    tree,
)

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
CAPABILITIES: Final[dict[str, Any]] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
ANSWER: Final = {"action": "accept", "content": {"confirm": True}}
_RUNNING: Final = frozenset({"working", "input_required"})


@dataclass
class TaskSpec:
    port: int
    kind: str  # "latency" (B3), "input" (B4) or "throughput" (B6)
    tool: str
    expect: dict[str, Any]
    """The ``structuredContent`` of the task's result."""
    path: str = "/mcp"
    poll_s: float = 0.0
    ops: int = 200
    warmup_ops: int = 20
    connections: int = 32
    warmup_s: float = 3.0
    duration_s: float = 10.0
    check: bool = False
    server_pids: list[int] = field(default_factory=list)
    aux_pids: list[int] = field(default_factory=list)


@dataclass
class Flow:
    """What one flow saw."""

    seconds: float
    create_s: float
    """How long the ``tools/call`` took (task creation, or the whole call when answered directly)."""
    polls: int
    questions: int
    direct: bool
    """The server answered the ``tools/call`` with the result itself, not with a task."""
    answers: list[dict[str, Any]]
    """The create answer and the last ``tasks/get`` answer (kept only for the record)."""


class Client:
    """Requests of one connection: the same raw 2026-07-28 request shape for every server."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec
        self.conn = Connection(spec.port)
        self.next_id = 1
        self.meta = meta(CAPABILITIES)

    async def request(self, method: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": self.next_id,
                "method": method,
                "params": {**params, "_meta": self.meta},
            }
        ).encode()
        self.next_id += 1
        await self.conn.send(http_request(self.spec.port, self.spec.path, method, name, body))
        return result_of(await self.conn.receive())

    def close(self) -> None:
        self.conn.close()


def _check_result(result: Any, expect: dict[str, Any]) -> None:
    """A successful ``CallToolResult`` with ``expect`` as its ``structuredContent``."""
    if not isinstance(result, dict) or result.get("isError"):
        raise Failed(f"not a successful tool result: {json.dumps(result)[:300]}")
    if result.get("resultType", "complete") != "complete" or result.get("structuredContent") != expect:
        raise Failed(f"the result is not {json.dumps(expect)}: {json.dumps(result)[:300]}")


async def flow(client: Client) -> Flow:
    """One task from ``tools/call`` to ``completed``, every answer validated."""
    spec = client.spec
    started = time.perf_counter()
    created = await client.request("tools/call", spec.tool, {"name": spec.tool, "arguments": {}})
    create_s = time.perf_counter() - started
    kind = created.get("resultType", "complete")
    if kind == "complete":  # the server MAY answer directly: the task completed at once
        _check_result(created, spec.expect)
        return Flow(create_s, create_s, 0, 0, True, [created])
    task_id = created.get("taskId")
    if (
        kind != "task"
        or not isinstance(task_id, str)
        or created.get("status") not in _RUNNING | {"completed"}
    ):
        raise Failed(f"not a CreateTaskResult: {json.dumps(created)[:300]}")
    polls = 0
    answered: set[str] = set()
    while True:
        if polls and spec.poll_s:
            await asyncio.sleep(spec.poll_s)
        got = await client.request("tasks/get", task_id, {"taskId": task_id})
        polls += 1
        status = got.get("status")
        if got.get("resultType") != "complete" or got.get("taskId") != task_id:
            raise Failed(f"not a GetTaskResult for {task_id}: {json.dumps(got)[:300]}")
        if status == "completed":
            _check_result(got.get("result"), spec.expect)
            return Flow(time.perf_counter() - started, create_s, polls, len(answered), False, [created, got])
        if status == "input_required":
            requests = got.get("inputRequests")
            if not isinstance(requests, dict) or not requests:
                raise Failed(f"input_required without inputRequests: {json.dumps(got)[:300]}")
            # Keys stay listed until the server has taken the answer in: answer each one once.
            todo = {key: ANSWER for key in requests if key not in answered}
            if todo:
                ack = await client.request(
                    "tasks/update", task_id, {"taskId": task_id, "inputResponses": todo}
                )
                if ack.get("resultType") != "complete":
                    raise Failed(f"tasks/update was not acknowledged: {json.dumps(ack)[:300]}")
                answered.update(todo)
        elif status != "working":
            raise Failed(f"the task ended {status}: {json.dumps(got)[:300]}")


class Meter:
    """CPU of the server, the backend, this process and the machine, between two readings."""

    def __init__(self, spec: TaskSpec) -> None:
        self.server = tree(spec.server_pids)
        self.aux = tree(spec.aux_pids)
        # Each backend process apart too (Temporal, the worker, Redis), to see which one works.
        self.each = {root: tree([root]) for root in spec.aux_pids}
        self.each_before = {root: cpu_seconds(pids) for root, pids in self.each.items()}
        self.before = self._read()

    def _read(self) -> tuple[float, float, float, float, float]:
        return (
            cpu_seconds(self.server),
            cpu_seconds(self.aux),
            own_cpu(),
            busy_seconds(),
            time.perf_counter(),
        )

    def stop(self) -> dict[str, Any]:
        after = self._read()
        server, aux, own, busy, wall = (b - a for a, b in zip(self.before, after, strict=True))
        each = {str(root): cpu_seconds(pids) - self.each_before[root] for root, pids in self.each.items()}
        return {
            "aux_cpu_each_s": each,
            "window_s": wall,
            "server_cpu_s": server,
            "aux_cpu_s": aux,
            "gen_cpu_s": own,
            "gen_cpu_share": own / wall,
            "server_cpu_share": server / wall,
            # Whatever else ran on the machine meanwhile (other processes, kernel work).
            "other_cpu_share": max(0.0, busy - server - aux - own) / wall,
        }


def figures(flows: list[Flow], measured: dict[str, Any]) -> dict[str, Any]:
    if not flows:
        raise Failed("no task completed in the window")
    ordered = sorted(item.seconds for item in flows)
    creates = sorted(item.create_s for item in flows)
    ops = len(flows)
    return {
        "ok": True,
        "ops": ops,
        "rate": ops / measured["window_s"],
        "p50_ms": percentile(ordered, 0.50) * 1000,
        "p99_ms": percentile(ordered, 0.99) * 1000,
        "mean_ms": sum(ordered) / ops * 1000,
        "max_ms": ordered[-1] * 1000,
        "create_p50_ms": percentile(creates, 0.50) * 1000,
        "create_p99_ms": percentile(creates, 0.99) * 1000,
        "polls_per_task": sum(item.polls for item in flows) / ops,
        "questions_per_task": sum(item.questions for item in flows) / ops,
        "created_tasks": sum(not item.direct for item in flows),
        "direct_results": sum(item.direct for item in flows),
        "errors": 0,
        **measured,
    }


async def sequential(spec: TaskSpec) -> dict[str, Any]:
    """B3 and B4: flows one after another on one connection."""
    client = Client(spec)
    try:
        for _ in range(spec.warmup_ops):
            await flow(client)
        meter = Meter(spec)
        flows = [await flow(client) for _ in range(spec.ops)]
        outcome = figures(flows, meter.stop())
    finally:
        client.close()
    if spec.kind == "input":  # B4 has no separate check run: keep what this run saw for the record
        outcome["answers"] = flows[-1].answers
    return outcome


@asynccontextmanager
async def _connection(spec: TaskSpec) -> AsyncIterator[Callable[[], Awaitable[Flow]]]:
    client = Client(spec)
    try:
        yield partial(flow, client)
    finally:
        client.close()


async def closed_loop(
    spec: TaskSpec, connect: Callable[[], AbstractAsyncContextManager[Callable[[], Awaitable[Flow]]]]
) -> dict[str, Any]:
    """B6: ``connections`` flows at a time; counts the tasks that complete inside the window.

    ``connect`` opens what one of them runs its flows on, and gives the function that runs one.
    """
    measuring = False
    stopping = False
    flows: list[Flow] = []

    async def loop() -> None:
        async with connect() as one:
            while not stopping:
                done = await one()  # a failed flow fails the run (raised through gather)
                if measuring:
                    flows.append(done)

    tasks = [asyncio.create_task(loop()) for _ in range(spec.connections)]
    try:
        await asyncio.sleep(spec.warmup_s)
        for task in tasks:  # a flow that died in the warm-up is a failed run
            if task.done():
                task.result()
        meter = Meter(spec)
        measuring = True
        await asyncio.sleep(spec.duration_s)
        measuring = False
        measured = meter.stop()
        stopping = True
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    # A flow counts when it ended inside the window: it was appended while measuring was set.
    return figures(flows, measured)


async def check(spec: TaskSpec) -> dict[str, Any]:
    """One flow, validated in full; returns its answers for the record."""
    client = Client(spec)
    try:
        done = await flow(client)
    finally:
        client.close()
    return {"ok": True, "answers": done.answers, "direct": done.direct}


def main() -> None:
    spec = TaskSpec(**json.load(sys.stdin))
    if spec.check:
        run = check(spec)
    elif spec.kind == "throughput":
        run = closed_loop(spec, partial(_connection, spec))
    else:
        run = sequential(spec)
    try:
        outcome = asyncio.run(run)
    except (Failed, OSError, ValueError, asyncio.IncompleteReadError) as exc:
        outcome = {"ok": False, "problem": f"{type(exc).__name__}: {exc}"}
    json.dump(outcome, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
