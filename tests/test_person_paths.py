"""How a person's question reaches a person through clients that could not pass it on before: each
is told where the page is, in something it shows. Ours (issue 31, REVIEW H5), against the session's
real ``serve`` (no auth: on loopback nobody signs in) and the real client.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

from tests.pages import PageClient
from tests.wire import TASKS_EXTENSION, Legacy, is_sse, post, result, sse_messages

ROOT = Path(__file__).resolve().parent.parent
INSPECTOR = ROOT / "tests" / "clients" / "inspector.sh"
LINKS = "longtools.dev/answer-links"


def _inspector(url: str, *args: str, exits: int = 0) -> dict[str, Any]:
    done = subprocess.run(
        [str(INSPECTOR), url, "--transport", "http", "--protocol-era", "modern", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == exits, done.stderr
    printed: dict[str, Any] = json.loads(done.stdout)["result"]
    return printed


def _call(url: str, tool: str, arguments: dict[str, Any], *, exits: int = 0) -> dict[str, Any]:
    named = ("--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments))
    return _inspector(url, *named, exits=exits)


def test_the_inspector_cli_in_the_modern_era_prints_the_link_of_a_persons_question(mcp_url: str) -> None:
    """It follows a task and prints only its end; a task that waits for a person has none until
    they answer, so its call answers once the task asks, in words, with the link."""
    customer = f"c-{secrets.token_hex(4)}"
    ticket = _call(mcp_url, "create_ticket", {"title": "From the Inspector", "customer": customer})
    ticket_id = ticket["structuredContent"]["ticketId"]
    # Not the tool's result: with its output schema, a tool error (exit 5, printed all the same),
    # the task in words, the links in _meta too.
    asked = _call(mcp_url, "bulk_close_tickets", {"customer": customer}, exits=5)
    assert asked["isError"] is True
    [link] = asked["_meta"][LINKS].values()
    said = asked["content"][0]["text"]
    assert link in said and "structuredContent" not in asked
    task_id = said.split('"')[1]
    assert said.startswith(f'Task "{task_id}" (bulk_close_tickets) is waiting for an answer')
    with PageClient(mcp_url.removesuffix("/mcp")) as person:
        person.answer(link, {"confirm": True})
    shown = _call(mcp_url, "task_status", {"taskId": task_id})["structuredContent"]
    while shown["status"] in ("working", "input_required"):
        shown = _call(mcp_url, "task_status", {"taskId": task_id})["structuredContent"]
    assert shown["status"] == "completed"
    assert shown["result"]["structuredContent"]["closed"] == [ticket_id]


def test_a_tasks_client_without_elicitation_gets_its_task_at_once_from_a_tool_that_asks_no_person(
    mcp_url: str,
) -> None:
    """Only a tool registered with asks_person=True is answered in words: any other's call gets
    its task at once (SEP-2575's per-request opt-in, which the conformance suite checks)."""
    caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
    params = {"name": "slow_compute", "arguments": {"seconds": 60}}
    created = result(post(mcp_url, "tools/call", params, caps=caps))
    assert created["resultType"] == "task" and created["status"] == "working", created
    result(post(mcp_url, "tasks/cancel", {"taskId": created["taskId"]}, caps=caps))


def test_a_2025_06_18_session_that_declares_url_mode_is_never_sent_a_url_request(mcp_url: str) -> None:
    """Codex CLI 0.171.0 declares url at 2025-06-18, whose elicitation has no mode: it rejected the
    URL request it was sent (REVIEW H3). Its call now ends with the link, and nothing is pushed."""
    customer = f"c-{secrets.token_hex(4)}"
    session = Legacy(mcp_url, caps={"elicitation": {"form": {}, "url": {}}}, version="2025-06-18")
    assert session.open()["protocolVersion"] == "2025-06-18"
    made = result(
        session.request(
            "tools/call", {"name": "create_ticket", "arguments": {"title": "t", "customer": customer}}
        )
    )
    assert made["isError"] is False, made
    response = session.request(
        "tools/call", {"name": "bulk_close_tickets", "arguments": {"customer": customer}}
    )
    messages = sse_messages(response) if is_sse(response) else [response.json()]
    assert not [m for m in messages if m.get("method") == "elicitation/create"], messages
    ended = messages[-1]["result"]
    assert ended["isError"] is True
    [link] = ended["_meta"][LINKS].values()
    assert link in ended["content"][0]["text"]
