"""longtools' promises under replays, cancellations, slow people and expiry, over real HTTP.

A side effect runs once however often a round is replayed; a task waits for a person as long as
its TTL says; no exchange ends in a silent dead end. The tools come from ``tests/promise_tools.py``
and write every side effect to ``<data-dir>/effects.txt``, which the tests read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from tests.conftest import Served, start_server, start_worker_and_api
from tests.promise_tools import effects
from tests.wire import (
    TASKS_EXTENSION,
    error,
    eventually,
    get_task,
    headers_for,
    is_sse,
    meta,
    post,
    result,
    sse_messages,
    wait_for_task,
)

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
YES = {"action": "accept", "content": {"ok": True}}
NO = {"action": "accept", "content": {"ok": False}}
FROZEN = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}
IDEMPOTENCY = "longtools.dev/idempotency-key"
STATE_TTL_S = 5


@pytest.fixture(scope="module")
def promises(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {
        "LONGTOOLS_STATE_TTL_S": str(STATE_TTL_S),
        "LONGTOOLS_IDEMPOTENCY_TTL_S": str(STATE_TTL_S),
        "LONGTOOLS_MAX_ROUNDS": "3",
        "LONGTOOLS_MRTR_WAIT_S": "1",
    }
    served = start_server(
        tmp_path_factory.mktemp("promises"),
        "--conformance-fixtures",
        "--tools",
        "tests.promise_tools",
        env=env,
    )
    try:
        yield served
    finally:
        served.stop()


def _data(served: Served) -> Path:
    return served.log_path.parent / "data"


def _call(url: str, tool: str, arguments: dict[str, Any], **params: Any) -> httpx.Response:
    caps = params.pop("caps", None)
    return post(url, "tools/call", {"name": tool, "arguments": arguments, **params}, caps=caps)


def _round(
    url: str, tool: str, arguments: dict[str, Any], state: str, answers: dict[str, Any], **more: Any
) -> httpx.Response:
    return _call(url, tool, arguments, requestState=state, inputResponses=answers, **more)


def _text(called: dict[str, Any]) -> str:
    return str(called["content"][0]["text"])


def _requests_of(served: Served, tool: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in served.log_text().splitlines() if '"mcp_request"' in line]
    return [line for line in lines if line.get("tool") == tool]


def _temporal_address(served: Served) -> str:
    started = next(line for line in served.log_text().splitlines() if '"temporal_started"' in line)
    return str(json.loads(started)["address"])


def _once_records_closed(address: str) -> list[WorkflowExecutionStatus | None]:
    async def statuses() -> list[WorkflowExecutionStatus | None]:
        client = await Client.connect(address)
        return [wf.status async for wf in client.list_workflows('WorkflowType="longtools.Once"')]

    return asyncio.run(statuses())


# 1. Run once, in every path ----------------------------------------------------------------------


def test_replaying_the_last_pre_phase_round_gives_the_same_task(promises: Served) -> None:
    """Ours (REVIEW 1.1): a proxy retry or a lost response must not start a second task."""
    args = {"label": "pre-phase replay"}
    asked = result(_call(promises.url, "start_after_confirm", args, caps=TASK_CAPS))
    assert asked["resultType"] == "input_required"
    final = {"confirm": YES}
    first = result(
        _round(promises.url, "start_after_confirm", args, asked["requestState"], final, caps=TASK_CAPS)
    )
    again = result(
        _round(promises.url, "start_after_confirm", args, asked["requestState"], final, caps=TASK_CAPS)
    )
    assert first["resultType"] == again["resultType"] == "task"
    assert again["taskId"] == first["taskId"]
    done = wait_for_task(promises.url, first["taskId"], lambda task: task["status"] == "completed")
    assert _text(done["result"]) == "started pre-phase replay"


def test_replaying_a_middle_round_does_not_fork_the_exchange(promises: Served) -> None:
    """Ours (REVIEW 1.2): replaying round 2 of 3 re-seals round 3's state with a fresh nonce; both
    copies must lead to the one recorded outcome, so the last round's side effect runs once."""
    args = {"label": "fork"}
    first = result(_call(promises.url, "three_rounds", args))
    second = result(_round(promises.url, "three_rounds", args, first["requestState"], {"first": YES}))
    replayed = result(_round(promises.url, "three_rounds", args, first["requestState"], {"first": YES}))
    assert second["inputRequests"].keys() == replayed["inputRequests"].keys() == {"second"}
    assert replayed["requestState"] != second["requestState"]  # sealed again, with a fresh nonce
    outcomes = [
        result(_round(promises.url, "three_rounds", args, state, {"second": YES}))
        for state in (second["requestState"], replayed["requestState"])
    ]
    assert [_text(outcome) for outcome in outcomes] == ["done fork", "done fork"]
    assert effects(_data(promises)).count("three_rounds fork") == 1


