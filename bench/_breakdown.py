"""Where B3's milliseconds go: one no-op task at a time, timed phase by phase (issue 17).

``python -m bench._breakdown [--tasks N] [--json PATH]`` (longtools' venv) starts its own Temporal
dev servers (the harness's flags) and runs, in this process, one worker and one client: no HTTP,
no MCP, so what is measured is what a task costs below longtools' API. Three setups, one task
after another, each with the worker in the starting process (eager start, as ``longtools serve``):

- ``floor``: the Temporal floor's empty workflow, the SDK's defaults (as ``temporal_floor --eager``);
- ``longtools``: longtools' own start and inline wait (``Tasks.start`` then
  ``Tasks.completed_within``, what ``tools/call`` does with ``LONGTOOLS_TASK_INLINE_MS``) of
  ``bench.noop``, on longtools' worker (``build_worker``: interceptors, the pydantic converter,
  encrypted payloads, the sandbox);
- ``floor-in-memory``: the floor again, against a dev server without a database file, so
  nothing is written to disk: what Temporal's SQLite commits (``synchronous=full``) cost.

Per task, from the workflow's own clock (an interceptor) and the SDK's metrics (a ``MetricBuffer``
of the process's runtime): the start's RPC, the wait until the workflow's code runs, the
workflow task's execution in the worker, ``RespondWorkflowTaskCompleted``, and the time from the
workflow's return until the client has the result. Last, ``fdatasync`` of a 4 KiB write in the
data directory's file system, the unit of a durable commit there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from bench._procs import BENCH_LIMITS, KEY_RINGS, start_temporal
from bench.servers.floor_workflow import Empty
from bench.servers.temporal_floor import TASK_QUEUE

_RPCS = ("StartWorkflowExecution", "RespondWorkflowTaskCompleted")
_TEMPORAL = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "temporal"

_moments: dict[str, float] = {}
"""Per workflow id, when its code began to run (the interceptor writes, outside the sandbox)."""
_returns: dict[str, float] = {}


class _Clock(Interceptor):
    """Notes when each workflow's code starts and returns, on the process's monotonic clock."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _ClockInbound


class _ClockInbound(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        with workflow.unsafe.sandbox_unrestricted():
            _moments[workflow.info().workflow_id] = time.perf_counter()
        result = await super().execute_workflow(input)
        with workflow.unsafe.sandbox_unrestricted():
            _returns[workflow.info().workflow_id] = time.perf_counter()
        return result


@dataclass
class _Task:
    total: float
    start_rpc: float
    to_code: float
    code_to_result: float


async def _connect(address: str, runtime: Runtime, **kwargs: Any) -> Client:
    for attempt in range(30):  # the frontend listens a moment before the namespace answers
        try:
            client = await Client.connect(address, runtime=runtime, **kwargs)
            await client.count_workflows()
            return client
        except Exception:
            if attempt == 29:
                raise
            await asyncio.sleep(0.2)
    raise AssertionError("unreachable")


async def _timed(one: Callable[[str], Coroutine[Any, Any, float]], tasks: int, warmup: int) -> list[_Task]:
    """``warmup`` tasks, then ``tasks`` timed ones; ``one`` starts a task, returns when its start
    returned, and returns once the client has its result."""
    measured: list[_Task] = []
    for n in range(warmup + tasks):
        task_id = f"breakdown-{uuid.uuid4()}"
        began = time.perf_counter()
        started = await one(task_id)
        ended = time.perf_counter()
        entered, returned = _moments.pop(task_id), _returns.pop(task_id)
        if n >= warmup:
            measured.append(
                _Task(
                    total=ended - began,
                    start_rpc=started - began,
                    to_code=entered - began,
                    code_to_result=ended - returned,
                )
            )
    return measured


async def _floor(address: str, runtime: Runtime, tasks: int, warmup: int) -> list[_Task]:
    client = await _connect(address, runtime)

    async def one(task_id: str) -> float:
        handle = await client.start_workflow(
            Empty.run, id=task_id, task_queue=TASK_QUEUE, request_eager_start=True
        )
        started = time.perf_counter()
        await handle.result()
        return started

    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Empty], interceptors=[_Clock()]):
        return await _timed(one, tasks, warmup)


