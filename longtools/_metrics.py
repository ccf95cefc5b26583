"""Prometheus metrics of the API and of the workers, labelled by tool and outcome. API and worker processes.

One `Metrics` per process owns its own ``CollectorRegistry`` (no global one, nothing at import
time), so several apps in one test process do not clash. The API counts what it sees directly
(`mrtr`, `task_created`, `request`). Task ends and times are recorded by workflow code on the
worker (``longtools/workflows/_metrics.py``) through Temporal's metric meter: `runtime` is the Temporal
``Runtime`` whose metrics go to a ``MetricBuffer``, and `drain` moves the buffered updates into
this registry. A process that connects a client with `runtime` must keep draining it
(`drain_forever`): a full buffer drops updates.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Final, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from temporalio.common import MetricAttributes
from temporalio.runtime import (
    MetricBuffer,
    MetricBufferDurationFormat,
    Runtime,
    TelemetryConfig,
)

from longtools.notify import NOTIFICATIONS
from longtools.workflows._metrics import FIRST_INPUT, TASK_DURATION, TASKS_FINISHED

__all__ = ["DURATION_BUCKETS", "Metrics", "MrtrOutcome"]

MrtrOutcome = Literal["started", "input_required", "completed", "expired", "rejected"]
"""One round of an MRTR exchange: ``started`` (its first round), ``input_required`` (answered with
an InputRequiredResult), ``completed`` (ended with a result), ``expired`` (requestState refused as
expired, invalid or used), ``rejected`` (answers or state refused for any other reason)."""

DURATION_BUCKETS: Final = (
    0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0,
    7200.0, 14_400.0, 28_800.0, 86_400.0, 259_200.0, 604_800.0,
)  # fmt: skip
"""Seconds, from a quick task to the longest task TTL worth telling apart (a week)."""

BUFFER_SIZE: Final = 100_000
"""Updates the Temporal buffer holds between drains; the SDK alone sends a few per poll and task."""

_METHODS: Final = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "subscriptions/listen",
        "completion/complete",
        "logging/setLevel",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "tasks/list",
        "tasks/result",
        "notifications/initialized",
        "notifications/cancelled",
    }
)
_MRTR_OUTCOMES: Final = frozenset({"started", "input_required", "completed", "expired", "rejected"})
_TASK_STATUSES: Final = frozenset({"completed", "failed", "cancelled"})
_LABEL_MAX = 64
# Two of the SDK's own metrics worth a look, without labels: a workflow task failing is a bug in
# workflow code that Temporal retries forever (the task looks stuck), activity failures an outage.
_SDK_WORKFLOW_TASK_FAILED = "temporal_workflow_task_execution_failed"
_SDK_ACTIVITY_FAILED = "temporal_activity_execution_failed"


class Metrics:
    """A process's metrics: its own registry, the API's counters and the workers' task metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._mrtr_rounds = Counter(
            "longtools_mrtr_rounds",
            "MRTR rounds by outcome",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.held_rounds = Gauge(
            "longtools_mrtr_held_rounds",
            "Requests this process holds open while a task works: MRTR rounds, 2025-era calls and "
            "tasks/result waiting for an answer, task tool waits, paced polls (bounded by "
            "max_held_rounds)",
            registry=self.registry,
        )
        self.watches = Gauge(
            "longtools_watches",
            "Workflows this process follows with a history long poll in Temporal (one long poll each)",
            registry=self.registry,
        )
        self.listen_streams = Gauge(
            "longtools_listen_streams",
            "subscriptions/listen streams this process holds open (bounded per principal by "
            "max_listens_per_principal)",
            registry=self.registry,
        )
        self._tasks_created = Counter(
            "longtools_tasks_created", "Tasks started by the API", ["tool"], registry=self.registry
        )
        self._requests = Counter(
            "longtools_requests",
            "MCP requests by protocol era (2026 or 2025), method and outcome",
            ["era", "method", "outcome"],
            registry=self.registry,
        )
        self._request_children: dict[tuple[str, str, str], Counter] = {}
        self._mrtr_children: dict[tuple[str, str], Counter] = {}
        self._tasks_finished = Counter(
            TASKS_FINISHED,
            "Tasks that ended (recorded by workers), by status as tasks/get reports it",
            ["tool", "status"],
            registry=self.registry,
        )
        self._task_duration = Histogram(
            TASK_DURATION,
            "Seconds from a task's start to its end (recorded by workers)",
            ["tool", "status"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self._first_input = Histogram(
            FIRST_INPUT,
            "Seconds from a task's start to its first input request (recorded by workers)",
            ["tool"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self._workflow_task_failures = Counter(
            "longtools_workflow_task_failures",
            "Workflow task attempts that failed (a bug in workflow code; Temporal retries them)",
            registry=self.registry,
        )
        self._activity_failures = Counter(
            "longtools_activity_failures",
            "Activity attempts that failed (retried or not)",
            registry=self.registry,
        )
        self._notifications = Counter(
            NOTIFICATIONS,
            "Notifications by channel (email, apprise, webhook) and outcome: sent, error (a try that "
            "failed and is tried again), failed (given up)",
            ["channel", "outcome"],
            registry=self.registry,
        )
        self._buffer: MetricBuffer | None = None
        self._runtime: Runtime | None = None
        self._lock = threading.Lock()  # render() may run in a scrape thread while drain_forever runs
        self._apply: Mapping[str, Callable[[float, MetricAttributes], None]] = {
            TASKS_FINISHED: self._finished,
            TASK_DURATION: self._duration,
            FIRST_INPUT: self._asked,
            NOTIFICATIONS: self._notified,
            _SDK_WORKFLOW_TASK_FAILED: lambda value, _: _inc(self._workflow_task_failures, value),
            _SDK_ACTIVITY_FAILED: lambda value, _: _inc(self._activity_failures, value),
        }

    def mrtr(self, tool: str, outcome: MrtrOutcome) -> None:
        """Count one round of an MRTR exchange of ``tool`` (a registered tool name)."""
        key = (_clamp(tool), outcome if outcome in _MRTR_OUTCOMES else "rejected")
        child = self._mrtr_children.get(key)
        if child is None:  # as in `request`: labels() once per key
            child = self._mrtr_children[key] = self._mrtr_rounds.labels(tool=key[0], outcome=key[1])
        child.inc()

    def task_created(self, tool: str) -> None:
        """Count a task the API started (once its workflow start is durable)."""
        self._tasks_created.labels(tool=_clamp(tool)).inc()

    def request(self, method: str, outcome: str, era: Literal["2026", "2025"] = "2026") -> None:
        """Count one MCP request; a method outside the protocol's own counts as ``other``."""
        key = (era, method if method in _METHODS else "other", _clamp(outcome))
        child = self._request_children.get(key)
        if child is None:  # labels() locks and validates: 4% of a plain tools/call, so once per key
            child = self._request_children[key] = self._requests.labels(
                era=key[0], method=key[1], outcome=key[2]
            )
        child.inc()

    def runtime(self) -> Runtime:
        """The Temporal runtime to connect clients with (made on first call, then the same one).

        Its metrics go to a buffer that only `drain` empties; whoever calls this must keep
        `drain_forever` running in the same process.
        """
        with self._lock:
            if self._runtime is None:
                buffer = MetricBuffer(BUFFER_SIZE, duration_format=MetricBufferDurationFormat.SECONDS)
                self._runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
                self._buffer = buffer
            return self._runtime

    def drain(self) -> int:
        """Move the runtime's buffered metric updates into the registry once; returns how many came.

        Counters arrive as deltas, histograms as single observations (durations as float seconds);
        attributes other than ``tool`` and ``status`` (namespace, task queue, workflow type) are
        dropped. The SDK's own updates are ignored except the two failure counters above.
        """
        with self._lock:
            if self._buffer is None:
                return 0
            updates = self._buffer.retrieve_updates()
            for update in updates:
                apply = self._apply.get(update.metric.name)
                if apply is not None:
                    apply(float(update.value), update.attributes)
            return len(updates)

    async def drain_forever(self, interval_s: float = 1.0) -> None:
        """`drain` every ``interval_s`` seconds until cancelled, and once more on the way out."""
        try:
            while True:
                self.drain()
                await asyncio.sleep(interval_s)
        finally:
            self.drain()

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its content type, after a fresh `drain`."""
        self.drain()
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def _finished(self, value: float, attributes: MetricAttributes) -> None:
        labels = self._task_labels(attributes)
        if labels is not None:
            _inc(self._tasks_finished.labels(*labels), value)

    def _duration(self, value: float, attributes: MetricAttributes) -> None:
        labels = self._task_labels(attributes)
        if labels is not None:
            self._task_duration.labels(*labels).observe(value)

    def _asked(self, value: float, attributes: MetricAttributes) -> None:
        tool = attributes.get("tool")
        if isinstance(tool, str):
            self._first_input.labels(tool=_clamp(tool)).observe(value)

    def _notified(self, value: float, attributes: MetricAttributes) -> None:
        channel, outcome = attributes.get("channel"), attributes.get("outcome")
        if channel in _CHANNELS and outcome in _NOTIFY_OUTCOMES:
            _inc(self._notifications.labels(channel=str(channel), outcome=str(outcome)), value)

    @staticmethod
    def _task_labels(attributes: MetricAttributes) -> tuple[str, str] | None:
        tool, status = attributes.get("tool"), attributes.get("status")
        if not isinstance(tool, str) or status not in _TASK_STATUSES:
            return None
        return _clamp(tool), str(status)


_CHANNELS: Final = frozenset({"email", "apprise", "webhook"})
_NOTIFY_OUTCOMES: Final = frozenset({"sent", "error", "failed"})


def _inc(counter: Counter, delta: float) -> None:
    if delta > 0:  # a Counter refuses negative steps; a buffered counter delta never is one
        counter.inc(delta)


def _clamp(value: str) -> str:
    return value[:_LABEL_MAX]
