"""A person's question is the person's: real client libraries that answer it themselves are not
taken, and the person answers on the answer page, against the session's ``owners`` server (two
principals; ``ann`` runs every client and is the person at the browser).

Each test runs ``bulk_close_tickets`` (it asks a person to approve closing a customer's tickets) in
one independent client library, which answers the question itself in the way that library can:

- ``accept`` of the URL request, and ``accept`` with the form's fields sent back to it ("filled in
  by the library"): by ``mcp`` 2.3's ``Client`` (``mode="auto"``, 2026-07-28 MRTR; ``"legacy"``,
  2025-11-25, the call held), fastmcp 2.14 and mcp 1.30's ``ClientSession`` (2025-11-25),
  fastmcp-tasks 4.1.4 (2026-07-28 tasks extension: ``tasks/update``, the quickstart's client), and
  the TypeScript SDK 1.32 client and its 2025-11-25 tasks API (``tasks/result``);
- ``decline`` and ``cancel`` of the URL request, by the same clients;
- clients that cannot be sent to a page: mcp 1.12.4 (2025-06-18, declares ``elicitation: {}``),
  the TypeScript SDK declaring form elicitation only, and ``mcp`` 2.3 with no callbacks (a chat
  host, whose model answers with ``task_answer``).

What must hold: no ticket closes and the task waits (``input_required``) until the person answers
on the page (``tests/pages.py``, plain HTTP, signed in as ann); then each ticket closes exactly
once, with the person's reason and note, never the library's. A client's ``decline`` or ``cancel``
ends its held call with a tool error that gives the link and the task id (in its text, and as data:
``structuredContent``, or the result's ``_meta`` answer links for a tool with an output schema,
:func:`assert_the_result_gives_the_link`), and a task's client keeps waiting. A client that cannot
be sent to the page gets the link in its result and in the task's ``statusMessage``, never the
form. Every client lists the tools first, as hosts do (some libraries then check a result against
the tool's output schema). And the quickstart's fastmcp snippet, whose person takes 10 s on
the page, sends at most 10 ``tasks/update`` meanwhile (review finding N1: about 290 a second).

The clients run as subprocesses, each from its own pinned environment: the Python ones through
``tests/clients/py/client_driver.py`` under ``.venv`` (mcp 2.3, fastmcp 4.1.4), ``.venv-fastmcp2``
(fastmcp 2.14 with mcp 1.30) and ``.venv-mcp1`` (mcp 1.12.4), which ``./dev test`` installs from
``tests/clients/py/*.lock``; the TypeScript ones through ``tests/clients/*.mjs``. Every request they
send goes through a recording pass-through (:class:`WireLog`), so a test knows when a client's own
answer has reached the server and what it carried.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tests.conftest import CLIENT_DRIVERS, NODE, OWNER_TOKENS, Served, bearer
from tests.pages import Page, PageClient
from tests.threaded import InThread, serve_in_thread
from tests.wire import TASKS_EXTENSION, eventually, get_task, post, result

ROOT = Path(__file__).resolve().parent.parent
PY_DRIVER = CLIENT_DRIVERS / "py" / "client_driver.py"
QUICKSTART = ROOT / "docs" / "quickstart.md"

PERSON: dict[str, Any] = {"confirm": True, "reason": "Duplicate", "note": "Answered on the page by ann."}
"""What the person answers on the page."""
LIBRARY: dict[str, Any] = {
    "confirm": True,
    "reason": "Cancelled",
    "note": "Filled in by the library, no person.",
}
"""What a library sends back as the form's fields."""
ACCEPT: dict[str, Any] = {"action": "accept"}
ACCEPT_FIELDS: dict[str, Any] = {"action": "accept", "content": LIBRARY}
WITHIN = 60.0
"""Bound of every wait on a client or the server, in seconds."""
SENT = "Your answer was sent"


