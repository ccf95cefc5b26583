"""A quick tool's value goes to the SDK as wire JSON (``wire_call_result``), which must be exactly
what the ``CallToolResult`` model it stands for dumps to. Ours (issue 35: the models were built only
to be dumped again)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, RootModel

from longtools import Registry, Round
from longtools.tools import as_wire, to_call_result, wire_call_result


class Note(BaseModel):
    text: str
    stars: int | None = None


class Numbers(RootModel[list[int]]):
    pass


def _tools() -> Registry:
    registry = Registry()

    async def note(args: Note, rnd: Round) -> Note:
        return args

    registry.tool("with_output", input=Note, output=Note)(note)
    registry.tool("without_output", input=Note)(note)
    return registry


VALUES: list[Any] = [
    Note(text='café "quoted"'),
    Note(text="x", stars=3),
    {"text": "a mapping", "stars": 1},
    [1, "two", {"three": 3.5}],
    Numbers([1, 2]),
    None,
    "plain text",
    4.25,
    CallToolResult(content=[TextContent(type="text", text="made by the tool")], is_error=True),
]


@pytest.mark.parametrize("tool", ["with_output", "without_output"])
@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_the_wire_result_is_the_dumped_model_key_for_key(tool: str, value: Any) -> None:
    declared = _tools().tools[tool]
    wire = wire_call_result(declared, value)
    dumped = as_wire(to_call_result(declared, value))
    assert wire == dumped
    assert list(wire) == list(dumped)
