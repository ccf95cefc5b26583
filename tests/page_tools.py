"""Tools for the person's pages (``--tools tests.page_tools``): a form whose answer breaks a rule
its JSON schema cannot say (asked again), options that are numbers, a tool whose tasks say which
one each is (``summary=``), one that fails with a message, and one that rolls back when cancelled."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field, field_validator
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Settings, ToolError, ask_form, report


class NoArgs(BaseModel):
    pass


class Change(BaseModel):
    change_ticket: str = Field(title="Change ticket", description="The approved change, e.g. CHG-1042.")
    reason: str = Field("", max_length=200, title="Reason", description="Why now.")
    urgent: bool = Field(False, title="Urgent")
    priority: Literal[1, 2, 3] = Field(2, title="Priority")

    @field_validator("change_ticket")
    @classmethod
    def _approved(cls, value: str) -> str:
        # A rule the form's JSON schema does not carry: the page cannot check it, the workflow does.
        if not value.startswith("CHG-"):
            raise ValueError("must name an approved change (CHG-...)")
        return value


class Changed(BaseModel):
    action: str
    change: Change | None = None


@workflow.defn(name="tests.approve_change")
class ApproveChange:
    """Asks a person for an approved change; an answer that names none is asked again."""

    @workflow.run
    async def run(self, args: NoArgs) -> Changed:
        answer = await ask_form("Which change allows this restart?", Change, by="person")
        return Changed(action=answer.action, change=answer.content)


class Factor(float, Enum):
    half = 0.5
    one_and_a_half = 1.5


class Numbers(BaseModel):
    level: Literal[1, 2, 3] = Field(title="Level")
    factor: Factor = Field(Factor.one_and_a_half, title="Factor")


class Picked(BaseModel):
    numbers: Numbers | None = None


@workflow.defn(name="tests.pick_numbers")
class PickNumbers:
    """Asks for options that are numbers (an integer and a number; an answer's several choices are
    strings only, in the protocol)."""

    @workflow.run
    async def run(self, args: NoArgs) -> Picked:
        answer = await ask_form("Pick the numbers", Numbers, by="person")
        return Picked(numbers=answer.content)


class Credential(BaseModel):
    database: str = Field(min_length=1, max_length=100)
    role: str = Field("reader", min_length=1, max_length=100)


class Rotated(BaseModel):
    database: str
    outcome: Literal["rotated", "declined"]


class Go(BaseModel):
    go: bool = Field(title="Rotate it now")


@workflow.defn(name="tests.rotate_credential")
class RotateCredential:
    """Rotates a database credential after a person's go; rolls back when cancelled."""

    @workflow.run
    async def run(self, args: Credential) -> Rotated:
        answer = await ask_form(f"Rotate the {args.role} credential of {args.database}?", Go, by="person")
        if answer.content is None or not answer.content.go:
            return Rotated(database=args.database, outcome="declined")
        report(f"Rotating the {args.role} credential of {args.database}", progress=1, total=3)
        try:
            await workflow.wait_condition(lambda: False)  # until cancelled: a rotation that hangs
        except asyncio.CancelledError:
            report(f"Rolled back: the old {args.role} credential of {args.database} is in place again")
            raise
        return Rotated(database=args.database, outcome="rotated")


@workflow.defn(name="tests.fail_loudly")
class FailLoudly:
    """Fails with a message of its own."""

    @workflow.run
    async def run(self, args: NoArgs) -> Rotated:
        raise ToolError("The database refused the new password: the role is locked")


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool(
        "approve_change", workflow=ApproveChange, input=NoArgs, output=Changed, title="Approve a restart"
    )
    registry.long_tool("pick_numbers", workflow=PickNumbers, input=NoArgs, output=Picked)
    registry.long_tool(
        "rotate_credential",
        workflow=RotateCredential,
        input=Credential,
        output=Rotated,
        title="Rotate a database credential",
        summary=lambda args: f"{args.database}, {args.role} role",
    )
    registry.long_tool("fail_loudly", workflow=FailLoudly, input=NoArgs, output=Rotated, title="Fail loudly")
