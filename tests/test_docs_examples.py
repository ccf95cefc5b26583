"""The documentation's examples run, and the generated pages match what generates them.

``docs/writing-tools.md`` holds a complete tool module (the ```python block whose first line is
``# docs_tools.py``) and two test files of it written with ``longtools.testing``: one with a
replay and a cancel (``# test_docs_tools.py``), one on a real server
(``# test_docs_tools_served.py``), with their ``# pytest.ini``. All are taken from the page as a
reader would copy them: the module is loaded by a real ``longtools serve --tools docs_tools`` and
driven over raw HTTP, and the page's tests are run as written, by ``pytest`` in their own
directory, without a warning.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longtools._settings import Settings
from longtools.cli._configdoc import REGENERATE, render
from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, error, post, result, wait_for_task

DOCS = Path(__file__).resolve().parent.parent / "docs"
FORM_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}


def python_block(page: Path, first_line: str, language: str = "python") -> str:
    """The ```python (or ``language``) block of ``page`` whose first line is ``first_line``, verbatim."""
    fence = f"```{language}\n"
    blocks = [block.split("\n```", 1)[0] + "\n" for block in page.read_text().split(fence)[1:]]
    found = [block for block in blocks if block.split("\n", 1)[0] == first_line]
    assert len(found) == 1, (
        f"{page.name} needs exactly one {language} block whose first line is {first_line!r}"
    )
    return found[0]


# docs/configuration.md ------------------------------------------------------------------------


def test_the_configuration_page_is_what_the_settings_generate() -> None:
    page = (DOCS / "configuration.md").read_text()
    assert page == render(), f"docs/configuration.md is out of date; regenerate it with: {REGENERATE}"


def test_the_configuration_page_names_every_setting() -> None:
    page = (DOCS / "configuration.md").read_text()
    missing = [name for name in Settings.model_fields if f"`LONGTOOLS_{name.upper()}`" not in page]
    assert not missing


# docs/writing-tools.md: the example module on a real server ------------------------------------


