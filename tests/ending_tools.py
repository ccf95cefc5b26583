"""Long tools that do not end by themselves (``--tools tests.ending_tools``).

``broken_at_start`` has a bug in its ``run`` (a plain exception, not a ToolError): Temporal fails
its workflow task and retries it for ever, so the task reads ``working`` and a cancel never reaches
its code. ``broken_on_cancel`` asks a question and has the bug in its clean-up: it waits for its
answer well, and fails for ever once cancelled. ``wait`` works for ``seconds`` and says so.
``approve_then_confirm`` asks a person to approve (on the page), then its client to confirm.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Settings
    from longtools.workflows import ask_form, report


class NoArgs(BaseModel):
    pass


class Wait(BaseModel):
    seconds: float


class Confirm(BaseModel):
    confirm: bool


@workflow.defn(name="tests.broken_at_start")
class BrokenAtStart:
    @workflow.run
    async def run(self, args: NoArgs) -> str:
        settings: dict[str, str] = {}
        return settings["missing"]  # a KeyError: a bug, which Temporal retries until it is fixed


@workflow.defn(name="tests.broken_on_cancel")
class BrokenOnCancel:
    @workflow.run
    async def run(self, args: NoArgs) -> str:
        try:
            answer = await ask_form("Go on?", Confirm)
        except BaseException:
            # A clean-up with a bug in it: the cancel arrives, and the workflow task fails for ever.
            cleanup: dict[str, str] = {}
            return cleanup["missing"]
        return f"answered {answer.action}"


@workflow.defn(name="tests.wait")
class WaitAWhile:
    @workflow.run
    async def run(self, args: Wait) -> str:
        report("waiting")
        await workflow.sleep(timedelta(seconds=args.seconds))
        return f"waited {args.seconds}s"


@workflow.defn(name="tests.approve_then_confirm")
class ApproveThenConfirm:
    @workflow.run
    async def run(self, args: NoArgs) -> str:
        await workflow.sleep(timedelta(seconds=1))  # a round that holds first: a state to replay
        approved = await ask_form("Approve?", Confirm, by="person")
        confirmed = await ask_form("Confirm?", Confirm)
        return f"approved: {approved.action}, confirmed: {confirmed.action}"


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool("broken_at_start", workflow=BrokenAtStart, input=NoArgs)
    registry.long_tool("broken_on_cancel", workflow=BrokenOnCancel, input=NoArgs)
    registry.long_tool("wait", workflow=WaitAWhile, input=Wait)
    registry.long_tool("approve_then_confirm", workflow=ApproveThenConfirm, input=NoArgs)
