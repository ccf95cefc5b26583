"""A person's address from where they signed in (issue 33): a real ``serve`` with JWTs and OIDC sign-in
from a real provider (tests/oidc_provider.py) and a real SMTP server (tests/receivers.py), and no
``LONGTOOLS_NOTIFY_PEOPLE`` at all. Whoever signed in to the pages with a verified ``email`` claim is
mailed there, as a requester (by principal) and as an approver (by the name a rule gives); an email
the issuer did not verify is never used.

The sign-in is the browser's redirects, followed by an HTTP client (the provider signs in its
``auto_user`` without a form): what the pages do with it is the same as for a browser.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import Served, oidc_server
from tests.oidc_provider import OidcProvider
from tests.receivers import Mail, Mailbox, wait_for
from tests.wire import TASKS_EXTENSION, post, result

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}


@dataclass
class Site:
    served: Served
    provider: OidcProvider
    mailbox: Mailbox
    resource: str

    def sign_in(self, user: str, claims: dict[str, Any]) -> None:
        """``user`` signs in to the pages at the provider, whose ID token carries ``claims``."""
        self.provider.reset()
        self.provider.auto_user = user
        self.provider.id_token_claims = claims
        with httpx.Client(follow_redirects=True, timeout=15) as browser:
            landed = browser.get(f"{self.served.base}/signin/oidc?next=/tasks")
        assert landed.status_code == 200 and landed.url.path == "/tasks", (landed.status_code, landed.url)
        assert "Signed in as" in landed.text

    def call(self, who: str, tool: str, arguments: dict[str, Any]) -> str:
        """``who`` starts ``tool`` over MCP with their bearer token; the task's id."""
        token = self.provider.mint_access_token(who, self.resource)
        started = result(
            post(
                self.served.url,
                "tools/call",
                {"name": tool, "arguments": arguments},
                caps=TASK_CAPS,
                headers={"authorization": f"Bearer {token}"},
            )
        )
        assert started["resultType"] == "task", started
        return str(started["taskId"])

    def mails(self, address: str, task_id: str) -> Callable[[], list[Mail]]:
        return lambda: [mail for mail in self.mailbox.to(address) if task_id in mail.body]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with OidcProvider() as provider, Mailbox() as mailbox:
        env = {"LONGTOOLS_OIDC_SCOPES": "openid email", "LONGTOOLS_NOTIFY_EMAIL": mailbox.url}
        tools = ("--tools", "tests.decision_tools", "--tools", "tests.person_tools")
        with oidc_server(tmp_path_factory.mktemp("notify-oidc"), provider, *tools, env=env) as served:
            yield Site(served=served, provider=provider, mailbox=mailbox, resource=f"{served.base}/mcp")


def _person(name: str) -> tuple[str, str]:
    """A name no other test uses, and an address of theirs."""
    user = f"{name}-{secrets.token_hex(4)}"
    return user, f"{user}@example.test"


def test_a_person_is_mailed_at_the_verified_email_they_signed_in_with(site: Site) -> None:
    erin, erins = _person("erin")
    frank, franks = _person("frank")
    site.sign_in(erin, {"email": erins, "email_verified": True})
    site.sign_in(frank, {"email": franks, "email_verified": True})
    # Her own question: she is found by her principal, the task's requester.
    kept = site.call(erin, "keep_a_secret", {})
    [asked] = wait_for(site.mails(erins, kept), within=10)
    assert "needs your answer" in asked.subject and asked.to == [erins]
    # frank's decision: he is found by the name the rule gives him (his subject).
    decided = site.call(erin, "decide", {"principals": [frank]})
    [to_frank] = wait_for(site.mails(franks, decided), within=10)
    assert "waits for your decision" in to_frank.subject and to_frank.to == [franks]
    assert f"{site.served.base}/answer/" in to_frank.body
    assert site.mails(erins, decided)() == []  # the requester is not an approver of it


def test_an_email_the_issuer_did_not_verify_is_never_used(site: Site) -> None:
    erin, _ = _person("erin")
    frank, franks = _person("frank")
    gina, ginas = _person("gina")
    hal, hals = _person("hal")
    site.sign_in(frank, {"email": franks, "email_verified": True})
    site.sign_in(gina, {"email": ginas, "email_verified": False})
    site.sign_in(hal, {"email": hals})  # no email_verified at all
    first = site.call(erin, "decide", {"principals": [frank, gina, hal]})
    # One plan made all three deliveries (or would have): frank's mail means it was made.
    wait_for(site.mails(franks, first), within=10)
    # gina's issuer verifies her email now: her next sign-in records it, and the next decision
    # reaches her; the first, planned while she had none, never did.
    site.sign_in(gina, {"email": ginas, "email_verified": True})
    second = site.call(erin, "decide", {"principals": [gina]})
    wait_for(site.mails(ginas, second), within=10)
    assert site.mails(ginas, first)() == []
    assert site.mailbox.to(hals) == []