# The clients ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Host:
    """One real client library, as a host runs it."""

    name: str
    driver: str
    """``py`` (tests/clients/py/client_driver.py), ``legacy_client`` or ``tasks_client`` (Node)."""
    venv: str = ".venv"
    client: str = ""
    """The Python driver's ``client``."""
    mode: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    """What a Node driver declares at ``initialize``."""
    elicitation: bool = True
    """Whether a Python client registers its elicitation handler (without one it declares none)."""
    tasks: bool = False
    """Whether the call is a task (fastmcp-tasks' ``call_tool_task``, the TypeScript tasks API)."""
    update: bool = False
    """Whether it answers with ``tasks/update`` (2026-07-28 tasks extension)."""

    def __str__(self) -> str:
        return self.name

    def command(self) -> list[str]:
        if self.driver == "py":
            python = ROOT / self.venv / "bin" / "python"
            if not python.exists():
                pytest.fail(f"{python} is missing: ./dev test installs it (setup_client_venvs)")
            return [str(python), str(PY_DRIVER)]
        return [str(NODE), str(CLIENT_DRIVERS / f"{self.driver}.mjs")]

    def script(self, customer: str, answers: list[dict[str, Any]], events: Path) -> dict[str, Any]:
        call = {"name": "bulk_close_tickets", "arguments": {"customer": customer}}
        # A host lists the tools first (and a library may then check results against their schemas).
        steps: list[dict[str, Any]] = [{"op": "listTools"}, call]
        if not self.elicitation:  # a chat host's model answers through the task tools
            task_answer = {"taskId": "$taskId", "answers": {"$questionKey": ACCEPT_FIELDS}}
            steps.append({"name": "task_answer", "arguments": task_answer})
        token = OWNER_TOKENS["ann"]
        if self.driver == "py":
            if self.tasks:
                steps = [{"op": "listTools"}, {"op": "callToolTask", **call}]
            script: dict[str, Any] = {
                "client": self.client,
                "token": token,
                "elicitation": self.elicitation,
                "answers": answers,
                "eventsFile": str(events),
                "steps": steps,
                "timeoutS": 2 * WITHIN,
            }
            if self.mode is not None:
                script["mode"] = self.mode
            return script
        op = "callToolAsTask" if self.tasks else "callTool"
        return {
            "token": token,
            "capabilities": self.capabilities,
            "answers": answers,
            "urlFile": str(events),
            "steps": [{"op": "listTools"}, {"op": op, **call, "timeoutMs": int(2 * WITHIN * 1000)}],
        }


URL_MODE: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
MCP_AUTO = Host("mcp 2.3 auto", "py", client="mcp", mode="auto")
MCP_LEGACY = Host("mcp 2.3 legacy", "py", client="mcp", mode="legacy")
FASTMCP2 = Host("fastmcp 2.14", "py", venv=".venv-fastmcp2", client="fastmcp")
MCP_1_30 = Host("mcp 1.30 ClientSession", "py", venv=".venv-fastmcp2", client="mcp-session")
FASTMCP_TASKS = Host("fastmcp-tasks 4.1.4", "py", client="fastmcp-tasks", tasks=True, update=True)
TYPESCRIPT = Host("TypeScript SDK 1.32", "legacy_client", capabilities=URL_MODE)
TYPESCRIPT_TASKS = Host(
    "TypeScript SDK 1.32 tasks",
    "tasks_client",
    capabilities={**URL_MODE, "tasks": {"list": {}, "cancel": {}}},
    tasks=True,
)
MCP_1_12 = Host("mcp 1.12.4", "py", venv=".venv-mcp1", client="mcp-session")
TYPESCRIPT_FORM_ONLY = Host(
    "TypeScript SDK 1.32 form only", "legacy_client", capabilities={"elicitation": {"form": {}}}
)
MCP_AUTO_BARE = Host("mcp 2.3 auto without callbacks", "py", client="mcp", mode="auto", elicitation=False)
MCP_LEGACY_BARE = Host(
    "mcp 2.3 legacy without callbacks", "py", client="mcp", mode="legacy", elicitation=False
)


