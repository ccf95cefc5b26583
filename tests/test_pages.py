"""The person's pages over real HTTP against a real ``longtools serve``: who may open a link, what a
used, tampered or expired link says, CSRF, the sign-in, the headers every page carries, the list of
one's tasks. Ours (issue 26); the looks and the live page are in test_pages_browser.py.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import OWNER_TOKENS, Served, bearer, start_server
from tests.pages import PageClient
from tests.wire import TASKS_EXTENSION, eventually, post, result

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
LINKS = "longtools.dev/answer-links"
_HEADERS = {
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}


def _call(url: str, who: str, name: str, arguments: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
    return result(
        post(url, "tools/call", {"name": name, "arguments": arguments}, caps=caps, headers=bearer(who))
    )


def _task(url: str, who: str, task_id: str) -> dict[str, Any]:
    return result(post(url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=bearer(who)))


def start_bulk_close(url: str, who: str = "ann", tickets: int = 2) -> tuple[str, str]:
    """``who`` starts closing ``tickets`` new tickets as a task; its id and the question's link."""
    customer = f"c-{secrets.token_hex(4)}"
    for n in range(tickets):
        _call(url, who, "create_ticket", {"title": f"t{n}", "customer": customer}, TASK_CAPS)
    started = _call(url, who, "bulk_close_tickets", {"customer": customer}, TASK_CAPS)
    task_id = str(started["taskId"])
    asking = eventually(lambda: _task(url, who, task_id), _asks)
    [link] = asking["_meta"][LINKS].values()
    return task_id, str(link)


def _asks(task: dict[str, Any]) -> bool:
    """Whether the task waits for its person: a client is shown the question's link (and a
    working task, since no client may answer it)."""
    return LINKS in task.get("_meta", {}) and task["status"] not in ("completed", "failed", "cancelled")


def _tampered(link: str) -> str:
    head, token = link.rsplit("/", 1)
    middle = len(token) // 2
    return f"{head}/{token[:middle]}{'A' if token[middle] != 'A' else 'B'}{token[middle + 1 :]}"


def _signed_in(served: Served, who: str) -> PageClient:
    client = PageClient(served.base)
    client.sign_in(OWNER_TOKENS[who])
    return client


@pytest.fixture
def ann(owners: Served) -> Iterator[PageClient]:
    with _signed_in(owners, "ann") as client:
        yield client


@pytest.fixture
def ben(owners: Served) -> Iterator[PageClient]:
    with _signed_in(owners, "ben") as client:
        yield client


def test_a_link_opens_only_for_its_owner_and_reads_to_anyone_else_as_a_made_up_one(
    owners: Served, ann: PageClient, ben: PageClient
) -> None:
    task_id, link = start_bulk_close(owners.url)
    opened = ann.get(link)
    assert opened.status == 200 and 'Signed in as <strong id="who">ann</strong>' in opened.text
    assert "Close 2 tickets for" in opened.text

    foreign, tampered = ben.get(link), ben.get(_tampered(link))
    assert (foreign.status, foreign.heading) == (404, "This link is not known")
    # One page for both: nothing tells ben that the link is real.
    assert _without_csrf(foreign.text) == _without_csrf(tampered.text)
    assert ann.get(_tampered(link)).heading == "This link is not known"
    # A made-up task id on the task page is no task of theirs either.
    assert ben.get(f"/tasks/{task_id}").heading == "No such task"
    assert _asks(_task(owners.url, "ann", task_id))  # nothing happened to it


