"""What people and systems are told of a task, as data: the notice a task's workflow hands its notify
workflow, the deliveries it makes of it, and the words and the webhook body each carries.

Pure data and text (used in Temporal's sandbox by the notify workflow, and by the worker's
activities). A notice names who asked, the tool, the proposal's title and summary, the deadline and
where to answer; never an answer, a secret, an argument or a sealed state.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel

from longtools.decisions import Approvers, name_of

__all__ = [
    "NOTIFICATIONS",
    "NOTIFY_MEMO",
    "NOTIFY_WORKFLOW",
    "PLAN_ACTIVITY",
    "SEND_ACTIVITY",
    "Delivery",
    "Notice",
    "NoticeKind",
    "Notified",
    "Plan",
    "SendInput",
    "Sent",
]

NOTIFICATIONS: Final = "longtools_notifications_total"
"""Counter ``{channel, outcome}``, recorded by workers: ``sent``; ``error``, a try that failed (it is
tried again); ``failed``, a notification given up."""
NOTIFY_MEMO: Final = "longtools.notify"
"""Memo key of a task whose people are told (``{"base": URL, "remind": [seconds]}``), written by the
API at the start when the deployment notifies anyone: its absence is how a task started before (or
without) notifications keeps its history as it was."""
NOTIFY_WORKFLOW: Final = "longtools.Notify"
PLAN_ACTIVITY: Final = "longtools.notify.plan"
SEND_ACTIVITY: Final = "longtools.notify.send"

NoticeKind = Literal["waiting", "reminder", "escalated", "ended"]
Channel = Literal["email", "apprise", "webhook"]
Link = Literal["own", "approver", "shared", "task"]


class Notice(BaseModel):
    """One thing a task tells: a question waits, still waits, was escalated, or the task ended."""

    id: str
    """Unique per notice and the same on every try (``task/kind/question/n``): a webhook's id."""
    kind: NoticeKind
    task_id: str
    tool: str
    title: str
    requester: str
    """The principal who started the task."""
    base: str
    """Where people's browsers reach the server (links are made under it)."""
    created_at: datetime
    ttl_ms: int
    at: str
    """When it happened (workflow time, ISO 8601)."""
    summary: str | None = None
    question: str | None = None
    """The waiting question's key."""
    deadline: str | None = None
    rule: dict[str, Any] | None = None
    """The question's approvers (``Approvers.wire()``); none: the requester's own question."""
    voted: list[str] = []
    """Principals whose vote is in: not reminded."""
    widened: list[str] = []
    """The groups an escalation added."""
    exit: str | None = None
    """How the task ended (``ended``)."""
    reminder: int = 0

    def approvers(self) -> Approvers | None:
        return None if self.rule is None else Approvers.from_wire(self.rule)

    def webhook_id(self) -> str:
        return "msg_" + hashlib.sha256(self.id.encode()).hexdigest()[:32]

    def words(self, link: str) -> tuple[str, str]:
        """The title and text of a message to a person, whose ``link`` is theirs."""
        who = name_of(self.requester)
        what = f"“{self.title}” ({self.tool})"
        rule = self.approvers()
        if self.kind == "ended":
            title = f"{self.title}: {self.exit or 'ended'}"
            lines = [f"Your task {what} ended: {self.exit or 'ended'}.", f"See it at {link}"]
        else:
            if rule is None:
                title = f"{self.title} needs your answer"
                lines = [f"Your task {what} waits for your answer."]
            else:
                title = f"{self.title} waits for your decision"
                lines = [f"{who} asked for {what}; it waits for your decision ({_rule_words(rule)})."]
            if self.kind == "reminder":
                title = f"Reminder: {title}"
            elif self.kind == "escalated":
                title = f"Escalated: {title}"
                lines.append(f"No one decided in time, so it now waits for {', '.join(self.widened)} too.")
            if self.summary:
                lines.append(self.summary)
            if self.deadline:
                lines.append(f"Deadline: {self.deadline}")
            lines.append(f"Answer at {link}")
        lines.append(f"Task {self.task_id}")
        return title, "\n".join(lines)

    def webhook_body(self, links: dict[str, str]) -> dict[str, Any]:
        """The JSON a webhook receives (docs/operations.md, "Webhooks", documents its schema)."""
        data: dict[str, Any] = {
            "taskId": self.task_id,
            "tool": self.tool,
            "title": self.title,
            "requester": self.requester,
            "status": self.exit if self.kind == "ended" else "input_required",
            "links": links,
        }
        if self.question is not None:
            data["question"] = self.question
        if self.deadline is not None:
            data["deadline"] = self.deadline
        if self.summary:
            data["summary"] = self.summary
        if self.rule is not None:
            data["rule"] = self.rule
        if self.kind == "reminder":
            data["reminder"] = self.reminder
        if self.widened:
            data["escalatedTo"] = self.widened
        return {"type": f"task.{self.kind}", "timestamp": self.at, "data": data}


def _rule_words(rule: Approvers) -> str:
    who = [*rule.principals, *(f"group {group}" for group in rule.groups)]
    words = f"{rule.quorum} approval{'s' if rule.quorum != 1 else ''} from {' or '.join(who)}"
    return words + (", not the requester's" if rule.exclude_requester else "")


class Delivery(BaseModel):
    """One message of a notice: a channel and its receiver, named as the settings name them (the
    address itself, which may hold a token, is looked up again when it is sent)."""

    channel: Channel
    to: str
    """Who, in words: ``bob``, ``group leads``, ``webhook 1``."""
    route: str
    """Where the address is in the settings: ``person:<name>:<n>``, ``group:<name>:<n>``,
    ``webhook:<n>``, ``signed-in:<name>`` (the email the person signed in with, read again)."""
    link: Link
    """Which link it carries: the requester's own, the approver's own, the one all approvers share,
    or the task's page."""
    name: str = ""
    """The person the link is made for (``own``, ``approver``)."""


class Plan(BaseModel):
    deliveries: list[Delivery]
    retry_max_s: float
    give_up_s: float


class SendInput(BaseModel):
    notice: Notice
    delivery: Delivery


class Sent(BaseModel):
    attempt: int


class Notified(BaseModel):
    """What became of each delivery of a notice (the notify workflow's result)."""

    sent: list[str] = []
    failed: dict[str, str] = {}
    """Receiver (``Delivery.to``) → the last error, for those given up."""
