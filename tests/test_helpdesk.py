"""The helpdesk example: tickets over the wire, the store's close-once rule, and its activities.

Wire tests run against the session's real ``longtools serve`` (examples on, 1 s of work per
ticket); each makes its own tickets and customers, so they share the server without sharing state.
"""

from __future__ import annotations

import asyncio
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from longtools.activities.helpdesk import CloseReason, CloseTicketRequest, HelpdeskActivities, TicketStore
from tests.conftest import Served
from tests.pages import PageClient
from tests.wire import post, result, wait_for_task

TASKS = "io.modelcontextprotocol/tasks"
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}
LINKS = "longtools.dev/answer-links"


def _call(url: str, name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    caps = params.pop("caps", None)
    return result(post(url, "tools/call", {"name": name, "arguments": arguments, **params}, caps=caps))


def _customer() -> str:
    return f"customer-{secrets.token_hex(4)}"


def _new_ticket(url: str, customer: str | None = None, title: str = "Printer on fire") -> str:
    made = _call(url, "create_ticket", {"title": title, "customer": customer or _customer()})
    ticket_id = made["structuredContent"]["ticketId"]
    assert isinstance(ticket_id, str)
    return ticket_id


def _ticket(url: str, ticket_id: str) -> dict[str, Any]:
    got = _call(url, "get_ticket", {"ticketId": ticket_id})
    assert got["isError"] is False, got
    content: dict[str, Any] = got["structuredContent"]
    return content


def _events(url: str, ticket_id: str) -> list[str]:
    return [entry["event"] for entry in _ticket(url, ticket_id)["history"]]


def _ask_reason(url: str, ticket_id: str) -> str:
    asked = _call(url, "close_ticket", {"ticketId": ticket_id})
    assert asked["resultType"] == "input_required", asked
    assert set(asked["inputRequests"]) == {"close_reason"}
    state = asked["requestState"]
    assert isinstance(state, str)
    return state


def _answer(url: str, ticket_id: str, state: str, response: dict[str, Any]) -> dict[str, Any]:
    return _call(
        url,
        "close_ticket",
        {"ticketId": ticket_id},
        inputResponses={"close_reason": response},
        requestState=state,
    )


def _reason(value: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"reason": value}}


# Quick tools over the wire ---------------------------------------------------------------------


def test_the_helpdesk_tools_take_camel_case_arguments_and_declare_output_schemas(server: Served) -> None:
    listed = {tool["name"]: tool for tool in result(post(server.url, "tools/list"))["tools"]}
    expected = {
        "create_ticket": ["customer", "title"],
        "get_ticket": ["ticketId"],
        "close_ticket": ["ticketId"],
        "bulk_close_tickets": ["customer"],
    }
    for name, arguments in expected.items():
        assert sorted(listed[name]["inputSchema"]["properties"]) == arguments, name
        assert "outputSchema" in listed[name], name
    assert listed["get_ticket"]["annotations"]["readOnlyHint"] is True


def test_a_new_ticket_is_open_and_its_history_says_created(server: Served) -> None:
    customer = _customer()
    made = _call(server.url, "create_ticket", {"title": "VPN drops", "customer": customer})
    assert made["isError"] is False
    ticket = made["structuredContent"]
    assert ticket["ticketId"].startswith("T-") and ticket["ticketId"][2:].isdigit()
    assert (ticket["title"], ticket["customer"], ticket["status"]) == ("VPN drops", customer, "open")
    assert ticket["closeReason"] is None
    assert [entry["event"] for entry in ticket["history"]] == ["created"]
    assert _ticket(server.url, ticket["ticketId"]) == ticket


def test_close_ticket_asks_the_reason_then_closes_once_with_it(server: Served) -> None:
    ticket_id = _new_ticket(server.url)
    asked = _call(server.url, "close_ticket", {"ticketId": ticket_id})
    form = asked["inputRequests"]["close_reason"]["params"]["requestedSchema"]
    assert form["properties"]["reason"]["enum"] == ["Resolved", "Duplicate", "Cancelled"]
    assert _ticket(server.url, ticket_id)["status"] == "open"  # asking changes nothing

    done = _answer(server.url, ticket_id, asked["requestState"], _reason("Duplicate"))
    assert done["isError"] is False, done
    assert done["structuredContent"]["status"] == "closed"
    assert done["structuredContent"]["closeReason"] == "Duplicate"
    ticket = _ticket(server.url, ticket_id)
    assert ticket == done["structuredContent"]
    assert [entry["event"] for entry in ticket["history"]] == ["created", "closed"]
    assert "Duplicate" in ticket["history"][1]["detail"]