def test_a_post_without_its_csrf_token_is_refused_and_delivers_nothing(
    owners: Served, ann: PageClient, ben: PageClient
) -> None:
    task_id, link = start_bulk_close(owners.url)
    opened = ann.get(link)
    answer = {"confirm": True, "reason": "Duplicate"}
    missing = ann.send(link, opened, answer, csrf=False)
    assert (missing.status, missing.heading) == (403, "This form could not be sent")
    # Another session's token does not pass either (a page of another site cannot read ann's).
    stolen = ben.get("/tasks").forms().hidden["csrf"]
    data = {"csrf": stolen, "confirm": "true", "reason": "Duplicate", "action": "accept"}
    assert ann.http.post(link, data=data).status_code == 403
    # A form posted without ann's cookie (another site's, whose browser holds none) asks who it is.
    bare = httpx.post(link, data={**ann.get(link).forms().hidden, "confirm": "true", "action": "accept"})
    assert bare.status_code == 401 and "Your answer was not sent" in bare.text
    assert _asks(_task(owners.url, "ann", task_id))


def test_a_used_link_says_already_answered(owners: Served, ann: PageClient) -> None:
    task_id, link = start_bulk_close(owners.url)
    opened = ann.get(link)
    done = ann.send(link, opened, {"confirm": True, "reason": "Duplicate", "note": "dup of T-1"})
    assert done.status == 200 and "Your answer was sent" in done.text
    again = ann.get(link)
    assert (again.status, again.heading) == (409, "Already answered")
    assert f"/tasks/{task_id}" in again.text
    # The first answer wins: a second POST of the same form is not delivered.
    late = ann.send(link, opened, {"confirm": False})
    assert (late.status, late.heading) == (409, "Already answered")
    ended = eventually(lambda: _task(owners.url, "ann", task_id), lambda task: task["status"] == "completed")
    outcome = ended["result"]["structuredContent"]
    assert (outcome["outcome"], outcome["reason"], outcome["note"]) == ("closed", "Duplicate", "dup of T-1")


def test_a_wrong_answer_is_shown_beside_its_field_in_words_and_nothing_is_sent(
    owners: Served, ann: PageClient
) -> None:
    task_id, link = start_bulk_close(owners.url)
    opened = ann.get(link)
    wrong = ann.send(link, opened, {"confirm": True, "reason": "Maybe", "note": "x" * 201})
    assert wrong.status == 422
    assert wrong.forms().errors == {
        "reason": "Choose one of the options given.",
        "note": "Use at most 200 characters.",
    }
    assert (
        'aria-invalid="true"' in wrong.text
        and 'aria-describedby="f-note-help f-note-hint f-note-error"' in wrong.text
    )
    assert _asks(_task(owners.url, "ann", task_id))
    declined = ann.send(link, wrong, {}, action="decline")
    assert declined.status == 200
    ended = eventually(lambda: _task(owners.url, "ann", task_id), lambda task: task["status"] == "completed")
    assert ended["result"]["structuredContent"]["outcome"] == "declined"


def test_every_page_carries_the_headers_that_keep_it_out_of_frames_caches_and_referrers(
    owners: Served, ann: PageClient
) -> None:
    _, link = start_bulk_close(owners.url)
    for response in (
        ann.get(link).response,
        ann.get(_tampered(link)).response,
        ann.get("/tasks").response,
        httpx.get(f"{owners.base}/signin"),
        httpx.get(f"{owners.base}/_pages/page.js"),
    ):
        assert {name: response.headers.get(name) for name in _HEADERS} == _HEADERS, response.url
        policy = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    # A Host this server does not answer to (DNS rebinding) gets nothing.
    assert httpx.get(f"{owners.base}/tasks", headers={"host": "evil.example"}).status_code == 421


