"""Where B3's milliseconds go: one no-op task at a time, timed phase by phase (issues 17, 35).

``python -m bench._breakdown [--tasks N] [--json PATH]`` (longtools' venv) starts its own Temporal
dev servers (the harness's flags) and runs, in this process, the workers and the clients: no HTTP,
no MCP, so what is measured is what a task costs below longtools' API. Each worker is in the
starting process (eager start, as ``longtools serve``):

- ``floor``: the Temporal floor's empty workflow, the SDK's defaults (as ``temporal_floor --eager``);
- ``longtools``: longtools' own start and inline wait (``Tasks.start`` then
  ``Tasks.completed_within``, what ``tools/call`` does with ``LONGTOOLS_TASK_INLINE_MS``) of
  ``bench.noop``, on longtools' worker (``build_worker``: interceptors, the pydantic converter,
  encrypted payloads, the sandbox);
- ``floor-in-memory``: the floor again, against a dev server without a database file, so
  nothing is written to disk: what Temporal's SQLite commits (``synchronous=full``) cost.

``floor`` and ``longtools`` share one dev server and take turns, a task each (the order rotated),
so the machine's drift hits both alike. Per task, from the workflow's own clock (an interceptor)
and the SDK's metrics (a ``MetricBuffer`` of the process's runtime): the start's RPC, the wait
until the workflow's code runs, the workflow task's execution in the worker,
``RespondWorkflowTaskCompleted``, the time from the workflow's return until the client has the
result, and how many of each RPC the task took; then one task's history, its events by type and
their bytes. Last, ``fdatasync`` of a 4 KiB write in the data directory's file system, the unit of
a durable commit there.
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
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
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
    task_id: str


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


_One = Callable[[str], Coroutine[Any, Any, float]]
"""Starts one task under the id it is given; returns when its start returned, once the client has
its result."""


def _task(task_id: str, began: float, started: float, ended: float) -> _Task:
    entered, returned = _moments.pop(task_id), _returns.pop(task_id)
    return _Task(
        total=ended - began,
        start_rpc=started - began,
        to_code=entered - began,
        code_to_result=ended - returned,
        task_id=task_id,
    )


@asynccontextmanager
async def _floor(client: Client) -> AsyncIterator[_One]:
    async def one(task_id: str) -> float:
        handle = await client.start_workflow(
            Empty.run, id=task_id, task_queue=TASK_QUEUE, request_eager_start=True
        )
        started = time.perf_counter()
        await handle.result()
        return started

    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Empty], interceptors=[_Clock()]):
        yield one


@asynccontextmanager
async def _longtools(address: str, runtime: Runtime) -> AsyncIterator[_One]:
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

    async def one(task_id: str) -> float:
        view, _ = await gateway.start(tool, tool.input_model(), "anonymous", task_id=task_id)
        started = time.perf_counter()
        assert await gateway.completed_within(tool, view.task_id, 5.0) is not None
        return started

    try:
        async with Worker(**config):
            yield one
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


def _metrics(buffer: MetricBuffer) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Per RPC, and per workflow task's execution, every duration the runtime recorded (ms); and
    how many of each RPC the process made (long polls apart, ``(long)``)."""
    values: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for update in buffer.retrieve_updates():
        name = update.metric.name
        attributes = update.attributes
        if name.endswith("request_latency"):
            operation = str(attributes.get("operation"))
            counts[operation + (" (long)" if "long_request" in name else "")] += 1
            if operation in _RPCS:
                values[operation].append(float(update.value))
        elif name.endswith("workflow_task_execution_latency"):
            values["workflow task execution (worker)"].append(float(update.value))
    return values, counts


