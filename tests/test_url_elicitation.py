"""URL-mode elicitation end to end: a person's question reaches each client that declared URL mode as
a URL request for its answer page, the client's host only sends the person there (``accept``), and
the person answers on that page in a real headless Chromium (Debian's, tests/browser.py), against
the session's ``server`` (no auth: on loopback nobody signs in).

Four clients: the official Python ``mcp`` client at 2026-07-28 (MRTR: no
``notifications/elicitation/complete``; its retry round is held until the task moves on) and in
legacy mode (2025-11-25: the complete notification, once, after the page has the answer), the
TypeScript SDK 1.x client (tests/clients/legacy_client.mjs), and the same SDK's 2025-11-25 tasks
API (tests/clients/tasks_client.mjs: the URL request pushed on ``tasks/result``). The drivers write
each URL request they get to a file (``urlFile``) while their call goes on; the test opens it.
Last, a host that accepts only once its person is back from the page (``urlAnswerGate``): on a
2025-11-25 ``tools/call`` and on ``tasks/result`` alike it is still told the request completed,
and its late answer is taken, not refused.

Each answered page is saved as ``url-elicitation-<client>.png`` (``screenshot_dirs``).
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp_types import (
    CallToolResult,
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
)
from playwright.async_api import Browser, expect

from tests.browser import PHONE, async_chromium, screenshot_dirs
from tests.conftest import CLIENT_DRIVERS, NODE, Served
from tests.wire import post, result

TIMEOUT_MS = 15_000
"""Bound of every Playwright wait."""
REASON = "Duplicate"
NOTE = "Merged into one ticket."
RELATED = "io.modelcontextprotocol/related-task"
COMPLETE = "notifications/elicitation/complete"


@pytest_asyncio.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    """One Chromium for the module; each person gets a context (cookies) of their own."""
    async with async_chromium() as launched:
        yield launched


async def answer_on_the_page(
    browser: Browser,
    url: str,
    question: str,
    tmp_path: Path,
    shot: str,
    said: list[str],
    *,
    until_taken: bool = False,
) -> None:
    """The person opens ``url``, confirms, picks the reason, writes the note and sends the answer;
    ``said`` gets ``"sent"`` as the answer goes. Ends on the task page that follows it, once the
    task no longer waits for an answer if ``until_taken``."""
    context = await browser.new_context(viewport=PHONE)
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    try:
        page = await context.new_page()
        await page.goto(url)
        await expect(page.locator("#question")).to_have_text(question, timeout=TIMEOUT_MS)
        await page.check("#f-confirm")
        await page.get_by_label(REASON, exact=True).check()
        await page.fill("#f-note", NOTE)
        for folder in screenshot_dirs(tmp_path):
            await page.screenshot(path=str(folder / shot), full_page=True)
        said.append("sent")
        await page.click("button[value=accept]")
        await expect(page.locator(".flash")).to_contain_text("Your answer was sent", timeout=TIMEOUT_MS)
        if until_taken:  # the page follows the task live
            status = page.locator("#live .status")
            await expect(status).not_to_have_class(re.compile(r"\bs-input_required\b"), timeout=TIMEOUT_MS)
    finally:
        await context.close()


def _closed(customer: str, tickets: list[str]) -> dict[str, Any]:
    """The tool's structuredContent once the person confirmed with :data:`REASON` and :data:`NOTE`."""
    return {
        "customer": customer,
        "outcome": "closed",
        "reason": REASON,
        "note": NOTE,
        "closed": tickets,
        "alreadyClosed": [],
        "notFound": [],
    }


def _new_ticket(url: str, customer: str) -> str:
    """A ticket of ``customer``'s, created with a raw 2026 ``tools/call`` (a quick tool)."""
    arguments = {"title": "Printer on fire", "customer": customer}
    made = result(post(url, "tools/call", {"name": "create_ticket", "arguments": arguments}))
    ticket_id: str = made["structuredContent"]["ticketId"]
    return ticket_id


# The official Python client ------------------------------------------------------------------


