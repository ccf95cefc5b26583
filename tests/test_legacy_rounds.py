"""A 2025-era client's rounds through the run-once record, over real HTTP.

A tool with side effects runs each continuation round once (``tasks.RunOnce``), and a keyed call
runs once per key; the record replays the round's outcome as the wire JSON it stored. When that
outcome asks again (a re-ask after an answer that did not fit, a tool of several rounds, a keyed
call whose first round asks), a 2025-era client must be pushed the next question, exactly as a
2026-era client is handed it.
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from tests.wire import Legacy, result, sse_lines

FORM: dict[str, Any] = {"elicitation": {"form": {}}}
IDEMPOTENCY = "longtools.dev/idempotency-key"


def answered_call(
    session: Legacy, name: str, arguments: dict[str, Any], answers: list[dict[str, Any]], **params: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Call ``name`` and answer each question pushed on the call's stream with the next of
    ``answers``; the questions asked and the call's final message."""
    call_id = f"call-{secrets.token_hex(4)}"
    body = {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, **params},
    }
    asked: list[dict[str, Any]] = []
    with httpx.stream("POST", session.url, json=body, headers=session.headers(), timeout=60) as stream:
        if not stream.headers["content-type"].startswith("text/event-stream"):
            stream.read()
            return asked, stream.json()
        for message in sse_lines(stream.iter_lines()):
            if message.get("method") == "elicitation/create":
                asked.append(message)
                assert len(asked) <= len(answers), f"asked once too often: {message}"
                assert session.answer(message["id"], answers[len(asked) - 1]).status_code == 202
            elif message.get("id") == call_id:
                return asked, message
    raise AssertionError(f"the stream ended before the call's answer; asked {asked}")


def _ticket(session: Legacy) -> str:
    arguments = {"title": "T", "customer": f"c-{secrets.token_hex(4)}"}
    made = result(session.request("tools/call", {"name": "create_ticket", "arguments": arguments}))
    ticket_id: str = made["structuredContent"]["ticketId"]
    return ticket_id


def _history(session: Legacy, ticket_id: str) -> list[str]:
    got = result(session.request("tools/call", {"name": "get_ticket", "arguments": {"ticketId": ticket_id}}))
    return [entry["event"] for entry in got["structuredContent"]["history"]]


def test_an_answer_that_does_not_fit_is_asked_again_and_the_next_one_closes(mcp_url: str) -> None:
    session = Legacy(mcp_url, caps=FORM)
    session.open()
    ticket_id = _ticket(session)
    unfit = {"action": "accept", "content": {"reason": "Bored"}}  # not in the form's enum
    fit = {"action": "accept", "content": {"reason": "Resolved"}}
    asked, final = answered_call(session, "close_ticket", {"ticketId": ticket_id}, [unfit, fit])
    assert [question["params"]["message"] for question in asked] == [
        f"Why is ticket {ticket_id} being closed?"
    ] * 2
    assert len({question["id"] for question in asked}) == 2  # each push has its own box
    assert final["result"]["structuredContent"]["closeReason"] == "Resolved", final
    assert _history(session, ticket_id) == ["created", "closed"]


def test_a_tool_of_several_rounds_with_side_effects_asks_each_round(mcp_url: str) -> None:
    session = Legacy(mcp_url, caps=FORM)
    session.open()
    name = {"action": "accept", "content": {"name": "Ada"}}
    color = {"action": "accept", "content": {"color": "teal"}}
    asked, final = answered_call(session, "test_input_required_result_multi_round", {}, [name, color])
    assert [question["params"]["message"] for question in asked] == [
        "Step 1: What is your name?",
        "Step 2: What is your favorite color?",
    ]
    assert final["result"]["content"][0]["text"] == "Multi-round complete for Ada who likes teal", final


def test_a_keyed_call_whose_first_round_asks_is_asked_and_runs_once(mcp_url: str) -> None:
    session = Legacy(mcp_url, caps=FORM)
    session.open()
    ticket_id = _ticket(session)
    key = {"_meta": {IDEMPOTENCY: f"close-{secrets.token_hex(4)}"}}
    fit = {"action": "accept", "content": {"reason": "Duplicate"}}
    asked, final = answered_call(session, "close_ticket", {"ticketId": ticket_id}, [fit], **key)
    assert len(asked) == 1
    assert final["result"]["structuredContent"]["closeReason"] == "Duplicate", final
    # The same key again: the first round's record asks the same question again, and its answer
    # round, replayed with the same answer, gives the first outcome instead of closing twice.
    again, replayed = answered_call(session, "close_ticket", {"ticketId": ticket_id}, [fit], **key)
    assert len(again) == 1
    assert replayed["result"]["structuredContent"]["closeReason"] == "Duplicate", replayed
    assert _history(session, ticket_id) == ["created", "closed"]
