"""``ask_form(step_up="recent")`` on the answer page, over plain HTTP against a real ``serve`` and a
real OpenID Connect provider (tests/oidc_provider.py): an approval counts only from a sign-in within
``LONGTOOLS_STEP_UP_MAX_AGE_S``. An older one is sent to sign in again (OIDC: with ``max_age``, and
an issuer that ignores it signs nobody in; a token: asked again), comes back to the question, and
its vote counts, with when they signed in in its ledger entry. A rejection needs no step-up. Ours
(issue 34, item 3).

alice asks (static token); frank approves, signed in with OpenID Connect; bob, with his static token.
"""

from __future__ import annotations

import html
import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from longtools._sealing import Sealer
from longtools._settings import Settings
from tests.conftest import STATE_KEY, Served, oidc_server
from tests.oidc_provider import OidcProvider
from tests.pages import Page, PageClient
from tests.wire import TASKS_EXTENSION, eventually, post, result

MAX_AGE_S = 3
"""``LONGTOOLS_STEP_UP_MAX_AGE_S``: short, for the tests to wait past it; long enough to vote in."""
TOKENS = {name: secrets.token_urlsafe(24) for name in ("alice", "bob")}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
DECISIONS = "longtools.dev/decisions"
NEEDS_RECENT = "This approval needs a recent sign-in"


@dataclass
class Site:
    served: Served
    provider: OidcProvider

    @property
    def base(self) -> str:
        return self.served.base


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with OidcProvider() as provider:
        env = {
            "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in TOKENS.items()),
            "LONGTOOLS_STEP_UP_MAX_AGE_S": str(MAX_AGE_S),
        }
        tmp = tmp_path_factory.mktemp("step-up-recent")
        with oidc_server(tmp, provider, "--tools", "tests.decision_tools", env=env) as served:
            yield Site(served, provider)


@pytest.fixture
def person(site: Site) -> Iterator[PageClient]:
    """A browser of its own, and the provider as it should be (remembering sign-ins, as real ones do)."""
    site.provider.reset()
    site.provider.remember_sign_ins = True
    with PageClient(site.base) as browser:
        yield browser


def _alice(method: str, params: dict[str, Any], site: Site) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {TOKENS['alice']}"}
    got: dict[str, Any] = result(post(site.served.url, method, params, caps=TASK_CAPS, headers=headers))
    return got


def _asked(site: Site, approver: str) -> tuple[str, str]:
    """alice's new ``decide`` task, whose approval ``approver`` gives and needs a recent sign-in: its
    id and the path of its answer link."""
    arguments = {"principals": [approver], "step_up": "recent"}
    task_id = str(_alice("tools/call", {"name": "decide", "arguments": arguments}, site)["taskId"])
    task = eventually(
        lambda: _alice("tasks/get", {"taskId": task_id}, site),
        lambda now: bool(now.get("_meta", {}).get(DECISIONS)),
    )
    [decision] = task["_meta"][DECISIONS].values()
    return task_id, urlsplit(decision["link"]).path


def _votes(site: Site, task_id: str) -> list[Any]:
    """The votes counted so far on the task's open decision."""
    [decision] = _alice("tasks/get", {"taskId": task_id}, site)["_meta"][DECISIONS].values()
    votes: list[Any] = decision["votes"]
    return votes


def _ended(site: Site, task_id: str) -> dict[str, Any]:
    return eventually(
        lambda: _alice("tasks/get", {"taskId": task_id}, site),
        lambda now: now["status"] in ("completed", "failed", "cancelled"),
    )


def _vote_entry(site: Site, task_id: str) -> dict[str, Any]:
    """The data of the one vote entry of the task's ledger (exported as alice, its owner), counted."""
    ledger = httpx.get(
        f"{site.base}/tasks/{task_id}/ledger", headers={"authorization": f"Bearer {TOKENS['alice']}"}
    )
    assert ledger.status_code == 200, ledger.text
    [vote] = [entry for entry in map(json.loads, ledger.text.splitlines()) if entry["kind"] == "vote"]
    data: dict[str, Any] = vote["data"]
    assert data["counted"] is True, data
    return data


def _oidc_sign_in(site: Site, person: PageClient, who: str) -> float:
    """Sign ``person`` in as ``who`` at the provider; the time by which they were signed in."""
    site.provider.auto_user = who
    response = person.http.get("/signin/oidc?next=/decisions")
    while response.is_redirect:  # to the provider, back to the callback, to /decisions
        response = person.http.get(response.headers["location"])
    assert response.status_code == 200 and urlsplit(str(response.url)).path == "/decisions", response.text
    return time.time()


