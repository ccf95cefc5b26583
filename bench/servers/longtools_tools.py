"""longtools' side of the benchmark: a tool module (``--tools bench.servers.longtools_tools``).

B1 uses the built-in ``echo``. For B2 there are two copies of one quick tool that asks one form
question and then returns the text, as the peers' ``confirm`` does:

- ``confirm`` is annotated ``idempotentHint``: its final round may run again on a replay, so
  longtools keeps no record of it;
- ``confirm_once`` has no annotations: longtools makes its final round single-use by recording it
  in Temporal (a ``longtools.Once`` workflow started and signalled per exchange).

The long tools ``noop`` (B3, B6; ``longtools worker`` refuses to start without a long tool) and
``three_questions`` (B4) are told as docs/writing-tools.md advises: each workflow in a module of
its own (``longtools_noop``, ``longtools_questions``), the models and the activity in
another (``longtools_activities``), and their registration here.
"""

from __future__ import annotations

from mcp_types import ToolAnnotations

from bench.servers.longtools_activities import (
    ConfirmForm,
    NoopInput,
    NoopOutput,
    QuestionsInput,
    QuestionsOutput,
    TextInput,
    TextOutput,
    work,
)
from bench.servers.longtools_noop import Noop
from bench.servers.longtools_questions import ThreeQuestions
from longtools import Registry, Round, Settings, ToolError, ToolReturn, elicit


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
