"""The pages of decisions, over plain HTTP against a real ``serve``: ``/decisions`` lists what
waits for each person (as an approver, as the person who asked, or nothing), the answer page shows
the whole proposal and then "Your vote is in", the task's page follows the votes and says how the
decision ended, and groups come from a JWT's or an ID token's claim as well as from
``LONGTOOLS_GROUPS``. Ours (issue 32: the pages).

Four people with static tokens, as in tests/test_decisions.py (alice asks and is a lead, bob and
dave are leads, carol is in ``ops``); erin signs in with a JWT and frank and mallory with OpenID
Connect (tests/oidc_provider.py), whose claim ``roles`` names their groups.
"""

from __future__ import annotations

import html
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
import pytest

from tests.conftest import Served, oidc_server
from tests.oidc_provider import OidcProvider
from tests.pages import Page, PageClient, signed_in_people
from tests.wire import TASKS_EXTENSION, eventually, post, result

PEOPLE = {name: secrets.token_urlsafe(24) for name in ("alice", "bob", "dave", "carol")}
JWT_SECRET = secrets.token_urlsafe(32)
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
DECISIONS = "longtools.dev/decisions"


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
            "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items()),
            "LONGTOOLS_GROUPS": "leads=alice,bob,dave;ops=carol",
            "LONGTOOLS_GROUPS_CLAIM": "roles",
            "LONGTOOLS_JWT_SECRET": JWT_SECRET,
        }
        tmp = tmp_path_factory.mktemp("decisions-pages")
        with oidc_server(tmp, provider, "--tools", "tests.decision_tools", env=env) as served:
            yield Site(served, provider)


@pytest.fixture
def people(site: Site) -> Iterator[Callable[[str], PageClient]]:
    """``people(name)``: that person signed in with their static token, in a browser of their own."""
    with signed_in_people(site.base, PEOPLE) as people:
        yield people


