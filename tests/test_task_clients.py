"""``bulk_close_tickets`` driven by two independent client implementations against a real server.

Its approval is a person's question, answered on its page only: each client is sent there (a URL
request), its host says its person went (``accept``), and the person answers on the page
(tests/pages.py, plain HTTP; no auth: on loopback a visitor is signed in).

- ``fastmcp[tasks]`` 4.1.4 declares the Tasks extension: the call becomes a task that goes
  ``input_required`` → ``tasks/update`` (its handler's ``accept``) → the page → ``completed``.
- The official ``mcp`` SDK client declares no tasks extension: the same tool runs through MRTR
  rounds, its callback's ``accept`` held until the page has the answer.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitRequestURLParams, ElicitResult

from tests.conftest import Served, start_server
from tests.pages import PageClient
from tests.wire import post, result, wait_for_task

LINKS = "longtools.dev/answer-links"


@pytest.fixture(scope="module")
def helpdesk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # Short simulated work per ticket keeps the module quick; the flows are the same.
    served = start_server(tmp_path_factory.mktemp("helpdesk"), env={"LONGTOOLS_HELPDESK_WORK_S": "0.2"})
    try:
        yield served
    finally:
        served.stop()


@contextlib.contextmanager
def _path_hooks_kept() -> Iterator[None]:
    """Imports inside leave ``sys.path_hooks`` as it was.

    fastmcp imports ``key_value.aio``, which puts beartype's import hook (``beartype.claw``) in front
    of every later import of the process. Temporal's workflow sandbox imports a workflow's modules
    afresh for every run and replay, and under that hook each such import loads beartype's ~400
    modules again: a replay of a recorded history took 3 to 13 s instead of 0.07 s, and the test
    modules that run workflows in this process (test_replay, test_metrics_unit...) 4 minutes more.
    Imported in the test, not at collection, and the hook taken out again: what it adds is type
    checks inside ``key_value.aio`` that warn, nothing the flows under test use.
    """
    hooks = list(sys.path_hooks)
    try:
        yield
    finally:
        sys.path_hooks[:] = hooks
        sys.path_importer_cache.clear()  # finders made through the hook would keep using it
        importlib.invalidate_caches()


def _tickets(url: str, customer: str, count: int) -> list[str]:
    made = []
    for n in range(count):
        ticket = result(
            post(
                url,
                "tools/call",
                {"name": "create_ticket", "arguments": {"title": f"t{n}", "customer": customer}},
            )
        )
        made.append(ticket["structuredContent"]["ticketId"])
    return made


def _answer_on_the_page(base: str, link: str, fields: dict[str, Any], action: str = "accept") -> None:
    """The person opens ``link`` and answers it with ``fields`` (or declines)."""
    with PageClient(base) as person:
        sent = person.answer(link, fields, action=action)
    assert "Your answer was sent" in sent.text, sent.text


async def _person_answers(base: str, link: str, fields: dict[str, Any]) -> None:
    """:func:`_answer_on_the_page` beside a client's call (its host has sent the person there)."""
    await anyio.to_thread.run_sync(functools.partial(_answer_on_the_page, base, link, fields))


def _history(url: str, ticket_id: str) -> list[str]:
    ticket = result(post(url, "tools/call", {"name": "get_ticket", "arguments": {"ticketId": ticket_id}}))
    return [entry["event"] for entry in ticket["structuredContent"]["history"]]