def test_signing_in_makes_a_new_session_that_the_browser_keeps_to_itself(owners: Served) -> None:
    with PageClient(owners.base) as browser:
        port = urlsplit(owners.base).port
        browser.http.cookies.set(f"longtools-session-{port}", "made-up")  # fixation: a value not minted here
        assert browser.http.get("/tasks").headers["location"] == "/signin?next=%2Ftasks"
        form = browser.get("/signin?next=/tasks")
        wrong = browser.http.post("/signin", data={**form.forms().hidden, "token": "not-" + "x" * 20})
        assert wrong.status_code == 401 and "This token was not accepted" in wrong.text
        form = browser.get("/signin?next=https://evil.example/")
        signed = browser.http.post("/signin", data={**form.forms().hidden, "token": OWNER_TOKENS["ann"]})
        assert signed.status_code == 303
        assert signed.headers["location"] == "/tasks"  # never another site (open redirect)
        cookie = signed.headers["set-cookie"]
        # Named for the port: cookies ignore ports, and another server of this computer has its own.
        assert cookie.startswith(f"longtools-session-{port}=") and "made-up" not in cookie
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "path=/", "samesite=lax"} <= attributes
        assert "secure" not in attributes  # plain HTTP to this computer only
        assert browser.get("/tasks").heading == "Your tasks"
        # The sign-in form itself is CSRF-protected: a POST without its token is refused.
        bare = httpx.post(f"{owners.base}/signin", data={"token": OWNER_TOKENS["ann"], "next": "/tasks"})
        assert bare.status_code == 403 and "set-cookie" not in bare.headers
        out = browser.http.post("/signout", data=browser.get("/tasks").forms().hidden)
        assert out.status_code == 200 and "Signed out" in out.text
        assert browser.http.get("/tasks").status_code == 303


def test_the_list_shows_only_ones_own_tasks_with_what_each_waits_for_and_cancels_one(
    owners: Served, ann: PageClient, ben: PageClient
) -> None:
    task_id, link = start_bulk_close(owners.url)
    listed = ann.get("/tasks")
    assert listed.heading == "Your tasks"
    assert f'data-task="{task_id}"' in listed.text
    assert link.removeprefix(owners.base) in listed.text  # its Answer button
    assert task_id not in ben.get("/tasks").text
    # ann's own cancel, from the list: a page that asks first, then the cancel.
    assert f'href="/tasks/{task_id}/cancel?back=list"' in listed.text
    asked = ann.get(f"/tasks/{task_id}/cancel?back=list")
    assert asked.heading == "Cancel this task?" and 'href="/tasks" id="keep-running"' in asked.text
    cancelled = ann.http.post(f"/tasks/{task_id}/cancel", data=asked.forms().hidden)
    assert cancelled.status_code == 303
    assert cancelled.headers["location"].split("?")[0] == f"/tasks/{task_id}"
    ended = eventually(lambda: _task(owners.url, "ann", task_id), lambda task: task["status"] == "cancelled")
    assert ended["status"] == "cancelled"
    # ben cannot cancel ann's task: it is no task of his.
    other, _ = start_bulk_close(owners.url)
    refused = ben.http.post(f"/tasks/{other}/cancel", data=ben.get("/tasks").forms().hidden)
    assert refused.status_code == 404
    assert _asks(_task(owners.url, "ann", other))


def test_without_authentication_this_computer_is_the_one_person(server: Served) -> None:
    with PageClient(server.base) as browser:
        page = browser.get("/tasks")
        assert page.heading == "Your tasks"
        assert "you, on this computer" in page.text
        assert f"longtools-session-{urlsplit(server.base).port}=" in page.response.headers["set-cookie"]