@dataclass
class Driven:
    """A client driver running one script: the person acts while its call goes on."""

    host: Host
    process: subprocess.Popen[bytes]
    events: Path
    stdout: Path
    stderr: Path

    def url_requests(self) -> list[dict[str, Any]]:
        """The params of each URL-mode ``elicitation/create`` the client has been asked so far."""
        return [params for params in self._questions() if params.get("mode") == "url"]

    def _questions(self) -> list[dict[str, Any]]:
        if not self.events.exists():
            return []
        lines = self.events.read_text().splitlines(keepends=True)
        written = [json.loads(line) for line in lines if line.endswith("\n")]
        if self.host.driver != "py":
            return written  # the Node drivers write URL requests only, raw
        return [event["params"] for event in written if event["kind"] == "elicitation"]

    def first_url_request(self) -> dict[str, Any]:
        """The first URL request, waited for (bounded); the driver's output if it ends first."""

        def seen() -> list[dict[str, Any]] | None:
            asked = self.url_requests()
            if asked:
                return asked
            if self.process.poll() is not None:
                raise AssertionError(f"{self.host} ended before any URL request: {self.output()}")
            return None

        asked = eventually(seen, lambda found: found is not None, WITHIN)
        assert asked is not None
        return asked[0]

    def finish(self) -> dict[str, Any]:
        """The driver's one line of JSON, once it has ended (bounded)."""
        try:
            self.process.wait(timeout=WITHIN)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.host} is still in its call {WITHIN:g} s later") from None
        return self.output()

    def output(self) -> dict[str, Any]:
        assert self.process.returncode == 0, self.stderr.read_text()
        printed: dict[str, Any] = json.loads(self.stdout.read_text())
        return printed

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def start(host: Host, url: str, answers: list[dict[str, Any]], customer: str, tmp_path: Path) -> Driven:
    """``host``'s driver on ``bulk_close_tickets`` for ``customer``, answering with ``answers``."""
    run = tmp_path / f"{re.sub(r'[^a-z0-9]+', '-', host.name.lower())}-{secrets.token_hex(3)}"
    run.mkdir()
    events, script = run / "events.jsonl", run / "script.json"
    script.write_text(json.dumps(host.script(customer, answers, events)))
    stdout, stderr = run / "stdout.json", run / "stderr.txt"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen([*host.command(), url, str(script)], stdout=out, stderr=err)
    return Driven(host, process, events, stdout, stderr)


BULK, TASK_ANSWER = 1, 2
"""The steps of a script (after ``listTools``): the call of ``bulk_close_tickets``, then a chat
host's ``task_answer``."""


def call_result(host: Host, out: dict[str, Any], step: int = BULK) -> dict[str, Any]:
    """The result of the driver's ``step``-th step (``{"error": ...}`` if it failed)."""
    assert "connectError" not in out, out["connectError"]
    assert not out.get("errors") or host.driver != "py", out["errors"]
    results: list[dict[str, Any]] = out["results"]
    assert len(results) > step, f"{host} got no result for step {step}: {out}"
    return results[step]


def shown_form(host: Host, out: dict[str, Any]) -> list[dict[str, Any]]:
    """The form-mode questions the client was shown."""
    asked: list[dict[str, Any]] = out["elicitations"]
    if host.driver == "py":
        return [question["params"] for question in asked if question["mode"] == "form"]
    shown = [question.get("params", question) for question in asked]
    return [params for params in shown if params.get("mode", "form") == "form"]


# The wire between the clients and the server -------------------------------------------------------

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}


@dataclass
class Seen:
    """One request the pass-through forwarded: its JSON-RPC body, and its response's status once
    the response has begun."""

    body: dict[str, Any] | None
    status: int | None = None

    @property
    def method(self) -> str | None:
        method = (self.body or {}).get("method")
        return method if isinstance(method, str) else None


@dataclass
class WireLog:
    """A pass-through HTTP proxy in front of ``upstream`` (an MCP URL) that keeps every request it
    forwards as it arrives, streams included. With ``auth`` it adds that ``Authorization`` to a
    request that has none (a program written for a server without sign-in). Runs in a thread of the
    test process; ``close()`` stops it."""

    upstream: str
    auth: dict[str, str] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    url: str = ""
    _served: InThread | None = None

    def start(self) -> WireLog:
        self._served = serve_in_thread(self._forward)
        self.url = f"http://127.0.0.1:{self._served.port}/mcp"
        return self

    def close(self) -> None:
        if self._served is not None:
            self._served.close()

    async def _forward(self, request: Request) -> Response:
        content = await request.body()
        try:
            body = json.loads(content) if content else None
        except ValueError:
            body = None
        seen = Seen(body if isinstance(body, dict) else None)
        self.seen.append(seen)
        headers = {key: value for key, value in request.headers.items() if key.lower() not in _HOP_BY_HOP}
        headers.pop("content-length", None)
        if "authorization" not in headers:
            headers.update(self.auth)
        target = self.upstream.removesuffix("/mcp") + request.url.path
        client = httpx.AsyncClient(timeout=httpx.Timeout(10, read=None))
        sent = client.build_request(request.method, target, headers=headers, content=content)
        response = await client.send(sent, stream=True)
        seen.status = response.status_code
        kept = {key: value for key, value in response.headers.items() if key.lower() not in _HOP_BY_HOP}
        kept.pop("content-length", None)

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_raw():
                    yield chunk
            except httpx.HTTPError:
                return

        async def done() -> None:
            await response.aclose()
            await client.aclose()

        return StreamingResponse(
            relay(), status_code=response.status_code, headers=kept, background=BackgroundTask(done)
        )


