"""Waits that end, bounds that hold, and nothing left running, against a real ``longtools serve``
(REVIEW round 2). Temporal's own metrics (its frontend's requests and pending long polls) say
what each wait costs it; every principal of the server is a test's own, so bounds do not mix.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client

from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, Legacy, eventually, is_sse, post, result, sse_lines, sse_messages

GONE = tuple(f"gone{n}" for n in range(5))
PRINCIPALS = ("reset", "held", "status", "leave", "starts", "late", "result", "many", "caps", "listen", *GONE)
OPENS = 10
TOKENS = {name: secrets.token_urlsafe(24) for name in PRINCIPALS}
FORM: dict[str, Any] = {"elicitation": {"form": {}}}
TASKS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
LEGACY_TASKS: dict[str, Any] = {"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}}
WAIT_S = 2
HELD = 3
ACTIVE = 5
NAME = {"action": "accept", "content": {"name": "Ada"}}
YES = {"action": "accept", "content": {"ok": True}}


def auth(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture(scope="module")
def waits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {
        "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in TOKENS.items()),
        "LONGTOOLS_TASK_TOOL_WAIT_S": str(WAIT_S),
        "LONGTOOLS_MRTR_WAIT_S": str(WAIT_S),
        "LONGTOOLS_MAX_HELD_ROUNDS_PER_PRINCIPAL": str(HELD),
        "LONGTOOLS_MAX_ACTIVE_TASKS_PER_PRINCIPAL": str(ACTIVE),
        # A poll sooner than this is held (paced) while the task works: long enough for a test to
        # poll within it.
        "LONGTOOLS_TASK_POLL_INTERVAL_MS": "5000",
        "LONGTOOLS_MAX_LISTEN_OPENS_PER_MINUTE": str(OPENS),
    }
    tmp = tmp_path_factory.mktemp("waits")
    served = start_server(tmp, "--conformance-fixtures", "--tools", "tests.wait_tools", env=env)
    try:
        yield served
    finally:
        served.stop()


def _temporal(served: Served) -> dict[str, Any]:
    line = next(line for line in served.log_text().splitlines() if '"temporal_started"' in line)
    started: dict[str, Any] = json.loads(line)
    return started


def temporal_metric(served: Served, metric: str, operation: str) -> float:
    """One of the Temporal frontend's own metrics for ``operation`` (0 before its first use)."""
    text = httpx.get(_temporal(served)["metrics"]).text
    pattern = rf'^{metric}\{{namespace="default",operation="{operation}",service_name="frontend"\}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def describes(served: Served) -> float:
    return temporal_metric(served, "service_requests", "DescribeWorkflowExecution")