async def _longtools(address: str, runtime: Runtime, tasks: int, warmup: int) -> list[_Task]:
    # What `longtools serve` builds, with the benchmark's tool module and bounds.
    os.environ.update({**KEY_RINGS, **BENCH_LIMITS})
    from longtools import Settings
    from longtools.tasks import Changes, Tasks
    from longtools.temporal import build_worker, connect
    from longtools.tools import default_registry

    settings = Settings(
        temporal_address=address, tools=["bench.servers.longtools_tools"], examples=False, task_queue="bd"
    )
    registry = default_registry(settings)
    client = await connect(settings, runtime=runtime)
    changes = Changes(lambda: client, client.namespace)
    gateway = Tasks(settings, registry, lambda: client, changes, eager=True)
    tool = registry.tools["noop"]
    # build_worker's worker with the clock added: its config, on a queue of its own (a second
    # worker on one queue is refused), made into the worker that runs.
    throwaway = settings.model_copy(update={"task_queue": "bd-unused"})
    config = build_worker(throwaway, client, registry).config()
    config["task_queue"] = settings.task_queue
    config["interceptors"] = [*config.get("interceptors", []), _Clock()]
    worker = Worker(**config)

    async def one(task_id: str) -> float:
        args = tool.input_model()
        view, _ = await gateway.start(tool, args, "anonymous", owner_tag="bench", task_id=task_id)
        started = time.perf_counter()
        assert await gateway.completed_within(tool, view.task_id, 5.0) is not None
        return started

    try:
        async with worker:
            return await _timed(one, tasks, warmup)
    finally:
        await changes.aclose()


def _fsync_ms(directory: Path, times: int = 200) -> list[float]:
    path = directory / "fsync-probe"
    block = os.urandom(4096)
    spent = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(times):
            began = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            spent.append((time.perf_counter() - began) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return spent


def _metrics(buffer: MetricBuffer) -> dict[str, list[float]]:
    """Per RPC, and per workflow task's execution, every duration the runtime recorded (ms)."""
    values: dict[str, list[float]] = defaultdict(list)
    for update in buffer.retrieve_updates():
        name = update.metric.name
        attributes = update.attributes
        if name.endswith("request_latency") and attributes.get("operation") in _RPCS:
            values[str(attributes["operation"])].append(float(update.value))
        elif name.endswith("workflow_task_execution_latency"):
            values["workflow task execution (worker)"].append(float(update.value))
    return values


def _p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def _setup(
    name: str,
    run: Callable[[str, Runtime, int, int], Coroutine[Any, Any, list[_Task]]],
    work: Path,
    *,
    on_disk: bool,
    tasks: int,
) -> dict[str, float]:
    buffer = MetricBuffer(100_000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    directory = work / name
    directory.mkdir()
    child, address = start_temporal(_TEMPORAL.parent, directory, on_disk=on_disk)
    try:
        warmup = 10
        buffer.retrieve_updates()
        measured = await run(address, runtime, tasks, warmup)
    finally:
        child.stop()
    rpcs = {key: values[warmup:] for key, values in _metrics(buffer).items()}
    return {
        "task, start to result": _p50([t.total * 1000 for t in measured]),
        "start RPC (client)": _p50([t.start_rpc * 1000 for t in measured]),
        "start to workflow code": _p50([t.to_code * 1000 for t in measured]),
        "workflow return to result (client)": _p50([t.code_to_result * 1000 for t in measured]),
        **{f"{key} p50": _p50(values) for key, values in sorted(rpcs.items())},
    }


async def main_async(tasks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="longtools-breakdown-") as tmp:
        work = Path(tmp)
        report = {
            "floor": await _setup("floor", _floor, work, on_disk=True, tasks=tasks),
            "longtools": await _setup("longtools", _longtools, work, on_disk=True, tasks=tasks),
            "floor-in-memory": await _setup("memory", _floor, work, on_disk=False, tasks=tasks),
        }
        fsyncs = _fsync_ms(work)
    return {"tasks": tasks, "ms": report, "fdatasync 4 KiB p50 ms": _p50(fsyncs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    outcome = asyncio.run(main_async(args.tasks))
    if args.json:
        args.json.write_text(json.dumps(outcome, indent=2))
    print(render(outcome))  # noqa: T201


def render(outcome: dict[str, Any]) -> str:
    """The report as a Markdown table of p50s, one column per setup."""
    rows: dict[str, dict[str, float]] = outcome["ms"]
    phases = sorted(
        {phase for row in rows.values() for phase in row}, key=lambda p: (not p.startswith("task"), p)
    )
    lines = [
        f"| p50 ms ({outcome['tasks']} tasks each) | " + " | ".join(rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]
    for phase in phases:
        lines.append(
            f"| {phase} | "
            + " | ".join(f"{row.get(phase, float('nan')):.2f}" for row in rows.values())
            + " |"
        )
    lines.append(f"\nfdatasync of a 4 KiB append, p50: {outcome['fdatasync 4 KiB p50 ms']:.2f} ms")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
