"""Tools that fail with a caller's value in the failure, loaded by the log tests (``--tools``).

Every way a value can ride on an exception into a log line: a quick tool that raises with its
argument in the message (chained from a ``KeyError`` naming ``KEY_CANARY``), a quick tool whose
result fails its output model (pydantic puts ``input_value=...`` in the error), an activity that
raises with its argument (the Temporal worker logs it through the stdlib), and a workflow whose
code raises (a workflow-task failure, logged the same way).

``bad_result`` validates its result itself: a quick tool returns a model, and only a mapping (a long
tool's JSON result) is validated by longtools; either way the ValidationError carries the input.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

# The worker re-imports this module in its workflow sandbox: the service package is passed through.
with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Round, Settings, ToolReturn

KEY_CANARY = "canary-missing-key-5d1e0b"


class TextInput(BaseModel):
    text: str


class Count(BaseModel):
    count: int


@activity.defn(name="tests.leaky_activity")
async def leaky_activity(text: str) -> None:
    raise ValueError(f"the backend refused {text}")


@workflow.defn(name="tests.failing_activity_job")
class FailingActivityJob:
    @workflow.run
    async def run(self, args: TextInput) -> str:
        await workflow.execute_activity(
            leaky_activity,
            args.text,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        return "never"


@workflow.defn(name="tests.crashing_workflow")
class CrashingWorkflow:
    @workflow.run
    async def run(self, args: TextInput) -> str:
        # Not an ApplicationError: the workflow task fails (and is retried), as a bug would make it.
        raise ValueError(f"the workflow choked on {args.text}")


def _lookup(key: str) -> str:
    raise KeyError(key)


def register(registry: Registry, settings: Settings) -> None:
    @registry.tool("crash", input=TextInput)
    async def crash(args: TextInput, rnd: Round) -> ToolReturn:
        """Fails with its argument in the message."""
        try:
            return _lookup(KEY_CANARY)
        except KeyError as exc:
            raise ValueError(f"cannot handle {args.text}") from exc

    @registry.tool("bad_result", input=TextInput, output=Count)
    async def bad_result(args: TextInput, rnd: Round) -> ToolReturn:
        """Builds its result from a value its output model refuses."""
        return Count.model_validate({"count": args.text})

    registry.long_tool("failing_activity_job", workflow=FailingActivityJob, input=TextInput)
    registry.long_tool("crashing_workflow", workflow=CrashingWorkflow, input=TextInput)
    registry.add_activities(leaky_activity)