@pytest.fixture(scope="module")
def short_links(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose answer links last 2 seconds (``LONGTOOLS_ANSWER_LINK_TTL_S``)."""
    env = {
        "LONGTOOLS_AUTH_TOKENS": f"{OWNER_TOKENS['ann']}=ann",
        "LONGTOOLS_ANSWER_LINK_TTL_S": "2",
        "LONGTOOLS_HELPDESK_WORK_S": "0.1",
    }
    served = start_server(tmp_path_factory.mktemp("short-links"), env=env)
    try:
        yield served
    finally:
        served.stop()


def test_an_expired_link_says_so_and_the_task_page_gives_a_new_one(short_links: Served) -> None:
    task_id, link = start_bulk_close(short_links.url)
    with _signed_in(short_links, "ann") as browser:
        expired = eventually(lambda: browser.get(link), lambda page: page.status == 410, within=15)
        assert expired.heading == "This link has expired"
        fresh = re.search(r'href="(/answer/[^"]+)"', browser.get(f"/tasks/{task_id}").text)
        assert fresh is not None and fresh.group(1) != link.removeprefix(short_links.base)
        assert browser.get(fresh.group(1)).status == 200


def _without_csrf(text: str) -> str:
    return re.sub(r'name="csrf" value="[^"]*"', "", text)


def test_a_form_shows_each_kind_of_field_and_sends_each_answer_as_its_type(
    owners: Served, ann: PageClient
) -> None:
    started = _call(owners.url, "ann", "fill_profile", {}, TASK_CAPS)
    task_id = str(started["taskId"])
    asking = eventually(lambda: _task(owners.url, "ann", task_id), _asks)
    [link] = asking["_meta"][LINKS].values()
    opened = ann.get(link)
    assert opened.heading == "fill_profile asks"  # a tool without a title is named once (N11)
    assert ann.get(f"/tasks/{task_id}").heading == "fill_profile"
    text = opened.text
    assert '<input id="f-name" name="name" type="text" value=""' in text
    assert 'aria-describedby="f-name-help f-name-hint" aria-required="true"' in text
    assert "As it should be printed." in text and "2 to 40 characters." in text
    assert '<input id="f-email" name="email" type="email" value=""' in text
    assert 'type="number" inputmode="numeric" step="1" min="18" max="130" value=""' in text
    assert 'type="number" inputmode="decimal" step="any" min="0" max="1" value="0.5"' in text
    assert '<input type="radio" id="f-color-2" name="color" value="green" checked>' in text  # its default
    assert '<select id="f-size" name="size" aria-required="true">' in text  # 7 choices: a list
    assert text.count("<option value=") == 8  # the 7 sizes and "Choose…"
    assert text.count('type="checkbox" id="f-extras-') == 3  # several choices: boxes
    assert '<input type="checkbox" id="f-agree" name="agree" value="true"' in text
    assert '<input id="f-day" name="day" type="date" value=""' in text
    assert text.count('<span class="req">(required)</span>') == 4  # name, email, age, size

    wrong = ann.send(link, opened, {"name": "x", "email": "a@b.example", "age": "old", "share": "2"})
    assert wrong.status == 422
    assert wrong.forms().errors == {
        "name": "Use at least 2 characters.",
        "age": "Enter a whole number.",
        "share": "Enter 1 or less.",
        "size": "Required: fill this in.",
    }
    answer = {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "age": "36",
        "share": "0.25",
        "color": "blue",
        "size": "XL",
        "extras": ["gift wrap", "insurance"],
        "agree": True,
        "day": "2026-12-24",
    }
    assert ann.send(link, wrong, answer).status == 200
    ended = eventually(lambda: _task(owners.url, "ann", task_id), lambda task: task["status"] == "completed")
    assert ended["result"]["structuredContent"] == {
        "action": "accept",
        "profile": {
            "name": "Ada Lovelace",
            "email": "ada@example.com",
            "age": 36,
            "share": 0.25,
            "color": "blue",
            "size": "XL",
            "extras": ["gift wrap", "insurance"],
            "agree": True,
            "day": "2026-12-24",
        },
    }


def test_a_quick_tool_that_asks_a_persons_question_is_told_only_a_long_tool_may(owners: Served) -> None:
    said = _call(owners.url, "ann", "approve_quickly", {}, {"elicitation": {"form": {}}})
    assert said["isError"] is True
    assert said["content"][0]["text"] == (
        "Tool approve_quickly asks a person's question (elicit(by='person') or sensitive=True), "
        "which only a long tool's workflow can ask: its answer page belongs to a task"
    )
