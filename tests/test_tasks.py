"""The Tasks extension and long tools on the exact wire (raw JSON-RPC over HTTP, real Temporal).

Uses the conformance fixtures (real workflows): ``slow_compute``, ``confirm_delete``,
``multi_input``, ``failing_job`` (task support required), ``protocol_error_job``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.conftest import Served, start_server
from tests.wire import error, get_task, is_sse, post, result, wait_for_task

TASKS = "io.modelcontextprotocol/tasks"
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}
NO_TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def call(url: str, tool: str, arguments: dict[str, Any], caps: dict[str, Any] = TASK_CAPS) -> httpx.Response:
    return post(url, "tools/call", {"name": tool, "arguments": arguments}, caps=caps)


def start(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    created = result(call(url, tool, arguments))
    assert created["resultType"] == "task", created
    return created


def test_discover_advertises_the_extension(mcp_url: str) -> None:
    capabilities = result(post(mcp_url, "server/discover"))["capabilities"]
    assert capabilities["extensions"] == {TASKS: {}}
    assert "tasks" not in capabilities


def test_a_declaring_client_gets_a_flat_task_that_is_durable_at_once(mcp_url: str) -> None:
    created = start(mcp_url, "slow_compute", {"seconds": 0.5, "label": "wire"})
    assert set(created) == {
        "resultType",
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
        "_meta",
    }
    assert created["status"] == "working"
    assert isinstance(created["ttlMs"], int) and created["ttlMs"] > 0
    assert created["pollIntervalMs"] == 500  # working: LONGTOOLS_TASK_POLL_INTERVAL_MS
    assert _ISO.match(created["createdAt"]) and _ISO.match(created["lastUpdatedAt"])
    # Durable before the answer: the very next tasks/get finds it.
    first = get_task(mcp_url, created["taskId"])
    assert first["resultType"] == "complete" and first["taskId"] == created["taskId"]
    assert first["status"] in ("working", "completed")
    done = wait_for_task(mcp_url, created["taskId"], lambda t: t["status"] == "completed")
    assert done["result"]["content"] == [{"type": "text", "text": "Computed wire in 0.5s"}]
    assert done["result"]["isError"] is False
    assert "error" not in done and "inputRequests" not in done and "requestState" not in done


def test_input_mid_task_partial_answers_unknown_keys_and_a_bad_answer(mcp_url: str) -> None:
    created = start(mcp_url, "multi_input", {})
    task_id = created["taskId"]
    waiting = wait_for_task(mcp_url, task_id, lambda t: t["status"] == "input_required")
    assert set(waiting["inputRequests"]) == {"first", "second"}
    assert waiting["inputRequests"]["first"]["method"] == "elicitation/create"
    # Ours: a task waiting for a person suggests slower polling than a working one (500 ms).
    assert waiting["pollIntervalMs"] == 2000

    def update(responses: dict[str, Any]) -> httpx.Response:
        return post(mcp_url, "tasks/update", {"taskId": task_id, "inputResponses": responses}, caps=TASK_CAPS)

    # An answer that does not fit the form is refused with the reason, and nothing is taken.
    bad = error(update({"first": {"action": "accept", "content": {"confirm": "maybe"}}}), 400)
    assert bad["code"] == -32602 and "first" in bad["message"]
    assert set(get_task(mcp_url, task_id)["inputRequests"]) == {"first", "second"}
    # A partial answer (plus an unknown key, ignored) is acked with an empty result...
    ack = result(update({"first": {"action": "accept", "content": {"confirm": True}}, "nope": {"x": 1}}))
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
    # ...and a tasks/get right after the ack lists only what is still outstanding.
    after = get_task(mcp_url, task_id)
    assert after["status"] == "input_required" and set(after["inputRequests"]) == {"second"}
    # Answering an answered key again changes nothing.
    result(
        update({"first": {"action": "decline"}, "second": {"action": "accept", "content": {"name": "Ada"}}})
    )
    done = wait_for_task(mcp_url, task_id, lambda t: t["status"] == "completed")
    text = done["result"]["content"][0]["text"]
    assert '"confirm":true' in text and '"name":"Ada"' in text
    # Ours: the task's creation time is the one the API recorded at the start, on every read
    # (from what the API knows, or from Temporal after each change).
    assert {view["createdAt"] for view in (created, waiting, after, done)} == {created["createdAt"]}


def test_tool_errors_complete_and_protocol_errors_fail(mcp_url: str) -> None:
    failing = start(mcp_url, "failing_job", {})["taskId"]
    broken = start(mcp_url, "protocol_error_job", {})["taskId"]
    tool_error = wait_for_task(mcp_url, failing, lambda t: t["status"] != "working")
    assert tool_error["status"] == "completed" and tool_error["result"]["isError"] is True
    assert tool_error["result"]["content"][0]["text"] == "This job failed on purpose"
    failed = wait_for_task(mcp_url, broken, lambda t: t["status"] != "working")
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"] == {"code": -32603, "message": "The job hit an internal error on purpose"}


def test_cancel_is_acked_and_a_terminal_task_stays_terminal(mcp_url: str) -> None:
    task_id = start(mcp_url, "slow_compute", {"seconds": 600})["taskId"]
    ack = result(post(mcp_url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS))
    assert {key for key in ack if key != "_meta"} == {"resultType"}
    assert wait_for_task(mcp_url, task_id, lambda t: t["status"] != "working")["status"] == "cancelled"
    done_id = start(mcp_url, "slow_compute", {"seconds": 0})["taskId"]
    wait_for_task(mcp_url, done_id, lambda t: t["status"] == "completed")
    result(post(mcp_url, "tasks/cancel", {"taskId": done_id}, caps=TASK_CAPS))
    assert get_task(mcp_url, done_id)["status"] == "completed"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_tasks_methods_need_the_extension_declared_and_a_known_id(mcp_url: str, method: str) -> None:
    params: dict[str, Any] = {"taskId": "no-such-task"}
    if method == "tasks/update":
        params["inputResponses"] = {}
    undeclared = error(post(mcp_url, method, params, caps=NO_TASK_CAPS), 400)
    assert undeclared["code"] == -32021
    assert undeclared["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    unknown = error(post(mcp_url, method, params, caps=TASK_CAPS), 400)
    assert unknown == {"code": -32602, "message": "Failed to retrieve task: Task not found"}


def test_mcp_name_must_be_the_task_id_and_removed_methods_are_not_found(mcp_url: str) -> None:
    task_id = start(mcp_url, "slow_compute", {"seconds": 0})["taskId"]
    wrong = post(mcp_url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers={"mcp-name": "other"})
    assert error(wrong, 400)["code"] == -32020
    # An absent header is tolerated (fastmcp's tasks client sends none); only a contradiction is refused.
    unnamed = post(mcp_url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers={"mcp-name": None})
    assert result(unnamed)["taskId"] == task_id
    for removed in ("tasks/result", "tasks/list"):
        assert error(post(mcp_url, removed, {"taskId": task_id}, caps=TASK_CAPS), 404)["code"] == -32601


def test_a_required_task_tool_refuses_a_client_without_the_extension(mcp_url: str) -> None:
    refused = error(call(mcp_url, "failing_job", {}, caps=NO_TASK_CAPS), 400)
    assert refused["code"] == -32021
    assert refused["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


def test_without_the_extension_a_long_tool_runs_through_mrtr_rounds(mcp_url: str) -> None:
    args = {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}
    first = result(post(mcp_url, "tools/call", args, caps=NO_TASK_CAPS))
    assert first["resultType"] == "input_required"
    (key,) = first["inputRequests"]
    assert (
        first["inputRequests"][key]["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    )
    answered = {
        **args,
        "requestState": first["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
    }
    done = result(post(mcp_url, "tools/call", answered, caps=NO_TASK_CAPS))
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "Deleted a.txt"}]


def test_a_client_that_cannot_answer_gets_32021_not_a_task_that_waits_forever(mcp_url: str) -> None:
    """URL elicitation only: it follows the call through rounds, but cannot answer a form. (A
    client with no elicitation at all follows it through the task tools, see test_task_tools.)"""
    url_only: dict[str, Any] = {"elicitation": {"url": {}}}
    refused = error(call(mcp_url, "confirm_delete", {"filename": "b.txt"}, caps=url_only), 400)
    assert refused["code"] == -32021
    assert refused["data"]["requiredCapabilities"] == {"elicitation": {}}


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose MRTR rounds hold only briefly and whose tasks live 4 s."""
    served = start_server(
        tmp_path_factory.mktemp("impatient"),
        "--conformance-fixtures",
        env={"LONGTOOLS_MRTR_WAIT_S": "0.3", "LONGTOOLS_TASK_TTL_S": "4"},
    )
    try:
        yield served
    finally:
        served.stop()