def _past_max_age(signed_in_by: float) -> None:
    """Wait (bounded: the max age, and a little) until a sign-in made by ``signed_in_by`` is older
    than the max age: the passage of time is the condition here."""
    deadline = signed_in_by + MAX_AGE_S + 0.2
    while (left := deadline - time.time()) > 0:
        time.sleep(min(left, 0.1))


def _approve(person: PageClient, link: str, opened: Page, action: str = "accept") -> httpx.Response:
    """Send the question's form (``opened``) with ``action``, its response unfollowed."""
    data = [*opened.forms().hidden.items(), ("note", "fine"), ("action", action)]
    headers = {"content-type": "application/x-www-form-urlencoded"}
    return person.http.post(link, content=urlencode(data), headers=headers)


def _stale(person: PageClient, link: str) -> Page:
    """The question's page, for a sign-in too old to approve with: it says so before anything is sent."""
    opened = person.get(link)
    assert opened.status == 200, opened.text
    assert NEEDS_RECENT in opened.text and "Sign in again to approve" in opened.text, opened.text
    return opened


def _sent_to_sign_in(site: Site, person: PageClient, link: str, task_id: str) -> Page:
    """Approve with a sign-in too old: nothing is delivered, and the person is sent to sign in
    again, for this question; the sign-in page, which says why."""
    refused = _approve(person, link, _stale(person, link))
    assert refused.status_code == 303, refused.text
    location = refused.headers["location"]
    assert urlsplit(location).path == "/signin", location
    assert parse_qs(urlsplit(location).query) == {"next": [link], "recent": ["1"]}, location
    assert _votes(site, task_id) == []
    signin = person.get(location)
    assert signin.status == 200 and NEEDS_RECENT in signin.text, signin.text
    return signin


def _oidc_again(person: PageClient, signin: Page) -> httpx.Response:
    """Follow the sign-in page's OIDC link; the authorization request it sends the browser with."""
    found = re.search(r'href="(/signin/oidc\?[^"]+)"', signin.text)
    assert found is not None, signin.text
    begun = person.http.get(html.unescape(found.group(1)))
    assert begun.status_code == 303, begun.text
    return begun


def _follow(person: PageClient, response: httpx.Response) -> httpx.Response:
    """Follow redirects across the provider and this server (a browser's way through a sign-in)."""
    while response.is_redirect:
        response = person.http.get(response.headers["location"])
    return response


def test_an_oidc_sign_in_older_than_max_age_is_sent_to_sign_in_again_then_the_vote_counts(
    site: Site, person: PageClient
) -> None:
    task_id, link = _asked(site, "frank")
    first = _oidc_sign_in(site, person, "frank")
    _past_max_age(first)

    signin = _sent_to_sign_in(site, person, link, task_id)
    begun = _oidc_again(person, signin)
    authorize = urlsplit(begun.headers["location"])
    assert f"{authorize.scheme}://{authorize.netloc}" == site.provider.issuer
    assert parse_qs(authorize.query)["max_age"] == [str(MAX_AGE_S)]

    # The provider's own sign-in is as old: it signs frank in again (auto_user), and back to the question.
    back = _follow(person, begun)
    assert back.status_code == 200 and back.url.path == link, back.text
    assert NEEDS_RECENT not in back.text and "An approval of this needs a recent sign-in" in back.text
    voted = Page(_follow(person, _approve(person, link, Page(back))))
    assert voted.status == 200 and voted.heading == "Your vote is in", voted.text

    done = _ended(site, task_id)
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"]["votes"] == ["frank"]
    signed_in_at = datetime.fromisoformat(_vote_entry(site, task_id)["signedInAt"]).timestamp()
    # The new sign-in's, at the provider (its auth_time, in whole seconds).
    assert first + MAX_AGE_S < signed_in_at + 1 and signed_in_at <= time.time()


def test_an_issuer_that_ignores_max_age_or_leaves_auth_time_out_signs_nobody_in_for_an_approval(
    site: Site, person: PageClient
) -> None:
    task_id, link = _asked(site, "frank")
    first = _oidc_sign_in(site, person, "frank")
    _past_max_age(first)

    site.provider.honour_max_age = False  # answers from its own sign-in, however old
    begun = _oidc_again(person, _sent_to_sign_in(site, person, link, task_id))
    refused = _follow(person, begun)
    assert refused.status_code == 400 and "did not confirm a recent sign-in" in refused.text, refused.text

    site.provider.honour_max_age = True
    site.provider.id_token_claims = {"auth_time": None}  # signs frank in again, and does not say when
    begun = _oidc_again(person, _sent_to_sign_in(site, person, link, task_id))
    refused = _follow(person, begun)
    assert refused.status_code == 400 and "did not confirm a recent sign-in" in refused.text, refused.text

    _stale(person, link)  # still the sign-in that was too old
    assert _votes(site, task_id) == []
    _alice("tasks/cancel", {"taskId": task_id}, site)


