"""Progress with numbers, re-asks that say why, and a tool's own "no" from an activity, over real
HTTP against a real ``longtools serve`` (``tests.progress_tools``).

``report(message, progress=, total=)`` is one call for workflow code and activities alike: a task
shows it as ``statusMessage`` (with "(3/10)") and ``_meta``; a held round (MRTR, or a 2025-era
call) as progress notifications whose value grows across rounds, never restarting at 1.

A task of steps (``stepped``: its workflow's k of 3 steps done, each step's activity j of 10 parts)
has one progress, k + j/10 of 3, which never runs backwards: in ``tasks/get``, in a held call's
notifications, in the terminal (tests/test_terminal_client.py) and on the task's page, in Chromium.
"""

from __future__ import annotations

import itertools
import json
import queue
import re
import secrets
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser import chromium
from tests.conftest import Served, start_server
from tests.test_terminal_client import ENV, LONGTOOLS
from tests.wire import (
    TASKS_EXTENSION,
    Legacy,
    eventually,
    headers_for,
    meta,
    post,
    result,
    sse_lines,
    wait_for_task,
)

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


STAGES: list[tuple[str, str, float]] = [
    # The file that lets the stepped task on, the statusMessage it then shows, its progress of 3.
    ("1.5", "Copying part 5 of 10 (0.5/3)", 0.5),
    ("1.10", "Copying part 10 of 10 (1/3)", 1),
    ("1.end", "Step 2 of 3 (1/3)", 1),
    ("2.5", "Copying part 5 of 10 (1.5/3)", 1.5),
    ("2.10", "Copying part 10 of 10 (2/3)", 2),
    ("2.end", "Step 3 of 3 (2/3)", 2),
    ("3.5", "Copying part 5 of 10 (2.5/3)", 2.5),
    ("3.10", "Copying part 10 of 10 (3/3)", 3),
]


def _stepped(url: str, tmp_path: Path) -> tuple[str, Path]:
    gate = tmp_path / f"gate-{secrets.token_hex(3)}"
    return _start(url, "stepped", {"gate": str(gate)}), gate


def _let_on(gate: Path, stage: str) -> None:
    Path(f"{gate}.{stage}").touch()


def _showing(message: str) -> Callable[[dict[str, Any]], bool]:
    return lambda task: task.get("statusMessage") == message


def _nondecreasing(values: list[float]) -> bool:
    return all(earlier <= later for earlier, later in itertools.pairwise(values))