@pytest.fixture(scope="module")
def example_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's module, its tests and their pytest.ini, saved as a reader would save them, in a
    directory outside the project (no conftest.py or pytest configuration of ours above it)."""
    where = tmp_path_factory.mktemp("docs_tools")
    page = DOCS / "writing-tools.md"
    (where / "docs_tools.py").write_text(python_block(page, "# docs_tools.py"))
    for test in ("test_docs_tools.py", "test_docs_tools_served.py"):
        (where / test).write_text(python_block(page, f"# {test}"))
    (where / "pytest.ini").write_text(python_block(page, "# pytest.ini", "ini"))
    return where


@pytest.fixture(scope="module")
def served(example_dir: Path) -> Iterator[Served]:
    path = os.pathsep.join(part for part in (str(example_dir), os.environ.get("PYTHONPATH")) if part)
    server = start_server(example_dir, "--tools", "docs_tools", "--no-examples", env={"PYTHONPATH": path})
    try:
        yield server
    finally:
        server.stop()


def _store(example_dir: Path) -> sqlite3.Connection:
    """The example's own database (the server's data dir is ``<dir>/data``), read directly."""
    return sqlite3.connect(example_dir / "data" / "expenses.sqlite3")


def _claims(example_dir: Path, description: str) -> list[tuple[Any, ...]]:
    db = _store(example_dir)
    try:
        return db.execute(
            "SELECT id, status, payment, paid_by FROM expenses WHERE description = ?", (description,)
        ).fetchall()
    finally:
        db.close()


def _submit_call(description: str) -> dict[str, Any]:
    arguments = {"employee": "ada", "description": description, "amount_cents": 4250}
    return {"name": "submit_expense", "arguments": arguments}


def _budget(name: str) -> dict[str, Any]:
    return {"budget": {"action": "accept", "content": {"budget": name}}}


def _file_claim(url: str, description: str) -> str:
    call = _submit_call(description)
    asked = result(post(url, "tools/call", call, caps=FORM_CAPS))
    retry = {**call, "requestState": asked["requestState"], "inputResponses": _budget("Travel")}
    filed = result(post(url, "tools/call", retry, caps=FORM_CAPS))
    expense_id: str = filed["structuredContent"]["expense_id"]
    return expense_id


def test_both_tools_are_listed_with_their_schemas_and_hints(served: Served) -> None:
    tools = {tool["name"]: tool for tool in result(post(served.url, "tools/list"))["tools"]}
    assert set(tools) == {"echo", "submit_expense", "approve_expense"}
    submit = tools["submit_expense"]
    assert submit["inputSchema"]["required"] == ["employee", "description", "amount_cents"]
    assert submit["annotations"] == {"readOnlyHint": False, "idempotentHint": False}
    assert "expense_id" in submit["outputSchema"]["properties"]
    approve = tools["approve_expense"]  # a long tool's description is its workflow's docstring
    assert approve["description"] == "Ask a manager to approve an expense claim; pay it once approved."


def test_the_quick_tool_asks_validates_every_round_and_files_one_claim_per_answered_round(
    served: Served, example_dir: Path
) -> None:
    description = f"Taxi {uuid.uuid4().hex[:8]}"
    call = _submit_call(description)
    asked = result(post(served.url, "tools/call", call, caps=FORM_CAPS))
    assert asked["resultType"] == "input_required"
    form = asked["inputRequests"]["budget"]["params"]
    assert form["message"] == f"Which budget pays for {description!r}?"
    assert form["requestedSchema"]["properties"]["budget"]["enum"] == ["Travel", "Meals", "Equipment"]

    # An answer that does not fit the form is checked again in this round: the question comes back.
    wrong = {**call, "requestState": asked["requestState"], "inputResponses": _budget("Snacks")}
    again = result(post(served.url, "tools/call", wrong, caps=FORM_CAPS))
    assert again["resultType"] == "input_required" and set(again["inputRequests"]) == {"budget"}
    assert _claims(example_dir, description) == []

    final = {**call, "requestState": again["requestState"], "inputResponses": _budget("Travel")}
    filed = result(post(served.url, "tools/call", final, caps=FORM_CAPS))
    claim = filed["structuredContent"]
    assert filed["isError"] is False
    assert (claim["budget"], claim["status"], claim["amount_cents"]) == ("Travel", "submitted", 4250)

    # Neither read-only nor idempotent: the answered round ran once; its replay gets the record.
    replayed = result(post(served.url, "tools/call", final, caps=FORM_CAPS))
    assert replayed["structuredContent"] == claim
    assert len(_claims(example_dir, description)) == 1
    other = {**final, "inputResponses": _budget("Meals")}
    refused = error(post(served.url, "tools/call", other, caps=FORM_CAPS), 400)
    assert refused["code"] == -32602 and "already used with other answers" in refused["message"]


def test_the_authorize_check_runs_again_on_the_answer_round(served: Served, example_dir: Path) -> None:
    description = f"Lunch {uuid.uuid4().hex[:8]}"
    call = _submit_call(description)
    asked = result(post(served.url, "tools/call", call, caps=FORM_CAPS))
    frozen = example_dir / "data" / "expenses-frozen.txt"
    frozen.write_text("anonymous\n")  # without authentication every caller is "anonymous"
    try:
        answer = {**call, "requestState": asked["requestState"], "inputResponses": _budget("Meals")}
        refused = result(post(served.url, "tools/call", answer, caps=FORM_CAPS))
    finally:
        frozen.unlink()
    assert refused["isError"] is True
    assert refused["content"] == [{"type": "text", "text": "Not authorized to use this tool"}]
    assert _claims(example_dir, description) == []


def test_the_long_tool_runs_as_a_task_asks_the_manager_and_pays_once(
    served: Served, example_dir: Path
) -> None:
    description = f"Train {uuid.uuid4().hex[:8]}"
    expense_id = _file_claim(served.url, description)
    approve = {"name": "approve_expense", "arguments": {"expense_id": expense_id}}
    created = result(post(served.url, "tools/call", approve, caps=TASK_CAPS))
    assert created["resultType"] == "task" and created["status"] == "working"
    task_id = created["taskId"]

    waiting = wait_for_task(served.url, task_id, lambda task: task["status"] == "input_required")
    (key,) = waiting["inputRequests"]
    question = waiting["inputRequests"][key]["params"]
    assert question["message"] == f"Approve {expense_id}: 42.50 for {description!r} (Travel) by ada?"
    assert _claims(example_dir, description)[0][1] == "submitted"  # nothing is paid before the answer

    answer = {key: {"action": "accept", "content": {"approve": True, "note": "Thanks"}}}
    update = {"taskId": task_id, "inputResponses": answer}
    assert result(post(served.url, "tasks/update", update, caps=TASK_CAPS))["resultType"] == "complete"
    done = wait_for_task(served.url, task_id, lambda task: task["status"] in ("completed", "failed"))
    assert done["status"] == "completed" and done["result"]["isError"] is False
    paid = done["result"]["structuredContent"]
    assert (paid["expense_id"], paid["outcome"], paid["note"]) == (expense_id, "paid", "Thanks")
    [(_, status, payment, paid_by)] = _claims(example_dir, description)
    assert (status, payment, paid_by) == ("paid", paid["payment"], task_id)

    # A second approval of the same claim pays nothing: the task ends with a tool error.
    second = result(post(served.url, "tools/call", approve, caps=TASK_CAPS))["taskId"]
    refused = wait_for_task(served.url, second, lambda task: task["status"] == "completed")["result"]
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == f"{expense_id} is already paid ({paid['payment']})."
    assert _claims(example_dir, description) == [(int(expense_id[2:]), "paid", paid["payment"], task_id)]


def test_a_task_cancelled_while_it_waits_for_the_manager_pays_nothing(
    served: Served, example_dir: Path
) -> None:
    description = f"Hotel {uuid.uuid4().hex[:8]}"
    expense_id = _file_claim(served.url, description)
    approve = {"name": "approve_expense", "arguments": {"expense_id": expense_id}}
    task_id = result(post(served.url, "tools/call", approve, caps=TASK_CAPS))["taskId"]
    wait_for_task(served.url, task_id, lambda task: task["status"] == "input_required")
    ack = result(post(served.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS))
    assert ack["resultType"] == "complete"
    ended = wait_for_task(served.url, task_id, lambda task: task["status"] != "input_required")
    assert ended["status"] == "cancelled"
    assert _claims(example_dir, description)[0][1:] == ("submitted", None, None)


def test_without_the_tasks_extension_the_long_tool_runs_in_mrtr_rounds(
    served: Served, example_dir: Path
) -> None:
    description = f"Desk {uuid.uuid4().hex[:8]}"
    expense_id = _file_claim(served.url, description)
    approve = {"name": "approve_expense", "arguments": {"expense_id": expense_id}}
    asked = result(post(served.url, "tools/call", approve, caps=FORM_CAPS))
    assert asked["resultType"] == "input_required"
    (key,) = asked["inputRequests"]
    decline = {key: {"action": "accept", "content": {"approve": False, "note": "Not this quarter"}}}
    retry = {**approve, "requestState": asked["requestState"], "inputResponses": decline}
    declined = result(post(served.url, "tools/call", retry, caps=FORM_CAPS))
    assert declined["structuredContent"] == {
        "expense_id": expense_id,
        "outcome": "declined",
        "payment": None,
        "note": "Not this quarter",
    }
    assert _claims(example_dir, description)[0][1] == "submitted"


# docs/writing-tools.md: the page's own tests, run as written ------------------------------------


def _pytest(example_dir: Path, test_file: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``pytest TEST_FILE`` run in the page's directory, as its reader runs it: the environment's
    pytest and plugins, the page's pytest.ini, none of this project's configuration."""
    reader = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    return subprocess.run(
        # --basetemp: the run's temporary directories under this test's, not beside this session's.
        [sys.executable, "-m", "pytest", test_file, f"--basetemp={tmp_path / 'basetemp'}"],
        cwd=example_dir,
        env=reader,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_the_pages_replay_and_cancel_tests_pass_without_a_warning(example_dir: Path, tmp_path: Path) -> None:
    done = _pytest(example_dir, "test_docs_tools.py", tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "2 passed" in done.stdout, output
    assert "warning" not in output.lower(), output


def test_the_pages_test_on_a_real_server_passes_without_a_warning(example_dir: Path, tmp_path: Path) -> None:
    done = _pytest(example_dir, "test_docs_tools_served.py", tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "1 passed" in done.stdout, output
    assert "warning" not in output.lower(), output


def test_the_pages_tests_use_only_public_names() -> None:
    """No internals of longtools in a test a reader copies: ``longtools.testing`` says it all."""
    page = DOCS / "writing-tools.md"
    for test in ("# test_docs_tools.py", "# test_docs_tools_served.py"):
        text = python_block(page, test)
        for internal in ("TASK_MEMO", "ANSWER_SIGNAL", "Published", "longtools.workflows", "tests."):
            assert internal not in text, f"{test} uses {internal}"
