"""``elicit()`` turns a pydantic model into a form a client can render: flat, primitive fields only."""

from __future__ import annotations

import gc
import weakref
from enum import StrEnum
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from longtools import elicit


class Colour(StrEnum):
    red = "red"
    blue = "blue"


class Form(BaseModel):
    name: str = Field(description="Your name")
    note: str | None = None
    count: int = Field(3, ge=1)
    ok: bool
    colour: Colour = Colour.red
    choice: Literal["a", "b"] = "a"
    tags: list[Literal["x", "y"]] = []


def _schema(schema: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    return elicit("question", schema).model_dump(by_alias=True)["params"]["requestedSchema"]  # type: ignore[no-any-return]


def test_a_model_becomes_a_flat_form_without_references() -> None:
    schema = _schema(Form)
    assert schema["type"] == "object"
    assert "$defs" not in schema and "title" not in schema
    props = schema["properties"]
    assert props["name"] == {"type": "string", "title": "Name", "description": "Your name"}
    assert props["note"] == {"type": "string", "title": "Note"}  # optional, no null branch, no null default
    assert props["colour"]["enum"] == ["red", "blue"] and props["colour"]["type"] == "string"
    assert props["choice"]["enum"] == ["a", "b"]
    assert props["tags"]["items"]["enum"] == ["x", "y"]
    assert set(schema["required"]) == {"name", "ok"}


class Nested(BaseModel):
    inner: dict[str, int]


class FreeList(BaseModel):
    items: list[str]


@pytest.mark.parametrize("model", [Nested, FreeList])
def test_a_field_a_form_cannot_hold_is_refused_when_the_tool_asks(model: type[BaseModel]) -> None:
    with pytest.raises(ValueError, match="must be a string, number, integer, boolean or enum"):
        elicit("question", model)


def test_a_raw_schema_is_passed_through() -> None:
    raw = {"type": "object", "properties": {"ok": {"title": "Ok", "type": "boolean"}}, "required": ["ok"]}
    assert _schema(raw) == raw


def test_forms_are_made_once_per_model_and_die_with_the_model() -> None:
    """Temporal's sandbox brings new model classes with every workflow run: none may be kept."""
    from longtools.workflows import _inputs

    def run_once() -> weakref.ref[type[BaseModel]]:
        class Fresh(BaseModel):
            ok: bool

        assert (
            _schema(Fresh)
            == _schema(Fresh)
            == {
                "type": "object",
                "properties": {"ok": {"title": "Ok", "type": "boolean"}},
                "required": ["ok"],
            }
        )
        assert Fresh in _inputs._FORMS
        return weakref.ref(Fresh)

    models = [run_once() for _ in range(5)]
    gc.collect()
    assert [model() for model in models] == [None] * 5  # the cache held none of them
