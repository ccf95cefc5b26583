"""The person's pages in a real headless Chromium (Debian's, tests/browser.py) against a real
``longtools serve``: a chat host's model relays a link, the person signs in, answers the form (an
enum, a boolean and a text field), sees the server's word on a wrong field beside it, and follows
the task live to its result; the list of their tasks follows them too. At a phone's width, by
keyboard where a person would use it. Ours (issue 26).

Each page is saved as a screenshot (``LONGTOOLS_SCREENSHOTS=docs/images`` refreshes the docs').
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser import PHONE, save_screenshot
from tests.conftest import OWNER_TOKENS, Served, bearer
from tests.pages import PageClient
from tests.wire import post, result

TIMEOUT_MS = 15_000
"""Bound of every Playwright wait."""


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=PHONE)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def _chat_host(url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """ann's ``tools/call`` from a client that declared nothing: a chat host's model."""
    params = {"name": name, "arguments": arguments}
    return result(post(url, "tools/call", params, caps={}, headers=bearer("ann")))


def _text(outcome: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in outcome["content"] if block["type"] == "text")


def _fits_the_width(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_a_person_answers_in_the_browser_what_a_chat_host_may_not_and_follows_the_task_to_its_result(
    owners: Served, page: Page, tmp_path: Path
) -> None:
    customer = f"acme-{secrets.token_hex(3)}"
    for title in ("Printer on fire", "Paper jam", "Toner empty"):
        _chat_host(owners.url, "create_ticket", {"title": title, "customer": customer})
    started = _chat_host(owners.url, "bulk_close_tickets", {"customer": customer})
    task_id = started["structuredContent"]["taskId"]
    [link] = started["structuredContent"]["_meta"]["longtools.dev/answer-links"].values()
    assert link in _text(started)  # what the model relays to the person
    refused = _chat_host(
        owners.url,
        "task_answer",
        {"taskId": task_id, "answers": {"input": {"action": "accept", "content": {"confirm": True}}}},
    )
    assert refused["isError"] is True  # the model may not approve it for the person

    page.goto(link)
    expect(page.locator("h1")).to_have_text(f"Sign in to {'longtools'}")
    assert _fits_the_width(page)
    save_screenshot(page, tmp_path, "answer-signin.png")
    page.fill("#token", OWNER_TOKENS["ann"])
    page.keyboard.press("Enter")

    # Back at the question: its tool, its status, who is signed in.
    expect(page.locator("#question")).to_have_text(f"Close 3 tickets for {customer}?")
    expect(page.locator("#who")).to_have_text("ann")
    expect(page.locator("h1")).to_contain_text("Close all tickets of a customer")
    expect(page.locator(".state")).to_contain_text("Waiting for an answer")
    expect(page.locator("#f-note")).to_have_attribute("type", "text")
    assert page.is_checked("text=Resolved")  # the default
    assert _fits_the_width(page)
    save_screenshot(page, tmp_path, "answer-form.png")

    page.check("#f-confirm")
    page.check("text=Duplicate")
    page.fill("#f-note", "Merged into one ticket. " * 10)  # 240 characters: more than the form takes
    page.click("button[value=accept]")

    # The server's word, beside the field it is about; the rest of the answer kept.
    note = page.locator('[data-field="note"]')
    expect(note.locator(".error")).to_have_text("Use at most 200 characters.")
    expect(page.locator("#f-note")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#f-note")).to_be_focused()
    assert page.is_checked("#f-confirm") and page.is_checked("text=Duplicate")
    assert page.locator(".error").count() == 1
    save_screenshot(page, tmp_path, "answer-error.png")

    # By keyboard: the note is focused; replace it and send with Enter.
    page.keyboard.press("Control+A")
    page.keyboard.type("Merged into one ticket.")
    page.keyboard.press("Enter")

    expect(page.locator(".flash")).to_contain_text("Your answer was sent")
    live = page.locator("#live")
    expect(live).to_have_attribute("data-done", "true")
    expect(live.locator(".status")).to_have_text("Done")
    expect(page.locator("#result-json")).to_contain_text('"outcome": "closed"')
    expect(page.locator("#result-json")).to_contain_text('"note": "Merged into one ticket."')
    assert _fits_the_width(page)
    save_screenshot(page, tmp_path, "answer-task.png")
    outcome = _chat_host(owners.url, "task_status", {"taskId": task_id})["structuredContent"]
    assert outcome["status"] == "completed"
    assert outcome["result"]["structuredContent"]["reason"] == "Duplicate"

    # The link, used, says so.
    page.goto(link)
    expect(page.locator("h1")).to_have_text("Already answered")


def test_the_list_of_ones_tasks_follows_them_live(owners: Served, page: Page, tmp_path: Path) -> None:
    customer = f"acme-{secrets.token_hex(3)}"
    _chat_host(owners.url, "create_ticket", {"title": "Printer on fire", "customer": customer})
    started = _chat_host(owners.url, "bulk_close_tickets", {"customer": customer})
    task_id = started["structuredContent"]["taskId"]
    [link] = started["structuredContent"]["_meta"]["longtools.dev/answer-links"].values()

    page.goto(owners.base + "/tasks")
    page.fill("#token", OWNER_TOKENS["ann"])
    page.keyboard.press("Enter")
    row = page.locator(f'[data-task="{task_id}"]')
    expect(row.locator(".status")).to_have_text("Waiting for an answer")
    expect(row.locator(".questions a.button")).to_have_text("Answer")
    assert row.locator(".questions a.button").get_attribute("href") == link.removeprefix(owners.base)
    assert _fits_the_width(page)
    save_screenshot(page, tmp_path, "tasks.png")

    # Answered elsewhere (another tab, another device): the list shows it without a reload.
    with PageClient(owners.base) as elsewhere:
        elsewhere.sign_in(OWNER_TOKENS["ann"])
        elsewhere.answer(link, {"confirm": True})
    expect(page.locator(f'[data-task="{task_id}"] .status')).to_have_text("Done")


def test_a_secret_is_typed_into_a_password_field_and_never_shown_again(
    owners: Served, page: Page, tmp_path: Path
) -> None:
    started = _chat_host(owners.url, "connect_mailbox", {"address": "support@example.com"})
    task_id = started["structuredContent"]["taskId"]
    [link] = started["structuredContent"]["_meta"]["longtools.dev/answer-links"].values()
    page.goto(link)
    page.fill("#token", OWNER_TOKENS["ann"])
    page.keyboard.press("Enter")
    expect(page.locator("#question")).to_have_text("The app password of support@example.com")
    expect(page.locator(".note.secret")).to_contain_text("This is a secret")
    expect(page.locator("#f-password")).to_have_attribute("type", "password")
    page.fill("#f-password", "short")
    page.click("button[value=accept]")
    expect(page.locator('[data-field="password"] .error')).to_have_text("Use at least 8 characters.")
    expect(page.locator("#f-password")).to_have_value("")  # what was typed is not sent back
    secret = f"pw-{secrets.token_hex(8)}"
    page.fill("#f-password", secret)
    save_screenshot(page, tmp_path, "answer-secret.png")
    page.click("button[value=accept]")
    expect(page.locator("#live")).to_have_attribute("data-done", "true")
    expect(page.locator("#result-json")).to_contain_text('"outcome": "connected"')
    assert secret not in page.content()
    done = _chat_host(owners.url, "task_status", {"taskId": task_id})
    assert secret not in str(done)