def test_closing_a_closed_ticket_is_a_tool_error_and_changes_nothing(server: Served) -> None:
    ticket_id = _new_ticket(server.url)
    _answer(server.url, ticket_id, _ask_reason(server.url, ticket_id), _reason("Resolved"))

    again = _call(server.url, "close_ticket", {"ticketId": ticket_id})
    assert again["isError"] is True
    assert (
        again["content"][0]["text"]
        == f"Ticket {ticket_id} is already closed (Resolved); nothing was changed."
    )
    assert _events(server.url, ticket_id) == ["created", "closed"]


def test_an_unknown_ticket_is_a_tool_error(server: Served) -> None:
    for tool in ("close_ticket", "get_ticket"):
        called = _call(server.url, tool, {"ticketId": "T-999999999"})
        assert called["isError"] is True, tool
        assert called["content"][0]["text"] == "There is no ticket T-999999999.", tool


def test_a_declined_question_leaves_the_ticket_open(server: Served) -> None:
    ticket_id = _new_ticket(server.url)
    done = _answer(server.url, ticket_id, _ask_reason(server.url, ticket_id), {"action": "decline"})
    assert done["isError"] is False
    assert done["structuredContent"]["status"] == "open"
    assert _events(server.url, ticket_id) == ["created"]


def test_an_answer_that_arrives_after_another_exchange_closed_the_ticket_is_a_tool_error(
    server: Served,
) -> None:
    """The answer round checks the ticket again: the first exchange wins, the second changes nothing."""
    ticket_id = _new_ticket(server.url)
    first, second = _ask_reason(server.url, ticket_id), _ask_reason(server.url, ticket_id)
    won = _answer(server.url, ticket_id, first, _reason("Resolved"))
    lost = _answer(server.url, ticket_id, second, _reason("Cancelled"))
    assert won["structuredContent"]["closeReason"] == "Resolved"
    assert lost["isError"] is True
    assert "already closed (Resolved)" in lost["content"][0]["text"]
    ticket = _ticket(server.url, ticket_id)
    assert ticket["closeReason"] == "Resolved"
    assert [entry["event"] for entry in ticket["history"]] == ["created", "closed"]


# The long tool over the wire -------------------------------------------------------------------


def test_bulk_close_asks_once_then_closes_each_open_ticket_as_a_task(server: Served) -> None:
    url, customer = server.url, _customer()
    first, second = _new_ticket(url, customer), _new_ticket(url, customer)
    started = _call(url, "bulk_close_tickets", {"customer": customer}, caps=TASK_CAPS)
    assert started["resultType"] == "task"
    task_id = started["taskId"]

    # The approval is a person's: a client that shows forms is given its link, never the form.
    waiting = wait_for_task(url, task_id, lambda t: LINKS in t.get("_meta", {}))
    ((_, link),) = waiting["_meta"][LINKS].items()
    assert waiting["statusMessage"].endswith(f"A person must answer on its page: {link}")
    assert _events(url, first) == ["created"]  # nothing is touched before the answer

    # Meanwhile someone closes the second ticket by hand: the task reports it, never closes it twice.
    _answer(url, second, _ask_reason(url, second), _reason("Cancelled"))
    with PageClient(server.base) as person:
        form = person.get(link)
        assert f"Close 2 tickets for {customer}?" in form.text
        assert list(dict.fromkeys(form.forms().names)) == ["confirm", "reason", "note"]  # radios share one
        person.send(link, form, {"confirm": True, "reason": "Duplicate"})
    done = wait_for_task(url, task_id, lambda t: t["status"] not in ("working", "input_required"))

    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"] == {
        "customer": customer,
        "outcome": "closed",
        "reason": "Duplicate",
        "note": "",
        "closed": [first],
        "alreadyClosed": [second],
        "notFound": [],
    }
    closed_first, closed_second = _ticket(url, first), _ticket(url, second)
    assert closed_first["closeReason"] == "Duplicate"
    assert closed_first["history"][-1]["detail"] == f"Duplicate, by task {task_id}"
    assert closed_second["closeReason"] == "Cancelled"
    assert [entry["event"] for entry in closed_second["history"]] == ["created", "closed"]