def test_a_fresh_sign_in_votes_at_once(site: Site, person: PageClient) -> None:
    """A sign-in whose ID token has no ``auth_time`` counts from the sign-in itself."""
    task_id, link = _asked(site, "frank")
    site.provider.id_token_claims = {"auth_time": None}
    _oidc_sign_in(site, person, "frank")
    opened = person.get(link)
    assert opened.status == 200 and NEEDS_RECENT not in opened.text, opened.text
    voted = Page(_follow(person, _approve(person, link, opened)))
    assert voted.status == 200 and voted.heading == "Your vote is in", voted.text
    assert _ended(site, task_id)["status"] == "completed"
    assert "signedInAt" in _vote_entry(site, task_id)


def test_a_token_sign_in_older_than_max_age_is_asked_for_the_token_again(
    site: Site, person: PageClient
) -> None:
    task_id, link = _asked(site, "bob")
    person.sign_in(TOKENS["bob"])
    first = time.time()
    _past_max_age(first)

    signin = _sent_to_sign_in(site, person, link, task_id)
    form = signin.forms().hidden
    assert form["next"] == link and form["recent"] == "1", form
    back = person.http.post("/signin", data={**form, "token": TOKENS["bob"]})
    assert back.status_code == 303 and back.headers["location"] == link, back.text
    opened = person.get(link)
    assert NEEDS_RECENT not in opened.text, opened.text
    voted = Page(_follow(person, _approve(person, link, opened)))
    assert voted.status == 200 and voted.heading == "Your vote is in", voted.text

    assert _ended(site, task_id)["status"] == "completed"
    signed_in_at = datetime.fromisoformat(_vote_entry(site, task_id)["signedInAt"]).timestamp()
    assert first + MAX_AGE_S < signed_in_at <= time.time()


def test_a_rejection_needs_no_recent_sign_in(site: Site, person: PageClient) -> None:
    task_id, link = _asked(site, "bob")
    person.sign_in(TOKENS["bob"])
    _past_max_age(time.time())
    rejected = Page(_follow(person, _approve(person, link, _stale(person, link), action="decline")))
    assert rejected.status == 200 and rejected.heading == "Your vote is in", rejected.text
    done = _ended(site, task_id)
    assert done["result"]["structuredContent"]["outcome"] == "rejected", done
    assert _vote_entry(site, task_id)["decision"] == "reject"


def test_a_session_made_before_sessions_kept_their_sign_in_opens_and_is_sent_to_sign_in_again(
    site: Site, person: PageClient
) -> None:
    """A cookie sealed without the sign-in's time (as before they kept it) still signs its person
    in; only an approval that needs a recent sign-in sends them to sign in again."""
    task_id, link = _asked(site, "bob")
    person.sign_in(TOKENS["bob"])
    name = f"longtools-session-{urlsplit(site.base).port}"
    sealer = Sealer(Settings(state_keys=STATE_KEY).require_state_keys(), "longtools page sessions")
    value = sealer.open(person.http.cookies[name], name)
    assert "i" in value
    del value["i"]
    person.http.cookies.set(name, sealer.seal(value, name), domain=urlsplit(site.base).hostname or "")
    assert person.get("/decisions").status == 200
    _sent_to_sign_in(site, person, link, task_id)
    _alice("tasks/cancel", {"taskId": task_id}, site)


def test_adding_a_passkey_takes_a_recent_sign_in(site: Site, person: PageClient) -> None:
    """Ours (issue 34): a session cookie alone, left open or stolen, adds no passkey of its
    holder's; the page asks its person to sign in again first, and the form's POST is refused."""
    person.sign_in(TOKENS["bob"])
    fresh = person.get("/passkeys")
    assert fresh.status == 200 and 'id="register"' in fresh.text and "recent-note" not in fresh.text
    csrf = fresh.forms().hidden["csrf"]
    _past_max_age(time.time())
    stale = person.get("/passkeys?next=/answer/x")
    assert 'id="register"' not in stale.text and "Adding a passkey needs a recent sign-in" in stale.text
    posted = person.http.post("/passkeys", data={"csrf": csrf, "name": "mine", "credential": "{}"})
    assert posted.status_code == 303
    assert posted.headers["location"] == "/signin?" + urlencode({"next": "/passkeys", "recent": "1"})