def test_a_round_that_runs_out_of_time_returns_state_only_and_the_retry_finishes(impatient: Served) -> None:
    args = {"name": "slow_compute", "arguments": {"seconds": 1.5}}
    rounds = 0
    body = result(post(impatient.url, "tools/call", args, caps=NO_TASK_CAPS))
    while body["resultType"] == "input_required":
        assert set(body) - {"_meta"} == {"resultType", "requestState"}  # "not yet": no questions
        rounds += 1
        assert rounds < 20
        body = result(
            post(
                impatient.url, "tools/call", {**args, "requestState": body["requestState"]}, caps=NO_TASK_CAPS
            )
        )
    assert rounds >= 2
    assert body["content"] == [{"type": "text", "text": "Computed result in 1.5s"}]


def test_an_expired_task_is_gone(impatient: Served) -> None:
    task_id = start(impatient.url, "slow_compute", {"seconds": 0})["taskId"]
    wait_for_task(impatient.url, task_id, lambda t: t["status"] == "completed")
    deadline = time.monotonic() + 10
    while (gone := post(impatient.url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS)).status_code == 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert error(gone, 400) == {"code": -32602, "message": "Failed to retrieve task: Task has expired"}


def test_a_round_is_held_open_past_the_sse_switch_until_the_work_is_done(mcp_url: str) -> None:
    """One round, not a retry loop: after ~15 s the SDK switches the response to SSE and keeps the
    connection alive, so a client that caps its rounds still gets a tool longer than a few seconds."""
    response = call(mcp_url, "slow_compute", {"seconds": 17}, caps=NO_TASK_CAPS)
    assert is_sse(response)
    done = result(response)
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "Computed result in 17s"}]


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("tasks/get", {}, "params.taskId must be a string of 1 to 200 characters"),
        ("tasks/get", {"taskId": 5}, "params.taskId must be a string of 1 to 200 characters"),
        ("tasks/cancel", {"taskId": "x" * 201}, "params.taskId must be a string of 1 to 200 characters"),
        ("tasks/update", {"taskId": "x"}, "params.inputResponses must be an object of answers by key"),
    ],
)
def test_malformed_tasks_params_get_an_error_that_says_what_is_wrong(
    mcp_url: str, method: str, params: dict[str, Any], message: str
) -> None:
    if method == "tasks/update":
        params = {**params, "taskId": start(mcp_url, "confirm_delete", {"filename": "z"})["taskId"]}
    refused = error(post(mcp_url, method, params, caps=TASK_CAPS, headers={"mcp-name": None}), 400)
    assert refused == {"code": -32602, "message": message}


