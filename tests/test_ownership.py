"""Two principals on one server: nobody reads, answers, cancels or continues another's work.

Authentication is on (static tokens for alice and bob). Another principal's task answers exactly
like an unknown one, another principal's requestState exactly like a tampered one, and an
idempotency key is the caller's own.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, error, meta, post, result

ALICE, BOB = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
FORM_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
IDEMPOTENCY = "longtools.dev/idempotency-key"
REPO = Path(__file__).resolve().parents[1]
RESOURCE = "https://mcp.example.test/mcp"  # what the metadata says, whatever Host a request has


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("owners")
    env = {
        "LONGTOOLS_AUTH_TOKENS": f"{ALICE}=alice,{BOB}=bob",
        "LONGTOOLS_RESOURCE_URL": RESOURCE,
        "LONGTOOLS_MAX_ROUNDS": "2",
        "LONGTOOLS_MAX_INPUT_RESPONSES": "3",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    server = start_server(tmp, "--conformance-fixtures", "--tools", "tests.authz_tools", env=env)
    try:
        yield server
    finally:
        server.stop()


def _as(token: str | None, url: str, method: str, params: dict[str, Any], caps: Any = None) -> httpx.Response:
    headers: dict[str, str | None] = {"authorization": f"Bearer {token}"} if token else {}
    return post(url, method, params, caps=caps, headers=headers)


def _without_id(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    body.pop("id")
    return body


def test_without_a_token_the_answer_is_401_pointing_at_the_resource_metadata(served: Served) -> None:
    refused = _as(None, served.url, "tools/list", {})
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "error=" not in challenge  # RFC 6750: no token, no error
    metadata_url = challenge.split('resource_metadata="')[1].split('"')[0]
    assert metadata_url == "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
    metadata = httpx.get(f"{served.base}/.well-known/oauth-protected-resource/mcp").json()
    assert metadata["resource"] == RESOURCE
    assert metadata["bearer_methods_supported"] == ["header"]

    wrong = _as("not-a-real-token-at-all", served.url, "tools/list", {})
    assert wrong.status_code == 401
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert result(_as(ALICE, served.url, "tools/list", {}))["tools"]


def test_another_principals_task_is_exactly_an_unknown_task(served: Served) -> None:
    created = result(
        _as(
            ALICE,
            served.url,
            "tools/call",
            {"name": "confirm_delete", "arguments": {"filename": "a.txt"}},
            TASK_CAPS,
        )
    )
    task_id = created["taskId"]
    unknown = secrets.token_urlsafe(18)
    for method, params in (
        ("tasks/get", {}),
        ("tasks/update", {"inputResponses": {"input": {"action": "accept", "content": {"confirm": True}}}}),
        ("tasks/cancel", {}),
    ):
        bobs = _as(BOB, served.url, method, {"taskId": task_id, **params}, TASK_CAPS)
        nobodys = _as(BOB, served.url, method, {"taskId": unknown, **params}, TASK_CAPS)
        assert error(bobs, 400)["code"] == -32602, method
        assert _without_id(bobs) == _without_id(nobodys), method
    # Nothing bob did reached the task: it still waits for alice's answer.
    task = result(_as(ALICE, served.url, "tasks/get", {"taskId": task_id}, TASK_CAPS))
    assert task["status"] in ("working", "input_required")
    assert (
        result(_as(ALICE, served.url, "tasks/cancel", {"taskId": task_id}, TASK_CAPS))["resultType"]
        == "complete"
    )


def test_another_principals_request_state_is_exactly_a_tampered_one(served: Served) -> None:
    made = result(
        _as(
            ALICE,
            served.url,
            "tools/call",
            {"name": "create_ticket", "arguments": {"title": "x", "customer": "alice"}},
        )
    )
    ticket_id = made["structuredContent"]["ticketId"]
    asked = result(
        _as(
            ALICE,
            served.url,
            "tools/call",
            {"name": "close_ticket", "arguments": {"ticketId": ticket_id}},
            FORM_CAPS,
        )
    )
    state = asked["requestState"]
    answer = {"close_reason": {"action": "accept", "content": {"reason": "Resolved"}}}

    def final(token: str, sealed: str) -> httpx.Response:
        params = {
            "name": "close_ticket",
            "arguments": {"ticketId": ticket_id},
            "inputResponses": answer,
            "requestState": sealed,
        }
        return _as(token, served.url, "tools/call", params, FORM_CAPS)

    bobs = final(BOB, state)
    tampered = final(BOB, state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB"))
    assert error(bobs, 400)["message"] == "Invalid or expired requestState"
    assert _without_id(bobs) == _without_id(tampered)
    ticket = result(
        _as(ALICE, served.url, "tools/call", {"name": "get_ticket", "arguments": {"ticketId": ticket_id}})
    )
    assert ticket["structuredContent"]["status"] == "open"  # bob closed nothing
    assert result(final(ALICE, state))["structuredContent"]["status"] == "closed"


def test_twenty_concurrent_calls_with_one_idempotency_key_create_one_task(served: Served) -> None:
    key = secrets.token_hex(8)
    params = {"name": "confirm_delete", "arguments": {"filename": "once.txt"}}

    def call(token: str) -> str:
        sent = {**params, "_meta": meta(TASK_CAPS, **{IDEMPOTENCY: key})}
        created = result(_as(token, served.url, "tools/call", sent, TASK_CAPS))
        assert created["resultType"] == "task"
        task_id: str = created["taskId"]
        return task_id

    with ThreadPoolExecutor(20) as pool:
        ids = set(pool.map(call, [ALICE] * 20))
    assert len(ids) == 1
    # The key is alice's own: bob's identical call is a task of his.
    assert call(BOB) not in ids
    [task_id] = ids
    result(_as(ALICE, served.url, "tasks/cancel", {"taskId": task_id}, TASK_CAPS))


def test_an_idempotency_key_repeats_a_quick_tools_outcome_and_refuses_other_arguments(served: Served) -> None:
    key = secrets.token_hex(8)

    def create(title: str) -> httpx.Response:
        params = {
            "name": "create_ticket",
            "arguments": {"title": title, "customer": "alice"},
            "_meta": meta(None, **{IDEMPOTENCY: key}),
        }
        return _as(ALICE, served.url, "tools/call", params)

    first = result(create("Once"))
    assert result(create("Once")) == first  # the same ticket, not a second one
    assert error(create("Other"), 400) == {
        "code": -32602,
        "message": "This idempotency key was used for other arguments; use a new key",
    }


def test_a_tools_own_authorization_check_runs_again_on_every_round(served: Served) -> None:
    params: dict[str, Any] = {"name": "guarded_note", "arguments": {"text": "hello"}}
    asked = result(_as(BOB, served.url, "tools/call", params, FORM_CAPS))
    assert asked["resultType"] == "input_required"
    (served.log_path.parent / "data" / "revoked.txt").write_text("bob\n")
    final = {
        **params,
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
        "requestState": asked["requestState"],
    }
    refused = result(_as(BOB, served.url, "tools/call", final, FORM_CAPS))
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == "Not authorized to use this tool"
    assert result(_as(ALICE, served.url, "tools/call", params, FORM_CAPS))["resultType"] == "input_required"


def test_rounds_and_answers_per_request_are_bounded(served: Served) -> None:
    name = "test_input_required_result_multi_round"  # asks in round 1 and again in round 2
    first = result(_as(ALICE, served.url, "tools/call", {"name": name, "arguments": {}}, FORM_CAPS))
    step1 = {"step1": {"action": "accept", "content": {"name": "Ada"}}}
    params = {"name": name, "arguments": {}, "inputResponses": step1, "requestState": first["requestState"]}
    assert error(_as(ALICE, served.url, "tools/call", params, FORM_CAPS), 400) == {
        "code": -32602,
        "message": "This call took more than 2 rounds of questions; call the tool again",
    }
    many = {f"k{index}": {"action": "decline"} for index in range(4)}
    params = {"name": "guarded_note", "arguments": {"text": "x"}, "inputResponses": many}
    assert error(_as(ALICE, served.url, "tools/call", params, FORM_CAPS), 400) == {
        "code": -32602,
        "message": "inputResponses holds more than 3 answers",
    }


def test_jwt_bearer_tokens_are_checked_over_http(tmp_path: Path) -> None:
    secret, issuer = secrets.token_urlsafe(32), "https://issuer.example"
    env = {
        "LONGTOOLS_JWT_SECRET": secret,
        "LONGTOOLS_JWT_ISSUER": issuer,
        "LONGTOOLS_JWT_AUDIENCE": "longtools",
        "LONGTOOLS_RESOURCE_URL": RESOURCE,
    }
    server = start_server(tmp_path, env=env)
    try:

        def token(**claims: Any) -> str:
            now = int(time.time())
            base = {"iss": issuer, "aud": "longtools", "sub": "carol", "iat": now, "exp": now + 300}
            return jwt.encode({**base, **claims}, secret, algorithm="HS256")

        assert result(_as(token(), server.url, "tools/list", {}))["tools"]
        for refused in (
            token(exp=int(time.time()) - 120),
            token(aud="someone-else"),
            token(iss="https://evil"),
        ):
            assert _as(refused, server.url, "tools/list", {}).status_code == 401
        metadata = httpx.get(f"{server.base}/.well-known/oauth-protected-resource").json()
        assert metadata["authorization_servers"] == [issuer]
    finally:
        server.stop()


def test_a_crashing_check_refuses_and_a_pre_phase_tool_error_is_a_tool_error(served: Served) -> None:
    broken = result(
        _as(ALICE, served.url, "tools/call", {"name": "broken_check", "arguments": {"text": "x"}})
    )
    assert broken["isError"] is True and broken["content"][0]["text"] == "Not authorized to use this tool"
    refused = result(
        _as(ALICE, served.url, "tools/call", {"name": "careful_start", "arguments": {"text": " "}}, TASK_CAPS)
    )
    assert refused["isError"] is True and refused["content"][0]["text"] == "Say something first"
    started = result(
        _as(
            ALICE, served.url, "tools/call", {"name": "careful_start", "arguments": {"text": "hi"}}, TASK_CAPS
        )
    )
    assert started["resultType"] == "task"


def test_a_quick_tool_knows_its_caller(served: Served) -> None:
    params: dict[str, Any] = {"name": "guarded_note", "arguments": {"text": "hello"}}
    asked = result(_as(ALICE, served.url, "tools/call", params, FORM_CAPS))
    confirm = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    final = {**params, "inputResponses": confirm, "requestState": asked["requestState"]}
    done = result(_as(ALICE, served.url, "tools/call", final, FORM_CAPS))
    assert done["content"][0]["text"] == "Wrote hello for alice"
