"""requestState protection: every way a state can be wrong gets one identical error, and nothing runs."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Served, server_ready, spawn
from tests.wire import error, post, result

FROZEN = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}
ANSWER = {"close_reason": {"action": "accept", "content": {"reason": "Duplicate"}}}


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """The module's other servers, booted side by side (each is seconds of cold start on one core)."""
    key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    envs = {
        "short": {"LONGTOOLS_STATE_TTL_S": "0.001"},
        "aud": {"LONGTOOLS_SERVER_NAME": "other-service"},
        "key": {"LONGTOOLS_STATE_KEYS": key},
        "replica": {},
    }
    spawned = {
        name: spawn(tmp_path_factory.mktemp(name), ["serve", "--port", "0"], env)
        for name, env in envs.items()
    }
    served: dict[str, Served] = {}
    try:
        for name, process in spawned.items():
            served[name] = server_ready(process)
        yield served
    finally:
        for each in served.values():
            each.stop()


@pytest.fixture(scope="module")
def short_lived(elsewhere: dict[str, Served]) -> Served:
    """Same key and audience as the main server, but every state expires one millisecond after minting."""
    return elsewhere["short"]


@pytest.fixture(scope="module")
def other_audience(elsewhere: dict[str, Served]) -> Served:
    """Same key, another service name: its states must not open on the main server."""
    return elsewhere["aud"]


@pytest.fixture(scope="module")
def other_key(elsewhere: dict[str, Served]) -> Served:
    return elsewhere["key"]


@pytest.fixture(scope="module")
def replica(elsewhere: dict[str, Served]) -> Served:
    """Configured as the main server is: another replica of it."""
    return elsewhere["replica"]


def _create(url: str) -> str:
    made = result(
        post(url, "tools/call", {"name": "create_ticket", "arguments": {"title": "t", "customer": "c"}})
    )
    ticket: str = made["structuredContent"]["ticketId"]
    return ticket


def _same_ticket_on(url: str, ticket: str) -> None:
    """Make ``ticket`` exist on a fresh server too, so the same arguments name an open ticket there.

    Each test server has its own store (real replicas share one); ids count up from T-1.
    """
    while (made := _create(url)) != ticket:
        assert int(made[2:]) < int(ticket[2:]), (made, ticket)


def _first_round(url: str, ticket: str) -> str:
    asked = result(post(url, "tools/call", {"name": "close_ticket", "arguments": {"ticketId": ticket}}))
    assert asked["resultType"] == "input_required"
    assert set(asked["inputRequests"]) == {"close_reason"}
    state = asked["requestState"]
    assert isinstance(state, str)
    return state


def _retry(
    url: str,
    state: str,
    ticket: str,
    *,
    tool: str = "close_ticket",
    args: dict[str, Any] | None = None,
    responses: dict[str, Any] = ANSWER,
) -> Any:
    params = {
        "name": tool,
        "arguments": args if args is not None else {"ticketId": ticket},
        "inputResponses": responses,
        "requestState": state,
    }
    return post(url, "tools/call", params)


def _flip(state: str) -> str:
    middle = len(state) // 2
    return state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]


def test_every_bad_request_state_gets_the_identical_frozen_error_and_the_tool_never_runs(
    server: Served, short_lived: Served, other_audience: Served, other_key: Served
) -> None:
    """Spec-mandated (mrtr.mdx security): state failing verification is rejected; ours: one shape for all."""
    url = server.url
    ticket, other = _create(url), _create(url)
    for elsewhere in (short_lived, other_audience, other_key):
        _same_ticket_on(elsewhere.url, ticket)  # same arguments: only the named flaw differs
    good = _first_round(url, ticket)
    expired = _first_round(short_lived.url, ticket)
    post(url, "server/discover")  # one more round trip: the 1 ms lifetime is certainly over
    cases = {
        "tampered": _retry(url, _flip(good), ticket),
        "suffix appended": _retry(url, good + "-TAMPERED", ticket),
        "truncated": _retry(url, good[:-12], ticket),
        "expired": _retry(url, expired, ticket),
        "other arguments": _retry(url, good, other),
        "other tool": _retry(url, good, ticket, tool="echo", args={"text": "hi"}),
        "other audience": _retry(url, _first_round(other_audience.url, ticket), ticket),
        "other key": _retry(url, _first_round(other_key.url, ticket), ticket),
        "not base64": _retry(url, "v1.!!!", ticket),
    }
    for name, response in cases.items():
        assert error(response, 400) == FROZEN, name
    # None of those rounds closed a ticket: a good exchange now closes it with its own answer.
    assert _ticket(url, other)["status"] == "open"
    done = result(_retry(url, good, ticket))
    assert done["structuredContent"]["status"] == "closed"
    assert done["structuredContent"]["closeReason"] == "Duplicate"
    assert _closes(url, ticket) == 1