@pytest.fixture(scope="module")
def wire(owners: Served) -> Iterator[WireLog]:
    """The pass-through every client of this module talks to ``owners`` through."""
    log = WireLog(owners.url).start()
    try:
        yield log
    finally:
        log.close()


def _answer_kind(seen: Seen) -> str | None:
    """What kind of client answer ``seen`` carries, if it is one."""
    body = seen.body or {}
    params = body.get("params") if isinstance(body.get("params"), dict) else {}
    assert isinstance(params, dict)
    if "method" not in body and isinstance(body.get("result"), dict) and "action" in body["result"]:
        return "pushed"  # a 2025-era answer to a pushed elicitation/create
    if seen.method == "tools/call" and params.get("inputResponses"):
        return "round"  # an MRTR retry with the answer (held while the task goes on)
    if seen.method == "tasks/update":
        return "update"
    if seen.method == "tools/call" and params.get("name") == "task_answer":
        return "task_answer"
    return None


def client_answer_reached_the_server(wire: WireLog, since: int) -> list[Seen]:
    """Waits (bounded) until a client answer sent after ``since`` reached the server and, unless it
    is a held MRTR round, was answered; every answer seen so far."""

    def answers() -> list[Seen]:
        return [seen for seen in wire.seen[since:] if _answer_kind(seen) is not None]

    def reached(found: list[Seen]) -> bool:
        return any(seen.status is not None or _answer_kind(seen) == "round" for seen in found)

    return eventually(answers, reached, WITHIN)


# The person, the tickets, the task ------------------------------------------------------------


class Person:
    """Ann at a browser without JavaScript: signed in on the pages, she opens a link and answers."""

    def __init__(self, base: str) -> None:
        self.browser = PageClient(base)
        self.browser.sign_in(OWNER_TOKENS["ann"])
        self.opened: Page | None = None

    def __enter__(self) -> Person:
        return self

    def __exit__(self, *exc: object) -> None:
        self.browser.__exit__()

    def open(self, link: str, why: str = "") -> str:
        """Opens the answer link; the id of the task it belongs to, as the page's crumbs show it."""
        self.opened = self.browser.get(link)
        assert self.opened.status == 200, (
            f"the answer page no longer takes an answer (HTTP {self.opened.status}, "
            f"{self.opened.heading!r}){why}"
        )
        assert "confirm" in self.opened.forms().names, f"the page offers no form{why}: {self.opened.text}"
        found = re.search(r'<p class="crumbs">.*?href="/tasks/([^"/]+)"', self.opened.text, re.S)
        assert found, self.opened.text
        return found.group(1)

    def answer(self, link: str) -> None:
        assert self.opened is not None
        sent = self.browser.send(link, self.opened, PERSON)
        assert SENT in sent.text, sent.text


def new_tickets(url: str, customer: str, count: int = 2) -> list[str]:
    made = []
    for n in range(count):
        arguments = {"title": f"Printer {n} on fire", "customer": customer}
        created = result(
            post(url, "tools/call", {"name": "create_ticket", "arguments": arguments}, headers=bearer("ann"))
        )
        made.append(str(created["structuredContent"]["ticketId"]))
    return made


def ticket(url: str, ticket_id: str) -> dict[str, Any]:
    params = {"name": "get_ticket", "arguments": {"ticketId": ticket_id}}
    called = result(post(url, "tools/call", params, headers=bearer("ann")))
    shown: dict[str, Any] = called["structuredContent"]
    return shown


URL_TASKS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "extensions": {TASKS_EXTENSION: {}}}
"""A 2026-07-28 tasks client that declared URL-mode elicitation: it is shown a person's question."""
FORM_TASKS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
"""A 2026-07-28 tasks client that declared form elicitation only: it is shown only the link."""


def task_as(url: str, task_id: str, caps: dict[str, Any]) -> dict[str, Any]:
    """``tasks/get`` as ann, from a client that declared ``caps``."""
    return result(post(url, "tasks/get", {"taskId": task_id}, caps=caps, headers=bearer("ann")))