class UrlHost:
    """A host whose person consents to each URL request: it starts the person answering on the page
    (in the background) and accepts at once. Remembers what it was asked and what the server said
    was completed, in order with the browser's sending (``said``)."""

    def __init__(
        self, browser: Browser, group: anyio.abc.TaskGroup, question: str, tmp_path: Path, shot: str
    ) -> None:
        self.browser = browser
        self.group = group
        self.question = question
        self.tmp_path = tmp_path
        self.shot = shot
        self.asked: list[ElicitRequestURLParams] = []
        self.completed: list[str] = []
        self.said: list[str] = []

    async def elicit(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        if not isinstance(params, ElicitRequestURLParams):
            self.said.append("form")  # never expected: a client with URL mode gets a person's question as one
            return ElicitResult(action="decline")
        self.asked.append(params)
        self.said.append("asked")
        self.group.start_soon(
            answer_on_the_page, self.browser, params.url, self.question, self.tmp_path, self.shot, self.said
        )
        return ElicitResult(action="accept")  # the person went there: the page gives the answer

    async def on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)
            self.said.append(f"complete:{message.params.elicitation_id}")


async def _bulk_close_through_the_python_client(
    server: Served, browser: Browser, tmp_path: Path, mode: str, shot: str
) -> tuple[UrlHost, str, list[str], CallToolResult, dict[str, Any], str]:
    """One ticket for a new customer, then ``bulk_close_tickets`` through ``Client(mode=mode)``,
    the person answering on the page; the host, customer, ticket ids, the call's result, the
    ticket as ``get_ticket`` shows it afterwards, and the negotiated protocol version."""
    customer = f"c-{secrets.token_hex(4)}"
    with anyio.fail_after(45):
        async with anyio.create_task_group() as group:
            host = UrlHost(browser, group, f"Close 1 ticket for {customer}?", tmp_path, shot)
            async with Client(
                server.url, mode=mode, elicitation_callback=host.elicit, message_handler=host.on_message
            ) as client:
                made = await client.call_tool(
                    "create_ticket", {"title": "Printer on fire", "customer": customer}
                )
                assert made.structured_content is not None
                ticket_id = str(made.structured_content["ticketId"])
                called = await client.call_tool("bulk_close_tickets", {"customer": customer})
                ticket = await client.call_tool("get_ticket", {"ticketId": ticket_id})
                version = str(client.protocol_version)
    assert ticket.structured_content is not None
    return host, customer, [ticket_id], called, ticket.structured_content, version


def _check_url_request(asked: ElicitRequestURLParams, server: Served, customer: str) -> None:
    assert asked.mode == "url"
    assert asked.message == f"Close 1 ticket for {customer}?"
    assert asked.url.startswith(f"{server.base}/answer/"), asked.url


async def test_the_python_client_at_2026_07_28_sends_the_person_to_the_page_and_gets_the_result(
    server: Served, browser: Browser, tmp_path: Path
) -> None:
    host, customer, tickets, called, ticket, version = await _bulk_close_through_the_python_client(
        server, browser, tmp_path, "auto", "url-elicitation-python-mrtr.png"
    )
    assert version == "2026-07-28"
    [asked] = host.asked
    _check_url_request(asked, server, customer)
    # Removed at 2026-07-28, and sent all the same: GitHub Copilot CLI's client requires it there.
    assert asked.elicitation_id
    # The accept only said the person went there; the answer is the page's.
    assert called.is_error is not True
    assert called.structured_content == _closed(customer, tickets)
    assert (ticket["status"], ticket["closeReason"]) == ("closed", REASON)
    assert host.completed == []  # no notifications/elicitation/complete at 2026-07-28 (MRTR)
    assert host.said == ["asked", "sent"]


async def test_the_python_client_in_legacy_mode_is_told_once_the_page_has_the_answer(
    server: Served, browser: Browser, tmp_path: Path
) -> None:
    host, customer, tickets, called, ticket, version = await _bulk_close_through_the_python_client(
        server, browser, tmp_path, "legacy", "url-elicitation-python-legacy.png"
    )
    assert version == "2025-11-25"
    [asked] = host.asked
    _check_url_request(asked, server, customer)
    assert asked.elicitation_id  # required at 2025-11-25
    assert called.is_error is not True
    assert called.structured_content == _closed(customer, tickets)
    assert (ticket["status"], ticket["closeReason"]) == ("closed", REASON)
    # Exactly one complete, naming the URL request, and only after the browser sent the answer.
    assert host.completed == [asked.elicitation_id]
    assert host.said == ["asked", "sent", f"complete:{asked.elicitation_id}"]


# The TypeScript SDK 1.x drivers ----------------------------------------------------------------


