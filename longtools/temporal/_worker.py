"""The worker: runs the registry's workflows and activities on the task queue. Worker process."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Interceptor, Worker

from longtools._settings import Settings
from longtools.activities._ending import terminate_cancelled
from longtools.decisions import Signer, signing_activity
from longtools.notify import Notifier
from longtools.people import Directory
from longtools.temporal._outcomes import ActivityOutcomes
from longtools.tools import Registry
from longtools.workflows._ask import CarryConversation
from longtools.workflows._ledger import RecordLedger
from longtools.workflows._metrics import TaskMetricsInterceptor
from longtools.workflows._notify import TellEnd
from longtools.workflows.notify import NotifyWorkflow
from longtools.workflows.people import PersonRecord


def build_worker(settings: Settings, client: Client, registry: Registry) -> Worker:
    """The worker for every long tool in ``registry`` (their workflows and activities) and for
    longtools' own run-once records, which a deployment of quick tools only needs too.

    Its workflows record task metrics through ``client``'s runtime (see ``connect``).
    """
    signer = Signer.of(settings)
    interceptors = task_interceptors(signer)
    # Ours too: a task cancelled that does not stop is terminated (longtools/workflows/_ending.py),
    # every task's ledger is signed (longtools/decisions), and people are told (longtools/notify), at
    # the address the settings give or the one they signed in with (longtools/people).
    notifier = Notifier(settings, Directory(settings, lambda: client))
    activities: list[Callable[..., Any]] = [
        *registry.activities,
        terminate_cancelled,
        signing_activity(signer),
        notifier.plan,
        notifier.send,
    ]
    workflows = [*registry.workflows, NotifyWorkflow, PersonRecord]
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=workflows,
        activities=activities,
        # Given, not left to the SDK: its default hashes the bytecode of every module loaded, and
        # with no .pyc files (PYTHONDONTWRITEBYTECODE, a fresh install) that compiles ~1,000 modules
        # again, 2 s of a 2-core machine's start (bench/README.md, "serve start").
        build_id=build_id([*workflows, *activities, *map(type, interceptors)]),
        interceptors=interceptors,
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


def task_interceptors(signer: Signer | None = None) -> list[Interceptor]:
    """What every longtools worker runs its tasks with, and a replay of their histories must too:
    metrics, a conversation that survives continue-as-new, the end told (once the ledger has it),
    the ledger (signed by ``signer``; a replay's needs none), activity outcomes."""
    return [
        TaskMetricsInterceptor(),
        CarryConversation(),
        TellEnd(),
        RecordLedger(signer),
        ActivityOutcomes(),
    ]


def build_id(code: Iterable[object]) -> str:
    """What names the code this worker runs (Temporal records it on each workflow task it completes).

    A hash of the Python version and of the source files that define ``code`` (the workflows,
    activities and interceptors: the tool modules and longtools' own): it changes when that code
    does, as the SDK's default would, for a few file reads instead of compiling every loaded module.
    """
    digest = hashlib.sha256(sys.version.encode())
    files: set[str] = set()
    for item in code:
        module = sys.modules.get(getattr(item, "__module__", "") or "")
        source = getattr(module, "__file__", None)
        if source:
            files.add(source)
    for path in sorted(files):
        digest.update(path.encode())
        try:
            with open(path, "rb") as source_file:
                digest.update(source_file.read())
        except OSError:
            pass  # a module loaded from a zip or gone since: its name still counts
    return f"longtools-{digest.hexdigest()[:32]}"
