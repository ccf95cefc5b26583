"""B5's tool module (``--tools bench.servers.longtools_parked``): a long tool that parks at once.

``park`` is a workflow that asks one form question with ``ask_form`` as its first step and then
waits for the answer: its task sits in ``input_required`` until answered, cancelled, or its TTL
runs out. It needs no activity. B5 creates thousands of them and measures what the parked tasks
cost (memory of the API, the worker and Temporal) and how fast ``tasks/get`` reads one.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Settings
    from longtools.workflows import ask_form


class ParkInput(BaseModel):
    pass


class GoOn(BaseModel):
    go: bool = Field(description="Go on?")


class ParkOutput(BaseModel):
    answered: bool


@workflow.defn(name="bench.park")
class Park:
    """A long tool that asks one question at once and waits for the answer."""

    @workflow.run
    async def run(self, args: ParkInput) -> ParkOutput:
        answer = await ask_form("Go on?", GoOn)
        return ParkOutput(answered=answer.content is not None and answer.content.go)


def register(registry: Registry, settings: Settings) -> None:
    del settings
    registry.long_tool("park", workflow=Park, input=ParkInput, output=ParkOutput, task_support="required")
