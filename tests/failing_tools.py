"""A long tool whose activity fails (``--tools tests.failing_tools``), for ``longtools task show``.

``deploy`` asks which environment, then runs one activity that fails for good with a message
that only the (encrypted) history holds.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Settings
    from longtools.workflows import ask_form

FAILURE = "disk quota exceeded on build-7"


class Deploy(BaseModel):
    service: str


class Target(BaseModel):
    environment: str


@activity.defn(name="tests.push_release")
async def push_release(where: str) -> str:
    raise ApplicationError(f"{FAILURE} ({where})", type="QuotaExceeded")


@workflow.defn(name="tests.deploy")
class FailingDeploy:
    @workflow.run
    async def run(self, args: Deploy) -> str:
        answer = await ask_form(f"Deploy {args.service} where?", Target)
        where = answer.content.environment if answer.content is not None else "nowhere"
        return await workflow.execute_activity(
            push_release,
            f"{args.service} to {where}",
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=100)),
        )


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool("deploy", workflow=FailingDeploy, input=Deploy)
    registry.add_activities(push_release)
