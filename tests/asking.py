"""A workflow that exercises ``ask()`` itself (key naming, partial and bad answers); for tests only."""

from __future__ import annotations

from pydantic import BaseModel, field_validator
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mcp_types import CreateMessageResult, ElicitResult, TextContent

    from longtools.workflows import ask, ask_form, elicit, sample


class Flag(BaseModel):
    on: bool


@workflow.defn(name="tests.ask_repeatedly")
class AskRepeatedly:
    @workflow.run
    async def run(self) -> list[str]:
        first = await ask(elicit("First?", Flag))
        second = await ask(elicit("Second?", Flag))
        both = await ask({"input": elicit("Third?", Flag), "poem": sample("A poem, please")})
        third, poem = both["input"], both["poem"]
        assert isinstance(third, ElicitResult) and isinstance(poem, CreateMessageResult)
        text = poem.content.text if isinstance(poem.content, TextContent) else ""
        return [first.action, second.action, third.action, text]


class Reason(BaseModel):
    reason: str

    @field_validator("reason")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # A rule the form's JSON schema cannot say: the API lets a blank reason through, the model refuses it.
        if not value.strip():
            raise ValueError("a reason cannot be blank")
        return value


@workflow.defn(name="tests.ask_form_strictly")
class AskFormStrictly:
    @workflow.run
    async def run(self) -> str:
        answer = await ask_form("Why?", Reason)
        return answer.content.reason if answer.content is not None else answer.action