def long_polls(served: Served) -> float:
    """History long polls the API holds open in Temporal right now: its running watches (Temporal's
    own gauge of pending polls is not lowered when a poll is cancelled, measured on the dev server)."""
    text = httpx.get(f"{served.base}/metrics").text
    found = re.search(r"^longtools_watches (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def running_answer_records(served: Served) -> int:
    async def count() -> int:
        client = await Client.connect(_temporal(served)["address"])
        query = 'WorkflowId STARTS_WITH "longtools-answer-" AND ExecutionStatus="Running"'
        return (await client.count_workflows(query)).count

    return asyncio.run(count())


def final(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message that answers a request (JSON, or an SSE stream's last)."""
    message: dict[str, Any] = sse_messages(response)[-1] if is_sse(response) else response.json()
    return message


def call(
    served: Served, who: str, tool: str, arguments: dict[str, Any], caps: dict[str, Any]
) -> httpx.Response:
    return post(
        served.url, "tools/call", {"name": tool, "arguments": arguments}, caps=caps, headers=auth(who)
    )


def task_status(served: Served, who: str, task_id: str, timeout: float = 30) -> httpx.Response:
    params = {"name": "task_status", "arguments": {"taskId": task_id}}
    return post(served.url, "tools/call", params, caps={}, headers={**auth(who)}, timeout=timeout)


def through_task_tools(served: Served, who: str, tool: str, arguments: dict[str, Any]) -> str:
    """Start ``tool`` as a client with neither tasks nor elicitation does; its task id."""
    started = result(call(served, who, tool, arguments, caps={}))
    task_id: str = started["structuredContent"]["taskId"]
    return task_id


def is_bound(message: dict[str, Any], setting: str) -> bool:
    error = message.get("error") or {}
    return error.get("code") == -32600 and (error.get("data") or {}).get("limit") == setting


def test_clients_that_leave_open_questions_release_their_long_polls(waits: Served) -> None:
    """REVIEW 5: the holder's wait on its answer record outlived the request (24 h of long polls).

    First in the module: the watches other tests leave linger a while, and would blur the count."""
    idle = long_polls(waits)
    questions: list[tuple[Legacy, str]] = []
    kept: list[Iterator[dict[str, Any]]] = []
    with contextlib.ExitStack() as streams:
        for who in GONE:  # each its own principal: one principal may hold only HELD waits
            session = Legacy(waits.url, caps=FORM, headers=auth(who))
            session.open()
            client = streams.enter_context(httpx.Client(timeout=30))
            body = {
                "jsonrpc": "2.0",
                "id": "c1",
                "method": "tools/call",
                "params": {"name": "test_input_required_result_elicitation", "arguments": {}},
            }
            request = client.build_request("POST", waits.url, json=body, headers=session.headers())
            response = client.send(request, stream=True)
            streams.callback(response.close)
            messages = sse_lines(response.iter_lines())
            kept.append(messages)  # a reader dropped would close its stream
            question = next(messages)
            assert question["method"] == "elicitation/create"
            questions.append((session, question["id"]))
        # Past the holders' wait in memory, each waits on its record: one long poll each.
        eventually(lambda: long_polls(waits), lambda held: held >= idle + 5, within=10)
    # The five clients have gone.
    eventually(lambda: long_polls(waits), lambda held: held <= idle, within=5)
    assert eventually(lambda: running_answer_records(waits), lambda n: n == 0, within=10) == 0
    # A late answer hears that nobody waits for it.
    session, question_id = questions[0]
    late = session.answer(question_id, NAME)
    assert late.status_code == 400
    assert late.json()["error"]["message"] == (
        "This question is no longer open: it was answered, or the call that asked it has ended"
    )


# Waits that end ------------------------------------------------------------------------------


def test_a_wait_on_a_reset_task_follows_its_new_run_and_ends_by_its_bound(waits: Served) -> None:
    """REVIEW 2: after a reset the closed run's watch said "changed" for ever; the waiter spun on
    describes past its bound, and on after its client had left."""
    task_id = through_task_tools(waits, "reset", "slow_compute", {"seconds": 3600})
    assert result(task_status(waits, "reset", task_id))["structuredContent"]["status"] == "working"

    async def reset() -> None:
        client = await Client.connect(_temporal(waits)["address"])
        handle = client.get_workflow_handle(task_id)
        completed = [
            event.event_id
            async for event in handle.fetch_history_events()
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        ]
        await client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace=client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=task_id),
                reason="a test resets the task",
                workflow_task_finish_event_id=completed[0],
                request_id=str(uuid.uuid4()),
            )
        )

    asyncio.run(reset())
    before = describes(waits)
    began = time.monotonic()
    after = result(task_status(waits, "reset", task_id, timeout=WAIT_S + 15))
    took = time.monotonic() - began
    assert after["structuredContent"]["status"] == "working"
    assert took < WAIT_S + 10, took  # by its bound, give or take a loaded machine
    assert describes(waits) - before <= 4  # the reads of the new run, not a spin
    # Nobody waits now: Temporal is asked nothing more about it.
    quiet = describes(waits)
    time.sleep(2)  # a window to count in, not a synchronisation
    assert describes(waits) - quiet <= 1


def test_a_plain_wait_whose_client_leaves_ends_at_once(waits: Served) -> None:
    """REVIEW 10: a task_status (a plain-JSON request) went on waiting after its client had gone."""
    task_id = through_task_tools(waits, "leave", "slow_compute", {"seconds": 3600})
    with pytest.raises(httpx.ReadTimeout):
        task_status(waits, "leave", task_id, timeout=0.5)

    def left() -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in waits.log_text().splitlines() if '"mcp_request"' in line]
        return [
            line for line in lines if line.get("task_id") == task_id and line.get("outcome") == "client left"
        ]

    [ended] = eventually(left, within=10)
    assert ended["duration_ms"] < WAIT_S * 1000


