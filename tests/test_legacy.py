"""The 2025 protocol era on the same endpoint, against a real ``longtools serve``.

Raw HTTP for the wire's exact shape, then three independent 2025-era clients: the official ``mcp``
client in legacy mode, the TypeScript SDK 1.x client and the MCP Inspector CLI (both from
conformance/package-lock.json). Sessions are sealed tokens, so nothing here depends on which
process answers; tests/test_replicas.py shows that across replicas.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import (
    CallToolResult,
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    TextContent,
)

from longtools.server import LegacySession, Seals
from tests.conftest import Served, run_driver
from tests.pages import PageClient, person_answering
from tests.test_sdk_client import Recorder
from tests.wire import Legacy, error, result, sse_lines

ROOT = Path(__file__).resolve().parent.parent
INSPECTOR = ROOT / "tests" / "clients" / "inspector.sh"
FORM: dict[str, Any] = {"elicitation": {"form": {}}}
FORM_AND_URL: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
"""A host that shows forms and sends its person to pages: a person's question comes as a URL request."""


def _ticket(session: Legacy, customer: str) -> str:
    made = result(
        session.request(
            "tools/call", {"name": "create_ticket", "arguments": {"title": "T", "customer": customer}}
        )
    )
    ticket_id: str = made["structuredContent"]["ticketId"]
    return ticket_id


def _history(session: Legacy, ticket_id: str) -> list[str]:
    got = result(session.request("tools/call", {"name": "get_ticket", "arguments": {"ticketId": ticket_id}}))
    return [entry["event"] for entry in got["structuredContent"]["history"]]


def _close_call(call_id: str, ticket_id: str) -> dict[str, Any]:
    params = {"name": "close_ticket", "arguments": {"ticketId": ticket_id}}
    return {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": params}


# The wire ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "negotiated"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2099-01-01", "2025-11-25"),
    ],
)
def test_initialize_negotiates_a_2025_version_and_hands_out_a_sealed_session(
    mcp_url: str, asked: str, negotiated: str
) -> None:
    session = Legacy(mcp_url, version=asked)
    initialized = session.open()
    assert initialized["protocolVersion"] == negotiated
    assert initialized["serverInfo"]["name"] == "longtools"
    capabilities = initialized["capabilities"]
    # 2025-11-25 is the one handshake-era revision with tasks: only it is offered them.
    tasks = {"tasks"} if negotiated == "2025-11-25" else set()
    assert set(capabilities) == {"tools", "prompts", "resources", "logging", "completions", *tasks}
    assert capabilities["resources"]["subscribe"] is True
    assert "resultType" not in initialized  # a 2026-era field never reaches a 2025-era client
    assert session.session.startswith("v1.")
    listed = result(session.request("tools/list"))
    assert {"create_ticket", "close_ticket", "bulk_close_tickets"} <= {
        tool["name"] for tool in listed["tools"]
    }


def test_requests_without_a_valid_session_are_refused(mcp_url: str) -> None:
    session = Legacy(mcp_url)
    session.open()
    good = session.session
    session.session = ""
    session.extra = {"mcp-protocol-version": "2025-11-25"}
    missing = session.request("tools/list")
    assert error(missing, 400)["message"] == "Missing Mcp-Session-Id: send initialize first"
    for forged in (good[:-4] + "AAAA", "v1.nonsense", "x" * 5000):
        session.session = forged
        assert error(session.request("tools/list"), 404)["message"] == "Session not found"


def test_ping_set_level_and_subscribe_answer_empty_results(mcp_url: str) -> None:
    session = Legacy(mcp_url)
    session.open()
    assert result(session.request("ping")) == {}
    assert result(session.request("logging/setLevel", {"level": "debug"})) == {}
    assert result(session.request("resources/subscribe", {"uri": "test://static-text"})) == {}
    assert result(session.request("resources/unsubscribe", {"uri": "test://static-text"})) == {}
    unknown = session.request("resources/subscribe", {"uri": "test://nothing"})
    assert unknown.json()["error"]["data"] == {"uri": "test://nothing"}
    metrics = httpx.get(mcp_url.removesuffix("/mcp") + "/metrics").text
    assert 'longtools_requests_total{era="2025",method="ping",outcome="complete"}' in metrics


def test_get_and_delete_of_a_session_are_405(mcp_url: str) -> None:
    """The spec lets a server refuse both: no standalone stream (nothing is ever sent outside a
    request), and no DELETE (a sealed session cannot be revoked; it expires)."""
    session = Legacy(mcp_url)
    session.open()
    for verb in ("GET", "DELETE"):
        response = httpx.request(verb, mcp_url, headers=session.headers())
        assert (response.status_code, response.headers["allow"]) == (405, "POST")