def test_bulk_close_without_tasks_ends_the_call_with_its_link_and_a_no_on_the_page_closes_nothing(
    server: Served,
) -> None:
    url, customer = server.url, _customer()
    ticket_id = _new_ticket(url, customer)
    # A client without URL-mode elicitation cannot send its person to the page: the call ends
    # saying where, in words and as the task, which waits for the person.
    ended = _call(url, "bulk_close_tickets", {"customer": customer})
    assert ended["isError"] is True, ended
    # No structuredContent: the tool lists an output schema, which the task would not fit.
    assert "structuredContent" not in ended
    ((_, link),) = ended["_meta"][LINKS].items()
    said = ended["content"][0]["text"]
    assert link in said
    task_id = said.split("The task (", 1)[1].split(")", 1)[0]
    with PageClient(server.base) as person:
        person.answer(link, {"confirm": False})
    done = wait_for_task(url, task_id, lambda t: t["status"] == "completed")
    assert done["result"]["structuredContent"]["outcome"] == "declined"
    assert done["result"]["structuredContent"]["closed"] == []
    assert _events(url, ticket_id) == ["created"]


def test_bulk_close_with_nothing_open_finishes_without_asking(server: Served) -> None:
    done = _call(server.url, "bulk_close_tickets", {"customer": _customer()})
    assert done["resultType"] == "complete", done
    assert done["structuredContent"]["outcome"] == "nothing_to_close"


# The store ---------------------------------------------------------------------------------------


def test_a_retried_close_by_the_same_operation_reports_closed_and_writes_one_history_entry(
    tmp_path: Path,
) -> None:
    store = TicketStore(tmp_path / "helpdesk.sqlite3")
    ticket = store.create("Disk full", "acme")
    assert store.close(ticket.id, CloseReason.duplicate, "task A") == "closed"
    # A retry after the commit (even one that says something else) finds its own closure.
    assert store.close(ticket.id, CloseReason.resolved, "task A") == "closed"
    assert store.close(ticket.id, CloseReason.resolved, "task B") == "already_closed"
    assert store.close("T-424242", CloseReason.resolved, "task A") == "not_found"
    closed = store.get(ticket.id)
    assert closed is not None
    assert (closed.status, closed.close_reason, closed.closed_by) == (
        "closed",
        CloseReason.duplicate,
        "task A",
    )
    assert [entry.event for entry in closed.history] == ["created", "closed"]


def test_of_many_concurrent_closers_on_two_connections_exactly_one_wins(tmp_path: Path) -> None:
    """Two stores stand for the API and the worker process on one file: the write lock decides."""
    path = tmp_path / "helpdesk.sqlite3"
    stores = [TicketStore(path), TicketStore(path)]
    ticket = stores[0].create("Race", "acme")
    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(
            pool.map(lambda n: stores[n % 2].close(ticket.id, CloseReason.resolved, f"op {n}"), range(16))
        )
    assert sorted(outcomes) == ["already_closed"] * 15 + ["closed"]
    closed = stores[1].get(ticket.id)
    assert closed is not None
    assert [entry.event for entry in closed.history] == ["created", "closed"]
    assert stores[1].open_ids("acme") == []


# The activities ----------------------------------------------------------------------------------


async def test_a_cancel_during_the_work_raises_cancelled_and_leaves_the_ticket_open(tmp_path: Path) -> None:
    store = TicketStore(tmp_path / "helpdesk.sqlite3")
    ticket = store.create("Slow backend", "acme")
    acts = HelpdeskActivities(store, work_s=60)
    env = ActivityEnvironment()
    working = asyncio.Event()
    env.on_heartbeat = lambda *details: working.set()
    request = CloseTicketRequest(ticket_id=ticket.id, reason=CloseReason.resolved, operation="wf-1")
    running = asyncio.create_task(env.run(acts.close_ticket, request))
    async with asyncio.timeout(10):
        await working.wait()
        env.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    after = store.get(ticket.id)
    assert after is not None
    assert after.status == "open"
    assert [entry.event for entry in after.history] == ["created"]


async def test_a_retried_close_activity_skips_the_work_and_reports_its_own_closure(tmp_path: Path) -> None:
    store = TicketStore(tmp_path / "helpdesk.sqlite3")
    ticket = store.create("Flaky worker", "acme")
    acts = HelpdeskActivities(store, work_s=0.3)
    heartbeats: list[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: heartbeats.append(details)
    request = CloseTicketRequest(ticket_id=ticket.id, reason=CloseReason.resolved, operation="wf-2")
    first = await env.run(acts.close_ticket, request)
    beats = len(heartbeats)
    retry = await env.run(acts.close_ticket, request)  # as if the first attempt's report was lost
    other = await env.run(acts.close_ticket, request.model_copy(update={"operation": "wf-3"}))
    assert (first.result, retry.result, other.result) == ("closed", "closed", "already_closed")
    assert beats >= 2 and len(heartbeats) == beats  # the work ran once, heartbeating; retries skip it
    after = store.get(ticket.id)
    assert after is not None
    assert [entry.event for entry in after.history] == ["created", "closed"]