def test_a_task_tool_wait_past_the_held_bound_is_refused_and_a_paced_poll_answers_at_once(
    waits: Served,
) -> None:
    """REVIEW 10: 30 concurrent task_status calls were all held, outside every bound."""
    task_id = through_task_tools(waits, "status", "slow_compute", {"seconds": 3600})
    poll = {"taskId": task_id}
    assert (
        result(post(waits.url, "tasks/get", poll, caps=TASKS, headers=auth("status")))["pollIntervalMs"]
        == 5000
    )
    barrier = threading.Barrier(30)

    def status() -> httpx.Response:
        barrier.wait(10)  # all at once: the first ones are still held when the last arrive
        return task_status(waits, "status", task_id)

    with ThreadPoolExecutor(30) as pool:
        waiting = [pool.submit(status) for _ in range(30)]
        # While the held ones wait, a poll sooner than its interval, which would be held till the
        # task changes, is answered at once: neither held past the bound nor refused.
        time.sleep(0.5)  # lets the 30 arrive first: the poll must meet the bound
        began = time.monotonic()
        polled = post(waits.url, "tasks/get", poll, caps=TASKS, headers=auth("status"))
        assert result(polled)["status"] == "working"
        assert time.monotonic() - began < WAIT_S
        messages = [future.result().json() for future in waiting]
    refused = [
        message for message in messages if is_bound(message, "LONGTOOLS_MAX_HELD_ROUNDS_PER_PRINCIPAL")
    ]
    answered = [message for message in messages if "result" in message]
    assert (len(answered), len(refused)) == (HELD, 30 - HELD), messages


def test_a_call_refused_by_the_held_bound_starts_no_task(waits: Served) -> None:
    """REVIEW 6: the call started its task before the bound refused it; each retry another."""
    with ThreadPoolExecutor(HELD + 2) as pool:
        held = [
            pool.submit(call, waits, "held", "slow_compute", {"seconds": 3600, "label": f"h{n}"}, FORM)
            for n in range(HELD + 2)
        ]
        messages = [final(future.result()) for future in held]
    refused = [m for m in messages if is_bound(m, "LONGTOOLS_MAX_HELD_ROUNDS_PER_PRINCIPAL")]
    assert len(refused) == 2, messages
    session = Legacy(waits.url, caps=LEGACY_TASKS, headers=auth("held"))
    session.open()

    def listed() -> int:
        return len(result(session.request("tasks/list"))["tasks"])

    eventually(listed, lambda count: count >= HELD, within=10)  # visibility lags a start a moment
    assert listed() == HELD


# Limits that hold ----------------------------------------------------------------------------


def test_concurrent_starts_do_not_pass_the_per_principal_task_bound(waits: Served) -> None:
    """REVIEW 7: 40 concurrent starts read one count and all started."""
    barrier = threading.Barrier(40)

    def start(number: int) -> dict[str, Any]:
        barrier.wait(10)
        return final(call(waits, "starts", "ask_then_wait", {}, caps=TASKS))

    with ThreadPoolExecutor(40) as pool:
        messages = list(pool.map(start, range(40)))
    started = [m for m in messages if m.get("result", {}).get("resultType") == "task"]
    refused = [m for m in messages if is_bound(m, "LONGTOOLS_MAX_ACTIVE_TASKS_PER_PRINCIPAL")]
    assert (len(started), len(refused)) == (ACTIVE, 40 - ACTIVE), messages


def test_listening_to_ids_the_caller_does_not_own_costs_temporal_nothing_and_opens_are_bounded(
    waits: Served,
) -> None:
    """REVIEW 11: a listen read every id it named, then might close at once; 20 requests of 100 ids
    made 2,000 describes, and closing streams were never counted."""
    before = describes(waits)
    made_up = [secrets.token_hex(20) for _ in range(50)] + [secrets.token_urlsafe(18) for _ in range(50)]
    params = {"notifications": {"taskIds": made_up}}
    answers = [
        final(post(waits.url, "subscriptions/listen", params, caps=TASKS, headers=auth("listen")))
        for _ in range(OPENS + 5)
    ]
    assert describes(waits) - before <= 1
    heard = [message for message in answers if "result" in message]
    refused = [message for message in answers if is_bound(message, "LONGTOOLS_MAX_LISTEN_OPENS_PER_MINUTE")]
    assert (len(heard), len(refused)) == (OPENS, 5), answers