def test_a_workflows_steps_and_its_activitys_parts_are_one_progress_that_never_runs_backwards(
    served: Served, tmp_path: Path
) -> None:
    """Ours: k of 3 steps done and a running step's activity at j of 10 read as k + j/10 of 3 in
    ``statusMessage`` and ``_meta``, every read along the way (the moment between an activity's
    end and the workflow's next report included) no lower than the one before."""
    task_id, gate = _stepped(served.url, tmp_path)
    read: list[dict[str, Any]] = []

    def shows(message: str) -> Any:
        def ready(task: dict[str, Any]) -> bool:
            read.append(task)
            return task.get("statusMessage") == message

        return ready

    first = wait_for_task(served.url, task_id, shows("Step 1 of 3 (0/3)"))
    assert first["_meta"][PROGRESS] == {"progress": 0, "total": 3}
    for stage, message, progress in STAGES:
        _let_on(gate, stage)
        shown = wait_for_task(served.url, task_id, shows(message))
        assert shown["_meta"][PROGRESS] == {"progress": progress, "total": 3}, shown
    _let_on(gate, "3.end")
    done = wait_for_task(served.url, task_id, lambda task: task["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "stepped"
    numbers = [task["_meta"][PROGRESS] for task in read if PROGRESS in task.get("_meta", {})]
    assert {number["total"] for number in numbers} == {3}, numbers  # never an activity's 10
    assert _nondecreasing([number["progress"] for number in numbers]), numbers


def test_a_second_activity_in_the_same_step_does_not_take_the_progress_back(
    served: Served, tmp_path: Path
) -> None:
    """Ours: a step whose first activity reached 10 of 10 stays that far while a second activity
    of the same step starts over at 5 of 10 (its message is shown; its share is behind)."""
    gate = tmp_path / f"gate-{secrets.token_hex(3)}"
    task_id = _start(served.url, "two_in_a_step", {"gate": str(gate)})
    for stage, message in [
        ("1.5", "Copying part 5 of 10 (0.5/2)"),
        ("1.10", "Copying part 10 of 10 (1/2)"),
        ("1.end", None),
        ("2.5", "Copying part 5 of 10 (1/2)"),
    ]:
        _let_on(gate, stage)
        if message is not None:
            wait_for_task(served.url, task_id, _showing(message))
    for stage in ("2.10", "2.end"):
        _let_on(gate, stage)
    done = wait_for_task(served.url, task_id, lambda task: task["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "two"


class _Lines:
    """A process's stream, read line by line on a thread: each line waited for with a bound."""

    def __init__(self, stream: Any) -> None:
        self.seen: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._lines.put(line)

    def until(self, line: str, within: float = 30) -> None:
        while line not in self.seen:
            self.seen.append(self._lines.get(timeout=within).rstrip("\n"))


def test_the_terminal_shows_the_one_progress_of_a_task_of_steps(served: Served, tmp_path: Path) -> None:
    """Ours (review N3): task watch's count is k + j/10 of 3, never an activity's j/10, and its
    message says the numbers once (the "(0.5/3)" of statusMessage is the count's)."""
    task_id, gate = _stepped(served.url, tmp_path)
    watch = subprocess.Popen(
        [LONGTOOLS, "task", "watch", served.url, task_id],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        lines = _Lines(watch.stderr)
        lines.until("task working 0/3: Step 1 of 3")
        for stage, message, progress in STAGES:
            _let_on(gate, stage)
            lines.until(f"task working {progress:g}/3: {message.rpartition(' (')[0]}")
        _let_on(gate, "3.end")
        assert watch.wait(timeout=30) == 0
        assert watch.stdout is not None and watch.stdout.read() == "stepped\n"
    finally:
        watch.kill()
        watch.communicate()
    counts = [re.match(r"task working ([\d.]+)/3: ", line) for line in lines.seen]
    assert all(counts), lines.seen  # every one of 3, never of 10
    assert _nondecreasing([float(count.group(1)) for count in counts if count]), lines.seen


class _HeldCall(threading.Thread):
    """A tools/call on MRTR rounds (no tasks extension) with a progressToken, read as it streams:
    the progress notifications as they come, then the final result."""

    def __init__(self, url: str, name: str, arguments: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.params: dict[str, Any] = {"name": name, "arguments": arguments}
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.outcome: dict[str, Any] | None = None

    def run(self) -> None:
        for turn in range(40):
            self.params["_meta"] = meta(FORM, progressToken=f"p{turn}")
            body = {"jsonrpc": "2.0", "id": turn, "method": "tools/call", "params": self.params}
            headers = headers_for("tools/call", self.params)
            message: dict[str, Any] = {}
            with httpx.stream("POST", self.url, json=body, headers=headers, timeout=120) as response:
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    response.read()
                    message = response.json()
                for message in sse_lines(response.iter_lines()):
                    self.progress += _progress([message])
                    if message.get("id") == turn:
                        break
            if "result" not in message:
                return
            answer = message["result"]
            if answer.get("resultType") != "input_required":
                self.outcome = answer
                return
            assert not answer.get("inputRequests"), answer  # the stepped task asks nothing
            self.params = {**self.params, "requestState": answer["requestState"]}


def test_a_held_call_is_told_the_same_one_progress_as_tasks_get(served: Served, tmp_path: Path) -> None:
    """Ours: each progress notification of a held call carries the task's one progress (of 3,
    never an activity's 10), each larger than the last (MCP's rule), in step with ``tasks/get``."""
    gate = tmp_path / f"gate-{secrets.token_hex(3)}"
    call = _HeldCall(served.url, "stepped", {"gate": str(gate)})
    call.start()
    expected: list[tuple[float, float | None, str | None]] = []
    for stage, message, progress in STAGES:
        _let_on(gate, stage)
        said = message.rpartition(" (")[0]
        if progress > (expected[-1][0] if expected else 0):
            expected.append((progress, 3, said))
            eventually(lambda: list(call.progress), lambda seen: len(seen) >= len(expected))
    _let_on(gate, "3.end")
    call.join(timeout=60)
    assert call.outcome is not None and call.outcome["content"][0]["text"] == "stepped", call.outcome
    assert call.progress == expected


def test_the_tasks_page_shows_the_one_progress_and_it_never_runs_backwards(
    served: Served, tmp_path: Path
) -> None:
    """Ours: the task's page in Chromium, following it live, shows k + j/10 of 3; every value its
    bar took (recorded in the page as the bar changed) no lower than the one before."""
    task_id, gate = _stepped(served.url, tmp_path)
    wait_for_task(served.url, task_id, lambda task: task.get("statusMessage") == "Step 1 of 3 (0/3)")
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{served.base}/tasks/{task_id}")
        words = page.locator("#live .progress span")
        expect(words).to_have_text("0 of 3")
        page.evaluate(
            """() => {
                window.seen = [];
                const note = () => {
                    const bar = document.querySelector("#live progress");
                    const words = document.querySelector("#live .progress span");
                    if (bar && words) window.seen.push([Number(bar.value), words.textContent]);
                };
                note();
                new MutationObserver(note).observe(
                    document.querySelector("#live"), {childList: true, subtree: true, attributes: true}
                );
            }"""
        )
        for stage, _, progress in STAGES:
            _let_on(gate, stage)
            expect(words).to_have_text(f"{progress:g} of 3")
        _let_on(gate, "3.end")
        expect(page.locator("#live")).to_have_attribute("data-done", "true")
        seen: list[tuple[float, str]] = [tuple(shown) for shown in page.evaluate("window.seen")]
    percents = [round(100 * progress / 3, 1) for _, _, progress in STAGES]
    assert set(percents) <= {percent for percent, _ in seen}, seen
    assert _nondecreasing([percent for percent, _ in seen]), seen
    assert all(words.endswith(" of 3") for _, words in seen), seen  # never an activity's "of 10"
