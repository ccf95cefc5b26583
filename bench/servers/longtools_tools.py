"""longtools' side of the benchmark: a tool module (``--tools bench.servers.longtools_tools``).

B1 uses the built-in ``echo``. For B2 there are two copies of one quick tool that asks one form
question and then returns the text, as the peers' ``confirm`` does:

- ``confirm`` is annotated ``idempotentHint``: its final round may run again on a replay, so
  longtools keeps no record of it;
- ``confirm_once`` has no annotations: longtools makes its final round single-use by recording it
  in Temporal (a ``longtools.Once`` workflow started and signalled per exchange).

``noop`` is a long tool whose workflow returns at once: ``longtools worker`` refuses to start
without a long tool, and it is the subject of the task benchmarks B3 and B6.

``three_questions`` (B4) is a long tool written plainly, as docs/writing-tools.md shows: three
times, an activity does 2 s of work and then ``ask_form`` asks one question. The workflow waits
for each answer where it is; nothing is run again after an answer.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from mcp_types import ToolAnnotations

    from service import Registry, Round, Settings, ToolError, ToolReturn, elicit
    from workflows import ask_form

WORK_S = 2.0  # the work before each question; the fastmcp-tasks tool does the same (asyncio.sleep)
QUESTIONS = 3


class TextInput(BaseModel):
    text: str = Field(max_length=65_536, description="Text to send back.")


class TextOutput(BaseModel):
    result: str


class ConfirmForm(BaseModel):
    confirm: bool = Field(description="Send it back?")


class NoopInput(BaseModel):
    pass


class NoopOutput(BaseModel):
    done: bool


@workflow.defn(name="bench.noop")
class Noop:
    """A long tool that does nothing and finishes at once."""

    @workflow.run
    async def run(self, args: NoopInput) -> NoopOutput:
        return NoopOutput(done=True)


@activity.defn(name="bench.work")
async def work(seconds: float) -> None:
    """Work that takes ``seconds`` and holds no CPU, as the fastmcp-tasks tool's does."""
    await asyncio.sleep(seconds)


class QuestionsInput(BaseModel):
    pass


class QuestionsOutput(BaseModel):
    confirmed: int


@workflow.defn(name="bench.three_questions")
class ThreeQuestions:
    """Do 2 s of work before each of three questions; return how many were confirmed."""

    @workflow.run
    async def run(self, args: QuestionsInput) -> QuestionsOutput:
        confirmed = 0
        for number in range(1, QUESTIONS + 1):
            await workflow.execute_activity(work, WORK_S, start_to_close_timeout=timedelta(seconds=30))
            answer = await ask_form(f"Go on after step {number}?", ConfirmForm)
            if answer.content is not None and answer.content.confirm:
                confirmed += 1
        return QuestionsOutput(confirmed=confirmed)


async def _confirm(args: TextInput, rnd: Round) -> ToolReturn:
    answer = rnd.elicited("confirm", ConfirmForm)
    if answer is None:
        question = elicit(f"Echo {args.text}?", ConfirmForm)
        if not rnd.supports(question):
            raise ToolError("confirm needs a client that can answer a form")
        return rnd.ask({"confirm": question})
    if answer.content is not None and answer.content.confirm:
        return TextOutput(result=args.text)
    return TextOutput(result="declined")


def register(registry: Registry, settings: Settings) -> None:
    del settings
    registry.tool(
        "confirm",
        input=TextInput,
        output=TextOutput,
        description="Return the text after the user confirms (idempotent: no single-use record).",
        annotations=ToolAnnotations(idempotent_hint=True),
    )(_confirm)
    registry.tool(
        "confirm_once",
        input=TextInput,
        output=TextOutput,
        description="Return the text after the user confirms (its final round is single-use).",
    )(_confirm)
    registry.long_tool("noop", workflow=Noop, input=NoopInput, output=NoopOutput, task_support="optional")
    registry.long_tool(
        "three_questions",
        workflow=ThreeQuestions,
        input=QuestionsInput,
        output=QuestionsOutput,
        task_support="optional",
    )
    registry.add_activities(work)