async def test_fastmcp_tasks_client_drives_the_task_through_input_required(helpdesk: Served) -> None:
    tickets = _tickets(helpdesk.url, "acme", 3)
    questions: list[str] = []
    links: list[str] = []
    approval: dict[str, Any] = {"confirm": True, "reason": "Resolved"}

    with _path_hooks_kept():
        from fastmcp import Client as FastMCPClient
        from fastmcp_tasks.client import call_tool_task

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:

            async def send_to_the_page(
                message: str, response_type: Any, params: Any, context: Any
            ) -> dict[str, Any]:
                questions.append(message)
                links.append(params.url)
                group.start_soon(_person_answers, helpdesk.base, params.url, approval)
                return {}  # accept: the person went there

            async with FastMCPClient(helpdesk.url, elicitation_handler=send_to_the_page) as client:
                task = await call_tool_task(client, "bulk_close_tickets", {"customer": "acme"})
                parked = await task.wait(state="input_required", timeout=30)
                assert parked.task_id == task.task_id
                done = await task.result()  # the handler's accept with tasks/update, then polls
                final = await task.status()

    assert questions == ["Close 3 tickets for acme?"]
    [link] = links
    assert link.startswith(f"{helpdesk.base}/answer/"), link
    assert final.status == "completed"
    assert done.structured_content is not None
    assert sorted(done.structured_content["closed"]) == sorted(tickets)
    assert done.structured_content["reason"] == "Resolved"
    for ticket in tickets:
        assert _history(helpdesk.url, ticket).count("closed") == 1


async def test_the_sdk_client_without_tasks_gets_the_same_tool_through_mrtr_rounds(helpdesk: Served) -> None:
    tickets = _tickets(helpdesk.url, "globex", 2)
    questions: list[str] = []
    approval: dict[str, Any] = {"confirm": True, "reason": "Duplicate"}
    messages: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:

            async def send_to_the_page(
                context: ClientRequestContext, params: ElicitRequestParams
            ) -> ElicitResult:
                questions.append(params.message)
                assert isinstance(params, ElicitRequestURLParams), params  # a person's question: its page
                group.start_soon(_person_answers, helpdesk.base, params.url, approval)
                return ElicitResult(action="accept")  # the person went there: the page has the answer

            async with Client(helpdesk.url, elicitation_callback=send_to_the_page) as client:
                outcome = await client.call_tool(
                    "bulk_close_tickets", {"customer": "globex"}, progress_callback=on_progress
                )

    assert questions == ["Close 2 tickets for globex?"]
    # The held round relays the workflow's statusMessage as progress notifications.
    assert "Closed 1 of 2" in messages or "Closed 2 of 2" in messages, messages
    assert not outcome.is_error
    assert outcome.structured_content is not None
    assert sorted(outcome.structured_content["closed"]) == sorted(tickets)
    assert outcome.structured_content["reason"] == "Duplicate"
    for ticket in tickets:
        assert _history(helpdesk.url, ticket).count("closed") == 1


def test_declining_closes_nothing(helpdesk: Served) -> None:
    """A host's decline of the URL request only ends its call (with the link and the task); the
    person's decline on the page is the answer, and closes nothing."""
    (ticket,) = _tickets(helpdesk.url, "initech", 1)
    args = {"name": "bulk_close_tickets", "arguments": {"customer": "initech"}}
    caps: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
    asked = result(post(helpdesk.url, "tools/call", args, caps=caps))
    ((key, request),) = asked["inputRequests"].items()
    link = request["params"]["url"]
    retry = {**args, "requestState": asked["requestState"], "inputResponses": {key: {"action": "decline"}}}
    ended = result(post(helpdesk.url, "tools/call", retry, caps=caps))
    assert ended["isError"] is True, ended
    # The task in words (no structuredContent: the tool lists an output schema the task would not fit).
    assert "structuredContent" not in ended and ended["_meta"][LINKS] == {key: link}
    said = ended["content"][0]["text"]
    assert link in said
    task_id = said.split("The task (", 1)[1].split(")", 1)[0]
    assert _history(helpdesk.url, ticket) == ["created"]
    _answer_on_the_page(helpdesk.base, link, {}, action="decline")
    done = wait_for_task(helpdesk.url, task_id, lambda t: t["status"] == "completed")
    assert done["result"]["structuredContent"]["outcome"] == "declined"
    assert done["result"]["structuredContent"]["closed"] == []
    assert _history(helpdesk.url, ticket) == ["created"]