def _give_up_on(url: str, params: dict[str, Any]) -> None:
    """Send a request whose work waits for a release, and leave before it answers (a client that
    timed out, a proxy that dropped the connection): on the SSE path the server cancels the request."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url, json=body, headers=headers_for("tools/call", params), timeout=1)


def _lapsed(served: Served, state: str) -> bool:
    """Whether a three_rounds state minted earlier is refused as expired: a clock the server keeps."""
    response = _round(served.url, "three_rounds", {"label": "clock"}, state, {"first": YES})
    return response.status_code == 400 and response.json()["error"] == FROZEN


def test_a_round_cancelled_after_its_work_still_records_its_outcome(promises: Served) -> None:
    """Ours (REVIEW 1.3): the client goes away while the round's work runs; the work finishes, its
    outcome is recorded, and the replay gets it instead of "not known"."""
    args = {"label": "cancelled"}
    asked = result(_call(promises.url, "hold_effect", args))
    params = {"name": "hold_effect", "arguments": args, "requestState": asked["requestState"]}
    params |= {"inputResponses": {"go": YES}, "_meta": meta()}
    _give_up_on(promises.url, params)
    # Both rounds' lines logged: the server has let the second request go (its log line is written
    # when the request ends), while its work still waits for the release.
    eventually(lambda: len(_requests_of(promises, "hold_effect")), lambda n: n == 2)
    (_data(promises) / "release-cancelled").touch()
    replay = eventually(
        lambda: _round(promises.url, "hold_effect", args, asked["requestState"], {"go": YES}),
        lambda response: "still in progress" not in response.text,
    )
    assert _text(result(replay)) == "done cancelled"
    assert effects(_data(promises)).count("hold_effect cancelled") == 1


def test_an_idempotent_call_cancelled_after_its_work_never_runs_again(promises: Served) -> None:
    """Ours (REVIEW 1.3): neither after the client left, nor once the key's TTL has passed."""
    clock = result(_call(promises.url, "three_rounds", {"label": "clock"}))["requestState"]
    args = {"label": "keyed"}
    keyed = meta(None, **{IDEMPOTENCY: "cancelled-then-replayed", "progressToken": "p"})  # SSE path
    seen = len(_requests_of(promises, "keyed_effect"))
    _give_up_on(promises.url, {"name": "keyed_effect", "arguments": args, "_meta": keyed})
    eventually(lambda: len(_requests_of(promises, "keyed_effect")), lambda n: n > seen)
    (_data(promises) / "release-keyed").touch()
    replay = eventually(
        lambda: _call(promises.url, "keyed_effect", args, _meta=keyed),
        lambda response: "still in progress" not in response.text,
    )
    assert _text(result(replay)) == "done keyed"
    eventually(lambda: _lapsed(promises, clock), bool, within=STATE_TTL_S * 4)  # the key's TTL has passed
    assert _text(result(_call(promises.url, "keyed_effect", args, _meta=keyed))) == "done keyed"
    assert effects(_data(promises)).count("keyed_effect keyed") == 1


# 1d. A deployment of quick tools only ------------------------------------------------------------


def test_a_quick_tools_only_deployment_runs_a_worker_that_closes_its_run_once_records(
    tmp_path: Path,
) -> None:
    """Ours (REVIEW 1.4): ``longtools worker`` starts with no long tool, and completes the records."""
    from longtools.temporal import start_dev_server

    temporal = asyncio.run(start_dev_server(tmp_path / "temporal" / "temporal.db"))
    tools = ("--no-examples", "--tools", "tests.quick_tools", "--temporal-address", temporal.address)
    worker = api = None
    try:
        worker, api = start_worker_and_api(tmp_path, *tools)
        args = {"label": "quick only"}
        first = result(_call(api.url, "three_rounds", args))
        second = result(_round(api.url, "three_rounds", args, first["requestState"], {"first": YES}))
        done = result(_round(api.url, "three_rounds", args, second["requestState"], {"second": YES}))
        assert _text(done) == "done quick only"
        statuses = eventually(
            lambda: _once_records_closed(temporal.address),
            lambda found: len(found) == 2 and all(s == WorkflowExecutionStatus.COMPLETED for s in found),
        )
        assert len(statuses) == 2
    finally:
        for served in (api, worker):
            if served is not None:
                served.stop()
        temporal.stop()


# 2. A person may take as long as the task lives --------------------------------------------------


