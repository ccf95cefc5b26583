"""The person hears about it (issue 33), against a real ``serve``, a real SMTP server (aiosmtpd) and
a real webhook receiver on loopback: alice asks and is a lead, bob and dave are leads, carol is in
``ops``. Each approver is mailed a link of their own, reminded, and the requester told of the end;
every webhook verifies with ``standardwebhooks``; nothing sent holds a secret or a sensitive field.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tests.conftest import Served, start_server
from tests.pages import PageClient, signed_in_people
from tests.receivers import Hook, Mail, Mailbox, WebhookReceiver, links_in, wait_for, webhook_secret
from tests.wire import TASKS_EXTENSION, eventually, post, result

PEOPLE = {name: secrets.token_urlsafe(24) for name in ("alice", "bob", "dave", "carol")}
TASK_CAPS: dict[str, object] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
SECRET = webhook_secret()
REMIND_S = 4


def address(name: str) -> str:
    return f"{name}@example.test"


class Deployment:
    def __init__(self, served: Served, mailbox: Mailbox, hooks: WebhookReceiver) -> None:
        self.served, self.mailbox, self.hooks = served, mailbox, hooks

    def call(self, who: str, tool: str, arguments: dict[str, object]) -> dict[str, object]:
        return result(
            post(
                self.served.url,
                "tools/call",
                {"name": tool, "arguments": arguments},
                caps=TASK_CAPS,
                headers={"authorization": f"Bearer {PEOPLE[who]}"},
            )
        )

    def task(self, who: str, task_id: str) -> dict[str, object]:
        return result(
            post(
                self.served.url,
                "tasks/get",
                {"taskId": task_id},
                caps=TASK_CAPS,
                headers={"authorization": f"Bearer {PEOPLE[who]}"},
            )
        )

    def mails(self, name: str, task_id: str, subject: str = "") -> Callable[[], list[Mail]]:
        return lambda: [
            mail
            for mail in self.mailbox.to(address(name))
            if task_id in mail.body and subject in mail.subject
        ]

    def hooks_of(self, task_id: str, kind: str) -> Callable[[], list[Hook]]:
        return lambda: [
            hook
            for hook in self.hooks.received()
            if hook.json()["data"]["taskId"] == task_id and hook.json()["type"] == kind
        ]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with Mailbox() as mailbox, WebhookReceiver() as hooks:
        env = {
            "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items()),
            "LONGTOOLS_GROUPS": "leads=alice,bob,dave;ops=carol",
            "LONGTOOLS_HELPDESK_APPROVAL_S": "600",
            "LONGTOOLS_NOTIFY_EMAIL": mailbox.url,
            "LONGTOOLS_NOTIFY_PEOPLE": ";".join(f"{name}={address(name)}" for name in PEOPLE),
            "LONGTOOLS_WEBHOOKS": hooks.url,
            "LONGTOOLS_WEBHOOK_SECRETS": SECRET,
            "LONGTOOLS_NOTIFY_REMIND_S": str(REMIND_S),
        }
        served = start_server(
            tmp_path_factory.mktemp("notify"),
            "--tools",
            "tests.decision_tools",
            "--tools",
            "tests.person_tools",
            env=env,
        )
        try:
            yield Deployment(served, mailbox, hooks)
        finally:
            served.stop()


@pytest.fixture
def people(deployment: Deployment) -> Iterator[Callable[[str], PageClient]]:
    with signed_in_people(deployment.served.base, PEOPLE) as people:
        yield people


def _answer_link(mail: Mail) -> str:
    return next(link for link in links_in(mail.body) if "/answer/" in link)


def test_each_approver_is_mailed_a_link_of_their_own_reminded_and_the_requester_hears_the_end(
    deployment: Deployment, people: Callable[[str], PageClient]
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    ticket = deployment.call("alice", "create_ticket", {"title": "t", "customer": customer})
    assert ticket
    started = time.monotonic()
    task_id = str(deployment.call("alice", "delete_customer", {"customer": customer})["taskId"])
    # Both approvers are mailed within 5 s of the start; the requester (excluded) and carol are not.
    [to_bob] = wait_for(deployment.mails("bob", task_id), within=5)
    [to_dave] = wait_for(deployment.mails("dave", task_id), within=5)
    print(f"both approvers mailed {time.monotonic() - started:.2f} s after the start")  # noqa: T201
    assert "waits for your decision" in to_bob.subject
    assert "2 approvals from group leads, not the requester's" in to_bob.body
    assert deployment.mails("alice", task_id)() == [] and deployment.mails("carol", task_id)() == []
    bob_link, dave_link = _answer_link(to_bob), _answer_link(to_dave)
    assert bob_link != dave_link
    bob, dave, carol = people("bob"), people("dave"), people("carol")
    # Each link opens the page for its approver only: to another signed-in lead it is not known.
    made_up = carol.get(bob_link.rsplit("/", 1)[0] + "/" + secrets.token_urlsafe(40))
    for other, link in ((dave, bob_link), (bob, dave_link), (carol, bob_link)):
        refused = other.get(link)
        assert refused.status == 404 and refused.heading == made_up.heading
    opened = bob.get(bob_link)
    assert opened.status == 200 and 'class="answer"' in opened.text
    # A reminder at the configured interval, to each who has not voted.
    [reminder] = wait_for(deployment.mails("bob", task_id, "Reminder:"), within=REMIND_S + 10)
    assert _answer_link(reminder) == bob_link
    bob.send(bob_link, opened, {"note": "fine"})
    eventually(lambda: deployment.task("alice", task_id), lambda now: "1 of 2 approvals" in str(now))
    # bob voted: the next reminders go to dave only.
    reminders_to_bob = len(deployment.mails("bob", task_id, "Reminder:")())
    wait_for(deployment.mails("dave", task_id, "Reminder:"), count=2, within=2 * REMIND_S + 10)
    assert len(deployment.mails("bob", task_id, "Reminder:")()) == reminders_to_bob
    dave.send(dave_link, dave.get(dave_link), {"note": "ok"})
    [ended] = wait_for(deployment.mails("alice", task_id, ": completed"), within=30)
    assert f"/tasks/{task_id}" in ended.body
    # The webhook saw each event, the same ones, in order of kind.
    for kind in ("task.waiting", "task.reminder", "task.ended"):
        wait_for(deployment.hooks_of(task_id, kind), within=30)


def test_every_webhook_verifies_and_a_tampered_one_does_not(deployment: Deployment) -> None:
    task_id = str(deployment.call("alice", "decide", {"principals": ["bob"]})["taskId"])
    [hook] = wait_for(deployment.hooks_of(task_id, "task.waiting"), within=10)
    verifier = Webhook(SECRET)
    body = verifier.verify(hook.body, hook.headers)
    assert body["data"]["taskId"] == task_id and body["data"]["status"] == "input_required"
    assert set(body["data"]["links"]) == {"task", "answer"}
    assert hook.headers["webhook-id"].startswith("msg_")
    tampered = hook.body.replace(b"input_required", b"completed")
    with pytest.raises(WebhookVerificationError):
        verifier.verify(tampered, hook.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(webhook_secret()).verify(hook.body, hook.headers)
    # Signed right, but outside the tolerance (5 minutes): a replay of an old message.
    old = datetime.now(UTC) - timedelta(minutes=10)
    replayed = {
        **hook.headers,
        "webhook-timestamp": str(int(old.timestamp())),
        "webhook-signature": verifier.sign(hook.headers["webhook-id"], old, hook.body.decode()),
    }
    with pytest.raises(WebhookVerificationError, match="too old"):
        verifier.verify(hook.body, replayed)
    for each in deployment.hooks.received():
        verifier.verify(each.body, each.headers)


def test_nothing_sent_holds_a_secret_answered_on_a_page_or_a_sensitive_field(
    deployment: Deployment, people: Callable[[str], PageClient]
) -> None:
    sensitive = f"SENSITIVE-{secrets.token_hex(8)}"
    decided = str(
        deployment.call("alice", "decide", {"principals": ["bob"], "secret_note": sensitive})["taskId"]
    )
    kept = str(deployment.call("alice", "keep_a_secret", {})["taskId"])
    [asked] = wait_for(deployment.mails("alice", kept), within=10)
    assert "needs your answer" in asked.subject
    alice = people("alice")
    link = _answer_link(asked)
    answered_secret = f"s3cret-{secrets.token_hex(8)}"
    alice.send(link, alice.get(link), {"secret": answered_secret})
    wait_for(deployment.mails("alice", kept, ": completed"), within=30)
    [to_bob] = wait_for(deployment.mails("bob", decided), within=10)
    bob = people("bob")
    bob_link = _answer_link(to_bob)
    bob.send(bob_link, bob.get(bob_link), {"note": "fine"})
    wait_for(deployment.hooks_of(decided, "task.ended"), within=30)
    wait_for(deployment.hooks_of(kept, "task.ended"), within=30)
    sent = [mail.raw for mail in deployment.mailbox.mails] + [
        hook.body.decode() for hook in deployment.hooks.received()
    ]
    assert sent and all(sensitive not in text and answered_secret not in text for text in sent)
    # Nor a sealed state: no requestState in any of it.
    assert all("requestState" not in text for text in sent)
    bodies = [json.loads(hook.body) for hook in deployment.hooks.received()]
    assert {body["type"] for body in bodies} >= {"task.waiting", "task.ended"}


def test_an_escalation_is_told_to_the_group_it_widens_to(
    deployment: Deployment, people: Callable[[str], PageClient]
) -> None:
    arguments = {"principals": ["bob"], "escalate_after_s": 1, "escalate_to": ["ops"], "timeout_s": 600}
    task_id = str(deployment.call("alice", "decide", arguments)["taskId"])
    [escalated] = wait_for(deployment.mails("carol", task_id, "Escalated:"), within=15)
    assert "it now waits for ops too" in escalated.body
    assert deployment.mails("carol", task_id, "waits for your decision")() == [escalated]
    carol = people("carol")
    link = _answer_link(escalated)
    opened = carol.get(link)
    assert opened.status == 200 and 'class="answer"' in opened.text
    carol.send(link, opened, {"note": "as ops"})
    [ended] = wait_for(deployment.mails("alice", task_id, ": completed"), within=30)
    assert task_id in ended.body


def test_a_link_a_worker_mails_without_the_state_keys_opens_on_the_api_for_its_person_only() -> None:
    """A worker seals its links under the payload ring (it holds no requestState ring); the API,
    which has both, opens them, bound as made."""
    import base64
    from datetime import datetime

    from longtools import Settings
    from longtools._links import AnswerLinks, LinkUnknown

    payload, state, other = (base64.urlsafe_b64encode(secrets.token_bytes(32)).decode() for _ in range(3))
    worker = AnswerLinks.mailed(Settings(payload_keys=payload, state_keys=None))
    api = AnswerLinks(Settings(payload_keys=payload, state_keys=state))
    assert worker is not None and AnswerLinks.mailed(Settings(payload_keys=None)) is None

    class View:
        task_id, created_at, ttl_ms = "t1", datetime.now(UTC), 60_000

    token = worker.approver_path("bob", View(), "approval").rsplit("/", 1)[1]
    opened = api.open(token, "token:bob", {"token:bob", "bob"})
    assert (opened.task_id, opened.key, opened.approvers) == ("t1", "approval", True)
    with pytest.raises(LinkUnknown):
        api.open(token, "token:dave", {"token:dave", "dave"})
    with pytest.raises(LinkUnknown):  # another deployment's payload ring: not a link of this one
        AnswerLinks(Settings(payload_keys=other, state_keys=state)).open(token, "token:bob", {"bob"})
