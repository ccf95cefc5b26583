"""A tool's own check (``authorize=``) runs again on every answer to its task, on every path that
answers one, with the caller who answers and the task's arguments. Ours (docs/security.md,
"Per-tool authorization"): an owner whose permission was withdrawn after the task started is
refused as a call of the tool would be, and nothing reaches the task.

Each test starts a task of a tool of tests/authz_tools.py as ann, lists ann in the server's
``revoked.txt`` (which the tools' check reads on every run), answers, and finds the answer refused
with the exact error and the task still asking; then ann is allowed again, and the same answer
goes through. Authentication is on (static tokens), against a real ``serve``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from longtools import Caller
from longtools.testing import NotAuthorized, embedded
from tests.conftest import OWNER_TOKENS, Served, bearer, start_server
from tests.pages import PageClient
from tests.wire import TASKS_EXTENSION, Legacy, error, eventually, post, result, sse_lines

REPO = Path(__file__).resolve().parents[1]
NOT_AUTHORIZED = "Not authorized to use this tool"
YES: dict[str, Any] = {"action": "accept", "content": {"confirm": True}}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "extensions": {TASKS_EXTENSION: {}}}
"""A tasks client that shows forms and opens links: a person's question is listed as a URL request."""
FORM_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
IDEMPOTENCY = "longtools.dev/idempotency-key"
LINKS = "longtools.dev/answer-links"
NOTE: dict[str, Any] = {"name": "guarded_long_note", "arguments": {"text": "hello"}}