def ended(url: str, task_id: str) -> dict[str, Any]:
    return eventually(
        lambda: get_task(url, task_id, headers=bearer("ann")),
        lambda t: t["status"] not in ("working", "input_required"),
        WITHIN,
    )


def closed_by_the_person(customer: str, tickets: list[str]) -> dict[str, Any]:
    return {
        "customer": customer,
        "outcome": "closed",
        "reason": PERSON["reason"],
        "note": PERSON["note"],
        "closed": sorted(tickets),
        "alreadyClosed": [],
        "notFound": [],
    }


def _sorted_closed(structured: Any) -> Any:
    if isinstance(structured, dict) and isinstance(structured.get("closed"), list):
        return {**structured, "closed": sorted(structured["closed"])}
    return structured


def assert_the_task_waits_for_the_page(
    url: str, task_id: str, link: str, tickets: list[str], what: str, *, noted: bool = False
) -> dict[str, Any]:
    """The task still waits for the person, and no ticket has closed: as a URL-mode tasks client
    sees it, it is ``input_required`` with the URL request for ``link``. ``noted``: the client
    answered with ``tasks/update``, after which the question may be left out of every listing for
    a while (so that no client asks its person again at once): then the task has not ended and
    still names ``link``. The person's page must still offer the form (:meth:`Person.open`)."""
    shown = task_as(url, task_id, URL_TASKS)
    statuses = {ticket_id: ticket(url, ticket_id)["status"] for ticket_id in tickets}
    assert statuses == dict.fromkeys(tickets, "open"), f"{what} closed tickets: {statuses}; {shown}"
    if noted:
        assert shown["status"] in ("input_required", "working"), f"{what} was taken: {shown}"
        assert carries(shown, link), f"the task no longer names its link after {what}: {shown}"
        return shown
    assert shown["status"] == "input_required", f"{what} was taken as the person's answer: {shown}"
    asked = [question["params"] for question in shown.get("inputRequests", {}).values()]
    assert [(params.get("mode"), params.get("url")) for params in asked] == [("url", link)], shown
    return shown


def assert_the_person_closed_each_ticket_once(
    url: str, task_id: str, customer: str, tickets: list[str]
) -> None:
    done = ended(url, task_id)
    assert done["status"] == "completed", done
    assert _sorted_closed(done["result"]["structuredContent"]) == closed_by_the_person(customer, tickets)
    for ticket_id in tickets:
        shown = ticket(url, ticket_id)
        events = [entry["event"] for entry in shown["history"]]
        assert (shown["status"], shown["closeReason"], events) == (
            "closed",
            PERSON["reason"],
            ["created", "closed"],
        ), shown
        assert shown["history"][-1]["detail"] == f"{PERSON['reason']}, by task {task_id}"


def carries(found: Any, *needles: str) -> bool:
    """Whether every one of ``needles`` is somewhere in ``found`` (text or JSON)."""
    text = found if isinstance(found, str) else json.dumps(found)
    return all(needle in text for needle in needles)


def text_of(called: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in called.get("content", []))


def assert_the_result_gives_the_link(called: dict[str, Any], link: str, task_id: str, what: str) -> None:
    """The call's result gives the person's link and the task id: in its text, for the model and
    the person, and as data: in ``structuredContent`` (the task, as the task tools show it), or,
    for a tool whose output schema the task would not fit (a library checks ``structuredContent``
    against it, the TypeScript SDK even for a tool error), in the result's
    ``_meta["longtools.dev/answer-links"]``."""
    assert carries(text_of(called), link, task_id), f"{what}: no link and task id in the text: {called}"
    structured = called.get("structuredContent")
    if structured is not None:
        assert carries(structured, link, task_id), f"{what}: structuredContent without them: {called}"
    else:
        links = (called.get("_meta") or {}).get("longtools.dev/answer-links") or {}
        assert link in links.values(), f"{what}: the link in neither structuredContent nor _meta: {called}"


# A client that answers the person's question itself --------------------------------------------