def test_a_question_is_pushed_on_the_call_stream_and_its_answer_posted_back(mcp_url: str) -> None:
    session = Legacy(mcp_url, caps=FORM)
    session.open()
    ticket_id = _ticket(session, f"c-{secrets.token_hex(4)}")
    body = _close_call("call-1", ticket_id)
    with httpx.stream("POST", mcp_url, json=body, headers=session.headers(), timeout=60) as stream:
        assert stream.headers["content-type"] == "text/event-stream"
        messages = sse_lines(stream.iter_lines())
        question = next(messages)
        assert question["method"] == "elicitation/create"
        assert question["id"].startswith("ltq.")
        assert question["params"]["message"] == f"Why is ticket {ticket_id} being closed?"
        assert question["params"]["requestedSchema"]["properties"]["reason"]["enum"][0] == "Resolved"
        answered = session.answer(question["id"], {"action": "accept", "content": {"reason": "Duplicate"}})
        assert answered.status_code == 202
        final = next(messages)
    assert final["id"] == "call-1"
    assert final["result"]["structuredContent"]["closeReason"] == "Duplicate"
    assert _history(session, ticket_id) == ["created", "closed"]


def test_a_question_answered_with_an_error_is_a_tool_error_and_nothing_happens(mcp_url: str) -> None:
    session = Legacy(mcp_url, caps=FORM)
    session.open()
    ticket_id = _ticket(session, f"c-{secrets.token_hex(4)}")
    body = _close_call("call-2", ticket_id)
    with httpx.stream("POST", mcp_url, json=body, headers=session.headers(), timeout=60) as stream:
        messages = sse_lines(stream.iter_lines())
        question = next(messages)
        refusal = {"jsonrpc": "2.0", "id": question["id"], "error": {"code": -32603, "message": "no UI"}}
        assert session.send(refusal).status_code == 202
        final = next(messages)
    assert final["result"]["isError"] is True
    assert final["result"]["content"][0]["text"] == (
        "The client did not answer the question 'close_reason': no UI (-32603)"
    )
    assert _history(session, ticket_id) == ["created"]


def test_an_answer_to_a_question_never_pushed_is_refused(mcp_url: str) -> None:
    session = Legacy(mcp_url)
    session.open()
    for request_id in ("ltq.v1.forged", 7, "anything"):
        assert error(session.answer(request_id, {"action": "cancel"}), 400)["message"] == (
            "Unknown or expired request id"
        )


def test_a_client_without_the_capability_gets_a_tool_error_naming_it(mcp_url: str) -> None:
    session = Legacy(mcp_url, caps={})
    session.open()
    ticket_id = _ticket(session, f"c-{secrets.token_hex(4)}")
    called = result(
        session.request("tools/call", {"name": "close_ticket", "arguments": {"ticketId": ticket_id}})
    )
    # The tool's own check, before it does anything.
    assert called["isError"] is True
    assert called["content"][0]["text"] == "close_ticket needs a client that supports form elicitation"
    # A tool that just asks: the question it cannot push becomes the same kind of tool error.
    asking = result(session.request("tools/call", {"name": "test_input_required_result_elicitation"}))
    assert asking["isError"] is True
    assert asking["content"][0]["text"] == (
        "test_input_required_result_elicitation needs to ask you something through elicitation, which "
        "this client does not support (it did not declare that capability when it connected)"
    )
    assert _history(session, ticket_id) == ["created"]


# Sealed sessions -------------------------------------------------------------------------------


def test_a_session_id_opens_only_for_its_principal_its_ring_and_its_lifetime() -> None:
    ring = [secrets.token_bytes(32)]
    seals = Seals(ring, session_ttl_s=60)
    opened = LegacySession("2025-11-25", {"elicitation": {}}, {"name": "c", "version": "1"})
    token = seals.session(opened, "alice")
    assert seals.open_session(token, "alice") == opened
    assert seals.open_session(token, "bob") is None
    # Rotation: a ring with a new first key still opens what the old key sealed.
    assert Seals([secrets.token_bytes(32), *ring], session_ttl_s=60).open_session(token, "alice") == opened
    assert Seals([secrets.token_bytes(32)], session_ttl_s=60).open_session(token, "alice") is None
    # A question id is not a session id, nor the other way round.
    question = seals.question("box", "alice", 60)
    assert seals.open_question(question, "alice") == "box"
    assert seals.open_session(question.removeprefix("ltq."), "alice") is None
    assert seals.open_question("ltq." + token, "alice") is None
    expired = Seals(ring, session_ttl_s=0.001).session(opened, "alice")
    time.sleep(0.01)
    assert seals.open_session(expired, "alice") is None