def _as(who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {PEOPLE[who]}"}


def _start(site: Site, arguments: dict[str, Any]) -> str:
    started = result(
        post(
            site.served.url,
            "tools/call",
            {"name": "decide", "arguments": arguments},
            caps=TASK_CAPS,
            headers=_as("alice"),
        )
    )
    return str(started["taskId"])


def _task(site: Site, task_id: str) -> dict[str, Any]:
    """alice's ``tasks/get`` of her task."""
    return result(
        post(site.served.url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=_as("alice"))
    )


def _decision(site: Site, task_id: str, said: str = "") -> dict[str, Any]:
    """The task's open decision as ``tasks/get`` shows alice (with its link), once it says ``said``."""
    task = eventually(
        lambda: _task(site, task_id),
        lambda now: bool(now.get("_meta", {}).get(DECISIONS)) and said in now.get("statusMessage", ""),
    )
    [decision] = task["_meta"][DECISIONS].values()
    return dict(decision)


def _ended(site: Site, task_id: str) -> dict[str, Any]:
    return eventually(
        lambda: _task(site, task_id), lambda now: now["status"] in ("completed", "failed", "cancelled")
    )


def _row(page: Page, task_id: str) -> str:
    """The text of ``task_id``'s row on a ``/decisions`` page ("" when it has none)."""
    found = re.search(rf'<li class="task" data-task="{task_id}".*?</li>', page.text, re.S)
    return _words(found.group(0)) if found else ""


def _words(page: str) -> str:
    """A page's text as a person reads it, on one line."""
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    return text.replace(" ,", ",").replace(" .", ".")


def _path(link: str) -> str:
    return urlsplit(link).path


def test_each_person_sees_what_waits_for_them_reads_the_whole_proposal_and_follows_the_votes(
    site: Site, people: Callable[[str], PageClient]
) -> None:
    secret = f"hunter2-{secrets.token_hex(4)}"
    task_id = _start(
        site,
        {
            "principals": [],
            "groups": ["leads"],
            "quorum": 2,
            "exclude_requester": True,
            "timeout_s": 600,
            "secret_note": secret,
        },
    )
    decision = _decision(site, task_id)
    link = _path(decision["link"])
    alice, bob, dave, carol = (people(who) for who in ("alice", "bob", "dave", "carol"))

    # bob decides it; alice asked and others decide; carol has nothing waiting.
    row = _row(bob.get("/decisions"), task_id)
    assert "Waiting for you" in row and "Go ahead?" in row and "Does one thing" in row, row
    assert "Asked by alice" in row and "decide by" in row and "0 of 2 approvals" in row, row
    assert f'href="{link}"' in bob.get("/decisions").text
    row = _row(alice.get("/decisions"), task_id)
    assert "You asked for this; others decide. Waiting for group leads, not the person who asked." in row
    assert f'href="{link}"' not in alice.get("/decisions").text
    nothing = carol.get("/decisions")
    assert nothing.status == 200 and 'id="nothing"' in nothing.text and task_id not in nothing.text

    # The proposal in full: the tool, each argument (the sensitive one redacted), who decides.
    opened = bob.get(link)
    assert opened.status == 200 and "Approve" in opened.text
    shown = _words(opened.text)
    assert 'Tool decide principals [] groups ["leads"] quorum 2' in shown, shown
    assert "secret_note [redacted] (sensitive: the tool does not show it)" in shown
    assert secret not in opened.text
    assert "Asked by alice" in shown and "Decide by" in shown
    assert decision["fingerprint"] in shown
    assert "2 approvals from group leads, not from the person who asked. One refusal rejects it." in shown
    assert "Votes so far 0 of 2 approvals" in shown

    voted = bob.send(link, opened, {"note": "fine"})
    assert voted.status == 200 and voted.heading == "Your vote is in", voted.text
    assert "1 of 2 approvals: bob," in _words(voted.text) and 'class="answer"' not in voted.text
    # alice's own reads of her task go on as before (the vote's page read it as hers).
    assert _task(site, task_id)["status"] == "working"
    assert "Your vote is in. Waiting for group leads" in _row(bob.get("/decisions"), task_id)

    # alice's task page: each vote, the rule, where she stands, and the link to pass on.
    page = alice.get(f"/tasks/{task_id}")
    text = _words(page.text)
    assert "1 of 2 approvals: bob," in text and "Who decides: 2 approvals from group leads" in text
    assert "You asked for this; others decide." in text
    assert f'href="{link}" id="share-' in page.text

    done = dave.send(link, dave.get(link), {})
    assert done.status == 200 and done.heading == "Your vote is in"
    assert "The decision is made" in _words(done.text)
    assert _ended(site, task_id)["status"] == "completed"
    ended = _words(alice.get(f"/tasks/{task_id}").text)
    assert "Approved by bob and dave" in ended and "Done" in ended, ended
    assert _row(bob.get("/decisions"), task_id) == ""


def test_the_task_page_and_the_list_say_how_a_decision_that_did_not_approve_ended(
    site: Site, people: Callable[[str], PageClient]
) -> None:
    rejected = _start(site, {"principals": ["bob", "dave"], "quorum": 2})
    expired = _start(site, {"timeout_s": 1})
    escalated = _start(site, {"timeout_s": 3, "escalate_after_s": 1, "escalate_to": ["ops"]})
    link = _path(_decision(site, rejected)["link"])
    dave = people("dave")
    dave.send(link, dave.get(link), {}, action="decline")
    for task_id in (rejected, expired, escalated):
        _ended(site, task_id)
    alice = people("alice")
    said = {
        task_id: _words(alice.get(f"/tasks/{task_id}").text) for task_id in (rejected, expired, escalated)
    }
    assert "Rejected by dave: nothing was done" in said[rejected], said[rejected]
    assert "Expired: no decision before the deadline" in said[expired]
    assert "Escalated, then expired: no decision before the deadline" in said[escalated]
    listed = alice.get("/tasks").text
    for task_id, badge in ((rejected, "Rejected"), (expired, "Expired"), (escalated, "Expired")):
        found = re.search(rf'data-task="{task_id}".*?</li>', listed, re.S)
        assert found is not None and f'class="status s-{badge.lower()}">{badge}<' in found.group(0)


def test_a_jwt_claim_and_an_id_token_claim_put_their_person_in_groups(
    site: Site, people: Callable[[str], PageClient]
) -> None:
    """``LONGTOOLS_GROUPS_CLAIM``: erin's pasted JWT and frank's OpenID Connect sign-in name the group
    ``reviewers`` (a list, and a space-separated string), which ``LONGTOOLS_GROUPS`` does not have;
    mallory's names none, and the link reads to her as a made-up one."""
    task_id = _start(site, {"principals": [], "groups": ["reviewers"], "quorum": 2})
    link = _path(_decision(site, task_id)["link"])
    with PageClient(site.base) as erin, PageClient(site.base) as frank, PageClient(site.base) as mallory:
        now = int(time.time())
        claims = {"iss": site.provider.issuer, "sub": "erin", "aud": f"{site.base}/mcp", "exp": now + 300}
        erin.sign_in(jwt.encode({**claims, "roles": ["reviewers"]}, JWT_SECRET, algorithm="HS256"))
        _oidc_sign_in(site, frank, "frank", "reviewers auditors")
        _oidc_sign_in(site, mallory, "mallory", None)
        assert "Waiting for you" in _row(erin.get("/decisions"), task_id)
        assert "Waiting for you" in _row(frank.get("/decisions"), task_id)
        assert _row(mallory.get("/decisions"), task_id) == ""
        made_up = mallory.get(link.rsplit("/", 1)[0] + "/" + secrets.token_urlsafe(40))
        refused = mallory.get(link)
        assert refused.status == 404 and refused.heading == made_up.heading
        erin.send(link, erin.get(link), {})
        frank.send(link, frank.get(link), {})
    done = _ended(site, task_id)
    assert sorted(done["result"]["structuredContent"]["votes"]) == ["erin", "frank"]


def test_the_list_of_decisions_answers_its_live_request_once_a_vote_changes_it(
    site: Site, people: Callable[[str], PageClient]
) -> None:
    task_id = _start(site, {"principals": ["bob", "dave"], "quorum": 2})
    link = _path(_decision(site, task_id)["link"])
    dave = people("dave")
    shown = dave.get("/decisions")
    version = re.search(r'data-version="([0-9a-f]+)"', shown.text)
    assert version is not None and "0 of 2 approvals" in _row(shown, task_id)
    bob = people("bob")
    bob.send(link, bob.get(link), {})
    news = dave.http.get(f"/decisions/live?v={version.group(1)}").json()
    assert news["v"] != version.group(1) and "1 of 2 approvals: bob" in _words(news["html"])
    result(post(site.served.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS, headers=_as("alice")))


def test_a_vote_on_a_proposal_the_page_no_longer_shows_is_not_sent(
    site: Site, people: Callable[[str], PageClient]
) -> None:
    task_id = _start(site, {"principals": ["bob", "dave"], "quorum": 2})
    decision = _decision(site, task_id)
    link = _path(decision["link"])
    bob = people("bob")
    opened = bob.get(link)
    older = Page(httpx.Response(200, text=opened.text.replace(decision["digest"], "0" * 64)))
    refused = bob.send(link, older, {})
    assert refused.status == 409 and "The proposal has changed" in refused.forms().errors[""]
    assert _decision(site, task_id)["votes"] == []
    voted = bob.send(link, bob.get(link), {})  # on the proposal as it is: counted
    assert voted.heading == "Your vote is in"
    assert [vote["name"] for vote in _decision(site, task_id, "1 of 2")["votes"]] == ["bob"]
    result(post(site.served.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS, headers=_as("alice")))


def test_the_person_who_asked_votes_on_their_own_task_when_the_rule_admits_them(
    site: Site, people: Callable[[str], PageClient]
) -> None:
    task_id = _start(site, {"principals": [], "groups": ["leads"], "quorum": 2})
    link = _path(_decision(site, task_id)["link"])
    alice = people("alice")
    assert "Waiting for you" in _row(alice.get("/decisions"), task_id)
    sent = alice.send(link, alice.get(link), {})
    assert sent.response.url.path == f"/tasks/{task_id}" and "Your answer was sent" in sent.text
    assert "1 of 2 approvals: alice," in _words(sent.text) and "Your vote is in." in _words(sent.text)
    result(post(site.served.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS, headers=_as("alice")))


def _oidc_sign_in(site: Site, person: PageClient, who: str, roles: str | None) -> None:
    """Sign ``person`` in as ``who`` at the provider, whose ID token's ``roles`` claim is ``roles``."""
    site.provider.reset()
    site.provider.auto_user = who
    site.provider.id_token_claims = {"roles": roles}
    response = person.http.get("/signin/oidc?next=/decisions")
    while response.is_redirect:  # to the provider, back to the callback, to /decisions
        response = person.http.get(response.headers["location"])
    assert response.status_code == 200 and urlsplit(str(response.url)).path == "/decisions", response.text
    site.provider.reset()
