"""Approval with a passkey (issue 34), in a real headless Chromium with a virtual authenticator (the
DevTools protocol's ``WebAuthn`` domain, through Playwright's CDP session; nothing downloaded)
against a real ``longtools serve``: bob registers a passkey and approves a ``step_up="passkey"``
question with it, and the task completes; an approval without the assertion, with carol's
authenticator, with an assertion made for another task's proposal, or with one replayed after a
newer one, is refused and nothing is delivered. The ledger keeps the assertion, and its check holds
against the registered key; with the digest changed it does not.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, CDPSession, Page, expect
from typer.testing import CliRunner

from longtools.cli import cli
from longtools.decisions import LedgerKeys, chain, passkey_problem, verify_entries
from tests.browser import PHONE, save_screenshot
from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, eventually, post, result

PEOPLE = {name: secrets.token_urlsafe(24) for name in ("alice", "bob", "carol")}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
DECISIONS = "longtools.dev/decisions"
TIMEOUT_MS = 15_000
ASSERT = """async ({challenge, rpId, allow}) => {
  const b = (t) => Uint8Array.from(
    atob(t.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((t.length + 3) % 4)), (c) => c.charCodeAt(0),
  ).buffer;
  const s = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf)))
    .replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
  const got = await navigator.credentials.get({publicKey: {challenge: b(challenge), rpId,
    allowCredentials: allow.map((id) => ({type: 'public-key', id: b(id)})), userVerification: 'required'}});
  const r = got.response;
  return JSON.stringify({id: got.id, rawId: s(got.rawId), type: got.type, clientExtensionResults: {},
    response: {clientDataJSON: s(r.clientDataJSON), authenticatorData: s(r.authenticatorData),
      signature: s(r.signature), userHandle: r.userHandle ? s(r.userHandle) : null}});
}"""
"""An assertion made in the page by its authenticator, for any challenge: what an attacker with the
device could send."""
SEND = """(assertion) => {
  const form = document.querySelector('form[data-passkey-challenge]');
  form.elements.namedItem('passkey').value = assertion;
  const action = document.createElement('input');
  Object.assign(action, {type: 'hidden', name: 'action', value: 'accept'});
  form.append(action);
  HTMLFormElement.prototype.submit.call(form);
}"""
"""Send the approval with ``assertion`` as its passkey, as a hand-made POST would: past passkey.js."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items())}
    server = start_server(tmp_path_factory.mktemp("passkeys"), "--tools", "tests.decision_tools", env=env)
    try:
        yield server
    finally:
        server.stop()


class Person:
    """Someone in a browser of their own, signed in, with a virtual authenticator (user verified)."""

    def __init__(self, browser: Browser, contexts: list[BrowserContext], served: Served, who: str) -> None:
        # WebAuthn takes a domain as its relying party, never an address: the pages at `localhost`.
        self.base = served.base.replace("127.0.0.1", "localhost")
        context = browser.new_context(viewport=PHONE)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        self.page = context.new_page()
        self.cdp: CDPSession = context.new_cdp_session(self.page)
        self.cdp.send("WebAuthn.enable")
        options = {
            "protocol": "ctap2",
            "transport": "internal",
            "hasResidentKey": True,
            "hasUserVerification": True,
            "isUserVerified": True,
            "automaticPresenceSimulation": True,
        }
        self.authenticator = self.cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})[
            "authenticatorId"
        ]
        self.page.goto(self.base + "/tasks")
        self.page.fill("#token", PEOPLE[who])
        self.page.keyboard.press("Enter")
        expect(self.page.locator("#who")).to_have_text(who)

    def open(self, link: str) -> Page:
        self.page.goto(link.replace("127.0.0.1", "localhost"))
        return self.page

    def register(self, name: str) -> None:
        self.page.goto(self.base + "/passkeys")
        self.page.fill("#passkey-name", name)
        self.page.click("#add-passkey")
        expect(self.page.locator("#passkeys")).to_contain_text(name)

    def credentials(self) -> list[dict[str, Any]]:
        found = self.cdp.send("WebAuthn.getCredentials", {"authenticatorId": self.authenticator})
        return list(found["credentials"])

    def assertion(self, challenge: str, allow: list[str]) -> str:
        """A real assertion of this person's authenticator over ``challenge``, by ``allow``'s keys."""
        made = self.page.evaluate(ASSERT, {"challenge": challenge, "rpId": "localhost", "allow": allow})
        return str(made)

    def question(self) -> dict[str, str]:
        """The open approval form's challenge and allowed keys, as the server made them."""
        form = self.page.locator("form[data-passkey-challenge]")
        allow = form.get_attribute("data-passkey-allow") or ""
        return {"challenge": form.get_attribute("data-passkey-challenge") or "", "allow": allow}