def test_a_kept_session_id_is_still_checked_for_its_principal_and_lifetime_on_every_use() -> None:
    # A process keeps the session ids it opened; what it keeps must not outlive what it checks.
    seals = Seals([secrets.token_bytes(32)], session_ttl_s=0.5)
    opened = LegacySession("2025-06-18", {}, None)
    token = seals.session(opened, "alice")
    assert seals.open_session(token, "alice") == opened
    assert seals.open_session(token, "bob") is None
    assert seals.open_session(token, "alice") == opened
    assert seals.open_session(token[:-1], "alice") is None  # kept by its exact string only
    time.sleep(0.6)
    assert seals.open_session(token, "alice") is None


# The official Python client, legacy mode ---------------------------------------------------------


class _Person(Recorder):
    """Answers the bulk confirmation too, on its page as its URL request asks; remembers progress
    and which URL requests the server said were completed."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base
        self.progress: list[str] = []
        self.completed: list[str] = []
        self.opened: list[str] = []

    async def elicit(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        if isinstance(params, ElicitRequestURLParams):  # a person's question: its page, in a browser
            self.asked.append(params.message)
            self.opened.append(str(params.elicitation_id))
            with PageClient(self.base) as browser:
                await anyio.to_thread.run_sync(
                    browser.answer, params.url, {"confirm": True, "reason": "Resolved"}
                )
            return ElicitResult(action="accept")  # the person went there: the page has the answer
        return await super().elicit(context, params)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append(message or "")

    async def on_message(self, message: Any) -> None:
        if isinstance(message, ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)


async def test_the_python_client_in_legacy_mode_closes_tickets_quick_and_long(server: Served) -> None:
    person = _Person(server.base)
    customer = f"c-{secrets.token_hex(4)}"
    with anyio.fail_after(60):
        async with Client(
            server.url,
            mode="legacy",
            elicitation_callback=person.elicit,
            sampling_callback=person.sample,
            list_roots_callback=person.roots,
            message_handler=person.on_message,
        ) as client:
            assert client.protocol_version == "2025-11-25"
            made = [
                await client.call_tool("create_ticket", {"title": title, "customer": customer})
                for title in ("one", "two", "three")
            ]
            tickets = [ticket.structured_content["ticketId"] for ticket in made if ticket.structured_content]
            closed = await client.call_tool("close_ticket", {"ticketId": tickets[0]})
            every_kind = await client.call_tool("test_input_required_result_multiple_inputs", {})
            bulk = await client.call_tool(
                "bulk_close_tickets", {"customer": customer}, progress_callback=person.on_progress
            )
            histories = [
                await client.call_tool("get_ticket", {"ticketId": ticket_id}) for ticket_id in tickets
            ]
    assert closed.structured_content is not None and closed.structured_content["status"] == "closed"
    assert every_kind.is_error is not True
    assert isinstance(every_kind.content[0], TextContent)
    assert every_kind.content[0].text == "Name: Ada; Greeting: Paris; Roots: 1"
    assert {"sampling", "roots", f"Close 2 tickets for {customer}?"} <= set(person.asked)
    assert person.completed == person.opened  # notifications/elicitation/complete, once answered
    assert isinstance(bulk, CallToolResult) and bulk.structured_content is not None
    assert bulk.structured_content["closed"] == tickets[1:]
    assert person.progress and set(person.progress) <= {"Closing 2 tickets", "Closed 1 of 2", "Closed 2 of 2"}
    for history in histories:
        assert history.structured_content is not None
        assert [entry["event"] for entry in history.structured_content["history"]] == ["created", "closed"]


# The TypeScript SDK 1.x client and the Inspector CLI --------------------------------------------


def _call(name: str, arguments: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"op": "callTool", "name": name, "arguments": arguments, **more}


def test_the_typescript_sdk_client_closes_tickets_quick_and_long(mcp_url: str, tmp_path: Path) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    script = {
        "capabilities": FORM,
        "steps": [
            _call("create_ticket", {"title": title, "customer": customer}) for title in ("a", "b", "c")
        ],
    }
    made = run_driver("legacy_client", mcp_url, script, tmp_path)
    tickets = [step["structuredContent"]["ticketId"] for step in made["results"]]
    url_file = tmp_path / "urls.jsonl"
    script = {
        "capabilities": FORM_AND_URL,
        "answers": [
            {"action": "accept", "content": {"reason": "Resolved"}},
            {"action": "accept"},  # the bulk approval's URL request: the person went to the page
        ],
        "urlFile": str(url_file),
        "steps": [
            _call("close_ticket", {"ticketId": tickets[0]}),
            _call("bulk_close_tickets", {"customer": customer}, progress=True, timeoutMs=60_000),
            *(_call("get_ticket", {"ticketId": ticket_id}) for ticket_id in tickets),
        ],
    }
    base = mcp_url.removesuffix("/mcp")
    with person_answering(base, url_file, {"confirm": True, "reason": "Duplicate"}) as answered:
        out = run_driver("legacy_client", mcp_url, script, tmp_path)
    assert out["protocolVersion"] == "2025-11-25"
    closed, bulk, *histories = out["results"]
    assert closed["structuredContent"]["closeReason"] == "Resolved"
    assert bulk["structuredContent"]["closed"] == tickets[1:]
    assert bulk["structuredContent"]["reason"] == "Duplicate"  # the person's, on the page
    quick, long = out["elicitations"]
    assert (quick.get("mode", "form"), quick["message"]) == (
        "form",
        f"Why is ticket {tickets[0]} being closed?",
    )
    assert (long["mode"], long["message"]) == ("url", f"Close 2 tickets for {customer}?")
    assert answered == [long["url"]]
    shown = {note["message"] for note in out["progress"] if note["step"] == 1}
    assert shown and shown <= {"Closing 2 tickets", "Closed 1 of 2", "Closed 2 of 2"}
    for history in histories:
        assert [entry["event"] for entry in history["structuredContent"]["history"]] == ["created", "closed"]


def _inspector(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INSPECTOR), url, "--transport", "http", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_the_inspector_cli_lists_calls_and_gets_the_capability_error(mcp_url: str) -> None:
    listed = _inspector(mcp_url, "--method", "tools/list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert "create_ticket" in {tool["name"] for tool in json.loads(listed.stdout)["result"]["tools"]}
    arguments = json.dumps({"title": "From the Inspector", "customer": "inspector"})
    made = _inspector(
        mcp_url,
        "--method",
        "tools/call",
        "--tool-name",
        "create_ticket",
        "--tool-args-json",
        arguments,
        "--format",
        "json",
    )
    assert made.returncode == 0, made.stderr
    ticket_id = json.loads(made.stdout)["result"]["structuredContent"]["ticketId"]
    asking = _inspector(
        mcp_url,
        "--method",
        "tools/call",
        "--tool-name",
        "close_ticket",
        "--tool-args-json",
        json.dumps({"ticketId": ticket_id}),
        "--format",
        "json",
    )
    # A tool error: the Inspector exits 5 and still prints the result.
    assert asking.returncode == 5, asking.stderr
    text = json.loads(asking.stdout)["result"]["content"][0]["text"]
    assert text == "close_ticket needs a client that supports form elicitation"


def test_the_inspector_cli_follows_a_task_through_the_task_tools_while_the_person_answers_on_its_page(
    mcp_url: str,
) -> None:
    """The Inspector CLI declares no elicitation: a long tool answers it with its task, and the
    task tools carry the rest, one CLI call each, as a model in a chat host would; the person
    answers the question on its page."""
    customer = f"c-{secrets.token_hex(4)}"

    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        done = _inspector(
            mcp_url, "--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments)
        )
        assert done.returncode == 0, done.stderr
        outcome: dict[str, Any] = json.loads(done.stdout)
        return outcome

    made = call("create_ticket", {"title": "From the Inspector", "customer": customer})
    ticket_id = made["structuredContent"]["ticketId"]
    task = call("bulk_close_tickets", {"customer": customer})["structuredContent"]
    assert task["status"] == "input_required"
    # A person's question: the model relays its link, and the person answers on the page.
    [link] = task["_meta"]["longtools.dev/answer-links"].values()
    with PageClient(mcp_url.removesuffix("/mcp")) as browser:
        browser.answer(link, {"confirm": True})
    shown = call("task_status", {"taskId": task["taskId"]})["structuredContent"]
    while shown["status"] in ("working", "input_required"):
        shown = call("task_status", {"taskId": task["taskId"]})["structuredContent"]
    assert shown["status"] == "completed"
    assert shown["result"]["structuredContent"]["closed"] == [ticket_id]
