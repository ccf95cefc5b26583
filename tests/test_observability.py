"""What an operator sees: /metrics moving for each flow, traces linking an exchange's requests, logs.

One ``serve`` with traces written to a file; every flow runs once; the counters are read before and
after from ``/metrics`` as Prometheus would.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.server.lowlevel import Server
from prometheus_client.parser import text_string_to_metric_families

from longtools.server._handlers import _opens_spans
from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, meta, post, result, wait_for_task

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
FORM_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("observed")
    env = {"LONGTOOLS_TRACES": f"file:{tmp / 'spans.jsonl'}"}
    server = start_server(tmp, "--conformance-fixtures", env=env)
    try:
        yield server
    finally:
        server.stop()


def _samples(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(f"{url}/metrics").text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _moved(before: dict[Any, float], after: dict[Any, float], name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


def _traceparent() -> tuple[str, str]:
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


def _call(url: str, name: str, arguments: dict[str, Any], caps: Any, traceparent: str, **more: Any) -> Any:
    params = {"name": name, "arguments": arguments, "_meta": meta(caps, traceparent=traceparent), **more}
    return result(post(url, "tools/call", params, caps=caps))


def _spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_each_flow_moves_its_metrics_and_its_requests_share_one_trace_attribute(served: Served) -> None:
    url, before = served.url, _samples(served.base)
    confirm = {"action": "accept", "content": {"confirm": True}}

    # A quick MRTR exchange of two rounds, continuing the client's trace.
    mrtr_trace, parent = _traceparent()
    ticket = _call(url, "create_ticket", {"title": "t", "customer": "ops"}, None, parent)
    ticket_id = ticket["structuredContent"]["ticketId"]
    asked = _call(url, "close_ticket", {"ticketId": ticket_id}, FORM_CAPS, parent)
    answer = {"close_reason": {"action": "accept", "content": {"reason": "Resolved"}}}
    state = asked["requestState"]
    _call(
        url,
        "close_ticket",
        {"ticketId": ticket_id},
        FORM_CAPS,
        parent,
        inputResponses=answer,
        requestState=state,
    )
    # A state that was tampered with.
    tampered = state[:-6] + ("AAAAAA" if not state.endswith("AAAAAA") else "BBBBBB")
    refused = post(
        url,
        "tools/call",
        {
            "name": "close_ticket",
            "arguments": {"ticketId": ticket_id},
            "inputResponses": answer,
            "requestState": tampered,
        },
        caps=FORM_CAPS,
    )
    assert refused.status_code == 400

    # A task with input, answered; the same long tool through MRTR rounds; a cancelled task; a failed one.
    task_trace, task_parent = _traceparent()
    created = _call(url, "confirm_delete", {"filename": "a.txt"}, TASK_CAPS, task_parent)
    task_id = created["taskId"]
    waiting = wait_for_task(url, task_id, lambda task: task["status"] == "input_required")
    [key] = waiting["inputRequests"]
    params = {
        "taskId": task_id,
        "inputResponses": {key: confirm},
        "_meta": meta(TASK_CAPS, traceparent=task_parent),
    }
    result(post(url, "tasks/update", params, caps=TASK_CAPS))
    wait_for_task(url, task_id, lambda task: task["status"] == "completed")

    rounds = _call(url, "confirm_delete", {"filename": "b.txt"}, FORM_CAPS, parent)
    while rounds.get("resultType") == "input_required":
        answers = {key: confirm for key in rounds.get("inputRequests") or {}}
        rounds = _call(
            url, "confirm_delete", {"filename": "b.txt"}, FORM_CAPS, parent,
            inputResponses=answers, requestState=rounds["requestState"],
        )  # fmt: skip
    assert rounds["content"][0]["text"] == "Deleted b.txt"

    slow = _call(url, "slow_compute", {"seconds": 60}, TASK_CAPS, parent)["taskId"]
    result(post(url, "tasks/cancel", {"taskId": slow}, caps=TASK_CAPS))
    wait_for_task(url, slow, lambda task: task["status"] == "cancelled")
    failed = _call(url, "protocol_error_job", {}, TASK_CAPS, parent)["taskId"]
    wait_for_task(url, failed, lambda task: task["status"] == "failed")

    # Task ends are recorded by the worker and reach /metrics within a drain (about a second).
    deadline = time.monotonic() + 15
    while True:
        after = _samples(served.base)
        if _moved(
            before, after, "longtools_tasks_finished_total", tool="protocol_error_job", status="failed"
        ):
            break
        assert time.monotonic() < deadline, "task ends never reached /metrics"
        time.sleep(0.2)

    def moved(name: str, **labels: str) -> float:
        return _moved(before, after, name, **labels)

    assert moved("longtools_mrtr_rounds_total", tool="close_ticket", outcome="started") == 1
    assert moved("longtools_mrtr_rounds_total", tool="close_ticket", outcome="input_required") == 1
    assert moved("longtools_mrtr_rounds_total", tool="close_ticket", outcome="completed") == 1
    assert moved("longtools_mrtr_rounds_total", tool="close_ticket", outcome="expired") == 1
    assert moved("longtools_mrtr_rounds_total", tool="confirm_delete", outcome="completed") == 1
    assert moved("longtools_tasks_created_total", tool="confirm_delete") == 2
    assert moved("longtools_tasks_created_total", tool="slow_compute") == 1
    assert moved("longtools_tasks_finished_total", tool="confirm_delete", status="completed") == 2
    assert moved("longtools_tasks_finished_total", tool="slow_compute", status="cancelled") == 1
    assert moved("longtools_task_first_input_seconds_count", tool="confirm_delete") == 2
    assert moved("longtools_task_duration_seconds_count", tool="confirm_delete", status="completed") == 2
    assert moved("longtools_requests_total", era="2026", method="tasks/update", outcome="complete") == 1

    # Traces: each round's span continues the client's trace, and one attribute links an exchange.
    spans = _spans(served.log_path.parent / "spans.jsonl")
    close_rounds = [
        span for span in spans
        if span["context"]["trace_id"] == f"0x{mrtr_trace}" and span["name"] == "tools/call close_ticket"
    ]  # fmt: skip
    assert len(close_rounds) == 2
    exchanges = {span["attributes"].get("longtools.exchange") for span in close_rounds}
    assert len(exchanges) == 1 and None not in exchanges
    assert [span["attributes"]["longtools.round"] for span in close_rounds] == [1, 2]
    task_spans = [span for span in spans if span["context"]["trace_id"] == f"0x{task_trace}"]
    assert {span["name"].split(" ")[0] for span in task_spans} == {"tools/call", "tasks/update"}
    assert {span["attributes"]["longtools.exchange"] for span in task_spans} == {task_id}

    # Logs: one event per request, with the task, the exchange and round, and a principal hash.
    events = [json.loads(line) for line in served.log_text().splitlines() if '"mcp_request"' in line]
    assert any(event.get("task_id") == task_id and event["method"] == "tasks/update" for event in events)
    rounds_logged = [event for event in events if event.get("tool") == "close_ticket" and "round" in event]
    assert {event["round"] for event in rounds_logged} >= {1, 2}
    assert all(len(event["principal"]) == 16 for event in events if "principal" in event)


def test_the_sdks_span_per_request_is_the_one_opened_only_while_traced() -> None:
    """Ours (issue 35): the SDK's default middleware is its span per request, which the API opens
    only while a tracer provider is installed; found by its class name, which an SDK upgrade
    could change without a word (the flow above shows the spans when traced)."""
    assert [_opens_spans(middleware) for middleware in Server("probe").middleware] == [True]