def _start(served: Served) -> tuple[str, str]:
    """alice's task whose one question bob must approve with a passkey: (task id, approvers' link)."""
    params = {"name": "decide", "arguments": {"principals": ["bob"], "step_up": "passkey"}}
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    task_id = str(result(post(served.url, "tools/call", params, caps=TASK_CAPS, headers=headers))["taskId"])
    task = eventually(lambda: _task(served, task_id), lambda now: bool(now.get("_meta", {}).get(DECISIONS)))
    [decision] = task["_meta"][DECISIONS].values()
    return task_id, str(decision["link"])


def _task(served: Served, task_id: str) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    return result(post(served.url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=headers))


def _ledger(served: Served, task_id: str) -> list[str]:
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    return [
        line
        for line in httpx.get(f"{served.base}/tasks/{task_id}/ledger", headers=headers).text.splitlines()
        if line
    ]


def _url_b64(standard: str) -> str:
    return base64.urlsafe_b64encode(base64.b64decode(standard)).decode().rstrip("=")


def _audit(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["audit", *args])
    return done.exit_code, done.output


def _rechained(entries: list[dict[str, Any]], seq: int, changed: dict[str, Any]) -> list[str]:
    """The ledger with entry ``seq``'s data ``changed``, chained and signed again (by a new key)."""
    made, head = [], ""
    for entry in entries:
        data = {**entry["data"], **changed} if entry["seq"] == seq else entry["data"]
        again = chain(entry["task"], entry["seq"], entry["at"], entry["kind"], data, head)
        head = again["hash"]
        made.append(again)
    return [json.dumps(entry) for entry in LedgerKeys([secrets.token_bytes(32)]).sign(made)]


def _refused(page: Page, why: str) -> None:
    expect(page.locator("#form-error")).to_contain_text(why)


def test_a_person_registers_a_passkey_and_approves_with_it_and_the_ledger_keeps_the_proof(
    served: Served, browser: Browser, contexts: list[BrowserContext], tmp_path: Path
) -> None:
    task_id, link = _start(served)
    bob = Person(browser, contexts, served, "bob")
    page = bob.open(link)
    # No passkey yet: the page says how to add one, and approving waits for it.
    expect(page.locator("#passkey-note")).to_contain_text("you have none yet")
    expect(page.get_by_role("button", name="Approve with your passkey")).to_be_disabled()
    page.click("#register-passkey")
    page.fill("#passkey-name", "bob's laptop")
    page.click("#add-passkey")
    # Back at the question, which now asks for the passkey.
    expect(page.locator("#passkey-note")).to_contain_text("confirm it with your passkey")
    save_screenshot(page, tmp_path, "passkey-approve.png")
    page.get_by_role("button", name="Approve with your passkey").click()
    expect(page.locator("h1")).to_have_text("Your vote is in")
    done = eventually(lambda: _task(served, task_id), lambda now: now["status"] != "working")
    assert done["status"] == "completed"
    lines = _ledger(served, task_id)
    held = verify_entries(lines)
    assert held.problem is None and held.ended, held
    [vote] = [json.loads(line) for line in lines if json.loads(line)["kind"] == "vote"]
    assert vote["data"]["counted"] is True
    [registered] = bob.credentials()
    assert vote["data"]["passkey"]["credential"] == _url_b64(registered["credentialId"])
    assert passkey_problem(vote, task_id) is None
    assert passkey_problem(vote, "another-task") is not None
    # `longtools audit verify` holds the exported ledger, passkey included.
    saved = tmp_path / "ledger.jsonl"
    saved.write_text("\n".join(lines) + "\n")
    code, said = _audit("verify", str(saved))
    assert code == 0 and "pin each approver's with --passkey" in said, said
    # Pinned to bob's registered key, as his /passkeys page shows it: it holds; to another, it does not.
    shown = page.goto(bob.base + "/passkeys")
    assert shown is not None
    public = page.locator("code.public-key").first.text_content() or ""
    assert public == vote["data"]["passkey"]["publicKey"]
    code, said = _audit("verify", str(saved), "--passkey", public)
    assert code == 0 and "--passkey" not in said, said
    code, said = _audit("verify", str(saved), "--passkey", "cHVibGlj")
    assert code == 1 and "its key is not one of the pinned passkeys" in said, said
    # A server that rewrote its own ledger (the vote on another digest, chained and signed again
    # with a key of its own): the chain holds, the passkey's signature does not.
    forged = _rechained([json.loads(line) for line in lines], vote["seq"], {"proposal": "0" * 64})
    saved.write_text("\n".join(forged) + "\n")
    code, said = _audit("verify", str(saved))
    assert code != 0 and "passkey approval does not hold: the passkey signed another proposal" in said, said


