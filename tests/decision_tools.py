"""Tools that decide, loaded by tests/test_decisions.py (``--tools``): each reaches one way a
decision can end, so every exit state has a test.

``decide``: one question for ``bob`` (or the rule its arguments give), then ``fail_after`` makes
the task fail once approved. ``decide_twice``: asks with one proposal, and when that expires,
again with another (its summary changed): the first one's votes must not count.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools import ProtocolError, Registry, Settings
    from longtools.decisions import Approved, Approvers, Escalation, Expired, Rejected, name_of
    from longtools.workflows import ask_form


class DecideInput(BaseModel):
    principals: list[str] = ["bob"]
    groups: list[str] = []
    quorum: int = 1
    exclude_requester: bool = False
    timeout_s: float | None = None
    escalate_after_s: float | None = None
    escalate_to: list[str] = []
    fail_after: bool = False
    secret_note: str = Field("", json_schema_extra={"sensitive": True})
    step_up: Literal["passkey", "recent"] | None = None


class Note(BaseModel):
    note: str = Field("", max_length=100, description="Why, if you like.")


class Decided(BaseModel):
    outcome: str
    votes: list[str] = []
    by: str | None = None
    digest: str = ""


def _rule(args: DecideInput) -> Approvers:
    escalate = (
        Escalation(after=timedelta(seconds=args.escalate_after_s), groups=tuple(args.escalate_to))
        if args.escalate_after_s is not None
        else None
    )
    return Approvers(
        principals=tuple(args.principals),
        groups=tuple(args.groups),
        quorum=args.quorum,
        exclude_requester=args.exclude_requester,
        escalate=escalate,
    )


def _decided(decision: Approved[Note] | Rejected | Expired) -> Decided:
    if isinstance(decision, Approved):
        return Decided(
            outcome="approved", votes=[vote.name for vote in decision.votes], digest=decision.digest
        )
    if isinstance(decision, Rejected):
        return Decided(outcome="rejected", by=name_of(decision.by), digest=decision.digest)
    return Decided(outcome="escalated" if decision.escalated else "expired")


@workflow.defn(name="tests.decide")
class Decide:
    @workflow.run
    async def run(self, args: DecideInput) -> Decided:
        timeout = None if args.timeout_s is None else timedelta(seconds=args.timeout_s)
        decision = await ask_form(
            "Go ahead?", Note, by=_rule(args), timeout=timeout, summary="Does one thing", step_up=args.step_up
        )
        if args.fail_after and isinstance(decision, Approved):
            raise ProtocolError(-32603, "The effect failed after the approval")
        return _decided(decision)


class TwiceInput(BaseModel):
    first_s: float = 3.0


@workflow.defn(name="tests.decide_twice")
class DecideTwice:
    @workflow.run
    async def run(self, args: TwiceInput) -> Decided:
        rule = Approvers(principals=("bob", "dave"), quorum=2)
        first = await ask_form(
            "Go ahead?", Note, by=rule, timeout=timedelta(seconds=args.first_s), summary="Version 1"
        )
        if isinstance(first, Approved):
            return _decided(first)
        return _decided(await ask_form("Go ahead, as changed?", Note, by=rule, summary="Version 2"))


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool("decide", workflow=Decide, input=DecideInput, output=Decided, task_support="optional")
    registry.long_tool(
        "decide_twice", workflow=DecideTwice, input=TwiceInput, output=Decided, task_support="optional"
    )
