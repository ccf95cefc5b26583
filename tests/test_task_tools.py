"""Tasks as tools: a client with neither tasks nor elicitation (a chat host) starts, follows,
answers and cancels long tools with plain tool calls, against a real ``longtools serve``.

Raw HTTP in both eras (with two principals, for what one may see of the other's tasks), then the
official ``mcp`` client with no callbacks at all, in auto (2026-07-28) and legacy (2025) mode.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import CallToolResult, TextContent

from tests.conftest import OWNER_TOKENS, Served, bearer
from tests.pages import PageClient
from tests.wire import ALL_CAPS, Legacy, eventually, post, result

NONE: dict[str, Any] = {}
UNKNOWN = "There is no task {!r} of yours: the id is wrong, or the task has expired."
Call = Callable[[str, dict[str, Any]], dict[str, Any]]


def _modern(url: str, who: str) -> Call:
    """tools/call at 2026-07-28, declaring no capabilities, as ``who``."""
    return lambda name, arguments: result(
        post(url, "tools/call", {"name": name, "arguments": arguments}, caps=NONE, headers=bearer(who))
    )


def _legacy(url: str, who: str) -> Call:
    """tools/call in a 2025-era session that declared no capabilities, as ``who``."""
    session = Legacy(url, caps=NONE, headers=bearer(who))
    session.open()
    return lambda name, arguments: result(
        session.request("tools/call", {"name": name, "arguments": arguments})
    )


def _text(outcome: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in outcome["content"] if block["type"] == "text")


def _tickets(call: Call, customer: str, count: int) -> list[str]:
    made = [call("create_ticket", {"title": f"t{n}", "customer": customer}) for n in range(count)]
    return [ticket["structuredContent"]["ticketId"] for ticket in made]


def _history(call: Call, ticket_id: str) -> list[str]:
    shown = call("get_ticket", {"ticketId": ticket_id})["structuredContent"]
    return [entry["event"] for entry in shown["history"]]


def test_only_a_client_that_needs_them_is_shown_the_task_tools(owners: Served) -> None:
    def listed(caps: dict[str, Any]) -> dict[str, dict[str, Any]]:
        tools = result(post(owners.url, "tools/list", caps=caps, headers=bearer("ann")))["tools"]
        return {tool["name"]: tool for tool in tools}

    bare = listed(NONE)
    assert {"task_status", "task_answer", "task_cancel"} <= set(bare)
    assert bare["task_answer"]["inputSchema"]["required"] == ["taskId", "answers"]
    # A long tool's call answers such a client with its task, so its own output schema would lie.
    assert "outputSchema" not in bare["bulk_close_tickets"]
    assert "outputSchema" in bare["create_ticket"]
    full = listed(ALL_CAPS)
    assert not {"task_status", "task_answer", "task_cancel"} & set(full)
    assert "outputSchema" in full["bulk_close_tickets"]


@pytest.mark.parametrize("era", [_modern, _legacy], ids=["2026-07-28", "2025"])
def test_a_client_without_capabilities_is_sent_to_the_page_for_a_persons_question(
    owners: Served, era: Callable[[str, str], Call]
) -> None:
    ann, ben = era(owners.url, "ann"), era(owners.url, "ben")
    customer = f"c-{secrets.token_hex(4)}"
    tickets = _tickets(ann, customer, 2)

    started = ann("bulk_close_tickets", {"customer": customer})
    task = started["structuredContent"]
    assert started.get("isError") is not True
    assert task["status"] == "input_required", task
    # Shown as a link: the text and structuredContent carry it, never a form the model could fill.
    [(key, link)] = task["_meta"]["longtools.dev/answer-links"].items()
    assert link.startswith(owners.base + "/answer/")
    shown = task["inputRequests"][key]["params"]
    shown.pop("elicitationId", None)  # the 2025 era's own field
    assert shown == {
        "mode": "url",
        "message": f"Close 2 tickets for {customer}?",
        "url": link,
    }
    said = _text(started)
    assert f"Close 2 tickets for {customer}?" in said
    assert link in said and "Only the person may answer this" in said
    assert "confirm (boolean" not in said

    def answer(who: Call, content: dict[str, Any]) -> dict[str, Any]:
        answers = {key: {"action": "accept", "content": content}}
        return who("task_answer", {"taskId": task["taskId"], "answers": answers})

    # The model may not approve it on the person's behalf, nor decline it.
    for attempt in ({"confirm": True, "reason": "duplicate"}, {"confirm": "yes"}):
        refused = answer(ann, attempt)
        assert refused["isError"] is True
        assert f"The question {key!r} must be answered by a person" in _text(refused)
        assert f"Ask the person to open {link}" in _text(refused)
        assert refused["structuredContent"]["status"] == "input_required"  # nothing was sent
    declined = ann("task_answer", {"taskId": task["taskId"], "answers": {key: {"action": "decline"}}})
    assert declined["isError"] is True

    # Another principal's task reads as no task at all, whatever the tool.
    extras: list[tuple[str, dict[str, Any]]] = [
        ("task_status", {}),
        ("task_cancel", {}),
        ("task_answer", {"answers": {key: {}}}),
    ]
    for tool, extra in extras:
        foreign = ben(tool, {"taskId": task["taskId"], **extra})
        assert foreign["isError"] is True
        assert _text(foreign) == UNKNOWN.format(task["taskId"])
        assert "structuredContent" not in foreign
    assert _text(ben("task_status", {"taskId": "no-such-task"})) == UNKNOWN.format("no-such-task")

    # The person answers on the page, and the task goes on to its end.
    with PageClient(owners.base) as browser:
        browser.sign_in(OWNER_TOKENS["ann"])
        sent = browser.answer(link, {"confirm": True, "reason": "Duplicate"})
        assert "Your answer was sent" in sent.text
    done = eventually(
        lambda: ann("task_status", {"taskId": task["taskId"]}),
        lambda shown: shown["structuredContent"]["status"] == "completed",
    )
    closed = done["structuredContent"]["result"]["structuredContent"]
    assert sorted(closed["closed"]) == sorted(tickets) and closed["reason"] == "Duplicate"
    assert "has completed" in _text(done) and tickets[0] in _text(done)
    assert all(_history(ann, ticket) == ["created", "closed"] for ticket in tickets)


def test_a_task_is_cancelled_through_task_cancel(owners: Served) -> None:
    ann = _modern(owners.url, "ann")
    customer = f"c-{secrets.token_hex(4)}"
    _tickets(ann, customer, 1)
    task = ann("bulk_close_tickets", {"customer": customer})["structuredContent"]
    cancelled = ann("task_cancel", {"taskId": task["taskId"]})
    assert cancelled["structuredContent"]["status"] == "cancelled"
    assert "was cancelled" in _text(cancelled)
    late = ann("task_answer", {"taskId": task["taskId"], "answers": {"input": {"action": "accept"}}})
    assert late["isError"] is True and "not waiting for an answer" in _text(late)


def test_bad_task_tool_arguments_are_a_tool_error(owners: Served) -> None:
    ann = _modern(owners.url, "ann")
    refused = ann("task_answer", {"taskId": "x"})
    assert refused["isError"] is True
    assert _text(refused).startswith("Invalid arguments for tool task_answer: answers:")
    # A name the tool does not take is refused, not dropped (issue 25), as for every other tool.
    extra = ann("task_status", {"taskId": "x", "verbose": True})
    assert extra["isError"] is True and "verbose" in _text(extra), _text(extra)


async def _follow_with_mcp(url: str, mode: Any) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    with anyio.fail_after(90):
        async with Client(url, mode=mode) as client:  # no callbacks: no capabilities declared
            made = [
                await client.call_tool("create_ticket", {"title": f"t{n}", "customer": customer})
                for n in range(2)
            ]
            started = await client.call_tool("bulk_close_tickets", {"customer": customer})
            task = _structured(started)
            assert task["status"] == "input_required"
            [(key, link)] = task["_meta"]["longtools.dev/answer-links"].items()
            answers = {key: {"action": "accept", "content": {"confirm": True}}}
            refused = await client.call_tool("task_answer", {"taskId": task["taskId"], "answers": answers})
            assert refused.is_error is True  # a person's question: not the model's to approve
            with PageClient(url.removesuffix("/mcp")) as browser:  # no auth: this computer's person
                await anyio.to_thread.run_sync(browser.answer, link, {"confirm": True})
            shown = _structured(await client.call_tool("task_status", {"taskId": task["taskId"]}))
            while shown["status"] != "completed":
                assert shown["status"] in ("working", "input_required"), shown
                shown = _structured(await client.call_tool("task_status", {"taskId": task["taskId"]}))
    ids = sorted(_structured(ticket)["ticketId"] for ticket in made)
    assert sorted(shown["result"]["structuredContent"]["closed"]) == ids


def _structured(outcome: CallToolResult) -> dict[str, Any]:
    said = [block.text for block in outcome.content if isinstance(block, TextContent)]
    assert outcome.is_error is not True, said
    assert isinstance(outcome.structured_content, dict)
    return outcome.structured_content


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_mcp_client_with_no_callbacks_follows_the_task_tools_while_the_person_answers_on_the_page(
    mcp_url: str, mode: str
) -> None:
    await _follow_with_mcp(mcp_url, mode)


def test_any_client_may_call_the_task_tools_on_its_own_tasks(owners: Served) -> None:
    """They are listed only to clients that need them, but served to all, with the same owner check."""
    task = result(
        post(
            owners.url,
            "tools/call",
            {"name": "confirm_delete", "arguments": {"filename": "x"}},
            caps={"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
            headers=bearer("ann"),
        )
    )
    shown = result(
        post(
            owners.url,
            "tools/call",
            {"name": "task_status", "arguments": {"taskId": task["taskId"]}},
            caps=ALL_CAPS,
            headers=bearer("ann"),
        )
    )
    assert shown["structuredContent"]["taskId"] == task["taskId"]


def test_a_tool_that_requires_a_task_is_no_task_tool(owners: Served) -> None:
    """SEP-2663: without the extension, a tool whose task support is `required` is -32021, even for
    a client that follows other long tools through the task tools."""
    refused = post(
        owners.url,
        "tools/call",
        {"name": "failing_job", "arguments": {}},
        caps=NONE,
        headers=bearer("ann"),
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32021
