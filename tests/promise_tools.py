"""Tools that count their side effects, for the tests of longtools' promises (``--tools``).

Every side effect appends one line to ``<data-dir>/effects.txt``; a test reads the file to see how
often each one ran. ``hold_effect`` and ``keyed_effect`` wait, after their side effect, until
``<data-dir>/release-<label>`` exists, so a test can act (leave, stop Temporal) between the work
and its record.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio import activity, workflow

# The worker re-imports this module in its workflow sandbox: the service package is passed through.
with workflow.unsafe.imports_passed_through():
    from mcp_types import InputRequiredResult

    from longtools import Registry, Round, Settings, ToolReturn, elicit
    from longtools.workflows import ask_form
    from tests.asking import Reason


class Step(BaseModel):
    ok: bool


class Label(BaseModel):
    label: str


class Nothing(BaseModel):
    pass


@workflow.defn(name="tests.echo_label")
class EchoLabel:
    @workflow.run
    async def run(self, args: Label) -> str:
        return f"started {args.label}"


@workflow.defn(name="tests.ask_reason")
class AskReason:
    """Asks for a reason that must not be blank, a rule the form's schema cannot say."""

    @workflow.run
    async def run(self, args: Nothing) -> str:
        answer = await ask_form("Why?", Reason)
        return answer.content.reason if answer.content is not None else answer.action


@workflow.defn(name="tests.one_slow_step")
class OneSlowStep:
    """Runs one activity that waits for the test's release: a step in flight when a worker stops."""

    @workflow.run
    async def run(self, args: Label) -> str:
        return str(
            await workflow.execute_activity(
                "tests.slow_step", args.label, start_to_close_timeout=timedelta(seconds=120)
            )
        )


class Steps:
    """The activity side: writes where it is to ``effects.txt``, waits for ``release-<label>``."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir

    @activity.defn(name="tests.slow_step")
    async def slow_step(self, label: str) -> str:
        attempt = activity.info().attempt
        _append(self._data_dir, f"slow_step {label} started attempt {attempt}")
        for _ in range(1200):
            if (self._data_dir / f"release-{label}").exists():
                break
            await asyncio.sleep(0.05)
        _append(self._data_dir, f"slow_step {label} finished attempt {attempt}")
        return f"stepped {label}"


def _append(data_dir: Path, line: str) -> None:
    with (data_dir / "effects.txt").open("a") as out:
        out.write(line + "\n")


def effects(data_dir: Path) -> list[str]:
    """The side effects done so far, one per line, in order."""
    path = data_dir / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


def register_quick(registry: Registry, settings: Settings) -> None:
    """The quick tools only (``tests/quick_tools.py`` serves just these)."""

    def effect(line: str) -> None:
        _append(settings.data_dir, line)

    async def held(label: str) -> None:
        for _ in range(1200):
            if (settings.data_dir / f"release-{label}").exists():
                return
            await asyncio.sleep(0.05)

    @registry.tool("three_rounds", input=Label)
    async def three_rounds(args: Label, rnd: Round) -> ToolReturn:
        """Asks twice, then does its side effect once both answers are in."""
        if rnd.request_state is None:
            return rnd.ask({"first": elicit("First step?", Step)}, state="after-first")
        if rnd.request_state == "after-first":
            return rnd.ask({"second": elicit("Second step?", Step)}, state="after-second")
        effect(f"three_rounds {args.label}")
        return f"done {args.label}"

    @registry.tool("hold_effect", input=Label)
    async def hold_effect(args: Label, rnd: Round) -> ToolReturn:
        """Asks to go on, then does its side effect and waits (up to 60 s) for the test's release."""
        if rnd.request_state is None:
            return rnd.ask({"go": elicit("Go on?", Step)}, state="asked")
        effect(f"hold_effect {args.label}")
        await held(args.label)
        return f"done {args.label}"

    @registry.tool("keyed_effect", input=Label)
    async def keyed_effect(args: Label, rnd: Round) -> ToolReturn:
        """Does its side effect at once (call it with an idempotency key), then waits for the release."""
        effect(f"keyed_effect {args.label}")
        await held(args.label)
        return f"done {args.label}"


def register(registry: Registry, settings: Settings) -> None:
    register_quick(registry, settings)

    async def confirm_first(args: Label, rnd: Round) -> Label | InputRequiredResult:
        answer = rnd.elicited("confirm", Step)
        if answer is None or answer.content is None or not answer.content.ok:
            # Asks until the answer is yes: each refusal is one more pre-phase round.
            return rnd.ask({"confirm": elicit(f"Start {args.label}?", Step)}, state="asking")
        return args

    registry.long_tool("start_after_confirm", workflow=EchoLabel, input=Label, before=confirm_first)
    registry.long_tool("ask_reason", workflow=AskReason, input=Nothing)
    registry.long_tool("one_slow_step", workflow=OneSlowStep, input=Label)
    registry.add_activities(Steps(settings.data_dir).slow_step)
