"""Tools that ask a person (``--tools tests.person_tools``): a form with every kind of field a
page renders, a secret, a secret whose validator quotes what was typed, and a quick tool, a long
tool's ``before=`` round, a prompt and a resource that ask a person's question, which only a long
tool's workflow may."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import date
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, field_validator
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mcp_types import InputRequiredResult, PromptMessage, TextContent

    from longtools import Prompt, Registry, Resource, Round, Settings, ToolReturn, ask_form, elicit


class Color(StrEnum):
    red = "red"
    green = "green"
    blue = "blue"


class Size(StrEnum):
    xs = "XS"
    s = "S"
    m = "M"
    l = "L"  # noqa: E741 (a size)
    xl = "XL"
    xxl = "XXL"
    xxxl = "XXXL"


class Profile(BaseModel):
    name: str = Field(min_length=2, max_length=40, description="As it should be printed.")
    email: str = Field(json_schema_extra={"format": "email"}, description="Where the receipt goes.")
    age: int = Field(ge=18, le=130)
    share: float = Field(0.5, ge=0, le=1, description="Of the total, from 0 to 1.")
    color: Color = Color.green
    size: Size
    extras: list[Literal["gift wrap", "express", "insurance"]] = Field([], description="Any of them.")
    agree: bool = Field(description="I agree to the terms.")
    day: date | None = Field(None, description="When it should arrive.")


class NoArgs(BaseModel):
    pass


class Filled(BaseModel):
    action: str
    profile: Profile | None = None


@workflow.defn(name="tests.fill_profile")
class FillProfile:
    """Asks a person for a profile: one form with every kind of field."""

    @workflow.run
    async def run(self, args: NoArgs) -> Filled:
        answer = await ask_form("Your profile, please", Profile, by="person")
        return Filled(action=answer.action, profile=answer.content)


class Approval(BaseModel):
    ok: bool


def register(registry: Registry, settings: Settings) -> None:
    register_outside_tasks(registry)
    registry.long_tool(
        "fill_profile", workflow=FillProfile, input=NoArgs, output=Filled, task_support="optional"
    )
    registry.long_tool(
        "keep_a_secret", workflow=KeepASecret, input=NoArgs, output=Kept, task_support="optional"
    )

    @registry.tool("approve_quickly", input=NoArgs)
    async def approve_quickly(args: NoArgs, rnd: Round) -> ToolReturn:
        """Asks a person to approve, as a quick tool: a mistake, which longtools names."""
        answer = rnd.elicited("ok", Approval)
        if answer is None:
            return rnd.ask({"ok": elicit("Approve?", Approval, by="person")})
        return "approved"


class Secret(BaseModel):
    secret: str = Field(min_length=8, description="Never shown again.")


class Kept(BaseModel):
    fingerprint: str


@workflow.defn(name="tests.keep_a_secret")
class KeepASecret:
    """Asks a person for a secret, answered on its page only; shows its fingerprint."""

    @workflow.run
    async def run(self, args: NoArgs) -> Kept:
        answer = await ask_form("A secret, please", Secret, sensitive=True)
        given = answer.content.secret if answer.content else ""
        return Kept(fingerprint=hashlib.sha256(given.encode()).hexdigest()[:12])


class Pin(BaseModel):
    pin: str = Field(min_length=4, description="Four digits or more.")

    @field_validator("pin")
    @classmethod
    def _digits(cls, value: str) -> str:
        if not value.isdigit():
            # Quotes what was typed, as validators often do: it must reach nobody but the page.
            raise ValueError(f"{value!r} is not all digits")
        return value


class Set(BaseModel):
    length: int


@workflow.defn(name="tests.set_a_pin")
class SetAPin:
    """Asks a person for a secret PIN, which a validator of the tool's own checks."""

    @workflow.run
    async def run(self, args: NoArgs) -> Set:
        answer = await ask_form("A PIN, please", Pin, sensitive=True)
        return Set(length=len(answer.content.pin) if answer.content else 0)


@workflow.defn(name="tests.approved")
class Approved:
    @workflow.run
    async def run(self, args: NoArgs) -> str:
        return "approved"


async def _approve_before(args: NoArgs, rnd: Round) -> NoArgs | InputRequiredResult:
    """A long tool's pre-phase that asks a person: a mistake, which longtools names."""
    if rnd.elicited("ok", Approval) is None:
        return rnd.ask({"ok": elicit("Approve?", Approval, sensitive=True)})
    return args


async def _secret_prompt(
    arguments: Mapping[str, str], rnd: Round
) -> Sequence[PromptMessage] | InputRequiredResult:
    if rnd.elicited("ok", Approval) is None:
        return rnd.ask({"ok": elicit("Approve?", Approval, by="person")})
    return [PromptMessage(role="user", content=TextContent(type="text", text="approved"))]


async def _secret_resource(variables: Mapping[str, str], rnd: Round) -> str | InputRequiredResult:
    if rnd.elicited("ok", Approval) is None:
        return rnd.ask({"ok": elicit("Approve?", Approval, sensitive=True)})
    return "approved"


def register_outside_tasks(registry: Registry) -> None:
    registry.long_tool("set_a_pin", workflow=SetAPin, input=NoArgs, output=Set, task_support="optional")
    registry.long_tool("approve_before", workflow=Approved, input=NoArgs, before=_approve_before)
    registry.add_prompt(Prompt("approve_prompt", "Asks a person to approve, as a prompt.", _secret_prompt))
    registry.add_resource(Resource("test://approve", "approve", _secret_resource))
