"""A long tool's line about each task (``summary=``), which the person's pages show to tell tasks of
one tool apart: the tool's own, or the arguments the call gave; never a reason for a start to fail.
Ours (review N6); the pages showing it are in test_page_flows_browser.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from longtools import Registry
from tests.page_tools import Credential, RotateCredential


def _tool(summary: Callable[[Any], str] | None = None) -> Registry:
    registry = Registry()
    registry.long_tool("rotate", workflow=RotateCredential, input=Credential, summary=summary)
    return registry


def test_without_a_summary_a_task_is_summed_up_by_the_arguments_its_call_gave() -> None:
    tool = _tool().tools["rotate"]
    assert tool.summary_of(tool.parse_arguments({"database": "orders"})) == "database: orders"
    given = tool.parse_arguments({"database": "orders", "role": "writer"})
    assert tool.summary_of(given) == "database: orders; role: writer"


def test_a_summary_is_one_line_of_at_most_200_characters() -> None:
    tool = _tool(summary=lambda args: f"{args.database}\n" + "x" * 300).tools["rotate"]
    line = tool.summary_of(tool.parse_arguments({"database": "orders"}))
    assert line is not None and len(line) == 200 and line.startswith("orders x") and line.endswith("…")


def test_a_summary_that_raises_leaves_the_task_without_a_line() -> None:
    def broken(args: BaseModel) -> str:
        raise KeyError("no such field")

    tool = _tool(summary=broken).tools["rotate"]
    assert tool.summary_of(tool.parse_arguments({"database": "orders"})) is None


def test_a_field_marked_sensitive_reads_redacted_in_the_line() -> None:
    """The line is kept in the task's memo and shown on the pages: a secret argument is not (issue 32)."""

    class Login(BaseModel):
        user: str
        password: str = Field(json_schema_extra={"sensitive": True})

    registry = Registry()
    registry.long_tool("login", workflow=RotateCredential, input=Login)
    tool = registry.tools["login"]
    line = tool.summary_of(tool.parse_arguments({"user": "ann", "password": "hunter2"}))
    assert line == "user: ann; password: [redacted]"