async def _history(client: Client, task_id: str) -> dict[str, Any]:
    """The shape of one task's history: its events by type, and their bytes (as protobuf)."""
    events: dict[str, int] = defaultdict(int)
    size = 0
    async for event in client.get_workflow_handle(task_id).fetch_history_events():
        events[EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")] += 1
        size += event.ByteSize()
    return {"events": dict(events), "bytes": size}


def _p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def _setups(
    work: Path, names: Sequence[str], tasks: int, *, on_disk: bool = True, warmup: int = 10
) -> dict[str, Any]:
    """``names`` (``floor``, ``longtools``) on one dev server, in one process, a task of each in
    turn (the order rotated each time), so the machine's drift hits them alike."""
    buffer = MetricBuffer(100_000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    directory = work / ("disk" if on_disk else "memory")
    directory.mkdir()
    child, address = start_temporal(_TEMPORAL.parent, directory, on_disk=on_disk)
    measured: dict[str, list[_Task]] = {name: [] for name in names}
    durations: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in names}
    counts: dict[str, dict[str, int]] = {name: defaultdict(int) for name in names}
    try:
        async with AsyncExitStack() as stack:
            client = await _connect(address, runtime)
            made = {"floor": lambda: _floor(client), "longtools": lambda: _longtools(address, runtime)}
            ones = {name: await stack.enter_async_context(made[name]()) for name in names}
            buffer.retrieve_updates()
            for n in range(warmup + tasks):
                for name in [*names[n % len(names) :], *names[: n % len(names)]]:
                    task_id = f"breakdown-{name}-{uuid.uuid4()}"
                    began = time.perf_counter()
                    started = await ones[name](task_id)
                    task = _task(task_id, began, started, time.perf_counter())
                    # Each task's RPCs and workflow task (the other worker idles meanwhile).
                    spent, made_calls = _metrics(buffer)
                    if n < warmup:
                        continue
                    measured[name].append(task)
                    for key, values in spent.items():
                        durations[name][key].extend(values)
                    for key, count in made_calls.items():
                        counts[name][key] += count
            histories = {name: await _history(client, measured[name][-1].task_id) for name in names}
    finally:
        child.stop()
    return {
        name: {
            "ms": {
                "task, start to result": _p50([t.total * 1000 for t in measured[name]]),
                "start RPC (client)": _p50([t.start_rpc * 1000 for t in measured[name]]),
                "start to workflow code": _p50([t.to_code * 1000 for t in measured[name]]),
                "workflow return to result (client)": _p50([t.code_to_result * 1000 for t in measured[name]]),
                **{f"{key} p50": _p50(values) for key, values in sorted(durations[name].items())},
            },
            "rpcs per task": {key: count / tasks for key, count in sorted(counts[name].items())},
            "history": histories[name],
        }
        for name in names
    }


async def main_async(tasks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="longtools-breakdown-") as tmp:
        work = Path(tmp)
        report = await _setups(work, ["floor", "longtools"], tasks)
        report["floor-in-memory"] = (await _setups(work, ["floor"], tasks, on_disk=False))["floor"]
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
    """The report as Markdown: p50s, RPCs per task and each setup's history, one column per setup."""
    setups: dict[str, dict[str, Any]] = outcome["ms"]
    lines: list[str] = []

    def table(title: str, rows: dict[str, dict[str, float]], form: str) -> None:
        keys = sorted(
            {key for row in rows.values() for key in row}, key=lambda k: (not k.startswith("task"), k)
        )
        lines.extend([f"| {title} | " + " | ".join(rows) + " |", "|---|" + "---:|" * len(rows)])
        for key in keys:
            lines.append(
                f"| {key} | "
                + " | ".join(format(row.get(key, float("nan")), form) for row in rows.values())
                + " |"
            )
        lines.append("")

    table(
        f"p50 ms ({outcome['tasks']} tasks each)",
        {name: setup["ms"] for name, setup in setups.items()},
        ".2f",
    )
    table("RPCs per task", {name: setup["rpcs per task"] for name, setup in setups.items()}, ".2f")
    histories = {
        name: {**setup["history"]["events"], "bytes": setup["history"]["bytes"]}
        for name, setup in setups.items()
    }
    table("one task's history: events, bytes", histories, ".0f")
    lines.append(f"fdatasync of a 4 KiB append, p50: {outcome['fdatasync 4 KiB p50 ms']:.2f} ms")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
