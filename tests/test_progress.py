"""Progress with numbers, re-asks that say why, and a tool's own "no" from an activity, over real
HTTP against a real ``longtools serve`` (``tests.progress_tools``).

``report(message, progress=, total=)`` is one call for workflow code and activities alike: a task
shows it as ``statusMessage`` (with "(3/10)") and ``_meta``; a held round (MRTR, or a 2025-era
call) as progress notifications whose value grows across rounds, never restarting at 1.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, Legacy, eventually, meta, post, result, sse_lines, wait_for_task

TASKS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
FORM: dict[str, Any] = {"elicitation": {"form": {}}}
PROGRESS = "longtools.dev/progress"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # A worker that stops lets a running activity go at once: one test leaves its gate closed.
    env = {"LONGTOOLS_WORKER_SHUTDOWN_S": "0"}
    server = start_server(tmp_path_factory.mktemp("progress"), "--tools", "tests.progress_tools", env=env)
    try:
        yield server
    finally:
        server.stop()


def _start(url: str, name: str, arguments: dict[str, Any]) -> str:
    created = result(post(url, "tools/call", {"name": name, "arguments": arguments}, caps=TASKS))
    task_id: str = created["taskId"]
    return task_id


def _progress(messages: list[dict[str, Any]]) -> list[tuple[float, float | None, str | None]]:
    return [
        (m["params"]["progress"], m["params"].get("total"), m["params"].get("message"))
        for m in messages
        if m.get("method") == "notifications/progress"
    ]


def test_a_task_shows_its_workflow_and_activity_progress_as_numbers(served: Served, tmp_path: Path) -> None:
    gate = tmp_path / f"gate-{secrets.token_hex(3)}"
    task_id = _start(served.url, "counts", {"gate": str(gate)})
    # From the activity's heartbeat: no history event, read from Temporal by tasks/get.
    first = wait_for_task(served.url, task_id, lambda t: t.get("statusMessage") == "Building (1/2)")
    assert first["_meta"][PROGRESS] == {"progress": 1, "total": 2}
    gate.touch()
    second = wait_for_task(served.url, task_id, lambda t: t.get("statusMessage") == "Building (2/2)")
    assert second["_meta"][PROGRESS] == {"progress": 2, "total": 2}
    Path(f"{gate}.2").touch()
    done = wait_for_task(served.url, task_id, lambda t: t["status"] == "completed")
    assert PROGRESS not in done.get("_meta", {}) and "statusMessage" not in done


def test_held_rounds_carry_the_numbers_and_never_go_back(served: Served) -> None:
    """MRTR without the tasks extension: the round before the question and the one after it each
    send progress; together the values only grow, and numbers keep their total."""
    seen: list[tuple[float, float | None, str | None]] = []
    params: dict[str, Any] = {"name": "counts", "arguments": {"ask": True}}
    for turn in range(20):
        params["_meta"] = meta(FORM, progressToken=f"p{turn}")
        response = post(served.url, "tools/call", params, timeout=60)
        assert response.status_code == 200, response.text
        messages = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        seen += _progress(messages)
        body = messages[-1]["result"] if messages else response.json()["result"]
        if body.get("resultType") != "input_required":
            break
        asked = body.get("inputRequests") or {}
        params = {
            "name": "counts",
            "arguments": {"ask": True},
            "requestState": body["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"go": True}} for key in asked},
        }
    assert body["content"][0]["text"] == "counted", body
    values = [value for value, _, _ in seen]
    assert values == sorted(set(values)), seen  # each one larger than the last, across rounds
    assert any(total == 4 for _, total, _ in seen), seen
    assert (3, None, "Checking") in seen, seen  # the round after the answer went on from 2


def test_a_2025_call_gets_progress_with_its_total(served: Served) -> None:
    session = Legacy(served.url, caps=FORM)
    session.open()
    call_id = f"call-{secrets.token_hex(3)}"
    body = {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": "counts", "arguments": {"ask": True}, "_meta": {"progressToken": "t"}},
    }
    messages: list[dict[str, Any]] = []
    with httpx.stream("POST", served.url, json=body, headers=session.headers(), timeout=60) as stream:
        for message in sse_lines(stream.iter_lines()):
            messages.append(message)
            if message.get("method") == "elicitation/create":
                answer = {"action": "accept", "content": {"go": True}}
                assert session.answer(message["id"], answer).status_code == 202
            elif message.get("id") == call_id:
                break
    assert messages[-1]["result"]["content"][0]["text"] == "counted", messages[-1]
    seen = _progress(messages)
    values = [value for value, _, _ in seen]
    assert values == sorted(set(values)), seen
    assert (2, 4, "Copying") in seen and (3, None, "Checking") in seen, seen


def test_a_reask_says_why_the_answer_was_refused(served: Served) -> None:
    task_id = _start(served.url, "picky", {})
    asked = wait_for_task(served.url, task_id, lambda t: t["status"] == "input_required")
    [key] = asked["inputRequests"]
    answer = {key: {"action": "accept", "content": {"day": "sun"}}}
    caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
    result(post(served.url, "tasks/update", {"taskId": task_id, "inputResponses": answer}, caps=caps))
    again = wait_for_task(served.url, task_id, lambda t: key not in (t.get("inputRequests") or {key: 0}))
    [question] = again["inputRequests"].values()
    assert question["params"]["message"] == (
        "That answer was not valid: day: must be a weekday, mon to fri. Which day?"
    ), question


def test_a_tool_error_from_an_activity_is_logged_as_an_outcome(served: Served) -> None:
    task_id = _start(served.url, "refuses", {})
    done = wait_for_task(served.url, task_id, lambda t: t["status"] == "completed")
    assert done["result"]["isError"] is True
    lines = eventually(
        lambda: [json.loads(line) for line in served.log_text().splitlines() if task_id in line],
        lambda found: any(line.get("event") == "activity_outcome" for line in found),
    )
    [outcome] = [line for line in lines if line.get("event") == "activity_outcome"]
    assert outcome["outcome"] == "tool_error" and outcome["activity"] == "tests.refuse"
    assert outcome["level"] == "info"
    failed = [line for line in served.log_text().splitlines() if "Completing activity as failed" in line]
    assert failed == [], failed  # an outcome, not a warning with a traceback
