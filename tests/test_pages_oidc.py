"""The pages' OpenID Connect sign-in end to end: a real ``longtools serve`` with JWT authentication
from a real provider (tests/oidc_provider.py), driven by headless Chromium (tests/browser.py).

A person opens the answer link their task made, is sent to the sign-in page, signs in at the
provider and comes back to the question; a sign-in the provider gets wrong makes no session; a
session ends with its TTL; a link opens for its own person only; and the sign-in never sends the
browser to another site.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import Browser, Page, Request

from tests.browser import chromium, save_screenshot
from tests.conftest import Served, oidc_server
from tests.oidc_provider import OidcProvider
from tests.wire import TASKS_EXTENSION, eventually, post, result

SESSION_TTL_S = 10.0
TASK_CAPS: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}, "url": {}}}
"""A tasks client that sends its person to pages: a task that waits for the person reads
``input_required`` to it, the question a URL request for its link."""
ANSWER_LINKS = "longtools.dev/answer-links"
TIMEOUT_MS = 15_000
"""Bound of every Playwright wait (navigations, selectors)."""


@dataclass
class Site:
    """The module's server, its provider and its browser."""

    served: Served
    provider: OidcProvider
    browser: Browser
    resource: str
    """``LONGTOOLS_RESOURCE_URL``: the audience of the MCP access tokens."""

    @property
    def base(self) -> str:
        return self.served.base

    def bearer(self, who: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.provider.mint_access_token(who, self.resource)}"}

    def call(self, who: str, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None) -> Any:
        return result(post(self.served.url, method, params, caps=caps, headers=self.bearer(who)))

    def task(self, who: str, task_id: str) -> dict[str, Any]:
        got: dict[str, Any] = self.call(who, "tasks/get", {"taskId": task_id}, TASK_CAPS)
        return got


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with OidcProvider() as provider:
        env = {
            "LONGTOOLS_PAGE_SESSION_TTL_S": str(SESSION_TTL_S),
            "LONGTOOLS_HELPDESK_WORK_S": "0.3",
        }
        with (
            oidc_server(tmp_path_factory.mktemp("pages-oidc"), provider, env=env) as served,
            chromium() as browser,
        ):
            yield Site(served=served, provider=provider, browser=browser, resource=f"{served.base}/mcp")


@pytest.fixture
def page(site: Site) -> Iterator[Page]:
    """A page of a browser context of its own (no cookies of another test), with the provider's
    knobs as they should be."""
    site.provider.reset()
    context = site.browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def _waiting_task(site: Site, who: str, tickets: int = 2) -> tuple[str, str, str]:
    """Start ``bulk_close_tickets`` for a new customer with ``tickets`` open tickets, as ``who`` over
    MCP; its task id, question, and the answer link of that question once it asks."""
    customer = f"c-{secrets.token_hex(4)}"
    for number in range(tickets):
        arguments = {"title": f"Ticket {number}", "customer": customer}
        made = site.call(who, "tools/call", {"name": "create_ticket", "arguments": arguments})
        assert made["isError"] is False, made
    started = site.call(
        who, "tools/call", {"name": "bulk_close_tickets", "arguments": {"customer": customer}}, TASK_CAPS
    )
    assert started["resultType"] == "task", started
    task_id = str(started["taskId"])
    asking = eventually(lambda: site.task(who, task_id), lambda task: task["status"] == "input_required", 20)
    [(_key, link)] = asking["_meta"][ANSWER_LINKS].items()
    assert isinstance(link, str) and link.startswith(site.base + "/answer/"), link
    return task_id, f"Close {tickets} tickets for {customer}?", link


@dataclass(frozen=True)
class Waiting:
    task_id: str
    link: str


@pytest.fixture(scope="module")
def alices(site: Site) -> Iterator[Waiting]:
    """A task of alice's that waits for her answer, and its answer link (nobody answers it here)."""
    task_id, _question, link = _waiting_task(site, "alice")
    yield Waiting(task_id, link)
    site.call("alice", "tasks/cancel", {"taskId": task_id}, TASK_CAPS)


def _path(page: Page) -> str:
    return urlsplit(page.url).path


def _sign_in_at_provider(page: Page, site: Site, username: str) -> None:
    """On the provider's page (reached from the sign-in page's link): sign in as ``username``."""
    page.wait_for_url(f"{site.provider.issuer}/authorize?*")
    page.locator("#username").fill(username)
    page.get_by_role("button", name="Sign in").click()


def _sign_in(page: Page, site: Site, username: str, start: str = "/signin?next=/tasks") -> None:
    """Sign in as ``username`` from ``start`` (a page that leads to the sign-in page), through the
    provider's form, and wait until the browser is back on the server."""
    page.goto(site.base + start)
    assert _path(page) == "/signin", page.url
    page.get_by_role("link", name="Sign in with").click()
    _sign_in_at_provider(page, site, username)
    page.wait_for_url(f"{site.base}/**")


def _next_of(href: str | None) -> str:
    """Where the sign-in link ``href`` (``/signin/oidc?next=...``) leads back to."""
    assert href is not None and href.startswith("/signin/oidc?"), href
    [back] = parse_qs(urlsplit(href).query)["next"]
    return back


