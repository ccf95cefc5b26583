"""Tasks that end (issue 25), on real ``longtools serve`` processes and their embedded Temporal.

A cancel ends a task whose workflow code keeps failing (it never runs to see the cancel): past
``LONGTOOLS_CANCEL_GRACE_S`` it is terminated and reads ``cancelled``, whichever way the cancel
came (``tasks/cancel``, ``task_cancel``, 2025's ``tasks/cancel``). An MRTR exchange whose client
does not come back within ``LONGTOOLS_MRTR_ABANDON_S`` has its task cancelled; one that keeps
coming back keeps it, and re-arms its ending once per half allowance, not once per round.

The settings are seconds here (a deployment's are half a minute and ten minutes); every wait is
for a condition, bounded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longtools.temporal import start_dev_server
from tests.conftest import Served, server_ready, spawn, start_server, worker_ready
from tests.pages import PageClient
from tests.wire import TASKS_EXTENSION, Legacy, eventually, get_task, post, result, wait_for_task

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
NO_TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
log = logging.getLogger(__name__)
GRACE_S = 2.0
ALLOWANCE_S = 2.0
HOLD_S = 0.1
ENDS_WITHIN_S = 30.0
"""Bound of every wait for a task to end: several times what it takes (grace, allowance, polls)."""
LINKS = "longtools.dev/answer-links"


ENV = {
    "LONGTOOLS_CANCEL_GRACE_S": str(GRACE_S),
    "LONGTOOLS_MRTR_ABANDON_S": str(ALLOWANCE_S),
    "LONGTOOLS_MRTR_WAIT_S": str(HOLD_S),
}


@pytest.fixture(scope="module")
def ends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = start_server(
        tmp_path_factory.mktemp("ends"),
        "--tools",
        "tests.ending_tools",
        env=ENV,
    )
    try:
        yield served
    finally:
        served.stop()


def _events(served: Served, name: str) -> list[dict[str, Any]]:
    lines = (json.loads(line) for line in served.log_text().splitlines() if line.startswith("{"))
    return [line for line in lines if line.get("event") == name]


def _started(served: Served, tool: str, before: int) -> str:
    """The id of the task of ``tool`` started after the first ``before`` starts (from the log: an
    MRTR client never sees its task's id)."""
    starts = [line for line in _events(served, "task_started") if line.get("tool") == tool]
    assert len(starts) > before, starts
    return str(starts[before]["task_id"])


def _starts(served: Served, tool: str) -> int:
    return sum(1 for line in _events(served, "task_started") if line.get("tool") == tool)


def _task(url: str, tool: str, arguments: dict[str, Any] | None = None) -> str:
    created = result(post(url, "tools/call", {"name": tool, "arguments": arguments or {}}, caps=TASK_CAPS))
    assert created["resultType"] == "task", created
    return str(created["taskId"])


def _cancel_modern(url: str, task_id: str) -> None:
    result(post(url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS))


def _cancel_by_tool(url: str, task_id: str) -> None:
    answer = result(
        post(url, "tools/call", {"name": "task_cancel", "arguments": {"taskId": task_id}}, caps={})
    )
    assert answer["isError"] is False, answer


def _cancel_2025(url: str, task_id: str) -> None:
    session = Legacy(url)
    session.open()
    result(session.request("tasks/cancel", {"taskId": task_id}))


CANCELS = {"tasks/cancel": _cancel_modern, "task_cancel": _cancel_by_tool, "2025 tasks/cancel": _cancel_2025}


@pytest.mark.parametrize("way", list(CANCELS))
def test_a_cancel_ends_a_task_whose_workflow_code_keeps_failing(ends: Served, way: str) -> None:
    """The workflow fails at its first step, for ever: without the grace's termination the task
    reads ``working`` until its TTL, however often it is cancelled."""
    task_id = _task(ends.url, "broken_at_start")
    assert get_task(ends.url, task_id)["status"] == "working"
    asked = time.monotonic()
    CANCELS[way](ends.url, task_id)
    ended = wait_for_task(ends.url, task_id, lambda task: task["status"] != "working", within=ENDS_WITHIN_S)
    took = time.monotonic() - asked
    assert ended["status"] == "cancelled", ended
    assert "error" not in ended and "result" not in ended
    assert took >= GRACE_S * 0.5, took  # terminated after its grace, not at once
    log.info(f"{way}: broken task cancelled {took:.2f} s after the cancel (grace {GRACE_S} s)")


def test_a_cancel_ends_a_task_whose_clean_up_keeps_failing(ends: Served) -> None:
    task_id = _task(ends.url, "broken_on_cancel")
    wait_for_task(ends.url, task_id, lambda task: task["status"] == "input_required")
    _cancel_modern(ends.url, task_id)
    ended = wait_for_task(
        ends.url,
        task_id,
        lambda task: task["status"] in ("cancelled", "failed", "completed"),
        within=ENDS_WITHIN_S,
    )
    assert ended["status"] == "cancelled", ended


def test_a_task_that_stops_when_cancelled_is_cancelled_at_once_and_stays_so(ends: Served) -> None:
    task_id = _task(ends.url, "wait", {"seconds": 600})
    asked = time.monotonic()
    _cancel_modern(ends.url, task_id)
    assert wait_for_task(ends.url, task_id, lambda task: task["status"] != "working")["status"] == "cancelled"
    assert time.monotonic() - asked < GRACE_S  # it stopped itself: nothing had to be terminated
    assert not any(line.get("task_id") == task_id for line in _events(ends, "task_terminated_after_cancel"))


def _round(
    url: str, tool: str, arguments: dict[str, Any], state: str | None = None, **extra: Any
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments, **extra}
    if state is not None:
        params["requestState"] = state
    return result(post(url, "tools/call", params, caps=NO_TASK_CAPS))


def test_an_exchange_whose_client_left_has_its_task_cancelled(ends: Served) -> None:
    """The client gets "not yet" and never comes back: its task is cancelled within one and a half
    allowances (plus the round's hold) of the round it left after."""
    before = _starts(ends, "wait")
    first = _round(ends.url, "wait", {"seconds": 600})
    left = time.monotonic()
    assert first["resultType"] == "input_required" and "inputRequests" not in first, first
    task_id = _started(ends, "wait", before)
    ended = wait_for_task(ends.url, task_id, lambda task: task["status"] != "working", within=ENDS_WITHIN_S)
    took = time.monotonic() - left
    assert ended["status"] == "cancelled", ended
    assert took >= ALLOWANCE_S, took
    log.info(
        f"abandoned exchange: task cancelled {took:.2f} s after the client left (allowance {ALLOWANCE_S} s)"
    )


def test_an_exchange_left_at_a_question_with_a_failing_clean_up_ends_too(ends: Served) -> None:
    """Asked a question, the client leaves; the cancel reaches a workflow whose clean-up fails, so
    the grace's termination ends it."""
    before = _starts(ends, "broken_on_cancel")
    first = _round(ends.url, "broken_on_cancel", {})
    assert first["resultType"] == "input_required" and first["inputRequests"], first
    task_id = _started(ends, "broken_on_cancel", before)
    ended = wait_for_task(
        ends.url,
        task_id,
        lambda task: task["status"] not in ("working", "input_required"),
        within=ENDS_WITHIN_S,
    )
    assert ended["status"] == "cancelled", ended


def test_a_client_that_keeps_coming_back_keeps_its_task_at_one_start_per_half_allowance(ends: Served) -> None:
    """Rounds every HOLD_S for three allowances: the task runs to its end, and its ending is
    re-armed about once per half allowance, not once per round."""
    before = _starts(ends, "wait")
    work_s = 3 * ALLOWANCE_S
    body = _round(ends.url, "wait", {"seconds": work_s})
    task_id = _started(ends, "wait", before)
    rounds = 1
    while body["resultType"] == "input_required":
        rounds += 1
        assert rounds < 200
        body = _round(ends.url, "wait", {"seconds": work_s}, body["requestState"])
    assert body["content"] == [{"type": "text", "text": f"waited {work_s}s"}], body
    armed = [line for line in _events(ends, "exchange_ending_armed") if line.get("task_id") == task_id]
    assert 1 <= len(armed) <= work_s / (ALLOWANCE_S / 2) + 2, (len(armed), rounds)
    assert rounds >= 2 * len(armed), (len(armed), rounds)
    log.info(f"busy exchange: {rounds} rounds in {work_s} s, {len(armed)} ending starts")


def test_a_client_that_comes_back_within_its_allowance_keeps_its_task(ends: Served) -> None:
    """Away for most of the allowance between rounds (a person reading), never past it."""
    before = _starts(ends, "wait")
    work_s = 3 * ALLOWANCE_S
    body = _round(ends.url, "wait", {"seconds": work_s})
    task_id = _started(ends, "wait", before)
    while body["resultType"] == "input_required":
        time.sleep(ALLOWANCE_S * 0.8)  # the client is away (the behaviour under test, not a wait)
        body = _round(ends.url, "wait", {"seconds": work_s}, body["requestState"])
    assert body["content"] == [{"type": "text", "text": f"waited {work_s}s"}], body
    assert get_task(ends.url, task_id)["status"] == "completed"


def test_the_api_that_took_the_cancel_or_served_the_round_may_die_at_once(tmp_path: Path) -> None:
    """Replicas on one Temporal: API ``a`` takes a cancel of a broken task and serves an MRTR
    round, and is killed (SIGKILL) right after; both tasks still end, read on API ``b``. The endings
    live in Temporal and run on the worker; neither API kept anything."""
    temporal = asyncio.run(start_dev_server(tmp_path / "temporal.db"))
    env = {**ENV, "LONGTOOLS_TOOLS": "tests.ending_tools"}
    args = ["--temporal-address", temporal.address]
    spawned = [
        spawn(tmp_path, ["api", "--port", "0", "--no-auth", *args], env),
        spawn(tmp_path, ["api", "--port", "0", "--no-auth", *args], env),
        spawn(tmp_path, ["worker", *args], env),
    ]
    started: list[Served] = []
    try:
        started.append(server_ready(spawned[0]))
        started.append(server_ready(spawned[1]))
        started.append(worker_ready(spawned[2]))
        a, b, _ = started
        broken = _task(a.url, "broken_at_start")
        first = _round(a.url, "wait", {"seconds": 600})
        assert first["resultType"] == "input_required", first
        left = _started(a, "wait", 0)
        _cancel_modern(a.url, broken)
        a.stop(signal.SIGKILL)
        for task_id in (broken, left):
            ended = wait_for_task(
                b.url, task_id, lambda task: task["status"] != "working", within=ENDS_WITHIN_S
            )
            assert ended["status"] == "cancelled", ended
    finally:
        for served in started:
            served.stop()
        for process, _ in spawned[len(started) :]:
            process.kill()
            process.wait()
        temporal.stop()


def test_an_exchange_that_hands_its_question_to_the_page_leaves_the_task_to_the_person(ends: Served) -> None:
    """A form-only client held in MRTR rounds meets a secret: its call ends with the link, and the
    task, no longer the exchange's, waits for the person past the exchange's allowance."""
    before = _starts(ends, "connect_mailbox")
    arguments = {"address": "support@example.com"}
    body = _round(ends.url, "connect_mailbox", arguments)
    while body["resultType"] == "input_required":  # "not yet": the workflow has not asked yet
        body = _round(ends.url, "connect_mailbox", arguments, body["requestState"])
    assert (
        body["isError"] is True and "waits for a person to answer on its page" in body["content"][0]["text"]
    )
    handed = time.monotonic()
    task_id = _started(ends, "connect_mailbox", before)
    # The person takes longer than the exchange's allowance: the task is not cancelled for it.
    # (It reads "working" to this form-only client: it waits for nothing but the page.)
    stays = eventually(
        lambda: (time.monotonic() - handed, get_task(ends.url, task_id)),
        lambda seen: seen[0] > 2 * ALLOWANCE_S + HOLD_S or LINKS not in seen[1].get("_meta", {}),
        within=ENDS_WITHIN_S,
    )[1]
    assert stays["status"] == "working" and LINKS in stays["_meta"], stays
    with PageClient(ends.base) as browser:
        browser.answer(next(iter(stays["_meta"][LINKS].values())), {"password": "x" * 12})
    done = wait_for_task(
        ends.url, task_id, lambda task: task["status"] != "input_required", within=ENDS_WITHIN_S
    )
    assert done["status"] == "completed" and done["result"]["structuredContent"]["outcome"] == "connected"


def test_a_round_replayed_after_its_exchange_gave_the_task_to_a_person_never_ends_it(ends: Served) -> None:
    """Suspected in review: the exchange's call ended with the link (its ending disarmed), the
    person answered, and the task asks its client again; a round of the exchange replayed then
    must not claim the task back: the ending it would arm would cancel it once that client left
    again. The replay comes when the deadline in its state is near, where a round re-arms."""
    before = _starts(ends, "approve_then_confirm")
    state = None
    body = _round(ends.url, "approve_then_confirm", {})
    while body["resultType"] == "input_required":  # "not yet": the workflow has not asked yet
        state = body["requestState"]
        body = _round(ends.url, "approve_then_confirm", {}, state)
    assert body["isError"] is True and state is not None, body
    handed = time.monotonic()
    task_id = _started(ends, "approve_then_confirm", before)
    with PageClient(ends.base) as person:
        person.answer(next(iter(body["_meta"][LINKS].values())), {"confirm": True})
    wait_for_task(ends.url, task_id, lambda task: "inputRequests" in task, within=ENDS_WITHIN_S)
    eventually(lambda: time.monotonic() - handed, lambda waited: waited > ALLOWANCE_S, within=ENDS_WITHIN_S)
    replayed = _round(ends.url, "approve_then_confirm", {}, state)
    assert replayed["resultType"] == "input_required" and replayed["inputRequests"], json.dumps(replayed)
    # Its client leaves again: nothing cancels the task, past every deadline an ending could have.
    left = time.monotonic()
    stays = eventually(
        lambda: (time.monotonic() - left, get_task(ends.url, task_id)),
        lambda seen: seen[0] > 2 * ALLOWANCE_S + GRACE_S + HOLD_S or seen[1]["status"] != "input_required",
        within=ENDS_WITHIN_S,
    )[1]
    assert stays["status"] == "input_required", stays
