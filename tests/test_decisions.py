"""Decisions people can trust (issue 32), against a real ``serve`` with four people: alice asks and
is a lead, bob and dave are leads, carol is in ``ops``. Approvals are given on the answer page, over
plain HTTP (tests/pages.py); what the requester's client sees is raw ``tasks/get``.
"""

from __future__ import annotations

import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Served, start_server
from tests.pages import PageClient, signed_in_people
from tests.wire import TASKS_EXTENSION, eventually, post, result

PEOPLE = {name: secrets.token_urlsafe(24) for name in ("alice", "bob", "dave", "carol")}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
"""A host with tasks and forms: a person's question is never its to answer, so it is shown the
approvers' link, in words and in ``_meta``."""
DECISIONS = "longtools.dev/decisions"
EXIT = "longtools.dev/exit"


def as_(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {PEOPLE[name]}"}


@pytest.fixture(scope="module")
def leads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {
        "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items()),
        "LONGTOOLS_GROUPS": "leads=alice,bob,dave;ops=carol",
        "LONGTOOLS_HELPDESK_APPROVAL_S": "600",
    }
    served = start_server(tmp_path_factory.mktemp("leads"), "--tools", "tests.decision_tools", env=env)
    try:
        yield served
    finally:
        served.stop()


def _call(served: Served, who: str, tool: str, arguments: dict[str, Any], **post_args: Any) -> dict[str, Any]:
    return result(
        post(served.url, "tools/call", {"name": tool, "arguments": arguments}, headers=as_(who), **post_args)
    )


def _start(served: Served, who: str, tool: str, arguments: dict[str, Any]) -> str:
    task = _call(served, who, tool, arguments, caps=TASK_CAPS)
    return str(task["taskId"])


def _task(served: Served, who: str, task_id: str) -> dict[str, Any]:
    return result(post(served.url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=as_(who)))


def _asking(served: Served, who: str, task_id: str, said: str = "") -> tuple[str, dict[str, Any]]:
    """The approvers' link of the task's open decision, once its status says ``said``."""
    task = eventually(
        lambda: _task(served, who, task_id),
        lambda now: bool(now.get("_meta", {}).get(DECISIONS)) and said in now.get("statusMessage", ""),
    )
    [decision] = task["_meta"][DECISIONS].values()
    return str(decision["link"]), task


def _ended(served: Served, who: str, task_id: str) -> dict[str, Any]:
    return eventually(
        lambda: _task(served, who, task_id), lambda now: now["status"] in ("completed", "failed", "cancelled")
    )


def _tickets(served: Served, customer: str, count: int) -> list[str]:
    return [
        _call(served, "alice", "create_ticket", {"title": f"t{n}", "customer": customer})[
            "structuredContent"
        ]["ticketId"]
        for n in range(count)
    ]


def _deletions(served: Served, ticket_id: str) -> int:
    store = served.log_path.parent / "data" / "helpdesk.sqlite3"
    with sqlite3.connect(store) as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM ticket_history WHERE ticket_id = ? AND event = 'deleted'",
            (int(ticket_id.removeprefix("T-")),),
        ).fetchone()
    return int(row[0])


@pytest.fixture
def people(leads: Served) -> Iterator[Callable[[str], PageClient]]:
    """``people(name)``: that person signed in to the pages (in a browser of their own)."""
    with signed_in_people(leads.base, PEOPLE) as people:
        yield people


