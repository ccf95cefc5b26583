"""A secret (``ask_form(..., sensitive=True)``) is answered on its page and nowhere else: no client
is shown a form for it nor may answer it, and what the person typed reaches the workflow and is
found in no other place: not Temporal's database files, not ``tasks/get``, not the logs, not any
response a client or the browser got. A real ``longtools serve`` with its own data dir; the files
read as bytes, as tests/test_at_rest.py does. Ours (issue 26).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import OWNER_TOKENS, bearer, start_server
from tests.pages import PageClient
from tests.test_at_rest import stored_bytes
from tests.wire import TASKS_EXTENSION, eventually, post, result

FORMS_TASKS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
URL_TASKS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "extensions": {TASKS_EXTENSION: {}}}
FORMS: dict[str, Any] = {"elicitation": {"form": {}}}
LINKS = "longtools.dev/answer-links"
MAILBOX = {"name": "connect_mailbox", "arguments": {"address": "support@example.com"}}


def test_a_secret_is_answered_only_on_its_page_and_found_nowhere_but_in_the_workflow(tmp_path: Path) -> None:
    secret = f"pw-{secrets.token_hex(12)}"
    too_short = f"Q!{secrets.token_hex(2)}"  # 6 characters: the form asks for 8 or more
    decoy = f"decoy-{secrets.token_hex(8)}"  # what a client tried to answer with
    served = start_server(tmp_path, env={"LONGTOOLS_AUTH_TOKENS": f"{OWNER_TOKENS['ann']}=ann"})
    seen: list[str] = []

    def send(method: str, params: dict[str, Any], caps: dict[str, Any]) -> httpx.Response:
        response = post(served.url, method, params, caps=caps, headers=bearer("ann"))
        seen.append(response.text)
        return response

    def get(caps: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        return lambda: result(send("tasks/get", {"taskId": task_id}, caps))

    try:
        task_id = result(send("tools/call", MAILBOX, FORMS_TASKS))["taskId"]
        asking = eventually(get(FORMS_TASKS), lambda task: LINKS in task.get("_meta", {}))
        # A client that shows forms is shown no form for it, nothing it could answer: only where
        # it is answered. For that client, the task works on without it.
        assert asking["status"] == "working" and "inputRequests" not in asking
        [(key, link)] = asking["_meta"][LINKS].items()
        assert asking["statusMessage"].endswith(f"A person must answer on its page: {link}")
        # Nor may it answer it, whatever it sends.
        answer = {key: {"action": "accept", "content": {"password": decoy}}}
        refused = send("tasks/update", {"taskId": task_id, "inputResponses": answer}, FORMS_TASKS)
        assert refused.status_code == 400
        assert refused.json()["error"]["message"] == (
            f"The question {key!r} must be answered by a person, only on its answer page: {link}"
        )
        # A client that opens links is asked it as a URL request: the page, not a form.
        shown = get(URL_TASKS)()["inputRequests"][key]
        assert shown == {
            "method": "elicitation/create",
            "params": {
                "mode": "url",
                "message": "The app password of support@example.com",
                "url": link,
                "elicitationId": shown["params"]["elicitationId"],
            },
        }
        # A chat host's model is given the link to pass on, and may not answer either.
        said = result(send("tools/call", {"name": "task_status", "arguments": {"taskId": task_id}}, {}))
        assert link in said["content"][0]["text"]
        tried = result(
            send(
                "tools/call", {"name": "task_answer", "arguments": {"taskId": task_id, "answers": answer}}, {}
            )
        )
        assert tried["isError"] is True and "only on its answer page" in tried["content"][0]["text"]
        # A client without tasks, held in MRTR rounds, is told where, in a tool error: never a form.
        held = result(send("tools/call", MAILBOX, FORMS))
        assert held["isError"] is True
        assert "waits for a person to answer on its page" in held["content"][0]["text"]
        assert "/answer/" in held["content"][0]["text"]

        with PageClient(served.base) as browser:
            browser.sign_in(OWNER_TOKENS["ann"])
            opened = browser.get(link)
            assert 'type="password" autocomplete="off"' in opened.text
            assert "This is a secret" in opened.text
            short = browser.send(link, opened, {"password": too_short})
            assert short.status == 422
            assert short.forms().errors == {"password": "Use at least 8 characters."}
            done = browser.send(link, short, {"password": secret})
            assert done.status == 200 and "Your answer was sent" in done.text
            pages = [opened.text, short.text, done.text, browser.get(f"/tasks/{task_id}").text]
            pages.append(browser.get("/tasks").text)

        ended = eventually(get(FORMS_TASKS), lambda task: task["status"] == "completed")
        # The workflow received it and used it: its result shows the connection it made.
        assert ended["result"]["structuredContent"] == {
            "address": "support@example.com",
            "outcome": "connected",
            "connection": ended["result"]["structuredContent"]["connection"],
        }
        assert ended["result"]["structuredContent"]["connection"].startswith("MBX-")
    finally:
        served.stop()

    stored = stored_bytes(tmp_path)
    assert task_id.encode() in stored  # the files are the right ones, and were read
    logs = served.log_text()
    assert task_id in logs
    for value in (secret, too_short, decoy):
        assert value.encode() not in stored, value
        assert value not in logs, value
        for text in seen + pages:
            assert value not in text, value
    # Nor anything made from it that a guess could be checked against (S-L5: a dictionary oracle).
    digest = hashlib.sha256(secret.encode()).hexdigest()
    for text in seen + pages + [logs]:
        assert digest[:8] not in text
