"""Metrics: the API's counters, and the task metrics workers record through Temporal's runtime.

The worker cases run for real: a Temporal dev server started by this module (and stopped by it),
a client connected with ``Metrics().runtime()`` and the production ``build_worker``. Tasks are
started with the memo the API sets (the tool's name), so they count as in production; one
workflow without that memo stands for an internal workflow, which is not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowHistory
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import Replayer

from longtools._metrics import Metrics, MrtrOutcome
from longtools._settings import Settings
from longtools.temporal import build_worker, connect, data_converter, start_dev_server, task_interceptors
from longtools.tools import Registry, Tool
from longtools.workflows import ANSWER_SIGNAL, PROTOCOL_ERROR, TASK_MEMO, TOOL_ERROR
from longtools.workflows._metrics import TASKS_FINISHED, TOOL_MEMO
from tests.conftest import PAYLOAD_KEY
from tests.metric_flows import AskInput, FlowInput, MetricAsk, MetricFlow

FLOW = "metrics.flow"
ASK = "metrics.ask"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _registry() -> Registry:
    registry = Registry()
    registry.long_tool(FLOW, workflow=MetricFlow, input=FlowInput)
    registry.long_tool(ASK, workflow=MetricAsk, input=AskInput)
    return registry


def _samples(metrics: Metrics) -> Samples:
    """Every sample ``render()`` shows, by name and labels."""
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _named(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: value for (sample, labels), value in samples.items() if sample == name}


async def _eventually(ready: Callable[[], Awaitable[bool]], within: float = 20) -> None:
    """Poll until ``ready()``, bounded: the state lives in Temporal or in a buffer, with no event."""
    async with asyncio.timeout(within):
        while True:
            if await ready():
                return
            await asyncio.sleep(0.05)


@dataclass
class Ran:
    metrics: Metrics
    registry: Registry
    outcomes: dict[str, str]
    histories: dict[str, WorkflowHistory]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ran(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Ran]:
    """Every ending once, on a real worker, with ``drain_forever`` running as a worker process would."""
    dev = await start_dev_server(tmp_path_factory.mktemp("metrics") / "temporal.db")
    try:
        metrics = Metrics()
        settings = Settings(
            temporal_address=dev.address, task_queue=f"tq-{uuid.uuid4()}", payload_keys=PAYLOAD_KEY
        )
        client = await connect(settings, runtime=metrics.runtime())
        registry = _registry()
        drainer = asyncio.create_task(metrics.drain_forever(interval_s=0.05))
        try:
            async with build_worker(settings, client, registry):
                outcomes, histories = await _run_every_ending(client, settings, registry)
            await _eventually(lambda: _drained(metrics))
        finally:
            drainer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drainer
        yield Ran(metrics=metrics, registry=registry, outcomes=outcomes, histories=histories)
    finally:
        dev.stop()


async def _drained(metrics: Metrics) -> bool:
    """Whether drain_forever has moved every update the runs made (read without render's own drain)."""

    def value(name: str, **labels: str) -> float:
        return metrics.registry.get_sample_value(name, labels) or 0.0

    finished = [(FLOW, "completed"), (FLOW, "failed"), (FLOW, "cancelled"), (ASK, "completed")]
    return (
        sum(value("longtools_tasks_finished_total", tool=tool, status=status) for tool, status in finished)
        >= 5
        and value("longtools_task_first_input_seconds_count", tool=ASK) >= 1
        and value("longtools_workflow_task_failures_total") >= 1
    )


async def _start(
    client: Client, settings: Settings, tool: Tool, args: BaseModel, *, memo: bool = True
) -> WorkflowHandle[Any, Any]:
    """Start ``tool``'s workflow with the memo key the API sets (``Tasks.start``)."""
    return await client.start_workflow(
        tool.workflow_name,
        args,
        id=f"metrics-{uuid.uuid4()}",
        task_queue=settings.task_queue,
        memo={TOOL_MEMO: tool.name} if memo else None,
    )


async def _run_every_ending(
    client: Client, settings: Settings, registry: Registry
) -> tuple[dict[str, str], dict[str, WorkflowHistory]]:
    flow, asking = registry.tools[FLOW], registry.tools[ASK]
    handles = {
        "complete": await _start(client, settings, flow, FlowInput(ending="complete")),
        "tool_error": await _start(client, settings, flow, FlowInput(ending="tool_error")),
        "protocol_error": await _start(client, settings, flow, FlowInput(ending="protocol_error")),
        "cancelled": await _start(client, settings, flow, FlowInput(ending="wait")),
        "internal": await _start(client, settings, flow, FlowInput(ending="complete"), memo=False),
        "ask": await _start(client, settings, asking, AskInput()),
    }
    bug = await _start(client, settings, flow, FlowInput(ending="bug"))
    await handles["cancelled"].cancel()

    async def asked() -> bool:
        published = (await (await handles["ask"].describe()).memo()).get(TASK_MEMO) or {}
        return "input" in published.get("input_requests", {})

    await _eventually(asked)
    await handles["ask"].signal(ANSWER_SIGNAL, {"input": {"action": "accept", "content": {"go": True}}})

    async def bug_failed_a_workflow_task() -> bool:
        events = (await bug.fetch_history()).events
        return any(event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for event in events)

    await _eventually(bug_failed_a_workflow_task)
    await bug.terminate("the test is over")  # it would retry its workflow task forever
    async with asyncio.timeout(30):
        outcomes = {name: await _outcome(handle) for name, handle in handles.items()}
    return outcomes, {name: await handle.fetch_history() for name, handle in handles.items()}


async def _outcome(handle: WorkflowHandle[Any, Any]) -> str:
    try:
        return str(await handle.result())
    except WorkflowFailureError as exc:
        if isinstance(exc.cause, CancelledError):
            return "cancelled"
        if isinstance(exc.cause, ApplicationError) and exc.cause.type:
            return exc.cause.type
        raise


async def test_every_flow_ended_as_designed(ran: Ran) -> None:
    """Ours: the premise of the cases below."""
    assert ran.outcomes == {
        "complete": "done",
        "tool_error": TOOL_ERROR,
        "protocol_error": PROTOCOL_ERROR,
        "cancelled": "cancelled",
        "internal": "done",
        "ask": "accept",
    }


async def test_each_task_end_is_counted_once_by_tool_and_status_as_tasks_get_reports_it(ran: Ran) -> None:
    """Ours: a ToolError is a completed task; a protocol error failed; an internal workflow (no tool
    memo), a workflow task failing from a bug (retried by Temporal) and a termination count nothing."""
    samples = _samples(ran.metrics)
    body, _ = ran.metrics.render()
    assert b'\nlongtools_tasks_finished_total{status="completed",tool="metrics.flow"} 2.0\n' in body
    assert _named(samples, "longtools_tasks_finished_total") == {
        frozenset({("tool", FLOW), ("status", "completed")}): 2.0,
        frozenset({("tool", FLOW), ("status", "failed")}): 1.0,
        frozenset({("tool", FLOW), ("status", "cancelled")}): 1.0,
        frozenset({("tool", ASK), ("status", "completed")}): 1.0,
    }
    # The SDK's own count of failed workflow task attempts: how a bug like that shows.
    assert (_value(samples, "longtools_workflow_task_failures_total") or 0) >= 1


async def test_each_task_end_observes_its_duration_in_seconds(ran: Ran) -> None:
    samples = _samples(ran.metrics)
    counts = _named(samples, "longtools_task_duration_seconds_count")
    assert counts == {
        frozenset({("tool", FLOW), ("status", "completed")}): 2.0,
        frozenset({("tool", FLOW), ("status", "failed")}): 1.0,
        frozenset({("tool", FLOW), ("status", "cancelled")}): 1.0,
        frozenset({("tool", ASK), ("status", "completed")}): 1.0,
    }
    # Seconds, not milliseconds: every run here took well under a minute of workflow time.
    total = _value(samples, "longtools_task_duration_seconds_sum", tool=FLOW, status="completed")
    assert total is not None and 0 <= total < 60
    within_a_minute = _value(
        samples, "longtools_task_duration_seconds_bucket", tool=FLOW, status="completed", le="60.0"
    )
    assert within_a_minute == 2.0


async def test_the_first_question_of_a_task_observes_the_time_to_it(ran: Ran) -> None:
    samples = _samples(ran.metrics)
    assert _named(samples, "longtools_task_first_input_seconds_count") == {frozenset({("tool", ASK)}): 1.0}
    waited = _value(samples, "longtools_task_first_input_seconds_sum", tool=ASK)
    assert waited is not None and 0 <= waited < 60


async def test_replaying_each_history_with_the_interceptor_succeeds_and_records_nothing(ran: Ran) -> None:
    """Ours: workflow.metric_meter() is replay-safe, so a worker restart or eviction never counts twice."""
    fresh = Metrics()
    runtime = fresh.runtime()
    assert fresh.runtime() is runtime
    replayer = Replayer(
        workflows=ran.registry.workflows,
        interceptors=task_interceptors(),  # as the worker that ran them
        data_converter=data_converter(Settings(payload_keys=PAYLOAD_KEY)),  # the histories are encrypted
        runtime=runtime,
    )
    for history in ran.histories.values():
        await replayer.replay_workflow(history)  # raises on any nondeterminism
    fresh.drain()
    samples = _samples(fresh)
    for name in (
        "longtools_tasks_finished_total",
        "longtools_task_duration_seconds_count",
        "longtools_task_first_input_seconds_count",
    ):
        assert _named(samples, name) == {}, name
    # The same runtime's meter does reach the registry, so the silence above is not a dead wire.
    runtime.metric_meter.create_counter(TASKS_FINISHED).add(1, {"tool": FLOW, "status": "failed"})
    assert fresh.drain() == 1
    assert _named(_samples(fresh), "longtools_tasks_finished_total") == {
        frozenset({("tool", FLOW), ("status", "failed")}): 1.0
    }


def test_api_counters_move_when_called_with_bounded_labels() -> None:
    metrics = Metrics()
    rounds: list[MrtrOutcome] = [
        "started",
        "input_required",
        "input_required",
        "completed",
        "expired",
        "rejected",
    ]
    for outcome in rounds:
        metrics.mrtr("greet", outcome)
    metrics.task_created("greet")
    metrics.request("tools/call", "ok")
    metrics.request("made/up", "error")
    metrics.mrtr("x" * 100, "started")
    samples = _samples(metrics)
    assert _named(samples, "longtools_mrtr_rounds_total") == {
        frozenset({("tool", "greet"), ("outcome", "started")}): 1.0,
        frozenset({("tool", "greet"), ("outcome", "input_required")}): 2.0,
        frozenset({("tool", "greet"), ("outcome", "completed")}): 1.0,
        frozenset({("tool", "greet"), ("outcome", "expired")}): 1.0,
        frozenset({("tool", "greet"), ("outcome", "rejected")}): 1.0,
        frozenset({("tool", "x" * 64), ("outcome", "started")}): 1.0,
    }
    assert _named(samples, "longtools_tasks_created_total") == {frozenset({("tool", "greet")}): 1.0}
    assert _named(samples, "longtools_requests_total") == {
        frozenset({("era", "2026"), ("method", "tools/call"), ("outcome", "ok")}): 1.0,
        frozenset({("era", "2026"), ("method", "other"), ("outcome", "error")}): 1.0,
    }


def test_each_metrics_has_its_own_registry_and_drains_nothing_before_its_runtime_exists() -> None:
    """Ours: many apps in one process (the tests) must not clash on a global registry."""
    one, two = Metrics(), Metrics()
    one.task_created("greet")
    assert two.drain() == 0
    assert _named(_samples(two), "longtools_tasks_created_total") == {}
    assert _named(_samples(one), "longtools_tasks_created_total") == {frozenset({("tool", "greet")}): 1.0}