ANSWERING_ITSELF = [
    pytest.param(MCP_AUTO, ACCEPT, id="mcp-2.3-auto-accept"),
    pytest.param(MCP_AUTO, ACCEPT_FIELDS, id="mcp-2.3-auto-accept-with-the-forms-fields"),
    pytest.param(MCP_LEGACY, ACCEPT, id="mcp-2.3-legacy-accept"),
    pytest.param(MCP_LEGACY, ACCEPT_FIELDS, id="mcp-2.3-legacy-accept-with-the-forms-fields"),
    pytest.param(FASTMCP2, ACCEPT, id="fastmcp-2.14-accept"),
    pytest.param(FASTMCP2, ACCEPT_FIELDS, id="fastmcp-2.14-accept-with-the-forms-fields"),
    pytest.param(MCP_1_30, ACCEPT_FIELDS, id="mcp-1.30-session-accept-with-the-forms-fields"),
    pytest.param(FASTMCP_TASKS, ACCEPT, id="fastmcp-tasks-4.1.4-tasks-update-accept"),
    pytest.param(
        FASTMCP_TASKS, ACCEPT_FIELDS, id="fastmcp-tasks-4.1.4-tasks-update-accept-with-the-forms-fields"
    ),
    pytest.param(TYPESCRIPT, ACCEPT_FIELDS, id="typescript-sdk-accept-with-the-forms-fields"),
    pytest.param(TYPESCRIPT_TASKS, ACCEPT_FIELDS, id="typescript-tasks-result-accept-with-the-forms-fields"),
]


