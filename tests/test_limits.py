"""Every bound longtools puts on a caller, a task and a process, and the error that names it.

Over a bound is a JSON-RPC error (-32600, HTTP 400) whose ``data.limit`` names the setting that
raises it: never a 5xx, never a hang.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from temporalio.client import Client

from longtools._settings import Settings
from longtools.temporal import start_dev_server
from tests.conftest import Served, start_server, start_worker_and_api
from tests.wire import (
    TASKS_EXTENSION,
    Legacy,
    error,
    eventually,
    meta,
    metric,
    post,
    result,
    sse_lines,
    wait_for_task,
)

# Each test has its own principals: the bounds are per principal, and tasks outlive a test.
TOKENS = {name: secrets.token_urlsafe(24) for name in ("alice", "bob", "carol", "dave", "erin", "frank")}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
IDEMPOTENCY = "longtools.dev/idempotency-key"
FORMS: dict[str, Any] = {"elicitation": {"form": {}}}


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {
        "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in TOKENS.items()),
        "LONGTOOLS_MAX_ACTIVE_TASKS_PER_PRINCIPAL": "2",
        "LONGTOOLS_MAX_HELD_ROUNDS_PER_PRINCIPAL": "1",
        "LONGTOOLS_MAX_HELD_ROUNDS": "2",
        "LONGTOOLS_MAX_TASK_ANSWER_BYTES": "300",
    }
    served = start_server(
        tmp_path_factory.mktemp("bounded"),
        "--conformance-fixtures",
        "--tools",
        "tests.promise_tools",
        env=env,
    )
    try:
        yield served
    finally:
        served.stop()


def _bearer(name: str) -> dict[str, str | None]:
    return {"authorization": f"Bearer {TOKENS[name]}"}


def _as(name: str, url: str, method: str, params: dict[str, Any], caps: Any = None) -> httpx.Response:
    return post(url, method, params, caps=caps, headers=_bearer(name))


def _limit(response: httpx.Response) -> tuple[str, int]:
    failure = error(response, 400)
    assert failure["code"] == -32600, failure
    assert failure["data"]["limit"] in failure["message"]
    return failure["data"]["limit"], failure["data"]["value"]


def test_a_principal_may_run_only_so_many_tasks_at_once(bounded: Served) -> None:
    def start(name: str, **keyed: Any) -> httpx.Response:
        params: dict[str, Any] = {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}
        if keyed:
            params["_meta"] = meta(TASK_CAPS, **keyed)
        return _as(name, bounded.url, "tools/call", params, caps=TASK_CAPS)

    first = result(start("alice", **{IDEMPOTENCY: "first"}))  # each waits for a person: running
    result(start("alice"))
    assert _limit(start("alice")) == ("LONGTOOLS_MAX_ACTIVE_TASKS_PER_PRINCIPAL", 2)
    again = result(start("alice", **{IDEMPOTENCY: "first"}))  # an existing task is not a new one
    assert again["taskId"] == first["taskId"]
    assert result(start("bob"))["resultType"] == "task"  # the bound is per principal
    _as("alice", bounded.url, "tasks/cancel", {"taskId": first["taskId"]}, caps=TASK_CAPS)
    eventually(lambda: "error" not in start("alice").json())  # a slot is free once the task has ended


def test_held_rounds_are_bounded_per_principal_and_per_process(bounded: Served) -> None:
    """A held round here is ``slow_compute`` without the tasks extension, held while it works (the
    client declares elicitation, so it follows the call through rounds, not the task tools)."""
    held: list[httpx.Response] = []

    def hold(name: str) -> threading.Thread:
        def run() -> None:
            params = {"name": "slow_compute", "arguments": {"seconds": 5}}
            held.append(_as(name, bounded.url, "tools/call", params, caps=FORMS))

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    threads = [hold("carol")]
    eventually(lambda: metric(bounded.base, "longtools_mrtr_held_rounds") == 1)
    call = {"name": "slow_compute", "arguments": {"seconds": 5}}
    assert _limit(_as("carol", bounded.url, "tools/call", call, caps=FORMS)) == (
        "LONGTOOLS_MAX_HELD_ROUNDS_PER_PRINCIPAL",
        1,
    )
    threads.append(hold("dave"))
    eventually(lambda: metric(bounded.base, "longtools_mrtr_held_rounds") == 2)
    erin = _as("erin", bounded.url, "tools/call", call, caps=FORMS)
    assert _limit(erin) == ("LONGTOOLS_MAX_HELD_ROUNDS", 2)
    for thread in threads:
        thread.join(timeout=60)
    assert [response.status_code for response in held] == [200, 200]


def test_a_task_takes_only_so_many_bytes_of_answers(bounded: Served) -> None:
    call = {"name": "ask_reason", "arguments": {}}
    task_id = result(_as("frank", bounded.url, "tools/call", call, TASK_CAPS))["taskId"]

    def answer(key: str, reason: str) -> httpx.Response:
        wait_for_task(
            bounded.url, task_id, lambda now: key in now.get("inputRequests", {}), headers=_bearer("frank")
        )
        update = {
            "taskId": task_id,
            "inputResponses": {key: {"action": "accept", "content": {"reason": reason}}},
        }
        return _as("frank", bounded.url, "tasks/update", update, TASK_CAPS)

    # A blank reason fits the form (a string), not the model: the question is asked again.
    assert result(answer("input", " " * 200))["resultType"] == "complete"
    refused = answer("input-2", "Printer on fire, and the spare one too")
    assert _limit(refused) == ("LONGTOOLS_MAX_TASK_ANSWER_BYTES", 300)


def test_a_round_cannot_be_held_longer_than_five_minutes() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(mrtr_wait_s=301)
    assert "mrtr_wait_s" in str(refused.value)
    assert Settings(mrtr_wait_s=300).mrtr_wait_s == 300


def test_an_answer_sent_again_costs_the_task_one_signal(tmp_path: Path) -> None:
    """Ours (REVIEW 2.7): with no worker taking answers, every copy would otherwise be written to
    the task's history (each up to the body limit), towards Temporal's limit on its size."""
    temporal = asyncio.run(start_dev_server(tmp_path / "temporal" / "temporal.db"))
    tools = ("--conformance-fixtures", "--temporal-address", temporal.address)
    worker, api = start_worker_and_api(tmp_path, *tools, api_env={"LONGTOOLS_ANSWER_SETTLE_S": "0"})
    try:
        params = {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}
        task_id = result(post(api.url, "tools/call", params, caps=TASK_CAPS))["taskId"]
        wait_for_task(api.url, task_id, lambda now: now["status"] == "input_required")
        worker.stop()  # nobody takes the answers now: each one stays outstanding
        update = {
            "taskId": task_id,
            "inputResponses": {"input": {"action": "accept", "content": {"confirm": True}}},
        }
        for _ in range(3):
            result(post(api.url, "tasks/update", update, caps=TASK_CAPS))
        assert _answer_signals(temporal.address, task_id) == 1
    finally:
        api.stop()
        worker.stop()
        temporal.stop()


def _answer_signals(address: str, task_id: str) -> int:
    async def count() -> int:
        client = await Client.connect(address)
        signalled = 0
        async for event in client.get_workflow_handle(task_id).fetch_history_events():
            if event.workflow_execution_signaled_event_attributes.signal_name == "longtools.answer":
                signalled += 1
        return signalled

    return asyncio.run(count())


def test_a_2025_era_call_waiting_for_its_answer_counts_as_a_held_round(bounded: Served) -> None:
    """Issue 15: a pushed question's wait holds a connection as a held round does, and is bounded
    the same way."""
    session = Legacy(
        bounded.url,
        caps={"elicitation": {"form": {}}},
        headers={"authorization": f"Bearer {TOKENS['frank']}"},
    )
    session.open()
    body = {
        "jsonrpc": "2.0",
        "id": "held",
        "method": "tools/call",
        "params": {"name": "test_input_required_result_elicitation"},
    }
    with httpx.stream("POST", bounded.url, json=body, headers=session.headers(), timeout=60) as stream:
        messages = sse_lines(stream.iter_lines())
        question = next(messages)
        assert metric(bounded.base, "longtools_mrtr_held_rounds") == 1
        refused = session.request("tools/call", {"name": "test_input_required_result_elicitation"}).json()
        assert refused["error"]["data"] == {"limit": "LONGTOOLS_MAX_HELD_ROUNDS_PER_PRINCIPAL", "value": 1}
        assert (
            session.answer(question["id"], {"action": "accept", "content": {"name": "Ada"}}).status_code
            == 202
        )
        assert next(messages)["result"]["content"][0]["text"] == "Hello, Ada!"
    assert metric(bounded.base, "longtools_mrtr_held_rounds") == 0
