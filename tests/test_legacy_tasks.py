"""The 2025-11-25 tasks API (VS Code, the MCP Inspector), against a real ``longtools serve``.

The TypeScript SDK 1.x client's experimental tasks API drives a long tool as a task, as a host
would; raw HTTP pins the wire: the task's shape at that revision, its errors, who sees which task.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import OWNER_TOKENS, Served, bearer, run_driver, start_server
from tests.pages import person_answering
from tests.wire import ALL_CAPS, Legacy, error, eventually, result, sse_lines

TASKS_CLIENT_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "tasks": {"list": {}, "cancel": {}},
}
"""A host that shows forms and sends its person to pages: a person's question comes as a URL request."""
RELATED = "io.modelcontextprotocol/related-task"


def _ts(url: str, script: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    out = run_driver("tasks_client", url, script, tmp_path)
    assert "connectError" not in out, out["connectError"]
    return out


def _session(url: str, who: str, caps: dict[str, Any] = ALL_CAPS, version: str = "2025-11-25") -> Legacy:
    session = Legacy(url, caps=caps, version=version, headers=bearer(who))
    session.open()
    return session


def _call(session: Legacy, name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return result(session.request("tools/call", {"name": name, "arguments": arguments, **params}))


def _tickets(session: Legacy, customer: str, count: int) -> list[str]:
    made = [_call(session, "create_ticket", {"title": f"t{n}", "customer": customer}) for n in range(count)]
    return [ticket["structuredContent"]["ticketId"] for ticket in made]


def _listed(session: Legacy) -> list[str]:
    """Every task id ``tasks/list`` shows, page after page."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = result(session.request("tasks/list", {"cursor": cursor} if cursor else {}))
        ids += [task["taskId"] for task in page["tasks"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            return ids


def test_the_typescript_sdk_runs_a_long_tool_as_a_task_and_lists_only_its_own(
    owners: Served, tmp_path: Path
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    tickets = _tickets(_session(owners.url, "ann"), customer, 2)
    bens = _ts(
        owners.url,
        {
            "token": OWNER_TOKENS["ben"],
            "capabilities": TASKS_CLIENT_CAPS,
            "steps": [{"op": "createTask", "name": "confirm_delete", "arguments": {"filename": "b.txt"}}],
        },
        tmp_path,
    )
    ben_task = bens["results"][0]["task"]["taskId"]
    url_file = tmp_path / "urls.jsonl"
    bulk = {"name": "bulk_close_tickets", "arguments": {"customer": customer}, "timeoutMs": 60_000}
    script = {
        "token": OWNER_TOKENS["ann"],
        "capabilities": TASKS_CLIENT_CAPS,
        "answers": [{"action": "accept"}],  # the approval's URL request: ann went to the page
        "urlFile": str(url_file),
        "steps": [
            {"op": "listTools"},
            {"op": "callToolAsTask", **bulk},
            {"op": "createTask", "name": "confirm_delete", "arguments": {"filename": "a.txt"}},
            {"op": "createTask", "name": "slow_compute", "arguments": {"seconds": 0}},
            {"op": "listTasks"},
            {"op": "getTask", "taskId": ben_task},
        ],
    }
    approval = {"confirm": True, "reason": "Duplicate"}
    with person_answering(owners.base, url_file, approval, token=OWNER_TOKENS["ann"]) as answered:
        anns = _ts(owners.url, script, tmp_path)
    assert anns["protocolVersion"] == "2025-11-25"
    assert anns["serverCapabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    listed = {tool["name"]: tool for tool in anns["results"][0]["tools"]}
    assert listed["bulk_close_tickets"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in listed["create_ticket"]

    # created → input_required → the approval's URL request pushed on tasks/result, tied to the
    # task → ann answers on its page → completed
    events = [event for event in anns["events"] if event["step"] == 1]
    created = events[0]
    assert created["type"] == "created"
    task_id = created["taskId"]
    assert created["task"]["status"] == "working" and created["task"]["ttl"] > 0
    assert "input_required" in [event.get("status") for event in events]
    [asked] = anns["elicitations"]
    assert (asked["params"]["mode"], asked["params"]["message"]) == (
        "url",
        f"Close 2 tickets for {customer}?",
    )
    assert answered == [asked["params"]["url"]]
    assert asked["relatedTask"] == {"taskId": task_id}
    final = events[-1]
    assert final["type"] == "result"
    assert final["result"]["_meta"][RELATED] == {"taskId": task_id}
    assert sorted(final["result"]["structuredContent"]["closed"]) == sorted(tickets)
    assert final["result"]["structuredContent"]["reason"] == "Duplicate"
    assert "resultType" not in final["result"]  # a 2026 field never reaches a 2025 client

    # tasks/list: the caller's own tasks only, over pages (2 per page on this server). Temporal's
    # visibility shows a start a moment after it (and a task that closes while the pages are read
    # may move past the cursor): the tasks just started are looked for until they show.
    pages = anns["results"][4]
    mine = {task_id, anns["results"][2]["task"]["taskId"], anns["results"][3]["task"]["taskId"]}
    assert ben_task not in pages["taskIds"]
    assert pages["pages"] >= 2
    eventually(lambda: set(_listed(_session(owners.url, "ann"))), lambda listed: mine <= listed)
    assert anns["results"][5]["error"]["code"] == -32602  # ben's task is not found for ann
    bens_list = _listed(_session(owners.url, "ben"))
    assert ben_task in bens_list and not mine & set(bens_list)


def test_a_task_at_2025_11_25_has_that_revisions_shape(owners: Served) -> None:
    session = _session(owners.url, "ann")
    created = _call(session, "confirm_delete", {"filename": "x"}, task={"ttl": 60000})
    task = created["task"]
    assert set(task) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}
    assert "ttlMs" not in task and "resultType" not in created
    assert created["_meta"]["io.modelcontextprotocol/model-immediate-response"]
    shown = eventually(
        lambda: result(session.request("tasks/get", {"taskId": task["taskId"]})),
        lambda got: got["status"] == "input_required",
    )
    assert "inputRequests" not in shown  # asked through tasks/result at this revision
    cancelled = result(session.request("tasks/cancel", {"taskId": task["taskId"]}))
    assert cancelled["status"] == "cancelled"
    again = error(session.request("tasks/cancel", {"taskId": task["taskId"]}), 200)
    assert again == {"code": -32602, "message": "Cannot cancel task: already in terminal status 'cancelled'"}


def test_tasks_result_pushes_the_question_and_status_on_its_stream(owners: Served) -> None:
    session = _session(owners.url, "ann")
    task_id = _call(session, "confirm_delete", {"filename": "y"}, task={})["task"]["taskId"]
    body = {"jsonrpc": "2.0", "id": "r1", "method": "tasks/result", "params": {"taskId": task_id}}

    seen: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", owners.url, content=json.dumps(body), headers=session.headers(), timeout=60
    ) as got:
        for message in sse_lines(got.iter_lines()):
            seen.append(message)
            if message.get("method") == "elicitation/create":
                assert message["params"]["_meta"][RELATED] == {"taskId": task_id}
                answered = session.answer(message["id"], {"action": "accept", "content": {"confirm": True}})
                assert answered.status_code == 202
            if "result" in message or "error" in message:
                break
    methods = [message.get("method") for message in seen]
    assert "elicitation/create" in methods
    statuses = [m["params"]["status"] for m in seen if m.get("method") == "notifications/tasks/status"]
    assert statuses[-1] == "completed"
    assert seen[-1]["result"]["_meta"][RELATED] == {"taskId": task_id}


@pytest.mark.parametrize("tool", ["failing_job", "protocol_error_job"])
def test_a_failed_task_answers_tasks_result_as_the_call_would_have(owners: Served, tool: str) -> None:
    """2025-11-25: a tool result with isError is a failed task, and so is a JSON-RPC error;
    tasks/result answers with that result, or that error."""
    session = _session(owners.url, "ann")
    task_id = _call(session, tool, {}, task={})["task"]["taskId"]
    failed = eventually(
        lambda: result(session.request("tasks/get", {"taskId": task_id})),
        lambda got: got["status"] == "failed",
    )
    assert failed["statusMessage"]
    outcome = session.request("tasks/result", {"taskId": task_id}).json()
    if tool == "failing_job":
        assert outcome["result"]["isError"] is True
        assert outcome["result"]["content"][0]["text"] == failed["statusMessage"]
    else:
        assert outcome["error"]["message"] == failed["statusMessage"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/get", {"taskId": "no-such-task"}),
        ("tasks/result", {"taskId": "no-such-task"}),
        ("tasks/cancel", {"taskId": "no-such-task"}),
        ("tasks/list", {"cursor": "forged.cursor"}),
    ],
)
def test_unknown_tasks_and_forged_cursors_are_invalid_params(
    owners: Served, method: str, params: dict[str, Any]
) -> None:
    assert error(_session(owners.url, "ann").request(method, params), 200)["code"] == -32602


def test_what_2025_11_25_does_not_allow_is_method_not_found(owners: Served) -> None:
    session = _session(owners.url, "ann")
    # A quick tool is no task; a tool that requires one is not called without.
    quick = session.request("tools/call", {"name": "echo", "arguments": {"text": "x"}, "task": {}})
    assert error(quick, 200)["code"] == -32601
    required = session.request("tools/call", {"name": "failing_job", "arguments": {}})
    assert error(required, 200)["code"] == -32601
    assert (
        error(session.request("tasks/update", {"taskId": "x", "inputResponses": {}}), 200)["code"] == -32601
    )
    # Earlier revisions have no tasks at all: params.task is ignored, tasks/* are unknown.
    older = _session(owners.url, "ann", version="2025-06-18")
    plain = _call(older, "slow_compute", {"seconds": 0}, task={})
    assert "task" not in plain and plain["isError"] is False
    assert error(older.request("tasks/list"), 200)["code"] == -32601


def test_tasks_list_on_a_fresh_server_before_any_task_is_empty(tmp_path: Path) -> None:
    """Ours (issue 25): the owner search attribute is registered by the first start; a listing
    before it asked Temporal about an attribute the namespace lacked and got -32603."""
    served = start_server(tmp_path, "--no-examples")
    try:
        session = Legacy(served.url, caps=TASKS_CLIENT_CAPS, version="2025-11-25")
        session.open()
        assert _listed(session) == []
    finally:
        served.stop()