@pytest.mark.parametrize(("host", "answer"), ANSWERING_ITSELF)
def test_a_clients_own_answer_closes_no_ticket_and_the_task_waits_until_the_person_answers_on_the_page(
    owners: Served, wire: WireLog, tmp_path: Path, host: Host, answer: dict[str, Any]
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    tickets = new_tickets(owners.url, customer)
    since = len(wire.seen)
    driven = start(host, wire.url, [answer], customer, tmp_path)
    try:
        asked = driven.first_url_request()
        link = str(asked["url"])
        assert asked["message"] == f"Close 2 tickets for {customer}?"
        assert link.startswith(f"{owners.base}/answer/"), link

        # The client's own answer reached the server, and carried what the library filled in.
        answers = client_answer_reached_the_server(wire, since)
        if "content" in answer:
            assert any(carries(seen.body, LIBRARY["note"]) for seen in answers), [s.body for s in answers]
        what = f"{host}'s own answer ({answer})"
        with Person(owners.base) as ann:
            task_id = ann.open(link, f": {what} was taken")
            assert_the_task_waits_for_the_page(owners.url, task_id, link, tickets, what, noted=host.update)

            # The person answers on the page: the held call or the task goes on with her answer.
            ann.answer(link)
        assert_the_person_closed_each_ticket_once(owners.url, task_id, customer, tickets)
        out = driven.finish()
    finally:
        driven.stop()
    called = call_result(host, out)
    assert called.get("isError") is not True, called
    assert _sorted_closed(called.get("structuredContent")) == closed_by_the_person(customer, tickets), called
    assert [params["url"] for params in driven.url_requests()][:1] == [link]


# A client's decline or cancel of the URL request ------------------------------------------------

CALLS = [
    pytest.param(MCP_AUTO, id="mcp-2.3-auto"),
    pytest.param(MCP_LEGACY, id="mcp-2.3-legacy"),
    pytest.param(FASTMCP2, id="fastmcp-2.14"),
    pytest.param(TYPESCRIPT, id="typescript-sdk"),
]


@pytest.mark.parametrize("action", ["decline", "cancel"])
@pytest.mark.parametrize("host", CALLS)
def test_a_clients_decline_or_cancel_of_the_url_request_ends_its_call_with_the_link_and_the_task_waits(
    owners: Served, wire: WireLog, tmp_path: Path, host: Host, action: str
) -> None:
    """The host's ``decline``/``cancel`` says its person did not go to the page, not how they would
    answer: the held call (an MRTR round, a 2025-11-25 ``tools/call``) ends with a tool error that
    gives the link and the task id, and the task waits for the page."""
    customer = f"c-{secrets.token_hex(4)}"
    tickets = new_tickets(owners.url, customer)
    since = len(wire.seen)
    driven = start(host, wire.url, [{"action": action}], customer, tmp_path)
    try:
        link = str(driven.first_url_request()["url"])
        client_answer_reached_the_server(wire, since)
        out = driven.finish()  # the call ends at once, without the person
    finally:
        driven.stop()
    called = call_result(host, out)
    what = f"{host}'s {action}"
    with Person(owners.base) as ann:
        task_id = ann.open(link, f": {what} was taken as the person's answer ({called})")
        assert called.get("isError") is True, f"{what}: the call ended without a tool error: {called}"
        assert_the_result_gives_the_link(called, link, task_id, what)
        assert_the_task_waits_for_the_page(owners.url, task_id, link, tickets, what)
        ann.answer(link)
    assert_the_person_closed_each_ticket_once(owners.url, task_id, customer, tickets)


TASK_CLIENTS = [
    pytest.param(FASTMCP_TASKS, id="fastmcp-tasks-4.1.4-tasks-update"),
    pytest.param(TYPESCRIPT_TASKS, id="typescript-tasks-result"),
]


@pytest.mark.parametrize("action", ["decline", "cancel"])
@pytest.mark.parametrize("host", TASK_CLIENTS)
def test_a_tasks_clients_decline_or_cancel_of_the_url_request_leaves_the_task_waiting_for_the_page(
    owners: Served, wire: WireLog, tmp_path: Path, host: Host, action: str
) -> None:
    """A task's client (fastmcp-tasks answers with ``tasks/update`` and polls on; the TypeScript
    tasks API answers on ``tasks/result`` and waits on it): its ``decline`` or ``cancel`` ends
    nothing, no ticket closes, and once the person has answered on the page the client gets the
    person's result (fastmcp-tasks may instead end with an error that gives the link)."""
    customer = f"c-{secrets.token_hex(4)}"
    tickets = new_tickets(owners.url, customer)
    since = len(wire.seen)
    driven = start(host, wire.url, [{"action": action}], customer, tmp_path)
    try:
        link = str(driven.first_url_request()["url"])
        client_answer_reached_the_server(wire, since)
        what = f"{host}'s {action}"
        with Person(owners.base) as ann:
            task_id = ann.open(link, f": {what} was taken")
            assert_the_task_waits_for_the_page(owners.url, task_id, link, tickets, what, noted=host.update)
            ann.answer(link)
        assert_the_person_closed_each_ticket_once(owners.url, task_id, customer, tickets)
        out = driven.finish()
    finally:
        driven.stop()
    called = call_result(host, out)
    if host.update and "error" in called:
        assert carries(called["error"], link), called
    else:
        assert called.get("isError") is not True, called
        assert _sorted_closed(called.get("structuredContent")) == closed_by_the_person(customer, tickets)
    if not host.update:  # 2025-11-25: a status notification gives the link (protocol.md)
        said = [
            note["params"].get("statusMessage") or ""
            for note in out["notifications"]
            if note.get("method") == "notifications/tasks/status"
        ]
        assert any(link in message for message in said), said


# A client that cannot be sent to the page ------------------------------------------------------

SENT_TO_THE_LINK = [
    pytest.param(MCP_1_12, id="mcp-1.12.4-2025-06-18-form-only"),
    pytest.param(TYPESCRIPT_FORM_ONLY, id="typescript-sdk-form-only"),
    pytest.param(MCP_AUTO_BARE, id="mcp-2.3-auto-no-elicitation-task-answer"),
    pytest.param(MCP_LEGACY_BARE, id="mcp-2.3-legacy-no-elicitation-task-answer"),
]


@pytest.mark.parametrize("host", SENT_TO_THE_LINK)
def test_a_client_that_cannot_open_a_url_gets_the_link_never_the_form_and_the_task_waits_for_the_page(
    owners: Served, wire: WireLog, tmp_path: Path, host: Host
) -> None:
    """A form-only client, a 2025-06-18 session and a client without elicitation are given the
    link (in the result, :func:`assert_the_result_gives_the_link`, and in the task's
    ``statusMessage``), never the form their library would fill in; a chat host's ``task_answer``
    is refused."""
    customer = f"c-{secrets.token_hex(4)}"
    tickets = new_tickets(owners.url, customer)
    since = len(wire.seen)
    driven = start(host, wire.url, [ACCEPT_FIELDS], customer, tmp_path)
    try:
        out = driven.finish()
    finally:
        driven.stop()
    initialized = [seen.body for seen in wire.seen[since:] if seen.method == "initialize"]
    if host is MCP_1_12:  # what it is: a 2025-06-18 client declaring form elicitation as `{}`
        [hello] = initialized
        assert hello is not None
        assert hello["params"]["protocolVersion"] == "2025-06-18"
        assert hello["params"]["capabilities"]["elicitation"] == {}
        assert out["protocolVersion"] == "2025-06-18"
    forms = shown_form(host, out)
    assert forms == [], f"{host} was shown the form, which its library answered: {forms}"
    called = call_result(host, out)
    found = re.search(re.escape(owners.base) + r"/answer/[A-Za-z0-9_-]+", text_of(called))
    assert found, f"{host}: no answer link in the result's text: {called}"
    link = found.group(0)
    with Person(owners.base) as ann:
        task_id = ann.open(link)
        assert_the_result_gives_the_link(called, link, task_id, f"{host}")
        if not host.elicitation:  # its model tried to approve on the person's behalf
            refused = call_result(host, out, step=TASK_ANSWER)
            assert refused.get("isError") is True, refused
            assert carries(text_of(refused), link), refused
        assert_the_task_waits_for_the_page(owners.url, task_id, link, tickets, f"{host}'s answer")
        shown = task_as(owners.url, task_id, FORM_TASKS)  # what a client like it sees of the task
        said = shown.get("statusMessage") or ""
        assert carries(said, link), f"a form-only client is not given the link in statusMessage: {said!r}"
        assert not shown.get("inputRequests"), f"a form-only client is shown: {shown['inputRequests']}"
        ann.answer(link)
    assert_the_person_closed_each_ticket_once(owners.url, task_id, customer, tickets)


# The quickstart's fastmcp snippet (N1) -----------------------------------------------------------

_FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_PLEASE_OPEN = re.compile(r"Please open (\S+) to answer:")
PERSON_TAKES_S = 10.0
MOST_UPDATES = 10


def _quickstart_fastmcp_snippet() -> str:
    [snippet] = [body for body in _FENCE.findall(QUICKSTART.read_text()) if "fastmcp_tasks" in body]
    return str(snippet)


class _Lines(threading.Thread):
    """Reads a process's stdout line by line (so it never blocks on a full pipe)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.lines: list[str] = []
        self.start()

    def run(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)


def test_the_quickstarts_fastmcp_snippet_sends_at_most_ten_tasks_updates_while_the_person_takes_ten_seconds(
    owners: Served, tmp_path: Path
) -> None:
    """docs/quickstart.md's fastmcp-tasks snippet as a reader runs it (against this server, through
    a pass-through that counts its requests and signs them in as ann), for a customer of its own;
    the person opens the link it prints and answers 10 s later."""
    snippet = _quickstart_fastmcp_snippet()
    customer = f"c-{secrets.token_hex(4)}"
    assert snippet.count("http://127.0.0.1:8000/mcp") == 1 and snippet.count('"acme"') == 2, snippet
    counting = WireLog(owners.url, auth=bearer("ann")).start()
    program = tmp_path / "quickstart_fastmcp.py"
    program.write_text(
        snippet.replace("http://127.0.0.1:8000/mcp", counting.url).replace('"acme"', json.dumps(customer))
    )
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-u", str(program)], stdout=subprocess.PIPE, stderr=err, text=True
        )
    lines = _Lines(process)
    try:
        first = eventually(lambda: next(filter(_PLEASE_OPEN.search, lines.lines), None), within=WITHIN)
        assert first is not None
        found = _PLEASE_OPEN.search(first)
        assert found is not None
        link = found.group(1)
        since, shown_before = len(counting.seen), len(lines.lines)
        with Person(owners.base) as ann:
            task_id = ann.open(link)
            # The person reads the question and decides: one moment of 10 s, no polling.
            threading.Event().wait(PERSON_TAKES_S)
            meanwhile = counting.seen[since:]
            shown = [ln for ln in lines.lines[shown_before:] if _PLEASE_OPEN.search(ln)]
            ann.answer(link)
        process.wait(timeout=WITHIN)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        lines.join(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        counting.close()
    updates = sum(1 for seen in meanwhile if seen.method == "tasks/update")
    gets = sum(1 for seen in meanwhile if seen.method == "tasks/get")
    assert updates <= MOST_UPDATES, (
        f"{updates} tasks/update (and {gets} tasks/get) in {PERSON_TAKES_S:g} s; "
        f"the snippet's handler printed the link {len(shown)} times more"
    )
    assert process.returncode == 0, stderr.read_text()
    said = "".join(lines.lines)
    assert "'outcome': 'closed'" in said and PERSON["note"] in said, said[-2000:]
    assert ended(owners.url, task_id)["status"] == "completed"