def test_an_approval_without_the_passkey_or_with_anothers_or_for_another_proposal_is_refused(
    served: Served, browser: Browser, contexts: list[BrowserContext]
) -> None:
    bob = Person(browser, contexts, served, "bob")
    bob.register("bob's phone")
    carol = Person(browser, contexts, served, "carol")
    carol.register("carol's laptop")
    task_id, link = _start(served)
    other_id, other_link = _start(served)
    page = bob.open(link)
    # Without the assertion (a script that skips the passkey, or a hand-made POST).
    page.evaluate(SEND, "")
    _refused(page, "needs your passkey")
    # With carol's authenticator: her real passkey signs bob's vote's challenge in bob's session.
    [hers] = carol.credentials()
    bob.cdp.send("WebAuthn.addCredential", {"authenticatorId": bob.authenticator, "credential": hers})
    asked = bob.question()
    page.evaluate(SEND, bob.assertion(asked["challenge"], [_url_b64(hers["credentialId"])]))
    _refused(page, "not one of your passkeys")
    # With bob's own passkey, but signed for the other task's proposal.
    bob.open(other_link)
    for_other = bob.question()
    made = bob.assertion(for_other["challenge"], for_other["allow"].split())
    bob.open(link)
    page.evaluate(SEND, made)
    _refused(page, "did not sign this approval")
    # Nothing was delivered: both tasks still wait for bob, no vote in their ledgers.
    for each in (task_id, other_id):
        assert "0 of 1 approval;" in str(_task(served, each).get("statusMessage"))
        assert not [line for line in _ledger(served, each) if '"kind":"vote"' in line.replace(" ", "")]


def test_a_replayed_assertion_is_refused_and_a_removed_passkey_approves_nothing(
    served: Served, browser: Browser, contexts: list[BrowserContext]
) -> None:
    bob = Person(browser, contexts, served, "bob")
    bob.register("bob's key")
    first_id, first_link = _start(served)
    second_id, second_link = _start(served)
    bob.open(first_link)
    asked = bob.question()
    kept = bob.assertion(asked["challenge"], asked["allow"].split())  # made, and kept back
    # A newer assertion is used for the second task: the authenticator's counter moves past it.
    page = bob.open(second_link)
    page.get_by_role("button", name="Approve with your passkey").click()
    expect(page.locator("h1")).to_have_text("Your vote is in")
    page = bob.open(first_link)
    page.evaluate(SEND, kept)
    _refused(page, "did not sign this approval")
    assert "0 of 1 approval;" in str(_task(served, first_id).get("statusMessage"))
    assert eventually(lambda: _task(served, second_id), lambda now: now["status"] != "working")["status"] == (
        "completed"
    )
    # A passkey removed no longer approves.
    page = bob.open(bob.base + "/passkeys")
    page.locator("li", has_text="bob's key").get_by_role("button", name="Remove").click()
    expect(page.locator("#passkeys")).not_to_contain_text("bob's key")
    page = bob.open(first_link)
    page.evaluate(SEND, kept)
    _refused(page, "not one of your passkeys")
