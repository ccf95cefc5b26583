"""Two people decide ``delete_customer``, in a real headless Chromium (Debian's, tests/browser.py)
against a real ``longtools serve``, at a phone's width: alice asks (over MCP), bob finds the
question on his ``/decisions``, reads the proposal (the tickets that will go) and approves; alice's
task page shows his vote without a reload; dave approves from his ``/decisions``, which followed
bob's vote too; alice's page shows the task done, and who approved. carol, in no group of the
rule, has nothing waiting and reads the link as not known. Ours (issue 32: the pages).

Each page is saved as a screenshot (``LONGTOOLS_SCREENSHOTS=docs/images`` refreshes the docs'
``decision-*.png``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.browser import PHONE, save_screenshot
from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, eventually, post, result

PEOPLE = {name: secrets.token_urlsafe(24) for name in ("alice", "bob", "dave", "carol")}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
DECISIONS = "longtools.dev/decisions"
TIMEOUT_MS = 15_000
"""Bound of every Playwright wait."""


@pytest.fixture(scope="module")
def leads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {
        "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items()),
        "LONGTOOLS_GROUPS": "leads=alice,bob,dave;ops=carol",
    }
    served = start_server(tmp_path_factory.mktemp("decisions-browser"), env=env)
    try:
        yield served
    finally:
        served.stop()


def _person(browser: Browser, contexts: list[BrowserContext], served: Served, who: str, path: str) -> Page:
    """``who`` in a browser of their own, signed in with their token on the way to ``path``."""
    context = browser.new_context(viewport=PHONE)
    context.set_default_timeout(TIMEOUT_MS)
    contexts.append(context)
    page = context.new_page()
    page.goto(served.base + path)
    page.fill("#token", PEOPLE[who])
    page.keyboard.press("Enter")
    expect(page.locator("#who")).to_have_text(who)
    return page


def _call(served: Served, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """alice's ``tools/call`` from a host with tasks and forms."""
    params = {"name": name, "arguments": arguments}
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    return result(post(served.url, "tools/call", params, caps=TASK_CAPS, headers=headers))


def _approvers_link(served: Served, task_id: str) -> str:
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    task = eventually(
        lambda: result(post(served.url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=headers)),
        lambda now: bool(now.get("_meta", {}).get(DECISIONS)),
    )
    [decision] = task["_meta"][DECISIONS].values()
    return str(decision["link"])


def _fits_the_width(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_two_leads_approve_delete_customer_in_their_browsers_and_the_requester_follows_each_vote(
    leads: Served, browser: Browser, contexts: list[BrowserContext], tmp_path: Path
) -> None:
    customer = f"globex-{secrets.token_hex(2)}"
    tickets = [
        _call(leads, "create_ticket", {"title": title, "customer": customer})["structuredContent"]["ticketId"]
        for title in ("Printer on fire", "Paper jam", "Toner empty")
    ]
    task_id = str(_call(leads, "delete_customer", {"customer": customer})["taskId"])
    link = _approvers_link(leads, task_id)

    # alice follows her task: nobody has voted, and she may not.
    alice = _person(browser, contexts, leads, "alice", f"/tasks/{task_id}")
    live = alice.locator("#live")
    expect(live.locator(".votes")).to_have_text("0 of 2 approvals")
    expect(live).to_contain_text("You asked for this; others decide.")
    expect(live).to_contain_text("Who decides: 2 approvals from group leads, not from the person who asked.")
    share = live.locator(".share-link")
    assert share.get_attribute("href") == link.removeprefix(leads.base)
    assert _fits_the_width(alice)
    alice.screenshot(path=str(tmp_path / "decision-task.png"), full_page=True)  # no page of the docs shows it

    # dave's list is open before bob votes.
    dave = _person(browser, contexts, leads, "dave", "/decisions")
    dave_row = dave.locator(f'[data-task="{task_id}"]')
    expect(dave_row.locator(".votes")).to_have_text("0 of 2 approvals")

    # bob finds it on his list, reads the proposal and approves.
    bob = _person(browser, contexts, leads, "bob", "/decisions")
    row = bob.locator(f'[data-task="{task_id}"]')
    expect(row.locator(".status")).to_have_text("Waiting for you")
    expect(row).to_contain_text(f"Delete 3 tickets of {customer}?")
    expect(row).to_contain_text("Asked by alice")
    assert _fits_the_width(bob)
    save_screenshot(bob, tmp_path, "decision-list.png")
    row.get_by_role("link", name="Decide").click()
    expect(bob.locator("#proposal-h")).to_have_text("What will happen")
    expect(bob.locator("#proposal-summary")).to_contain_text(", ".join(tickets))
    expect(bob.locator("#requester")).to_have_text("alice")
    expect(bob.locator("#rule")).to_contain_text("2 approvals from group leads")
    expect(bob.locator("#votes")).to_have_text("0 of 2 approvals")
    assert _fits_the_width(bob)
    save_screenshot(bob, tmp_path, "decision-proposal.png")
    bob.fill("#f-note", "Checked with the account manager.")
    bob.get_by_role("button", name="Approve").click()
    expect(bob.locator("h1")).to_have_text("Your vote is in")
    expect(bob.locator("#tally")).to_contain_text("1 of 2 approvals: bob,")
    assert _fits_the_width(bob)
    save_screenshot(bob, tmp_path, "decision-voted.png")

    # alice's page and dave's list show bob's vote, without a reload.
    expect(live.locator(".votes")).to_contain_text("1 of 2 approvals: bob,")
    save_screenshot(alice, tmp_path, "decision-task-vote.png")
    expect(dave_row.locator(".votes")).to_contain_text("1 of 2 approvals: bob,")
    dave_row.get_by_role("link", name="Decide").click()
    expect(dave.locator("#votes")).to_contain_text("1 of 2 approvals: bob,")
    dave.get_by_role("button", name="Approve").click()
    expect(dave.locator("h1")).to_have_text("Your vote is in")
    expect(dave.locator("#tally")).to_contain_text("The decision is made")

    # alice's page: done, who approved, and the tickets deleted.
    expect(live).to_have_attribute("data-done", "true")
    expect(live.locator(".status")).to_have_text("Done")
    expect(live.locator("#approved")).to_have_text("Approved by bob and dave")
    expect(alice.locator("#result-json")).to_contain_text('"outcome": "deleted"')
    assert _fits_the_width(alice)
    save_screenshot(alice, tmp_path, "decision-done.png")

    # carol is in no group of the rule: nothing waits for her, and the link is not known to her.
    carol = _person(browser, contexts, leads, "carol", "/decisions")
    expect(carol.locator("#nothing")).to_contain_text("Nothing waits for you")
    carol.goto(link)
    expect(carol.locator("h1")).to_have_text("This link is not known")


def test_the_approvers_link_is_copied_from_the_task_page(
    leads: Served, browser: Browser, contexts: list[BrowserContext]
) -> None:
    customer = f"initech-{secrets.token_hex(2)}"
    _call(leads, "create_ticket", {"title": "Fax jammed", "customer": customer})
    task_id = str(_call(leads, "delete_customer", {"customer": customer})["taskId"])
    link = _approvers_link(leads, task_id)
    alice = _person(browser, contexts, leads, "alice", f"/tasks/{task_id}")
    alice.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=leads.base)
    copy = alice.get_by_role("button", name="Copy the link")
    expect(copy).to_be_visible()
    copy.click()
    expect(alice.locator(".copied")).to_have_text("Copied.")
    assert alice.evaluate("navigator.clipboard.readText()") == link
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    result(post(leads.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS, headers=headers))