Revoke = Callable[[str], None]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {
        "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in OWNER_TOKENS.items()),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    server = start_server(tmp_path_factory.mktemp("answer-authz"), "--tools", "tests.authz_tools", env=env)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def revoke(served: Served) -> Iterator[Revoke]:
    """``revoke(name)`` lists ``name`` in ``revoked.txt``; ``revoke("")`` allows everyone again, as
    every test's end does."""
    listed = served.log_path.parent / "data" / "revoked.txt"

    def write(name: str) -> None:
        listed.write_text(f"{name}\n")

    yield write
    write("")


def _as(served: Served, method: str, params: dict[str, Any], caps: dict[str, Any]) -> httpx.Response:
    return post(served.url, method, params, caps=caps, headers=bearer("ann"))


def _started(served: Served, tool: str) -> str:
    created = result(_as(served, "tools/call", {"name": tool, "arguments": {"text": "hello"}}, TASK_CAPS))
    assert created["resultType"] == "task", created
    task_id: str = created["taskId"]
    return task_id


def _task(served: Served, task_id: str) -> dict[str, Any]:
    return result(_as(served, "tasks/get", {"taskId": task_id}, TASK_CAPS))


def _asking(served: Served, task_id: str) -> tuple[str, dict[str, Any]]:
    """The task once it asks (bounded), and the key of its one question."""
    task = eventually(lambda: _task(served, task_id), lambda now: now["status"] == "input_required")
    [key] = task["inputRequests"]
    return key, task


def _still_asks(served: Served, task_id: str, key: str) -> None:
    """Nothing was delivered: the task asks the same question (read again from Temporal: an answer
    taken is a change its watch would have shown)."""
    task = _task(served, task_id)
    assert task["status"] == "input_required", task
    assert list(task["inputRequests"]) == [key], task


def _completed(served: Served, task_id: str) -> dict[str, Any]:
    task = eventually(lambda: _task(served, task_id), lambda now: now["status"] == "completed")
    assert task["result"]["content"][0]["text"] == "Wrote hello", task
    return task


def test_tasks_update_from_an_owner_no_longer_allowed_is_refused_then_taken_once_allowed_again(
    served: Served, revoke: Revoke
) -> None:
    """2026 ``tasks/update``: the -32602 of every answer it refuses, in a refused call's words."""
    task_id = _started(served, "guarded_long_note")
    key, _ = _asking(served, task_id)
    update = {"taskId": task_id, "inputResponses": {key: YES}}
    revoke("ann")
    assert error(_as(served, "tasks/update", update, TASK_CAPS), 400) == {
        "code": -32602,
        "message": NOT_AUTHORIZED,
    }
    _still_asks(served, task_id, key)
    revoke("")
    assert result(_as(served, "tasks/update", update, TASK_CAPS))["resultType"] == "complete"
    _completed(served, task_id)


def test_the_task_answer_tool_from_an_owner_no_longer_allowed_is_the_refused_calls_tool_error(
    served: Served, revoke: Revoke
) -> None:
    task_id = _started(served, "guarded_long_note")
    key, _ = _asking(served, task_id)
    answer = {"name": "task_answer", "arguments": {"taskId": task_id, "answers": {key: YES}}}
    revoke("ann")
    refused = result(_as(served, "tools/call", answer, FORM_CAPS))
    assert refused["isError"] is True
    assert refused["content"] == [{"type": "text", "text": NOT_AUTHORIZED}]
    _still_asks(served, task_id, key)
    revoke("")
    taken = result(_as(served, "tools/call", answer, FORM_CAPS))
    assert taken["isError"] is False, taken
    _completed(served, task_id)


def test_an_mrtr_round_of_a_long_tool_from_an_owner_no_longer_allowed_is_refused(
    served: Served, revoke: Revoke
) -> None:
    """The round's own check refuses it first (it runs on every round); the answer never reaches
    the task either way. The task is read through the exchange: a round without answers shows its
    question still open."""
    call = NOTE
    asked = result(_as(served, "tools/call", call, FORM_CAPS))
    assert asked["resultType"] == "input_required", asked
    [key] = asked["inputRequests"]
    following = {**call, "requestState": asked["requestState"]}
    revoke("ann")
    refused = result(_as(served, "tools/call", {**following, "inputResponses": {key: YES}}, FORM_CAPS))
    assert refused["isError"] is True
    assert refused["content"] == [{"type": "text", "text": NOT_AUTHORIZED}]
    revoke("")
    again = result(_as(served, "tools/call", following, FORM_CAPS))
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == [key], again
    answered = {**call, "requestState": again["requestState"], "inputResponses": {key: YES}}
    done = result(_as(served, "tools/call", answered, FORM_CAPS))
    assert done["content"] == [{"type": "text", "text": "Wrote hello"}], done


def _legacy(served: Served, caps: dict[str, Any]) -> Legacy:
    session = Legacy(served.url, caps=caps, headers=bearer("ann"))
    assert session.open()["protocolVersion"] == "2025-11-25"
    return session


def _pushed_and_answered(
    session: Legacy, method: str, params: dict[str, Any], on_question: Callable[[], None]
) -> dict[str, Any]:
    """Send ``method`` on a 2025-era session and answer the one form question pushed on its stream
    with ``YES``, after ``on_question()``; the response that ends the stream."""
    body = {"jsonrpc": "2.0", "id": "pushed-1", "method": method, "params": params}
    with httpx.stream(
        "POST", session.url, content=json.dumps(body), headers=session.headers(), timeout=60
    ) as stream:
        for message in sse_lines(stream.iter_lines()):
            if message.get("method") == "elicitation/create":
                on_question()
                assert session.answer(message["id"], YES).status_code == 202
            if message.get("id") == "pushed-1":
                return message
    raise AssertionError(f"{method} ended without a response")


def test_an_answer_pushed_on_tasks_result_from_an_owner_no_longer_allowed_is_refused(
    served: Served, revoke: Revoke
) -> None:
    """2025-11-25: ``tasks/result`` answers with the task's outcome, which this is not: a JSON-RPC
    error, -32602 with a refused call's words, as ``tasks/update`` says it."""
    session = _legacy(served, {"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}})
    created = result(session.request("tools/call", {**NOTE, "task": {}}))
    task_id = created["task"]["taskId"]
    key, _ = _asking(served, task_id)
    ended = _pushed_and_answered(session, "tasks/result", {"taskId": task_id}, lambda: revoke("ann"))
    assert ended["error"] == {"code": -32602, "message": NOT_AUTHORIZED}
    _still_asks(served, task_id, key)
    revoke("")
    outcome = _pushed_and_answered(session, "tasks/result", {"taskId": task_id}, lambda: None)
    assert outcome["result"]["content"] == [{"type": "text", "text": "Wrote hello"}], outcome


def test_an_answer_pushed_on_a_held_2025_call_from_an_owner_no_longer_allowed_is_refused(
    served: Served, revoke: Revoke
) -> None:
    """The held call's next round is refused by its own check, as a tool error, and nothing is
    delivered. The call names its task by an idempotency key: called again with it, once allowed,
    the task still asks the question."""
    session = _legacy(served, FORM_CAPS)
    call = {**NOTE, "_meta": {IDEMPOTENCY: f"held-{os.urandom(6).hex()}"}}
    ended = _pushed_and_answered(session, "tools/call", call, lambda: revoke("ann"))
    assert ended["result"]["isError"] is True
    assert ended["result"]["content"] == [{"type": "text", "text": NOT_AUTHORIZED}]
    revoke("")
    outcome = _pushed_and_answered(session, "tools/call", call, lambda: None)
    assert outcome["result"]["content"] == [{"type": "text", "text": "Wrote hello"}], outcome


def test_the_answer_page_tells_an_owner_no_longer_allowed_so_and_keeps_the_question_unclaimed(
    served: Served, revoke: Revoke
) -> None:
    """The page's caller is its session's: the principal, the token's subject and scopes. Refused
    before the question's claim is taken: once allowed again, the same answer is its first."""
    task_id = _started(served, "guarded_approval")
    key, task = _asking(served, task_id)
    [link] = task["_meta"][LINKS].values()
    with PageClient(served.base) as person:
        person.sign_in(OWNER_TOKENS["ann"])
        opened = person.get(link)
        assert opened.status == 200, opened.text
        revoke("ann")
        refused = person.send(link, opened, {"confirm": True})
        assert refused.status == 403
        assert refused.heading == "Not allowed"
        assert "You are not allowed to answer this task any more." in refused.text
        _still_asks(served, task_id, key)
        revoke("")
        sent = person.send(link, opened, {"confirm": True})
        assert "Your answer was sent" in sent.text, sent.text
    _completed(served, task_id)


async def test_an_embedded_task_started_as_a_caller_checks_each_answer_as_the_api_does(
    tmp_path: Path,
) -> None:
    """``longtools.testing.embedded``: a task started with ``caller=`` runs the tool's check before
    each answer, with the task's arguments."""
    revoked = tmp_path / "revoked.txt"
    ann = Caller(principal="token:ann", subject="ann")
    async with embedded("tests.authz_tools", data_dir=tmp_path) as env:
        task = await env.start("guarded_long_note", {"text": "hello"}, caller=ann)
        question = await task.question()
        revoked.write_text("ann\n")
        with pytest.raises(NotAuthorized):
            await task.answer(question.key, {"confirm": True})
        assert list((await task.state()).questions) == [question.key]
        revoked.write_text("")
        await task.answer(question.key, {"confirm": True})
        assert (await task.result()).text == "Wrote hello"
