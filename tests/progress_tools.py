"""Tools that report how far they are, ask picky questions and say no in an activity
(``--tools tests.progress_tools``).

``counts`` reports numbers from its workflow (1/4, 2/4), optionally asks whether to go on, reports
a message without numbers, then runs ``tests.build``, an activity that reports 1/2 and 2/2 from its
heartbeat, each after the file ``gate`` (then ``gate.2``) exists, so a test sees each in turn.
``stepped`` is the one progress of a task made of steps: its workflow reports k of 3 steps done,
and each step's activity (``tests.stage``) reports 5 and then 10 of 10 parts, each once the file
``{gate}.{step}.{part}`` exists, and ends once ``{gate}.{step}.end`` does. ``two_in_a_step`` runs
two such activities (gated as steps 1 and 2) in its first of 2 steps, reporting nothing between.
``picky`` asks for a weekday, which only the model's own rule checks. ``refuses`` ends in a
ToolError raised by its activity.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, Field, field_validator
from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Settings, ToolError, ask_form, report

_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri")


class CountsInput(BaseModel):
    ask: bool = False
    gate: str | None = None


class GoOn(BaseModel):
    go: bool = Field(description="Go on?")


class Day(BaseModel):
    day: str = Field(description="A day, as mon..sun")

    @field_validator("day")
    @classmethod
    def _weekday(cls, value: str) -> str:
        if value not in _WEEKDAYS:
            raise ValueError("must be a weekday, mon to fri")
        return value


class Nothing(BaseModel):
    pass


class SteppedInput(BaseModel):
    gate: str


class StageInput(BaseModel):
    gate: str
    step: int


STEPS = 3
PARTS = (5, 10)
"""What each step's activity reports, of 10 parts."""


async def _until(path: Path) -> None:
    """Until the test creates ``path``: another process's doing, so there is nothing to wait on."""
    for _ in range(1200):  # a minute at most
        if path.exists():  # noqa: ASYNC240 - a stat, in a test tool
            return
        await asyncio.sleep(0.05)


@activity.defn(name="tests.build")
async def build(gate: str) -> None:
    report("Building", progress=1, total=2)
    await _until(Path(gate))
    report("Building", progress=2, total=2)
    await _until(Path(f"{gate}.2"))


@activity.defn(name="tests.stage")
async def stage(args: StageInput) -> None:
    for part in PARTS:
        await _until(Path(f"{args.gate}.{args.step}.{part}"))
        report(f"Copying part {part} of 10", progress=part, total=10)
    await _until(Path(f"{args.gate}.{args.step}.end"))


@activity.defn(name="tests.refuse")
async def refuse() -> None:
    raise ToolError("No such ticket")


@workflow.defn(name="tests.counts")
class Counts:
    @workflow.run
    async def run(self, args: CountsInput) -> str:
        report("Copying", progress=1, total=4)
        await workflow.sleep(timedelta(milliseconds=200))
        report("Copying", progress=2, total=4)
        if args.ask:
            await ask_form("Go on?", GoOn)
        report("Checking")
        await workflow.sleep(timedelta(milliseconds=200))
        if args.gate is not None:
            await workflow.execute_activity(build, args.gate, start_to_close_timeout=timedelta(seconds=60))
        report("Done", progress=4, total=4)
        return "counted"


@workflow.defn(name="tests.stepped")
class Stepped:
    @workflow.run
    async def run(self, args: SteppedInput) -> str:
        for done in range(STEPS):
            report(f"Step {done + 1} of {STEPS}", progress=done, total=STEPS)  # `done` steps are done
            await workflow.execute_activity(
                stage, StageInput(gate=args.gate, step=done + 1), start_to_close_timeout=timedelta(seconds=90)
            )
        report("All steps done", progress=STEPS, total=STEPS)
        return "stepped"


@workflow.defn(name="tests.two_in_a_step")
class TwoInAStep:
    @workflow.run
    async def run(self, args: SteppedInput) -> str:
        report("Step 1 of 2", progress=0, total=2)
        for part in (1, 2):
            await workflow.execute_activity(
                stage, StageInput(gate=args.gate, step=part), start_to_close_timeout=timedelta(seconds=90)
            )
        report("Step 2 of 2", progress=1, total=2)
        return "two"


@workflow.defn(name="tests.picky")
class Picky:
    @workflow.run
    async def run(self, args: Nothing) -> str:
        answer = await ask_form("Which day?", Day)
        return "none" if answer.content is None else answer.content.day


@workflow.defn(name="tests.refuses")
class Refuses:
    @workflow.run
    async def run(self, args: Nothing) -> str:
        await workflow.execute_activity(refuse, start_to_close_timeout=timedelta(seconds=30))
        return "never"


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool("counts", workflow=Counts, input=CountsInput)
    registry.long_tool("stepped", workflow=Stepped, input=SteppedInput)
    registry.long_tool("two_in_a_step", workflow=TwoInAStep, input=SteppedInput)
    registry.long_tool("picky", workflow=Picky, input=Nothing)
    registry.long_tool("refuses", workflow=Refuses, input=Nothing)
    registry.add_activities(build, stage, refuse)