def _start_driver(driver: str, url: str, script: dict[str, Any], tmp_path: Path) -> subprocess.Popen[str]:
    """``tests/clients/<driver>.mjs`` on ``script``, started (``run_driver`` waits for its end; these
    tests act while it runs)."""
    path = tmp_path / f"script-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps(script))
    command = [str(NODE), str(CLIENT_DRIVERS / f"{driver}.mjs"), url, str(path)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def _url_request(process: subprocess.Popen[str], url_file: Path) -> dict[str, Any]:
    """The first URL request the driver wrote to ``url_file``, waited for (bounded)."""
    written_to = anyio.Path(url_file)
    with anyio.fail_after(30):
        while True:
            lines = (
                (await written_to.read_text()).splitlines(keepends=True) if await written_to.exists() else []
            )
            if lines and lines[0].endswith("\n"):
                written: dict[str, Any] = json.loads(lines[0])
                return written
            if process.poll() is not None:
                out, err = process.communicate()
                raise AssertionError(f"the driver ended before any URL request:\n{err}\n{out}")
            await anyio.sleep(0.05)


async def _output(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The driver's one line of JSON, once it has ended (bounded)."""
    out, err = await anyio.to_thread.run_sync(functools.partial(process.communicate, timeout=60))
    assert process.returncode == 0, err
    printed: dict[str, Any] = json.loads(out)
    return printed


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
    process.communicate()


async def _drive(
    driver: str,
    url: str,
    script: dict[str, Any],
    tmp_path: Path,
    person: Callable[[dict[str, Any]], Awaitable[None]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``driver`` run on ``script`` (which names its ``urlFile``) while ``person`` answers the first
    URL request it writes there: that request, and the driver's output. The driver is always
    stopped."""
    process = _start_driver(driver, url, script, tmp_path)
    try:
        written = await _url_request(process, Path(script["urlFile"]))
        await person(written)
        return written, await _output(process)
    finally:
        _stop(process)


async def test_the_typescript_sdk_client_opens_the_url_and_is_told_once_the_page_has_the_answer(
    server: Served, browser: Browser, tmp_path: Path
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    ticket_id = await anyio.to_thread.run_sync(_new_ticket, server.url, customer)
    url_file = tmp_path / "urls.jsonl"
    script = {
        "capabilities": {"elicitation": {"url": {}}},  # URL mode only
        "answers": [{"action": "accept"}],
        "urlFile": str(url_file),
        "steps": [
            {"op": "callTool", "name": "bulk_close_tickets", "arguments": {"customer": customer}},
            {"op": "callTool", "name": "get_ticket", "arguments": {"ticketId": ticket_id}},
        ],
    }
    said: list[str] = []
    question = f"Close 1 ticket for {customer}?"

    async def person(written: dict[str, Any]) -> None:
        shot = "url-elicitation-typescript.png"
        await answer_on_the_page(browser, written["url"], question, tmp_path, shot, said)

    written, out = await _drive("legacy_client", server.url, script, tmp_path, person)
    assert "connectError" not in out, out["connectError"]
    assert out["protocolVersion"] == "2025-11-25"
    [asked] = out["elicitations"]
    assert {key: value for key, value in asked.items() if key not in ("step", "seq")} == written
    assert (asked["mode"], asked["message"]) == ("url", question)
    assert asked["url"].startswith(f"{server.base}/answer/"), asked["url"]
    assert asked["elicitationId"]
    bulk, ticket = out["results"]
    assert bulk.get("isError") is not True, bulk
    assert bulk["structuredContent"] == _closed(customer, [ticket_id])
    assert ticket["structuredContent"]["closeReason"] == REASON
    # The complete notification, as the SDK's own schema parsed it: once, for that request, after it.
    [complete] = out["elicitationCompletes"]
    assert complete["elicitationId"] == asked["elicitationId"]
    assert complete["step"] == 0 and complete["seq"] > asked["seq"]
    assert [note["params"] for note in out["notifications"] if note["method"] == COMPLETE] == [
        {"elicitationId": asked["elicitationId"]}
    ]
    assert out["errors"] == []


async def test_the_typescript_tasks_client_gets_the_url_on_tasks_result_and_the_task_completes(
    server: Served, browser: Browser, tmp_path: Path
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    ticket_id = await anyio.to_thread.run_sync(_new_ticket, server.url, customer)
    url_file = tmp_path / "urls.jsonl"
    script = {
        "capabilities": {"elicitation": {"form": {}, "url": {}}, "tasks": {"list": {}, "cancel": {}}},
        "answers": [{"action": "accept"}],
        "urlFile": str(url_file),
        "steps": [
            {"op": "callToolAsTask", "name": "bulk_close_tickets", "arguments": {"customer": customer}}
        ],
    }
    said: list[str] = []
    question = f"Close 1 ticket for {customer}?"

    async def person(written: dict[str, Any]) -> None:
        shot = "url-elicitation-typescript-tasks.png"
        await answer_on_the_page(browser, written["url"], question, tmp_path, shot, said)

    written, out = await _drive("tasks_client", server.url, script, tmp_path, person)
    assert "connectError" not in out, out["connectError"]
    assert out["protocolVersion"] == "2025-11-25"
    created = out["events"][0]
    assert created["type"] == "created"
    task_id = created["taskId"]

    # The URL request, pushed on the tasks/result stream and tied to the task.
    [asked] = out["elicitations"]
    assert asked["params"] == written
    assert (written["mode"], written["message"]) == ("url", question)
    assert written["url"].startswith(f"{server.base}/answer/"), written["url"]
    assert written["elicitationId"]
    assert asked["relatedTask"] == {"taskId": task_id}
    assert asked["answer"] == {"action": "accept"}
    wire = out["wire"]
    [pushed] = [m for m in wire if m["dir"] == "in" and m["message"].get("method") == "elicitation/create"]
    waiting = [
        m["message"]["id"]
        for m in wire
        if m["dir"] == "out" and m["message"].get("method") == "tasks/result" and m["seq"] < pushed["seq"]
    ]
    assert waiting, "no tasks/result was waiting when the URL request came"
    [answered] = [m for m in wire if m["dir"] == "in" and m["message"].get("id") == waiting[-1]]

    # The complete notification, once, for that request, before tasks/result answers.
    [complete] = out["elicitationCompletes"]
    assert complete["elicitationId"] == written["elicitationId"]
    [raw] = [m for m in wire if m["dir"] == "in" and m["message"].get("method") == COMPLETE]
    assert pushed["seq"] < raw["seq"] < answered["seq"]
    assert out["errors"] == []

    # The task's result, the person's answer in it.
    final = out["events"][-1]
    assert final["type"] == "result", final
    assert final["result"]["structuredContent"] == _closed(customer, [ticket_id])
    assert final["result"]["_meta"][RELATED] == {"taskId": task_id}
    assert answered["message"]["result"]["structuredContent"] == _closed(customer, [ticket_id])
    assert said == ["sent"]


PERSON_FIRST = [
    pytest.param("legacy_client", id="tools-call"),
    pytest.param("tasks_client", id="tasks-result"),
]


@pytest.mark.parametrize("driver", PERSON_FIRST)
async def test_a_host_that_accepts_only_once_its_person_is_back_is_still_told_the_url_request_completed(
    server: Served, browser: Browser, tmp_path: Path, driver: str
) -> None:
    """The host keeps its dialog open while its person is on the page (``urlAnswerGate``): the
    page has the answer, and the task has taken it, before the host's ``accept`` arrives. The
    URL request was shown all the same, so its complete notification is due all the same."""
    customer = f"c-{secrets.token_hex(4)}"
    ticket_id = await anyio.to_thread.run_sync(_new_ticket, server.url, customer)
    url_file = tmp_path / "urls.jsonl"
    back = tmp_path / "person-is-back"
    call = {"name": "bulk_close_tickets", "arguments": {"customer": customer}}
    tasks = driver == "tasks_client"
    script = {
        "capabilities": {
            "elicitation": {"form": {}, "url": {}},
            **({"tasks": {"list": {}, "cancel": {}}} if tasks else {}),
        },
        "answers": [{"action": "accept"}],
        "urlFile": str(url_file),
        "urlAnswerGate": str(back),
        "steps": [{"op": "callToolAsTask" if tasks else "callTool", **call}],
    }
    said: list[str] = []
    question = f"Close 1 ticket for {customer}?"

    async def person_first(written: dict[str, Any]) -> None:
        shot = f"url-elicitation-{driver.removesuffix('_client')}-person-first.png"
        await answer_on_the_page(browser, written["url"], question, tmp_path, shot, said, until_taken=True)
        await anyio.Path(back).touch()  # only now does the host answer

    written, out = await _drive(driver, server.url, script, tmp_path, person_first)
    assert "connectError" not in out, out["connectError"]
    [called] = out["results"]
    assert called.get("structuredContent") == _closed(customer, [ticket_id]), called
    assert [complete["elicitationId"] for complete in out["elicitationCompletes"]] == [
        written["elicitationId"]
    ]
    assert out["errors"] == []