def test_a_session_id_fits_whatever_capabilities_the_client_declares(waits: Served) -> None:
    """REVIEW 12: ~3 KB of experimental capabilities made a session id the server then refused."""
    noise = {f"vendor.{n}": {"blob": secrets.token_hex(64)} for n in range(24)}
    caps = {**FORM, "experimental": noise, "sampling": {"tools": {}}}
    session = Legacy(waits.url, caps=caps, headers=auth("caps"))
    session.open()
    assert len(session.session) < 4096
    assert result(session.request("tools/list"))["tools"]
    # What the server acts on is kept: the session still asks through forms.
    asked, final_message = _answered(session, "test_input_required_result_elicitation", [NAME])
    assert len(asked) == 1 and "result" in final_message


# Nothing left running ------------------------------------------------------------------------


def _answered(
    session: Legacy, tool: str, answers: list[dict[str, Any]], *, pause_s: float = 0.0
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Call ``tool`` in a 2025-era session, answering each pushed question ``pause_s`` after it
    arrives; the questions and the final message."""
    body = {"jsonrpc": "2.0", "id": "c1", "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    asked: list[dict[str, Any]] = []
    with httpx.stream("POST", session.url, json=body, headers=session.headers(), timeout=60) as stream:
        for message in sse_lines(stream.iter_lines()):
            if message.get("method") == "elicitation/create":
                asked.append(message)
                time.sleep(pause_s)  # the person takes a moment: part of the scenario
                assert session.answer(message["id"], answers[len(asked) - 1]).status_code == 202
            elif message.get("id") == "c1":
                return asked, message
    raise AssertionError(f"no answer to the call; asked {asked}")


def test_questions_answered_late_leave_no_answer_record_running(waits: Served) -> None:
    """REVIEW 4: an answer that came after the holder had started its record (0.5 s) left the
    record running for 24 h."""
    session = Legacy(waits.url, caps=FORM, headers=auth("late"))
    session.open()
    for _ in range(5):
        asked, ended = _answered(session, "test_input_required_result_elicitation", [NAME], pause_s=0.8)
        assert len(asked) == 1 and "result" in ended, ended
    assert eventually(lambda: running_answer_records(waits), lambda n: n == 0, within=10) == 0


def test_tasks_result_holding_a_question_ends_when_the_task_ends(waits: Served) -> None:
    """REVIEW 3 and 13: a 2025-11-25 tasks/result waited on its pushed question only, after the task
    was cancelled; the stale answer then met a closed workflow and was told "unavailable"."""
    session = Legacy(waits.url, caps=LEGACY_TASKS, headers=auth("result"))
    session.open()
    created = result(session.request("tools/call", {"name": "ask_then_wait", "arguments": {}, "task": {}}))
    task_id = created["task"]["taskId"]
    body = {"jsonrpc": "2.0", "id": "r1", "method": "tasks/result", "params": {"taskId": task_id}}
    with httpx.stream("POST", waits.url, json=body, headers=session.headers(), timeout=30) as stream:
        messages = sse_lines(stream.iter_lines())
        question = next(m for m in messages if m.get("method") == "elicitation/create")
        cancelled = result(session.request("tasks/cancel", {"taskId": task_id}))
        assert cancelled["status"] == "cancelled"
        ended = next(m for m in messages if m.get("id") == "r1")
    assert ended["result"]["isError"] is True
    assert ended["result"]["content"][0]["text"] == f"Task {task_id} was cancelled"
    late = session.answer(question["id"], YES)
    assert late.status_code == 400
    assert "no longer open" in late.json()["error"]["message"]
    assert '"temporal_error"' not in waits.log_text()


def test_tasks_result_asks_as_many_questions_as_the_task_has(waits: Served) -> None:
    """REVIEW 16: tasks/result counted every push as a round, so a task asking more than
    max_rounds (20) questions in a row failed with "answers ... did not fit them"."""
    session = Legacy(waits.url, caps=LEGACY_TASKS, headers=auth("many"))
    session.open()
    params = {"name": "many_questions", "arguments": {"questions": 25}, "task": {}}
    task_id = result(session.request("tools/call", params))["task"]["taskId"]
    body = {"jsonrpc": "2.0", "id": "r1", "method": "tasks/result", "params": {"taskId": task_id}}
    asked = 0
    with httpx.stream("POST", waits.url, json=body, headers=session.headers(), timeout=120) as stream:
        for message in sse_lines(stream.iter_lines()):
            if message.get("method") == "elicitation/create":
                asked += 1
                assert session.answer(message["id"], YES).status_code == 202
            elif message.get("id") == "r1":
                break
    assert "result" in message, message
    assert message["result"]["content"][0]["text"] == "25 of 25 yes"
    assert asked == 25
