"""A person's question asked where no task can keep it (S-M1), and a secret asked again (S-M2):
against the session's ``owners`` server (tests/person_tools.py), over HTTP. Ours (issue 31)."""

from __future__ import annotations

import secrets
from typing import Any

from tests.conftest import OWNER_TOKENS, Served, bearer
from tests.pages import PageClient
from tests.wire import TASKS_EXTENSION, post, result, wait_for_task

URL_CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
URL_TASKS: dict[str, Any] = {**URL_CAPS, "extensions": {TASKS_EXTENSION: {}}}
LINKS = "longtools.dev/answer-links"
REFUSED = (
    "asks a person's question (elicit(by='person') or sensitive=True), which only a long tool's "
    "workflow can ask"
)


def test_a_before_round_that_asks_a_person_is_a_tool_error(owners: Served) -> None:
    """S-M1: only quick tools were checked; a long tool's before= round asked the client a
    secret's form, and took its answer."""
    params = {"name": "approve_before", "arguments": {}}
    refused = result(post(owners.url, "tools/call", params, caps=URL_CAPS, headers=bearer("ann")))
    assert refused["isError"] is True and "inputRequests" not in refused, refused
    assert (
        refused["content"][0]["text"] == f"Tool approve_before {REFUSED}: its answer page belongs to a task"
    )


def test_a_prompt_or_a_resource_that_asks_a_person_is_refused_with_32603(owners: Served) -> None:
    """S-M1: a prompt's round and a resource's asked the client too."""
    for method, params, what in (
        ("prompts/get", {"name": "approve_prompt"}, "Prompt approve_prompt"),
        ("resources/read", {"uri": "test://approve"}, "Resource test://approve"),
    ):
        response = post(owners.url, method, params, caps=URL_CAPS, headers=bearer("ann"))
        error = response.json()["error"]
        assert error["code"] == -32603, error
        assert error["message"] == f"{what} {REFUSED}: its answer page belongs to a task"


def test_a_secret_asked_again_names_its_fields_and_error_kinds_to_clients_never_what_was_typed(
    owners: Served,
) -> None:
    """S-M2: the re-ask carried each validator's message, which may quote the value, in the
    question's message, which URL-mode clients and a chat host's model (task_status) read."""
    typed = f"x{secrets.token_hex(6)}"  # not all digits: the tool's validator quotes it
    created = result(
        post(owners.url, "tools/call", {"name": "set_a_pin"}, caps=URL_TASKS, headers=bearer("ann"))
    )
    task_id = created["taskId"]
    asked = wait_for_task(owners.url, task_id, lambda t: LINKS in t.get("_meta", {}), headers=bearer("ann"))
    [link] = asked["_meta"][LINKS].values()
    seen: list[str] = []
    with PageClient(owners.base) as person:
        person.sign_in(OWNER_TOKENS["ann"])
        again = person.answer(link, {"pin": typed})
        seen.append(again.text)
    reasked = wait_for_task(
        owners.url,
        task_id,
        lambda t: set(t.get("_meta", {}).get(LINKS, {})) == {"input-2"},
        headers=bearer("ann"),
    )
    seen.append(str(reasked))
    task = post(owners.url, "tasks/get", {"taskId": task_id}, caps=URL_TASKS, headers=bearer("ann"))
    seen.append(task.text)
    [shown] = result(task)["inputRequests"].values()
    assert shown["params"]["message"] == "That answer was not valid: pin: value_error. A PIN, please"
    said = post(
        owners.url,
        "tools/call",
        {"name": "task_status", "arguments": {"taskId": task_id}},
        caps={},
        headers=bearer("ann"),
    )
    seen.append(said.text)
    for text in seen:
        assert typed not in text
    # The page showed the question again at once, saying what is wrong beside the field.
    assert "pin" in again.forms().errors, again.text
