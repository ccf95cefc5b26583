"""The notify workflow's activities: who hears of a notice (``plan``) and one message sent (``send``).
Worker process.

Email and chat go through Apprise (one maintained library for SMTP, Slack, Teams, ntfy and the
rest); webhooks are POSTed signed as the Standard Webhooks spec says, by its library, with every
secret of the ring (one signature each), under the notice's id on every try: a receiver that keeps
the ids it has seen takes each event once.

A failed try raises, so Temporal tries again with backoff (``NotifyWorkflow``); each is counted in
``longtools_notifications_total{channel,outcome}`` and logged (``notification_failed``), so an
operator sees a channel failing long before it is given up.

A person the settings give no address is mailed at the verified email they last signed in to the
pages with, if they did (``longtools.people``): ``plan`` looks up each such person, and ``send`` looks
the address up again, so a mail goes where the person now says.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import structlog
from standardwebhooks import Webhook
from temporalio import activity
from temporalio.exceptions import ApplicationError

from longtools._links import AnswerLinks
from longtools._settings import Settings, parse_webhook_secrets
from longtools.notify._notices import (
    NOTIFICATIONS,
    PLAN_ACTIVITY,
    SEND_ACTIVITY,
    Delivery,
    Notice,
    Plan,
    SendInput,
    Sent,
)
from longtools.notify._routes import RouteGone, Routes
from longtools.people import Directory

__all__ = ["Notifier"]

log = structlog.get_logger("longtools.notify")

_WEBHOOK_TIMEOUT_S = 10.0
_MAX_ERROR = 300
"""Characters of a failure's reason kept (it goes to the log, a metric-free history, the ledger)."""


@dataclass(frozen=True)
class _Linked:
    task_id: str
    created_at: datetime
    ttl_ms: int


class Notifier:
    """The activities, bound to the deployment's routes, link keys and webhook secrets, and to the
    directory of people who signed in (``people``; none: only the settings' addresses are used)."""

    def __init__(self, settings: Settings, people: Directory | None = None) -> None:
        self._settings = settings
        self._routes = Routes(settings)
        self._people = people
        # Sealed under the payload ring (a worker has no state keys); without one, to the pages.
        self._links = AnswerLinks.mailed(settings)
        secrets = settings.webhook_secrets
        ring = [] if secrets is None else parse_webhook_secrets(secrets.get_secret_value())
        self._signers = [Webhook(key) for key in ring]

    @activity.defn(name=PLAN_ACTIVITY)
    async def plan(self, notice: Notice) -> Plan:
        unaddressed = self._routes.unaddressed(notice)
        # Temporal not answering fails this try (it is tried again): nobody is left out for it.
        signed_in = await self._people.emails(unaddressed) if self._people is not None and unaddressed else {}
        return Plan(
            deliveries=self._routes.plan(notice, signed_in),
            retry_max_s=self._settings.notify_retry_max_s,
            give_up_s=self._settings.notify_give_up_s,
        )

    @activity.defn(name=SEND_ACTIVITY)
    async def send(self, sending: SendInput) -> Sent:
        notice, delivery = sending.notice, sending.delivery
        attempt = activity.info().attempt
        said = log.bind(
            task_id=notice.task_id,
            notice=notice.kind,
            channel=delivery.channel,
            to=delivery.to,
            attempt=attempt,
        )
        try:
            target = self._routes.target(delivery, await self._signed_in(delivery))
        except RouteGone:
            raise ApplicationError(
                f"{delivery.to}: no longer in the settings", type="RouteGone", non_retryable=True
            ) from None
        try:
            if delivery.channel == "webhook":
                await self._post(target, notice)
            else:
                title, body = notice.words(self._link(notice, delivery))
                error = await asyncio.to_thread(_apprise, target, title, body)
                if error is not None:
                    raise _Failed(error)
        except (_Failed, httpx.HTTPError) as exc:
            reason = str(exc)[:_MAX_ERROR] or type(exc).__name__
            _count(delivery, "error")
            said.warning("notification_failed", error=reason)
            raise ApplicationError(f"{delivery.to}: {reason}", type="NotificationFailed") from None
        _count(delivery, "sent")
        said.info("notification_sent")
        return Sent(attempt=attempt)

    async def _signed_in(self, delivery: Delivery) -> str | None:
        """The email a ``signed-in:`` delivery's person signed in with, as the directory has it now."""
        kind, _, name = delivery.route.partition(":")
        if kind != "signed-in" or self._people is None:
            return None
        return (await self._people.emails([name])).get(name)

    async def _post(self, url: str, notice: Notice) -> None:
        body = json.dumps(notice.webhook_body(self._webhook_links(notice)), separators=(",", ":"))
        now = datetime.now(UTC)
        webhook_id = notice.webhook_id()
        headers = {
            "content-type": "application/json",
            "webhook-id": webhook_id,
            "webhook-timestamp": str(int(now.timestamp())),
            # One signature per secret of the ring, space-separated, as the spec allows for rotation.
            "webhook-signature": " ".join(signer.sign(webhook_id, now, body) for signer in self._signers),
        }
        async with httpx.AsyncClient(timeout=_WEBHOOK_TIMEOUT_S, follow_redirects=False) as http:
            response = await http.post(url, content=body, headers=headers)
        if not 200 <= response.status_code < 300:
            raise _Failed(f"HTTP {response.status_code}")

    def _link(self, notice: Notice, delivery: Delivery) -> str:
        """The link a message carries: the person's own where there is one (it opens for them only)."""
        task_page = f"{notice.base}/tasks/{notice.task_id}"
        if delivery.link == "task" or notice.question is None:
            return task_page
        if self._links is None:
            return task_page if delivery.link == "own" else f"{notice.base}/decisions"
        view = _Linked(notice.task_id, notice.created_at, notice.ttl_ms)
        if delivery.link == "own":
            path = self._links.path(notice.requester, view, notice.question)
        elif delivery.link == "approver":
            path = self._links.approver_path(delivery.name, view, notice.question)
        else:
            path = self._links.approvers_path(view, notice.question)
        return notice.base + path

    def _webhook_links(self, notice: Notice) -> dict[str, str]:
        """A system sees the task's page and, for a decision, the link its approvers share: each
        opens only for a person who signs in as one who may see it."""
        links = {"task": f"{notice.base}/tasks/{notice.task_id}"}
        if notice.kind != "ended" and notice.rule is not None and notice.question is not None:
            links["answer"] = self._link(notice, Delivery(channel="webhook", to="", route="", link="shared"))
        return links


class _Failed(Exception):
    """A channel refused or could not be reached; the message is its reason, never an address."""


def _apprise(url: str, title: str, body: str) -> str | None:
    """Send through Apprise (blocking: it runs in a thread); the reason it failed, if it did."""
    import apprise

    notifier = apprise.Apprise()
    if not notifier.add(url):
        return "not a URL Apprise can send to"
    with apprise.LogCapture(level=logging.WARNING) as logs:  # type: ignore[no-untyped-call]
        # Plain text, as written: line by line, and nothing in it read as HTML.
        if notifier.notify(title=title, body=body, body_format=apprise.NotifyFormat.TEXT):
            return None
        said = [line.split(" - ", 2)[-1].strip() for line in logs.getvalue().splitlines() if line.strip()]
    return said[-1] if said else "not sent"


def _count(delivery: Delivery, outcome: str) -> None:
    activity.metric_meter().create_counter(NOTIFICATIONS, "Notifications sent or failed").add(
        1, {"channel": delivery.channel, "outcome": outcome}
    )