def test_the_rejection_reason_goes_to_the_log_and_the_state_never_does(server: Served) -> None:
    ticket = _create(server.url)
    state = _first_round(server.url, ticket)
    error(_retry(server.url, _flip(state), ticket), 400)
    log = server.log_text()
    assert "requestState rejected on tools/call" in log
    assert state not in log
    assert state[4:40] not in log


def test_a_good_state_with_a_missing_answer_asks_again(server: Served) -> None:
    """SEP-2322 guidance: missing information gets a fresh InputRequiredResult, not an error."""
    ticket = _create(server.url)
    state = _first_round(server.url, ticket)
    wrong_key = {"wrong_key": {"action": "accept", "content": {"reason": "Resolved"}}}
    again = result(_retry(server.url, state, ticket, responses=wrong_key))
    assert again["resultType"] == "input_required"
    assert set(again["inputRequests"]) == {"close_reason"}


def test_a_malformed_answer_is_asked_again_never_a_crash(server: Served) -> None:
    ticket = _create(server.url)
    state = _first_round(server.url, ticket)
    not_an_option = {"close_reason": {"action": "accept", "content": {"reason": "because"}}}
    again = result(_retry(server.url, state, ticket, responses=not_an_option))
    assert again["resultType"] == "input_required"
    assert _ticket(server.url, ticket)["status"] == "open"


def test_a_declined_question_leaves_the_ticket_open(server: Served) -> None:
    ticket = _create(server.url)
    state = _first_round(server.url, ticket)
    declined = {"close_reason": {"action": "decline"}}
    done = result(_retry(server.url, state, ticket, responses=declined))
    assert done["structuredContent"]["status"] == "open"
    assert done["structuredContent"]["closeReason"] is None
    assert [entry["event"] for entry in done["structuredContent"]["history"]] == ["created"]


def test_state_minted_by_one_replica_opens_on_another_with_the_shared_key(
    server: Served, replica: Served
) -> None:
    """Any replica serves any round: the key ring comes from configuration, not from the process."""
    ticket = _create(server.url)
    _same_ticket_on(replica.url, ticket)
    state = _first_round(server.url, ticket)
    done = result(_retry(replica.url, state, ticket))
    assert done["structuredContent"]["status"] == "closed"


def test_a_replayed_final_round_is_answered_from_its_record_and_other_answers_are_refused(
    server: Served,
) -> None:
    """Seed test matrix, "duplicate request": the final round's state is single-use.

    A replay (same state, same answers) gets the recorded outcome without running the tool again;
    the same state with other answers is refused. Either way the ticket is closed once."""
    ticket = _create(server.url)
    state = _first_round(server.url, ticket)
    first = result(_retry(server.url, state, ticket))
    replay = result(_retry(server.url, state, ticket))
    other_answer = {"close_reason": {"action": "accept", "content": {"reason": "Cancelled"}}}
    changed = _retry(server.url, state, ticket, responses=other_answer)
    assert first["structuredContent"]["closeReason"] == "Duplicate"
    assert replay == first
    assert error(changed, 400) == {
        "code": -32602,
        "message": "This requestState was already used with other answers; call the tool again",
    }
    assert _closes(server.url, ticket) == 1


def _ticket(url: str, ticket: str) -> dict[str, Any]:
    got = result(post(url, "tools/call", {"name": "get_ticket", "arguments": {"ticketId": ticket}}))
    content: dict[str, Any] = got["structuredContent"]
    return content


def _closes(url: str, ticket: str) -> int:
    return sum(1 for entry in _ticket(url, ticket)["history"] if entry["event"] == "closed")