def test_a_person_signs_in_with_the_provider_and_answers_their_question(
    site: Site, page: Page, tmp_path: Path
) -> None:
    task_id, question, link = _waiting_task(site, "alice")

    # The link leads to the sign-in page first, which offers the provider.
    page.goto(link)
    assert _path(page) == "/signin", page.url
    assert page.locator("h1").inner_text().startswith("Sign in to")
    provider_host = urlsplit(site.provider.issuer).netloc
    offer = page.get_by_role("link", name=f"Sign in with {provider_host}")
    assert _next_of(offer.get_attribute("href")) == urlsplit(link).path
    assert page.locator("#who").count() == 0  # nobody is signed in yet
    save_screenshot(page, tmp_path, "oidc-signin.png")

    offer.click()
    page.wait_for_url(f"{site.provider.issuer}/authorize?*")
    save_screenshot(page, tmp_path, "oidc-provider.png")
    _sign_in_at_provider(page, site, "alice")

    # Back on the question the link made, signed in as alice.
    page.wait_for_url(link)
    assert page.locator("#question").inner_text() == question
    assert page.locator("header").get_by_text("Signed in as").is_visible()
    assert page.locator("#who").inner_text() == "Alice"  # the ID token's name
    save_screenshot(page, tmp_path, "oidc-answer.png")

    page.locator("#f-confirm").check()
    page.get_by_label("Duplicate").check()
    page.locator("#f-note").fill("Merged into one ticket.")
    page.get_by_role("button", name="Send answer").click()

    # The task's page follows it to its end.
    page.wait_for_url(f"{site.base}/tasks/{task_id}?*")
    page.locator("#live[data-done=true]").wait_for(state="attached")
    assert "Done" in page.locator("#live .status").inner_text()
    assert page.locator("#who").inner_text() == "Alice"
    done = site.task("alice", task_id)
    assert done["status"] == "completed", done
    for name in ("oidc-signin.png", "oidc-provider.png", "oidc-answer.png"):
        assert (tmp_path / name).stat().st_size > 0, name


def test_an_id_token_for_another_audience_signs_nobody_in(site: Site, page: Page) -> None:
    site.provider.id_token_audience = "someone-else"
    try:
        with page.expect_response(lambda response: urlsplit(response.url).path == "/signin/callback") as back:
            _sign_in(page, site, "alice")
        assert back.value.status == 400
        assert _path(page) == "/signin/callback", page.url
        assert page.locator("h1").inner_text() == "Sign-in failed"
        assert page.locator("#who").count() == 0
        names = [cookie["name"] for cookie in page.context.cookies()]
        assert not [name for name in names if name.startswith("longtools-session")], names
    finally:
        site.provider.id_token_audience = None

    # No session was made: the list of tasks sends the browser to the sign-in page.
    page.goto(site.base + "/tasks")
    assert _path(page) == "/signin", page.url
    assert page.locator("#who").count() == 0


def test_an_expired_sign_in_sends_the_person_to_sign_in_again(
    site: Site, page: Page, alices: Waiting
) -> None:
    alices_link = alices.link
    _sign_in(page, site, "alice", start=urlsplit(alices_link).path)
    assert page.url == alices_link
    assert page.locator("#who").inner_text() == "Alice"

    def reopened() -> str:
        page.goto(alices_link)
        return _path(page)

    # Bounded: the session lasts SESSION_TTL_S from the sign-in.
    eventually(reopened, lambda path: path == "/signin", SESSION_TTL_S + 10)
    assert page.get_by_text("Your sign-in has expired").is_visible()
    assert page.locator("#who").count() == 0
    # Signing in again leads back to the question.
    offer = page.get_by_role("link", name="Sign in with")
    assert _next_of(offer.get_attribute("href")) == urlsplit(alices_link).path


def test_another_persons_link_reads_as_a_made_up_one(site: Site, page: Page, alices: Waiting) -> None:
    alices_link = alices.link
    _sign_in(page, site, "bob")
    assert _path(page) == "/tasks", page.url
    assert page.locator("#who").inner_text() == "Bob"

    opened = page.goto(alices_link)
    assert opened is not None and opened.status == 404
    assert page.locator("h1").inner_text() == "This link is not known"
    foreign = page.locator("main").inner_html()

    # The same link with one character of its sealed token changed.
    token = alices_link.rsplit("/", 1)[1]
    middle = len(token) // 2
    tampered = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    made_up = page.goto(alices_link.rsplit("/", 1)[0] + "/" + tampered)
    assert made_up is not None and made_up.status == 404
    assert page.locator("main").inner_html() == foreign

    # Bob's visit took nothing from alice: her task still waits, with the same link.
    still = site.task("alice", alices.task_id)
    assert still["status"] == "input_required", still
    assert list(still["_meta"][ANSWER_LINKS].values()) == [alices_link]


@pytest.mark.parametrize("next_path", ["https://evil.example/x", "//evil.example/x", "/\\evil.example/x"])
def test_the_sign_in_never_leads_to_another_site(site: Site, page: Page, next_path: str) -> None:
    requested: list[str] = []

    def seen(request: Request) -> None:
        requested.append(request.url)

    page.on("request", seen)
    page.goto(f"{site.base}/signin/oidc?next={quote(next_path, safe='')}")
    _sign_in_at_provider(page, site, "alice")
    page.wait_for_url(f"{site.base}/**")
    page.wait_for_load_state()
    assert urlsplit(page.url).netloc == urlsplit(site.base).netloc, page.url
    assert _path(page) == "/tasks", page.url
    assert page.locator("#who").inner_text() == "Alice"
    assert not [url for url in requested if "evil.example" in urlsplit(url).netloc], requested
