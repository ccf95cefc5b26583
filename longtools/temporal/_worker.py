"""The worker: runs the registry's workflows and activities on the task queue. Worker process."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from longtools._settings import Settings
from longtools.activities._ending import terminate_cancelled
from longtools.temporal._outcomes import ActivityOutcomes
from longtools.tools import Registry
from longtools.workflows._ask import CarryConversation
from longtools.workflows._metrics import TaskMetricsInterceptor


def build_worker(settings: Settings, client: Client, registry: Registry) -> Worker:
    """The worker for every long tool in ``registry`` (their workflows and activities) and for
    longtools' own run-once records, which a deployment of quick tools only needs too.

    Its workflows record task metrics through ``client``'s runtime (see ``connect``).
    """
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=registry.workflows,
        # Ours too: a task cancelled that does not stop is terminated (longtools/workflows/_ending.py).
        activities=[*registry.activities, terminate_cancelled],
        interceptors=[TaskMetricsInterceptor(), CarryConversation(), ActivityOutcomes()],
        # A task waiting for a person's answer need not stay in memory: past this many, the least
        # recently run is dropped and replayed from its history when it runs again.
        max_cached_workflows=settings.worker_cached_tasks,
        # On stop, running activities get this long to finish before they are cancelled (and then
        # retried on another worker): a step half-done is worse than a shutdown that waits.
        graceful_shutdown_timeout=timedelta(seconds=settings.worker_shutdown_s),
        # A heartbeat carries an activity's report() to the API (docs/writing-tools.md): at most one
        # a second reaches Temporal, not the SDK's default one per 30-60 s, so progress is current.
        default_heartbeat_throttle_interval=timedelta(seconds=1),
        max_heartbeat_throttle_interval=timedelta(seconds=1),
        # A bug in workflow code (any exception but ToolError/ProtocolError) is left to Temporal's
        # default: the workflow task retries until fixed code is deployed, and the task continues
        # where it was. Failing it instead would lose every task in flight on a bad deploy.
    )