def test_a_long_tool_answered_after_the_state_ttl_gets_the_tasks_next_step(promises: Served) -> None:
    """Ours (REVIEW 1.5): a long tool's continuation lives as long as its task, not LONGTOOLS_STATE_TTL_S."""
    asked = result(_call(promises.url, "ask_reason", {}))
    assert set(asked["inputRequests"]) == {"input"}
    clock = result(_call(promises.url, "three_rounds", {"label": "clock"}))["requestState"]
    eventually(lambda: _lapsed(promises, clock), bool, within=STATE_TTL_S * 4)
    answer = {"input": {"action": "accept", "content": {"reason": "Printer on fire"}}}
    done = eventually(
        lambda: result(_round(promises.url, "ask_reason", {}, asked["requestState"], answer)),
        lambda called: called.get("resultType") == "complete",
    )
    assert _text(done) == "Printer on fire"


# 3. No silent dead ends --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def short_tasks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"LONGTOOLS_TASK_TTL_S": "2", "LONGTOOLS_MRTR_WAIT_S": "30"}
    served = start_server(tmp_path_factory.mktemp("short-tasks"), "--conformance-fixtures", env=env)
    try:
        yield served
    finally:
        served.stop()


def test_a_task_that_expires_during_a_held_round_is_an_expired_error(short_tasks: Served) -> None:
    """Ours (REVIEW 1.9): not a tool crash."""
    held = _call(short_tasks.url, "slow_compute", {"seconds": 60})  # held up to 30 s; the task lives 2
    answer = sse_messages(held)[-1] if is_sse(held) else held.json()
    failure = answer["error"]
    assert failure["code"] == -32602
    assert "expired" in failure["message"]
    assert "tool_crashed" not in short_tasks.log_text()


def test_pre_phase_rounds_count_towards_the_round_limit_and_name_their_exchange(promises: Served) -> None:
    """Ours (REVIEW 1.8): LONGTOOLS_MAX_ROUNDS is 3 here."""
    args = {"label": "never"}
    before = len(_requests_of(promises, "start_after_confirm"))
    state = result(_call(promises.url, "start_after_confirm", args))["requestState"]
    state = result(_round(promises.url, "start_after_confirm", args, state, {"confirm": NO}))["requestState"]
    refused = _round(promises.url, "start_after_confirm", args, state, {"confirm": NO})
    assert (
        error(refused, 400)["message"]
        == "This call took more than 3 rounds of questions; call the tool again"
    )
    # A request's log line is written as its response goes out: wait for the last one.
    rounds = eventually(
        lambda: _requests_of(promises, "start_after_confirm")[before:], lambda got: len(got) == 3
    )
    exchanges = {line.get("exchange") for line in rounds}
    assert len(exchanges) == 1 and None not in exchanges
    assert [line.get("round") for line in rounds] == [1, 2, 3]


def _mrtr_input_required(served: Served, tool: str) -> float:
    text = httpx.get(f"{served.base}/metrics").text
    sample = f'longtools_mrtr_rounds_total{{outcome="input_required",tool="{tool}"}}'
    found = [line for line in text.splitlines() if line.startswith(sample)]
    return float(found[0].rsplit(" ", 1)[1]) if found else 0.0


def test_still_working_rounds_are_not_counted_as_input_required(promises: Served) -> None:
    """Ours (REVIEW 1.10): a state-only "not yet" round asks the client nothing."""
    before = _mrtr_input_required(promises, "slow_compute")
    working = result(_call(promises.url, "slow_compute", {"seconds": 30}))  # held 1 s, then "not yet"
    assert working["resultType"] == "input_required" and "inputRequests" not in working
    assert _mrtr_input_required(promises, "slow_compute") == before


def test_ask_form_says_an_answer_was_not_valid_once(promises: Served) -> None:
    """Ours (REVIEW 1.10): the message does not grow with every retry."""
    task = result(_call(promises.url, "ask_reason", {}, caps=TASK_CAPS))
    blank = {"action": "accept", "content": {"reason": " "}}
    for key in ("input", "input-2"):
        wait_for_task(promises.url, task["taskId"], _asking(key))
        update = {"taskId": task["taskId"], "inputResponses": {key: blank}}
        result(post(promises.url, "tasks/update", update, caps=TASK_CAPS))
    third = wait_for_task(promises.url, task["taskId"], lambda now: "input-3" in now.get("inputRequests", {}))
    message = third["inputRequests"]["input-3"]["params"]["message"]
    assert message == "That answer was not valid: reason: a reason cannot be blank. Why?"
    assert get_task(promises.url, task["taskId"])["status"] == "input_required"


def _asking(key: str) -> Callable[[dict[str, Any]], bool]:
    return lambda task: key in task.get("inputRequests", {})
