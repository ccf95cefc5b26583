"""The long tool of the chaos test (``--tools tests.chaos_tools``): one question, one side effect.

``chaos_job`` works a moment, asks whether to go on, then runs an activity that appends its label to
``<data-dir>/chaos-effects.txt`` once, however often Temporal runs the activity (a worker killed
mid-activity, a lost completion); every attempt is written to ``chaos-attempts.txt`` too, so the
test can count the retries its kills caused.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

# The worker re-imports this module in its workflow sandbox: the service package is passed through.
with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Settings
    from longtools.workflows import ToolError, ask_form, report

EFFECTS = "chaos-effects.txt"
ATTEMPTS = "chaos-attempts.txt"
_LOCK = "chaos-effects.lock"


class Job(BaseModel):
    label: str
    work_s: float = 1.0


class Go(BaseModel):
    go: bool


@workflow.defn(name="tests.chaos_job")
class ChaosJob:
    """Works, asks whether to go on, records its side effect once, works again."""

    @workflow.run
    async def run(self, args: Job) -> str:
        report("Preparing")
        # Timers, so that a kill lands on a task between its steps as well as inside one.
        await workflow.sleep(args.work_s)
        answer = await ask_form(f"Go on with {args.label}?", Go)
        if answer.content is None or not answer.content.go:
            raise ToolError(f"Not done: {args.label}")
        report("Recording")
        await workflow.execute_activity(
            "tests.chaos_record",
            args.label,
            start_to_close_timeout=timedelta(seconds=30),
            # A worker killed mid-activity is noticed by the missed heartbeat, not the 30 s bound.
            heartbeat_timeout=timedelta(seconds=2),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=1)
            ),
        )
        report("Finishing")
        await workflow.sleep(args.work_s)
        return f"done {args.label}"


class Effects:
    """The activity side: the side effect, idempotent by its operation id (the label)."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir

    @activity.defn(name="tests.chaos_record")
    async def record(self, label: str) -> bool:
        """Whether this attempt did the side effect (False: an earlier attempt already had)."""
        attempt = activity.info().attempt
        _append(self._data_dir / ATTEMPTS, f"{label} {attempt}")
        done = _once(self._data_dir, label)
        # Work after the effect: a worker killed now leaves the effect done and the activity not,
        # which is what the operation id must make harmless.
        for _ in range(5):
            activity.heartbeat()
            await asyncio.sleep(0.1)
        return done


def _append(path: Path, line: str) -> None:
    with path.open("a") as out:
        out.write(line + "\n")


def _once(data_dir: Path, label: str) -> bool:
    """Append ``label`` unless it is there: under a lock, since two workers may run the same
    operation at once (an attempt whose worker Temporal gave up on, and its retry), and fsynced,
    since a kill must not lose an effect that a later attempt would then redo."""
    with (data_dir / _LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        effects = data_dir / EFFECTS
        if label in (effects.read_text().splitlines() if effects.exists() else []):
            return False
        with effects.open("a") as out:
            out.write(label + "\n")
            out.flush()
            os.fsync(out.fileno())
        return True


def effects(data_dir: Path) -> list[str]:
    """The side effects done, one label a line, in order."""
    path = data_dir / EFFECTS
    return path.read_text().splitlines() if path.exists() else []


def attempts(data_dir: Path) -> list[str]:
    """Every attempt of the recording activity, as ``<label> <attempt>``."""
    path = data_dir / ATTEMPTS
    return path.read_text().splitlines() if path.exists() else []


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool("chaos_job", workflow=ChaosJob, input=Job, task_support="optional")
    registry.add_activities(Effects(settings.data_dir).record)
