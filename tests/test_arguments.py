"""A tool call's arguments must be ones the tool declares, against a real ``longtools serve``.

pydantic ignores names a model does not declare, so ``deploy_service(..., extra=1)`` used to start
a deploy, and a misspelt optional argument went unnoticed. Now a name the input model does not
declare gets the tool error of any invalid argument (``isError: true``, naming it) in both eras,
for a quick tool and for a long tool, before anything runs; ``tools/list`` says so with
``additionalProperties: false``. A model that sets pydantic's ``extra`` itself keeps it: the
project's ``label_service`` takes every other argument as a label (``extra="allow"``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Served
from tests.test_package import serve_outside_project
from tests.wire import TASKS_EXTENSION, Legacy, eventually, post, result

FORM: dict[str, Any] = {"elicitation": {"form": {}}}
TASK_CAPS: dict[str, Any] = {**FORM, "extensions": {TASKS_EXTENSION: {}}}
LEGACY_TASK_CAPS: dict[str, Any] = {**FORM, "tasks": {"list": {}, "cancel": {}}}
DEPLOY = {"service": "api", "version": "1.4.2"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = serve_outside_project(tmp_path_factory.mktemp("arguments"))
    try:
        yield server
    finally:
        server.stop()


def _listed(url: str) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in result(post(url, "tools/list"))["tools"]}


def _refused(answered: dict[str, Any], tool: str, *names: str) -> None:
    """A tool error, as for any invalid argument, naming each unknown name."""
    assert answered.get("isError") is True, answered
    assert "task" not in answered and answered.get("resultType", "complete") == "complete", answered
    (text,) = [block["text"] for block in answered["content"]]
    assert text.startswith(f"Invalid arguments for tool {tool}: "), text
    for name in names:
        assert f"{name}: Extra inputs are not permitted" in text, text


def _tasks(url: str) -> list[str]:
    """The caller's tasks, of either era: 2026-07-28 has no ``tasks/list``, 2025-11-25 has."""
    session = Legacy(url, caps=LEGACY_TASK_CAPS)
    session.open()
    listed = result(session.request("tasks/list"))
    assert "nextCursor" not in listed  # one page holds this module's one task
    return [task["taskId"] for task in listed["tasks"]]


def test_the_listed_schemas_say_which_tools_take_other_names(served: Served) -> None:
    tools = _listed(served.url)
    assert tools["service_status"]["inputSchema"]["additionalProperties"] is False
    assert tools["deploy_service"]["inputSchema"]["additionalProperties"] is False
    assert tools["label_service"]["inputSchema"]["additionalProperties"] is True  # extra="allow"
    assert tools["echo"]["inputSchema"]["additionalProperties"] is False  # longtools' own


def test_a_quick_tool_refuses_unknown_names_in_both_eras(served: Served) -> None:
    call = {"name": "service_status", "arguments": {"service": "api", "extra": 1, "force": True}}
    _refused(result(post(served.url, "tools/call", call)), "service_status", "extra", "force")

    session = Legacy(served.url, caps=FORM)
    session.open()
    _refused(result(session.request("tools/call", call)), "service_status", "extra", "force")

    # The names it declares still answer, in both eras.
    fine = {"name": "service_status", "arguments": {"service": "api"}}
    assert result(post(served.url, "tools/call", fine))["structuredContent"]["healthy"] is True
    assert result(session.request("tools/call", fine))["isError"] is False


def test_a_long_tool_refuses_unknown_names_before_a_task_starts_in_both_eras(served: Served) -> None:
    call = {"name": "deploy_service", "arguments": {**DEPLOY, "extra": 1}}
    # 2026-07-28: as a task (the tasks extension) and in MRTR rounds (without it).
    _refused(result(post(served.url, "tools/call", call, caps=TASK_CAPS)), "deploy_service", "extra")
    _refused(result(post(served.url, "tools/call", call, caps=FORM)), "deploy_service", "extra")
    # 2025-11-25: as a task of that revision, and held on the call's stream (a client that cannot
    # answer the form: the call would answer at once with the task in words).
    tasks_session = Legacy(served.url, caps=LEGACY_TASK_CAPS)
    tasks_session.open()
    as_task = tasks_session.request("tools/call", {**call, "task": {}})
    _refused(result(as_task), "deploy_service", "extra")
    plain_session = Legacy(served.url, caps={})
    plain_session.open()
    _refused(result(plain_session.request("tools/call", call)), "deploy_service", "extra")

    # Its declared names still start one, and that is the only task of this server: none of the
    # calls above started a deploy (the task list reads Temporal's visibility, which may lag).
    fine = {"name": "deploy_service", "arguments": DEPLOY}
    created = result(post(served.url, "tools/call", fine, caps=TASK_CAPS))
    assert created["resultType"] == "task", created
    assert eventually(lambda: _tasks(served.url)) == [created["taskId"]]


def test_a_tool_whose_model_allows_other_names_gets_them(served: Served) -> None:
    call = {"name": "label_service", "arguments": {"service": "api", "team": "core", "tier": 1}}
    labelled = result(post(served.url, "tools/call", call))
    assert labelled["isError"] is False
    assert labelled["structuredContent"] == {"service": "api", "labels": {"team": "core", "tier": 1}}
    session = Legacy(served.url, caps=FORM)
    session.open()
    assert result(session.request("tools/call", call))["structuredContent"] == labelled["structuredContent"]
