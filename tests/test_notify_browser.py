"""The browser's own notification of a question newly waiting, in a real headless Chromium
(Debian's, tests/browser.py) against a real ``longtools serve``: bob keeps his ``/decisions`` open
and alice her ``/tasks``, each having allowed the pages to notify; alice starts a decision that
waits for both of them, and each page shows one notification of it, named by its task and question,
while the question already there when the pages loaded is told of to nobody. A click on it opens
the question. The button that asks shows only where the browser can still be asked. Ours (issue
33, item 4).

Each notification is recorded by an init script that wraps ``window.Notification``: it notes the
title, body and tag of every one the page constructs, then constructs the real one.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.browser import PHONE
from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, eventually, post, result

PEOPLE = {name: secrets.token_urlsafe(24) for name in ("alice", "bob")}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
DECISIONS = "longtools.dev/decisions"
TIMEOUT_MS = 15_000
"""Bound of every Playwright wait."""
NOTIFIED_MS = 30_000
"""Bound of the wait for a notification: a task started elsewhere reaches an open list through
Temporal's visibility (about a second, more on a busy machine)."""
RECORD = """
(() => {
  const Real = window.Notification;
  if (!Real) return;
  const notified = (window.__notified = []);
  window.Notification = class extends Real {
    constructor(title, options) {
      const record = { title: title, body: options && options.body, tag: options && options.tag };
      notified.push(record);
      super(title, options);
      record.shown = this;
    }
  };
})();
"""
RECORDED = "window.__notified.map((n) => ({ title: n.title, body: n.body, tag: n.tag }))"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items())}
    server = start_server(tmp_path_factory.mktemp("notify"), "--tools", "tests.decision_tools", env=env)
    try:
        yield server
    finally:
        server.stop()


def _context(browser: Browser, contexts: list[BrowserContext]) -> BrowserContext:
    context = browser.new_context(viewport=PHONE)
    context.set_default_timeout(TIMEOUT_MS)
    contexts.append(context)
    return context


def _sign_in(context: BrowserContext, served: Served, who: str, path: str) -> Page:
    """``who`` signed in with their token on the way to ``path``."""
    page = context.new_page()
    page.goto(served.base + path)
    page.fill("#token", PEOPLE[who])
    page.keyboard.press("Enter")
    expect(page.locator("#who")).to_have_text(who)
    return page


def _notifying(
    browser: Browser, contexts: list[BrowserContext], served: Served, who: str, path: str, there: str
) -> Page:
    """``who`` at ``path``, in a browser that lets this server notify and records what it shows,
    loaded once the page shows question ``there`` as it loads (Temporal's visibility lists a task
    a moment after it starts: one that came by a live update would be new to the page)."""
    context = _context(browser, contexts)
    context.grant_permissions(["notifications"], origin=served.base)
    context.add_init_script(RECORD)
    page = _sign_in(context, served, who, path)
    eventually(lambda: f'data-waits="{there}"' in context.request.get(served.base + path).text())
    page.reload()
    expect(page.locator(f'[data-waits="{there}"]')).to_have_count(1)
    return page


def _decide(served: Served, principals: list[str]) -> str:
    """alice starts ``decide``, its question waiting for ``principals``, and it asks: the question's
    tag (its task id and key)."""
    params = {"name": "decide", "arguments": {"principals": principals}}
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    task_id = str(result(post(served.url, "tools/call", params, caps=TASK_CAPS, headers=headers))["taskId"])
    task = eventually(
        lambda: result(post(served.url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=headers)),
        lambda now: bool(now.get("_meta", {}).get(DECISIONS)),
    )
    [key] = task["_meta"][DECISIONS]
    return f"{task_id}:{key}"


def _cancel(served: Served, tag: str) -> None:
    task_id = tag.split(":")[0]
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    result(post(served.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS, headers=headers))


def _recorded(page: Page) -> list[dict[str, str]]:
    shown: list[dict[str, str]] = page.evaluate(RECORDED)
    return shown


def test_a_question_new_to_an_open_page_is_notified_once_and_one_there_before_never(
    served: Served, browser: Browser, contexts: list[BrowserContext]
) -> None:
    earlier = _decide(served, ["alice", "bob"])
    bob = _notifying(browser, contexts, served, "bob", "/decisions", earlier)
    alice = _notifying(browser, contexts, served, "alice", "/tasks", earlier)
    for page in (bob, alice):
        expect(page.locator("#notify")).to_be_hidden()  # allowed already: nothing to ask

    later = _decide(served, ["alice", "bob"])
    for page in (bob, alice):
        page.wait_for_function(
            "(tag) => window.__notified.some((n) => n.tag === tag)", arg=later, timeout=NOTIFIED_MS
        )
    # Each page told of the new question once, and of the one there when it loaded never.
    assert _recorded(bob) == [
        {
            "title": "longtools: a question waits for you",
            "body": "decide waits for your decision. Asked by alice.",
            "tag": later,
        }
    ]
    assert _recorded(alice) == [
        {
            "title": "longtools: a question waits for you",
            "body": "decide waits for your decision.",
            "tag": later,
        }
    ]

    # The lists change again (the earlier task ends): the question shown is not told of again.
    _cancel(served, earlier)
    earlier_id = earlier.split(":")[0]
    expect(bob.locator(f'[data-task="{earlier_id}"]')).to_have_count(0)
    expect(alice.locator(f'[data-task="{earlier_id}"] .status')).to_have_text("Cancelled")
    assert len(_recorded(bob)) == 1
    assert len(_recorded(alice)) == 1

    # A reload: what the tab told of before, and what is there at load, is not told again.
    alice.reload()
    expect(alice.locator(f'[data-waits="{later}"]')).to_have_count(1)
    assert _recorded(alice) == []

    # A click on the notification brings the person to the question.
    bob.evaluate("window.__notified[0].shown.dispatchEvent(new Event('click'))")
    expect(bob.locator("#proposal-h")).to_have_text("What will happen")
    expect(bob.locator("#requester")).to_have_text("alice")
    _cancel(served, later)


def test_the_button_asks_to_notify_where_the_browser_can_still_be_asked(
    served: Served, browser: Browser, contexts: list[BrowserContext]
) -> None:
    # Not allowed yet: the button shows, and a click asks the browser (which, here, allows it).
    context = _context(browser, contexts)
    page = _sign_in(context, served, "alice", "/tasks")
    assert page.evaluate("Notification.permission") == "default"
    ask = page.get_by_role("button", name="Notify me when something waits")
    expect(ask).to_be_visible()
    context.grant_permissions(["notifications"], origin=served.base)
    ask.click()
    expect(page.locator("#notify-said")).to_have_text("You will be notified while this page is open.")
    expect(ask).to_be_hidden()

    # Refused in the browser's settings: said so, and nothing to click.
    refused = _context(browser, contexts)
    refused.add_init_script("Object.defineProperty(Notification, 'permission', { get: () => 'denied' })")
    page = _sign_in(refused, served, "alice", "/decisions")
    expect(page.locator("#notify-said")).to_have_text(
        "Notifications are blocked for this site in the browser's settings."
    )
    expect(page.locator("#notify-ask")).to_be_hidden()

    # A browser without notifications: nothing of them shows.
    without = _context(browser, contexts)
    without.add_init_script("delete window.Notification")
    page = _sign_in(without, served, "alice", "/decisions")
    expect(page.locator("h1")).to_have_text("Decisions")
    expect(page.locator("#notify")).to_be_hidden()
