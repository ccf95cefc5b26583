"""Long tools for the tests of waits and bounds (``tests/test_waits.py``, loaded with ``--tools``):
one that asks many questions in a row, one that asks once and then waits for an hour."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow

# The worker re-imports this module in its workflow sandbox: the service package is passed through.
with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Settings
    from longtools.workflows import ask_form


class Count(BaseModel):
    questions: int = Field(ge=1, le=100)


class Step(BaseModel):
    ok: bool


class Nothing(BaseModel):
    pass


@workflow.defn(name="tests.many_questions")
class ManyQuestions:
    """Asks ``questions`` yes-or-no questions, one after the other."""

    @workflow.run
    async def run(self, args: Count) -> str:
        yes = 0
        for number in range(1, args.questions + 1):
            answer = await ask_form(f"Question {number} of {args.questions}?", Step)
            yes += bool(answer.content is not None and answer.content.ok)
        return f"{yes} of {args.questions} yes"


@workflow.defn(name="tests.ask_then_wait")
class AskThenWait:
    """Asks once, then waits an hour: a task that stays open once answered."""

    @workflow.run
    async def run(self, args: Nothing) -> str:
        await ask_form("Go on?", Step)
        await workflow.sleep(timedelta(hours=1))
        return "waited"


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool("many_questions", workflow=ManyQuestions, input=Count, task_support="optional")
    registry.long_tool("ask_then_wait", workflow=AskThenWait, input=Nothing, task_support="optional")
