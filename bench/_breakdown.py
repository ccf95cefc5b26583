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
- ``floor-api`` and ``longtools-api``: the same without an eager start, as ``longtools api`` and
  its worker serve B6 (the worker still in this process): the floor awaits its result, longtools
  follows the task with its watch and answers ``tasks/get`` from it (``get``, then ``paced``)
  until it has completed;
- ``floor-in-memory``: the floor again, against a dev server without a database file, so
  nothing is written to disk: what Temporal's SQLite commits (``synchronous=full``) cost.

Each pair shares one dev server and takes turns, a task each (the order rotated), so the
machine's drift hits both alike. Last, one ``three_questions`` task (B4's tool), answered as a
host's form answers, for its history: B11 is what of each history the task's ledger is.

Per task, from the workflow's own clock (an interceptor) and the SDK's metrics (a
``MetricBuffer`` of the process's runtime): the start's RPC, the wait until the workflow's code
runs, the workflow task's execution in the worker, ``RespondWorkflowTaskCompleted``, the time
from the workflow's return until the client has the result, and how many of each RPC the task
took; then one task's history, its events by type and their bytes. Last, ``fdatasync`` of a 4 KiB
write in the data directory's file system, the unit of a durable commit there.
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
async def _floor(client: Client, *, eager: bool = True) -> AsyncIterator[_One]:
    async def one(task_id: str) -> float:
        handle = await client.start_workflow(
            Empty.run, id=task_id, task_queue=TASK_QUEUE, request_eager_start=eager
        )
        started = time.perf_counter()
        await handle.result()
        return started

    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Empty], interceptors=[_Clock()]):
        yield one


@asynccontextmanager
async def _served(address: str, runtime: Runtime, *, eager: bool) -> AsyncIterator[tuple[Any, Any]]:
    """What ``longtools serve`` (``eager``) or ``longtools api`` builds below HTTP: ``Tasks`` and a
    worker (``build_worker``'s, with the clock), the benchmark's tool module and bounds."""
    os.environ.update({**KEY_RINGS, **BENCH_LIMITS})
    from longtools import Settings
    from longtools._logging import configure_logging
    from longtools.tasks import Changes, Tasks
    from longtools.temporal import build_worker, connect
    from longtools.tools import default_registry

    queue = "bd" if eager else "bd-api"
    settings = Settings(
        temporal_address=address,
        tools=["bench.servers.longtools_tools"],
        examples=False,
        task_queue=queue,
        log_format="json",
    )
    configure_logging(settings)  # as the service logs: JSON lines on stderr
    registry = default_registry(settings)
    client = await connect(settings, runtime=runtime)
    changes = Changes(lambda: client, client.namespace)
    gateway = Tasks(settings, registry, lambda: client, changes, eager=eager)
    # build_worker's worker with the clock added: its config, on a queue of its own (a second
    # worker on one queue is refused), made into the worker that runs.
    throwaway = settings.model_copy(update={"task_queue": f"{queue}-unused"})
    config = build_worker(throwaway, client, registry).config()
    config["task_queue"] = settings.task_queue
    config["interceptors"] = [*config.get("interceptors", []), _Clock()]
    try:
        async with Worker(**config):
            yield gateway, registry
    finally:
        await changes.aclose()


@asynccontextmanager
async def _longtools(address: str, runtime: Runtime, *, eager: bool = True) -> AsyncIterator[_One]:
    """``eager``: as ``longtools serve`` answers inline (its start, then the result's long poll);
    else as ``longtools api`` serves B6's flow, its worker apart: a start without the worker at
    hand, the task followed by its watch, and ``tasks/get`` answered from it until completed."""
    from longtools.tasks import TERMINAL

    async with _served(address, runtime, eager=eager) as (gateway, registry):
        tool = registry.tools["noop"]

        async def one(task_id: str) -> float:
            view, _ = await gateway.start(tool, tool.input_model(), "anonymous", task_id=task_id)
            started = time.perf_counter()
            if eager:
                assert await gateway.completed_within(tool, view.task_id, 5.0) is not None
                return started
            gateway.follow(view, 20)
            while view.status not in TERMINAL:
                view = await gateway.get(view.task_id, "anonymous")
                view, _ = await gateway.paced(view, "anonymous", lambda _: 20)
            assert view.status == "completed"
            return started

        yield one