def test_serve_hands_a_new_task_to_its_own_worker_in_the_start_response(server: Served) -> None:
    """Eager start: `serve`'s worker shares the API's client, so Temporal's matching is skipped."""
    task_id = start(server.url, "slow_compute", {"seconds": 0})["taskId"]
    wait_for_task(server.url, task_id, lambda t: t["status"] == "completed")
    started = next(line for line in server.log_text().splitlines() if '"temporal_started"' in line)

    async def first_event() -> Any:
        client = await Client.connect(json.loads(started)["address"])
        async for event in client.get_workflow_handle(task_id).fetch_history_events():
            return event

    event = asyncio.run(first_event())
    assert event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    assert event.workflow_execution_started_event_attributes.eager_execution_accepted


@pytest.fixture(scope="module")
def inlining(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server that answers with the result when a task finishes within 1.5 s, and asks its
    pollers to come back in a minute."""
    env = {"LONGTOOLS_TASK_INLINE_MS": "1500", "LONGTOOLS_TASK_POLL_INTERVAL_MS": "60000"}
    served = start_server(tmp_path_factory.mktemp("inlining"), "--conformance-fixtures", env=env)
    try:
        yield served
    finally:
        served.stop()


def test_a_task_done_within_the_inline_window_is_answered_with_its_result(inlining: Served) -> None:
    quick = result(call(inlining.url, "slow_compute", {"seconds": 0, "label": "inline"}))
    assert quick["resultType"] == "complete"
    assert quick["content"] == [{"type": "text", "text": "Computed inline in 0s"}]
    assert "taskId" not in quick
    # Longer work, and work that fails, still come back as tasks, after the window at the latest.
    began = time.monotonic()
    slow = start(inlining.url, "slow_compute", {"seconds": 4, "label": "later"})
    assert 1.4 < time.monotonic() - began < 4
    failing = start(inlining.url, "failing_job", {})
    done = wait_for_task(inlining.url, failing["taskId"], lambda t: t["status"] != "working")
    assert done["status"] == "completed" and done["result"]["isError"] is True
    post(inlining.url, "tasks/cancel", {"taskId": slow["taskId"]}, caps=TASK_CAPS)


def test_a_poll_sooner_than_suggested_waits_for_the_task_to_change(inlining: Served) -> None:
    """Ours: a working task polled before the interval its last answer suggested is answered when
    it changes (or when the interval is over): an eager poller costs one held request, not one
    answer per poll, and sees the change at once."""
    created = start(inlining.url, "slow_compute", {"seconds": 3, "label": "paced"})
    assert created["status"] == "working" and created["pollIntervalMs"] == 60_000
    # Asked at once, 60 s too soon: the answer is the task once it has changed, which is its end.
    done = get_task(inlining.url, created["taskId"])
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "Computed paced in 3s"}]
    # A task that has ended is shown at once, however soon it is asked again.
    assert get_task(inlining.url, created["taskId"]) == done


def test_a_worker_that_caches_no_task_still_carries_each_task_through_its_questions(
    tmp_path: Path,
) -> None:
    """LONGTOOLS_WORKER_CACHED_TASKS=0: every step replays the task's history, nothing is lost."""
    served = start_server(tmp_path, "--conformance-fixtures", env={"LONGTOOLS_WORKER_CACHED_TASKS": "0"})
    try:
        task_id = start(served.url, "confirm_delete", {"filename": "a.txt"})["taskId"]
        asked = wait_for_task(served.url, task_id, lambda t: t["status"] == "input_required")
        (key,) = asked["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        post(served.url, "tasks/update", {"taskId": task_id, "inputResponses": answer}, caps=TASK_CAPS)
        done = wait_for_task(served.url, task_id, lambda t: t["status"] == "completed")
        assert done["result"]["isError"] is False
    finally:
        served.stop()