def test_two_leads_but_the_requester_approve_delete_customer_and_each_ticket_is_deleted_once(
    leads: Served,
    people: Callable[[str], PageClient],
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    tickets = _tickets(leads, customer, 3)
    task_id = _start(leads, "alice", "delete_customer", {"customer": customer})
    link, asked = _asking(leads, "alice", task_id, "0 of 2 approvals")
    # The requester's chat host: the rule, no votes yet, the approvers' link, and nothing to answer.
    assert asked["status"] == "working" and "inputRequests" not in asked
    [shown] = asked["_meta"][DECISIONS].values()
    assert shown["rule"] == {"principals": [], "groups": ["leads"], "quorum": 2, "excludeRequester": True}
    assert shown["votes"] == [] and link in asked["statusMessage"]
    alice, bob, dave, carol = (people(who) for who in ("alice", "bob", "dave", "carol"))
    made_up = carol.get(link.rsplit("/", 1)[0] + "/" + secrets.token_urlsafe(40))
    # carol is not a lead: she is told it is not known, the page a made-up link gets.
    refused = carol.get(link)
    assert refused.status == 404 and refused.heading == made_up.heading
    # alice may not vote on her own request: the link takes her to her task's page, no form.
    own = alice.get(link)
    assert own.status == 200 and "You asked for this; others decide." in own.text
    assert own.response.url.path == f"/tasks/{task_id}" and 'class="answer"' not in own.text
    opened = bob.get(link)
    assert opened.status == 200 and "Deletes these tickets" in opened.text
    assert all(ticket in opened.text for ticket in tickets)
    bob.send(link, opened, {"note": "fine by me"})
    _, waiting = _asking(leads, "alice", task_id, "1 of 2 approvals: bob")
    assert [
        vote["name"] for vote in waiting["_meta"][DECISIONS][next(iter(waiting["_meta"][DECISIONS]))]["votes"]
    ] == ["bob"]
    # bob again: his vote is in, the page says so, and a second send is not a second vote.
    again = bob.get(link)
    assert again.status == 200 and again.heading == "Your vote is in" and 'class="answer"' not in again.text
    assert "1 of 2 approvals: bob" in again.text
    twice = bob.send(link, opened, {"note": "twice"})
    assert twice.status == 409 and "this one was not counted" in twice.text
    _asking(leads, "alice", task_id, "1 of 2 approvals: bob")
    dave.answer(link, {})
    done = _ended(leads, "alice", task_id)
    assert done["status"] == "completed", done
    output = done["result"]["structuredContent"]
    assert output["outcome"] == "deleted" and output["deleted"] == tickets
    assert sorted(output["approvedBy"]) == ["bob", "dave"]
    assert done["_meta"][EXIT] == "completed"
    assert [_deletions(leads, ticket) for ticket in tickets] == [1, 1, 1]


@pytest.mark.parametrize("refuser", ["bob", "dave"])
def test_one_refusal_rejects_and_nothing_is_deleted(
    leads: Served, people: Callable[[str], PageClient], refuser: str
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    tickets = _tickets(leads, customer, 2)
    task_id = _start(leads, "alice", "delete_customer", {"customer": customer})
    link, _ = _asking(leads, "alice", task_id)
    if refuser == "dave":
        people("bob").answer(link, {})
        _asking(leads, "alice", task_id, "1 of 2 approvals")
    people(refuser).answer(link, {}, action="decline")
    done = _ended(leads, "alice", task_id)
    output = done["result"]["structuredContent"]
    assert output["outcome"] == "rejected" and output["rejectedBy"] == refuser
    assert done["_meta"][EXIT] == "rejected" and done["statusMessage"].startswith("Rejected")
    assert [_deletions(leads, ticket) for ticket in tickets] == [0, 0]


def test_the_requester_cannot_answer_a_decision_from_the_client(leads: Served) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    _tickets(leads, customer, 1)
    task_id = _start(leads, "alice", "delete_customer", {"customer": customer})
    _asking(leads, "alice", task_id)
    form_caps: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
    task = result(post(leads.url, "tasks/get", {"taskId": task_id}, caps=form_caps, headers=as_("alice")))
    [key] = task["_meta"][DECISIONS]
    answers = {key: {"action": "accept", "content": {"note": "me"}}}
    refused = post(
        leads.url,
        "tasks/update",
        {"taskId": task_id, "inputResponses": answers},
        caps=form_caps,
        headers=as_("alice"),
    )
    assert refused.status_code == 400 and "person" in refused.text
    result(post(leads.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS, headers=as_("alice")))


def test_a_question_asked_again_with_another_proposal_counts_no_earlier_vote(
    leads: Served, people: Callable[[str], PageClient]
) -> None:
    task_id = _start(leads, "alice", "decide_twice", {"first_s": 4})
    first, asked = _asking(leads, "alice", task_id)
    [v1] = asked["_meta"][DECISIONS].values()
    bob = people("bob")
    bob.answer(first, {})
    _asking(leads, "alice", task_id, "1 of 2 approvals: bob")
    # The first proposal expires; the second asks anew, with bob's vote not counted.
    second, again = eventually(
        lambda: _asking(leads, "alice", task_id),
        lambda found: found[0] != first,
        within=30,
    )
    [v2] = again["_meta"][DECISIONS].values()
    assert v2["digest"] != v1["digest"] and v2["votes"] == []
    assert bob.get(first).status in (404, 409)
    bob.answer(second, {})
    people("dave").answer(second, {})
    done = _ended(leads, "alice", task_id)
    assert done["result"]["structuredContent"]["outcome"] == "approved"
    assert done["result"]["structuredContent"]["digest"] == v2["digest"]


def test_the_six_exit_states(leads: Served, people: Callable[[str], PageClient]) -> None:
    """completed, rejected, expired, escalated, cancelled and failed, each as tasks/get shows it."""
    seen: dict[str, str] = {}
    approved = _start(leads, "alice", "decide", {})
    link, _ = _asking(leads, "alice", approved)
    people("bob").answer(link, {})
    seen["completed"] = _ended(leads, "alice", approved)["_meta"][EXIT]
    rejected = _start(leads, "alice", "decide", {})
    link, _ = _asking(leads, "alice", rejected)
    people("bob").answer(link, {}, action="decline")
    seen["rejected"] = _ended(leads, "alice", rejected)["_meta"][EXIT]
    expired = _start(leads, "alice", "decide", {"timeout_s": 1})
    seen["expired"] = _ended(leads, "alice", expired)["_meta"][EXIT]
    escalated = _start(
        leads, "alice", "decide", {"timeout_s": 3, "escalate_after_s": 1, "escalate_to": ["ops"]}
    )
    seen["escalated"] = _ended(leads, "alice", escalated)["_meta"][EXIT]
    cancelled = _start(leads, "alice", "decide", {})
    _asking(leads, "alice", cancelled)
    result(post(leads.url, "tasks/cancel", {"taskId": cancelled}, caps=TASK_CAPS, headers=as_("alice")))
    seen["cancelled"] = _ended(leads, "alice", cancelled)["_meta"][EXIT]
    failed = _start(leads, "alice", "decide", {"fail_after": True})
    link, _ = _asking(leads, "alice", failed)
    people("bob").answer(link, {})
    seen["failed"] = _ended(leads, "alice", failed)["_meta"][EXIT]
    assert seen == {state: state for state in seen}, seen
    # And on the task page, in words, as its owner sees it.
    shown = {
        "completed": (approved, "Approved by bob"),
        "rejected": (rejected, "Rejected by bob: nothing was done"),
        "expired": (expired, "Expired: no decision before the deadline"),
        "escalated": (escalated, "Escalated, then expired: no decision before the deadline"),
        "cancelled": (cancelled, "Cancelled"),
        "failed": (failed, "Failed"),
    }
    alice = people("alice")
    for state, (task_id, words) in shown.items():
        page = alice.get(f"/tasks/{task_id}")
        assert page.status == 200 and words in page.text, (state, page.text)


def test_an_escalated_rule_admits_the_wider_group(leads: Served, people: Callable[[str], PageClient]) -> None:
    task_id = _start(
        leads, "alice", "decide", {"timeout_s": 120, "escalate_after_s": 1, "escalate_to": ["ops"]}
    )
    link, _ = _asking(leads, "alice", task_id)
    carol = people("carol")
    assert carol.get(link).status == 404  # not yet: ops is not in the rule before it escalates
    eventually(lambda: carol.get(link).status, lambda status: status == 200, within=30)
    carol.answer(link, {})
    done = _ended(leads, "alice", task_id)
    assert done["result"]["structuredContent"] == {
        "outcome": "approved",
        "votes": ["carol"],
        "by": None,
        "digest": done["result"]["structuredContent"]["digest"],
    }


def test_without_groups_delete_customer_says_why_it_cannot_be_approved(tmp_path: Path) -> None:
    served = start_server(tmp_path)  # the quickstart's single user on loopback
    try:
        customer = f"c-{secrets.token_hex(4)}"
        result(
            post(
                served.url,
                "tools/call",
                {"name": "create_ticket", "arguments": {"title": "t", "customer": customer}},
            )
        )
        task_id = result(
            post(
                served.url,
                "tools/call",
                {"name": "delete_customer", "arguments": {"customer": customer}},
                caps=TASK_CAPS,
            )
        )["taskId"]
        done = eventually(
            lambda: result(post(served.url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS)),
            lambda now: now["status"] == "completed",
        )
        output = done["result"]["structuredContent"]
        assert output["outcome"] == "cannot_be_approved"
        assert "LONGTOOLS_GROUPS" in output["message"] and "Nothing was deleted" in output["message"]
    finally:
        served.stop()


def test_a_deadline_passes_across_a_restart_and_nothing_is_deleted(tmp_path: Path) -> None:
    """The deadline is a Temporal timer: it fires with every process of the first ``serve`` gone in
    the middle of the wait (API, worker and the embedded Temporal, which keeps its file)."""
    env = {
        "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items()),
        "LONGTOOLS_GROUPS": "leads=alice,bob,dave",
        "LONGTOOLS_HELPDESK_APPROVAL_S": "8",
    }
    served = start_server(tmp_path, env=env)
    try:
        customer = f"c-{secrets.token_hex(4)}"
        tickets = _tickets(served, customer, 2)
        task_id = _start(served, "alice", "delete_customer", {"customer": customer})
        _asking(served, "alice", task_id, "0 of 2 approvals")
    finally:
        assert served.stop() == 0
    served = start_server(tmp_path, env=env)
    try:
        done = eventually(
            lambda: _task(served, "alice", task_id), lambda now: now["status"] == "completed", 60
        )
        output = done["result"]["structuredContent"]
        assert output["outcome"] == "expired" and output["deleted"] == []
        assert done["_meta"][EXIT] == "expired" and done["statusMessage"].startswith("Expired")
        assert [_deletions(served, ticket) for ticket in tickets] == [0, 0]
    finally:
        served.stop()


def test_the_terminal_says_approvers_decide_and_how_it_stands(leads: Served, tmp_path: Path) -> None:
    """``longtools task get``: the requester's terminal names the approvers' page and the votes, not
    "answer it on its page" (they may not vote)."""
    customer = f"c-{secrets.token_hex(4)}"
    _tickets(leads, customer, 1)
    task_id = _start(leads, "alice", "delete_customer", {"customer": customer})
    link, _ = _asking(leads, "alice", task_id, "0 of 2 approvals")
    shown = subprocess.run(
        [
            str(Path(sys.executable).with_name("longtools")),
            "task",
            "get",
            leads.url,
            "--token",
            PEOPLE["alice"],
            "--",
            task_id,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    said = "0 of 2 approvals; waiting for group leads, not the requester"
    # The terminal takes URL requests: the question is listed, with where it is decided.
    assert f"  asks [approval]: Delete 1 ticket of {customer}?\n" in shown.stdout
    assert f"    approvers decide it on its page ({said}): {link}\n" in shown.stdout
    assert "answer it on its page" not in shown.stdout
    result(post(leads.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS, headers=as_("alice")))