async def _questions_task(address: str, runtime: Runtime) -> dict[str, Any]:
    """One ``three_questions`` task (B4's: three activities, each followed by a question that is
    answered as a host's form answers it), through longtools' API objects and worker: its history."""
    from longtools.auth import ANONYMOUS, Caller
    from longtools.tasks import TERMINAL

    def asks_or_ended(view: Any) -> bool:
        return view.status in TERMINAL or view.status == "input_required"

    async with _served(address, runtime, eager=False) as (gateway, registry):
        tool = registry.tools["three_questions"]
        view, _ = await gateway.start(tool, tool.input_model(), ANONYMOUS)
        async with asyncio.timeout(60):
            while True:
                view = await gateway.wait(view.task_id, ANONYMOUS, asks_or_ended, 30)
                if view.status in TERMINAL:
                    break
                answers = {
                    key: {"action": "accept", "content": {"confirm": True}}
                    for key in view.input_requests or {}
                }
                await gateway.answer(view, answers, caller=Caller(principal=ANONYMOUS), via="form")
                view = await gateway.wait(
                    view.task_id, ANONYMOUS, lambda now: now.status != "input_required", 30
                )
        assert view.status == "completed"
        return await _history(await _connect(address, runtime), view.task_id)


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
    """The shape of one task's history: its events by type and their bytes (as protobuf), and what
    of it its ledger is (B11): events that hold nothing else (the old signing activity's marker,
    the patch's marker and search attribute, a memo change of only the ledger's keys) and the bytes
    of the ledger's memo fields in events that hold more."""
    from longtools.decisions import EXIT_MEMO, LEDGER_ACTIVITY, LEDGER_MEMO, SIGNED_MEMO

    ledger_keys = {EXIT_MEMO, SIGNED_MEMO}
    events: dict[str, int] = defaultdict(int)
    size = ledger_events = ledger_bytes = 0
    async for event in client.get_workflow_handle(task_id).fetch_history_events():
        events[EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")] += 1
        size += event.ByteSize()
        own = 0
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            data = marker.details.get("data")
            patch = marker.details.get("patch-data")
            ran = data.payloads[0].data if data is not None and data.payloads else b""
            patched = patch is not None and b"longtools.ledger" in patch.payloads[0].data
            if LEDGER_ACTIVITY.encode() in ran or patched:
                own = event.ByteSize()
        elif event.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            indexed = (
                event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            )
            if set(indexed) == {"TemporalChangeVersion"}:
                own = event.ByteSize()
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
            if set(fields) <= ledger_keys:
                own = event.ByteSize()
            else:
                ledger_bytes += sum(fields[key].ByteSize() for key in ledger_keys & set(fields))
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            memo = event.workflow_execution_started_event_attributes.memo.fields
            ledger_bytes += memo[LEDGER_MEMO].ByteSize() if LEDGER_MEMO in memo else 0
        if own:
            ledger_events += 1
            ledger_bytes += own
    return {
        "events": dict(events),
        "bytes": size,
        "ledger": {"events": ledger_events, "bytes": ledger_bytes},
    }


def _p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def _setups(
    work: Path,
    names: Sequence[str],
    tasks: int,
    *,
    on_disk: bool = True,
    warmup: int = 10,
    directory: str | None = None,
) -> dict[str, Any]:
    """``names`` (``floor``, ``longtools``) on one dev server, in one process, a task of each in
    turn (the order rotated each time), so the machine's drift hits them alike."""
    buffer = MetricBuffer(100_000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    data = work / (directory or ("disk" if on_disk else "memory"))
    data.mkdir()
    child, address = start_temporal(_TEMPORAL.parent, data, on_disk=on_disk)
    measured: dict[str, list[_Task]] = {name: [] for name in names}
    durations: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in names}
    counts: dict[str, dict[str, int]] = {name: defaultdict(int) for name in names}
    try:
        async with AsyncExitStack() as stack:
            client = await _connect(address, runtime)
            made = {
                "floor": lambda: _floor(client),
                "longtools": lambda: _longtools(address, runtime),
                "floor-api": lambda: _floor(client, eager=False),
                "longtools-api": lambda: _longtools(address, runtime, eager=False),
            }
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
        report.update(await _setups(work, ["floor-api", "longtools-api"], tasks, directory="api"))
        report["floor-in-memory"] = (await _setups(work, ["floor"], tasks, on_disk=False))["floor"]
        (work / "questions").mkdir()
        child, address = start_temporal(_TEMPORAL.parent, work / "questions")
        try:
            questions = await _questions_task(address, Runtime(telemetry=TelemetryConfig()))
        finally:
            child.stop()
        fsyncs = _fsync_ms(work)
    return {
        "tasks": tasks,
        "ms": report,
        "three_questions history": questions,
        "fdatasync 4 KiB p50 ms": _p50(fsyncs),
    }


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
    """The report as Markdown: p50s, RPCs per task and each setup's history, one column per setup;
    then what of a task's history is its ledger (B11)."""
    setups: dict[str, dict[str, Any]] = outcome["ms"]
    lines: list[str] = []

    def table(title: str, rows: dict[str, dict[str, float]], form: str) -> None:
        keys = sorted(
            {key for row in rows.values() for key in row}, key=lambda k: (not k.startswith("task"), k)
        )
        lines.extend([f"| {title} | " + " | ".join(rows) + " |", "|---|" + "---:|" * len(rows)])
        for key in keys:
            cells = " | ".join(format(row.get(key, float("nan")), form) for row in rows.values())
            lines.append(f"| {key} | {cells} |")
        lines.append("")

    table(
        f"p50 ms ({outcome['tasks']} tasks each)",
        {name: setup["ms"] for name, setup in setups.items()},
        ".2f",
    )
    table("RPCs per task", {name: setup["rpcs per task"] for name, setup in setups.items()}, ".2f")
    histories = {name: setup["history"] for name, setup in setups.items()}
    histories["three_questions"] = outcome["three_questions history"]
    table(
        "one task's history: events, bytes",
        {name: {**history["events"], "bytes": history["bytes"]} for name, history in histories.items()},
        ".0f",
    )
    lines.extend(
        [
            "| B11: the ledger's share of one task's history | events | of all | bytes | of all |",
            "|---|---:|---:|---:|---:|",
        ]
    )
    for name in ("longtools", "longtools-api", "three_questions"):
        history = histories[name]
        ledger = history["ledger"]
        lines.append(
            f"| {name} | {ledger['events']} | {sum(history['events'].values())} | {ledger['bytes']:,} "
            f"| {history['bytes']:,} |"
        )
    lines.append(f"\nfdatasync of a 4 KiB append, p50: {outcome['fdatasync 4 KiB p50 ms']:.2f} ms")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
