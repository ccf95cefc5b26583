"""A task as a person sees it on the pages: which one it is (the tool's line about it), where it
stands in words, how it ended (declined, rejected, expired, or failed and why), its progress, the
questions it waits for (each with its answer link, a decision with its proposal, rule and votes)
and its result. API process."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from longtools.decisions import (
    REDACTED,
    Approvers,
    DecisionEnd,
    DecisionState,
    Voter,
    decision_of,
    name_of,
)
from longtools.tasks import TERMINAL, AnswerLinks, TaskView
from longtools.tools import Registry
from longtools.workflows import marking_of, reask_of

__all__ = [
    "DecisionCard",
    "QuestionCard",
    "Stance",
    "TaskCard",
    "Verdict",
    "VoteCard",
    "card_of",
    "decision_card",
    "said_duration",
    "signature",
]

_MAX_SHOWN = 20_000
"""Characters of a result shown on the page (the rest is cut: the page is for a person to read)."""
_MAX_LINE = 300
"""Characters of a card's one-line outcome (a failure's message) shown in the list of tasks."""

_STATUS_WORDS = {
    "working": "Working",
    "input_required": "Waiting for an answer",
    "completed": "Done",
    "failed": "Failed",
    "cancelled": "Cancelled",
}


Stance = Literal["decide", "voted", "asked", "none"]
"""Where the person a page is for stands on a decision: it waits for their vote (``decide``), their
vote is in (``voted``), they asked and others decide (``asked``), or none of these (``none``: it
is decided, or it is not theirs to see)."""


@dataclass(frozen=True)
class VoteCard:
    name: str
    at: str
    """ISO 8601, for ``<time datetime>``."""
    clock: str
    """``14:02`` (UTC): what the tally shows."""
    when: str
    """The whole moment, in words (a ``title``)."""


@dataclass(frozen=True)
class DecisionCard:
    """A decision as the pages show it: what will happen (the proposal), who decides (the rule in
    words), the votes so far, and where the person the page is for stands (``stance``)."""

    key: str
    tool: str
    title: str
    arguments: tuple[tuple[str, str, bool], ...]
    """Each argument as the call gave it: its name, its value as text, and whether the tool marked
    it sensitive (its value is then :data:`longtools.decisions.REDACTED`)."""
    summary: str | None
    requester: str
    """Who asked, by the name rules and pages use (``name_of``)."""
    started: str
    deadline: str | None
    deadline_at: str | None
    fingerprint: str
    digest: str
    needed: int
    votes: tuple[VoteCard, ...]
    rule: str | None
    """Who decides, in words; None: the person who asked decides (``by="person"``)."""
    waiting: str | None
    """Whom it waits for, in words, while it is open."""
    decided: str | None
    """How it ended, in words, once it has (before the task takes it up)."""
    stance: Stance
    link: str | None
    """Where the person the page is for votes (``stance`` is ``decide``): the approvers' link, or
    for a question the person who asked decides, their own answer link."""
    share: str | None
    """The approvers' link to pass on (a path of this server), for a decision with approvers."""

    @property
    def tally(self) -> str:
        """``1 of 2 approvals``: the votes so far (the template lists who and when)."""
        return f"{len(self.votes)} of {self.needed} approval{'s' if self.needed != 1 else ''}"

    @property
    def approvers(self) -> bool:
        return self.rule is not None


@dataclass(frozen=True)
class Verdict:
    """How a task's last decision was taken, as its ledger records it."""

    outcome: DecisionEnd
    by: tuple[str, ...]
    """The names of those whose votes took it: who approved, or who refused (none for one that
    expired)."""


@dataclass(frozen=True)
class QuestionCard:
    key: str
    message: str
    """The question as its tool asked it (for one asked again, as first asked: ``again``)."""
    path: str | None
    """The answer link (a path of this server); None for what only the client can answer
    (sampling, roots)."""
    person: bool
    sensitive: bool
    again: bool = False
    """Asked again: its last answer broke a rule of the tool's (``longtools.workflows.Reask``)."""
    decision: DecisionCard | None = None
    """A person's question's decision: its proposal, and with approvers, its rule and votes."""


@dataclass(frozen=True)
class TaskCard:
    task_id: str
    tool: str
    title: str
    summary: str | None
    """The tool's line about this task (its arguments, by default): what tells eight tasks of one
    tool apart."""
    status: str
    state: str
    """How it stands or ended, for its badge: a status, or ``declined`` (completed, its person said no)."""
    status_words: str
    outcome: str | None
    """How it ended, on one line: why it failed, or the tool's ``outcome`` word."""
    message: str | None
    progress: float | None
    total: float | None
    questions: tuple[QuestionCard, ...]
    result_text: str | None
    result_json: str | None
    result_is_error: bool
    error_text: str | None
    created_at: str
    updated_at: str
    version: str
    """Changes whenever anything shown changes (``signature``)."""
    last_status: str | None = None
    """What the tool last said before it ended, when its end says nothing (a cancel: its rollback)."""
    approved: str | None = None
    """Who approved its decision, once it has ended with it (``Approved by bob and dave``)."""

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def percent(self) -> float | None:
        if self.progress is None or not self.total:
            return None
        return max(0.0, min(100.0, 100 * self.progress / self.total))

    @property
    def progress_words(self) -> str | None:
        if self.progress is None:
            return None
        if self.total:
            return f"{self.progress:g} of {self.total:g}"
        return f"{self.progress:g} done"


def signature(view: TaskView) -> str:
    """What a page shows of ``view``, as a short digest: two views that read the same give the
    same one, so a page waits for a change rather than redrawing the same thing."""
    decisions = {key: decision_of(question) for key, question in (view.input_requests or {}).items()}
    shown = [
        view.status,
        view.message,
        view.progress,
        view.total,
        sorted(view.input_requests or {}),
        view.result is not None,
        view.error is not None,
        view.exit_state,
        # Each vote as it comes, an escalation, a decision: the question's key stays the same.
        sorted(
            (
                key,
                decision.digest,
                [vote.principal for vote in decision.votes],
                decision.outcome,
                decision.escalated_at,
            )
            for key, decision in decisions.items()
            if decision is not None
        ),
    ]
    return hashlib.sha256(json.dumps(shown, default=str).encode()).hexdigest()[:16]


def card_of(
    view: TaskView, registry: Registry, links: AnswerLinks, voter: Voter, *, verdict: Verdict | None = None
) -> TaskCard:
    """``view`` as the pages show it to ``voter`` (the person signed in, with their groups).
    ``verdict``: how its decision was taken, once it has ended (the task's page reads its ledger)."""
    principal = voter.principal
    tool = registry.tools.get(view.tool)
    title = (tool.title if tool is not None else None) or view.tool
    questions = []
    for key, question in (view.input_requests or {}).items() if view.status == "input_required" else ():
        params = question.get("params") if isinstance(question.get("params"), Mapping) else {}
        assert isinstance(params, Mapping)
        form = question.get("method") == "elicitation/create" and params.get("mode", "form") == "form"
        marking = marking_of(question)
        message = str(params.get("message") or _ASKS.get(str(question.get("method")), "A question"))
        reask = reask_of(question)
        decision = decision_of(question) if form else None
        shown = None if decision is None else decision_card(decision, key, view, links, voter)
        path = links.path(principal, view, key) if form else None
        if shown is not None and shown.approvers:
            path = shown.link  # the approvers' link, if this person may vote; else none to answer
        questions.append(
            QuestionCard(
                key=key,
                # Its own message starts with why it is asked again, in the tool's field names;
                # the page says that beside each field, by its label.
                message=reask.message if reask is not None and reask.message else message,
                path=path,
                person=marking.person,
                sensitive=marking.sensitive,
                again=reask is not None,
                decision=shown,
            )
        )
    result = view.result or {}
    text, structured = _result_text(result), result.get("structuredContent")
    if text is not None and structured is not None and _same_json(text, structured):
        text = None  # the text is the data again (a tool's model result): shown once, readably
    error = (view.error or {}).get("message") if view.error else None
    refused = verdict is not None and verdict.outcome == "rejected" and verdict.by
    state, words, outcome = _ending(view, verdict.by[0] if verdict is not None and refused else None)
    if questions and all(
        q.decision is not None and q.decision.approvers and q.decision.stance != "decide" for q in questions
    ):
        words = "Waiting for approvals"  # nothing of it is this person's to answer now
    approved = None
    if verdict is not None and verdict.outcome == "approved" and view.exit_state == "completed":
        approved = "Approved by " + _and(verdict.by) if verdict.by else "Approved"
    return TaskCard(
        task_id=view.task_id,
        tool=view.tool,
        title=title,
        summary=view.summary,
        status=view.status,
        state=state,
        status_words=words,
        outcome=outcome,
        # A cancelled task keeps what its tool said last (its clean-up: a rollback, say), shown as
        # such; a task that works shows what it says now.
        message=None if view.status in TERMINAL else view.message,
        last_status=view.message if view.status in TERMINAL else None,
        progress=view.progress,
        total=view.total,
        questions=tuple(questions),
        result_text=text,
        result_json=None
        if structured is None
        else _cut(json.dumps(structured, indent=2, ensure_ascii=False)),
        result_is_error=result.get("isError") is True,
        error_text=str(error) if error is not None else None,
        created_at=view.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        updated_at=view.updated_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        version=signature(view),
        approved=approved,
    )


_ASKS = {
    "sampling/createMessage": "It asks the client's model for a completion (only the client answers this)",
    "roots/list": "It asks the client for its roots (only the client answers this)",
}


_DECLINED = frozenset({"declined", "decline"})
"""A result's ``outcome`` (or ``action``) that says its person said no: the examples' convention
(``BulkCloseOutput.outcome``, ``Elicited.action``)."""


def decision_card(
    decision: DecisionState, key: str, view: TaskView, links: AnswerLinks, voter: Voter
) -> DecisionCard:
    """``decision`` (question ``key`` of ``view``) as the pages show it to ``voter``."""
    proposal = decision.proposal
    rule = decision.rule
    escalated = decision.escalated_at is not None
    if decision.outcome is not None:
        stance: Stance = "none"
    elif decision.voted(voter.principal):
        stance = "voted"
    elif decision.admits(voter):
        stance = "decide"
    elif voter.principal == proposal.requester:
        stance = "asked"
    else:
        stance = "none"
    share = None if rule is None else links.approvers_path(view, key)
    link = None
    if stance == "decide":
        link = share if share is not None else links.path(voter.principal, view, key)
    return DecisionCard(
        key=key,
        tool=proposal.tool,
        title=proposal.title or proposal.tool,
        arguments=tuple(
            (str(name), _argument_text(value), value == REDACTED)
            for name, value in proposal.arguments.items()
        ),
        summary=proposal.summary,
        requester=name_of(proposal.requester),
        started=_when(proposal.started_at),
        deadline=None if decision.deadline is None else _when(decision.deadline),
        deadline_at=decision.deadline,
        fingerprint=proposal.fingerprint,
        digest=decision.digest,
        needed=decision.needed,
        votes=tuple(
            VoteCard(name=vote.name, at=vote.at, clock=_clock(vote.at), when=_when(vote.at, seconds=True))
            for vote in decision.votes
        ),
        rule=None if rule is None else rule_words(rule, escalated=escalated),
        waiting=None if decision.outcome is not None else _waiting(decision),
        decided=_decided(decision),
        stance=stance,
        link=link,
        share=share,
    )


def rule_words(rule: Approvers, *, escalated: bool) -> str:
    """Who decides, in words: ``2 approvals from group leads, not from the person who asked. One
    refusal rejects it.``, and what an escalation adds."""
    said = (
        f"{rule.quorum} approval{'s' if rule.quorum != 1 else ''} from {_who(rule.principals, rule.groups)}"
    )
    if rule.exclude_requester:
        said += ", not from the person who asked"
    said += ". One refusal rejects it."
    if rule.escalate is not None:
        wider = _who((), rule.escalate.groups)
        if escalated:
            said += f" It has been escalated: {wider} may decide too."
        else:
            said += f" With no decision after {said_duration(rule.escalate.after)}, {wider} may decide too."
    return said


def _waiting(decision: DecisionState) -> str:
    rule = decision.rule
    if rule is None:
        return "the person who asked"
    groups = rule.groups
    if decision.escalated_at is not None and rule.escalate is not None:
        groups = (*groups, *rule.escalate.groups)
    said = _who(rule.principals, groups)
    return said + (", not the person who asked" if rule.exclude_requester else "")


def _decided(decision: DecisionState) -> str | None:
    if decision.outcome == "approved":
        return "Approved"
    if decision.outcome == "rejected":
        return f"Rejected by {name_of(decision.by or '')}"
    if decision.outcome == "expired":
        return "Expired: no decision before the deadline"
    if decision.outcome == "escalated":
        return "Escalated, then expired: no decision before the deadline"
    return None


def _who(principals: tuple[str, ...], groups: tuple[str, ...]) -> str:
    """``bob, dave or group leads``."""
    names = [name_of(name) for name in principals] + [f"group {group}" for group in groups]
    if len(names) < 2:
        return names[0] if names else "nobody"
    return ", ".join(names[:-1]) + " or " + names[-1]


def _and(names: tuple[str, ...]) -> str:
    """``bob and dave``; ``ann, bob and dave``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def said_duration(span: timedelta) -> str:
    """``5 minutes``: ``span`` in its largest whole unit (to the second, rounded down)."""
    seconds = int(span.total_seconds())
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def _argument_text(value: Any) -> str:
    """An argument's value as a person reads it: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _moment(at: str) -> datetime | None:
    try:
        return datetime.fromisoformat(at)
    except ValueError:
        return None


def _when(at: str, *, seconds: bool = False) -> str:
    """An ISO 8601 moment as the pages say it (UTC, as every time the pages show)."""
    moment = _moment(at)
    if moment is None:
        return at
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def _clock(at: str) -> str:
    moment = _moment(at)
    if moment is None:
        return at
    return (moment.astimezone(UTC) if moment.tzinfo is not None else moment).strftime("%H:%M")


_NOT_APPROVED = frozenset({"rejected", "expired", "escalated"})
"""The exit states of a decision that did not approve: the task's badge says so, not "Done"."""


def _ending(view: TaskView, refused_by: str | None = None) -> tuple[str, str, str | None]:
    """Where the task stands, as its badge's kind and words, and how it ended on one line.

    A tool error (a completed task whose result ``isError``) is a failure to the person, with its
    message; a decision that did not approve ends "Rejected" or "Expired" (its exit state), with who
    refused when ``refused_by`` says; a result whose ``outcome`` is ``declined`` is "Declined", not
    "Done"; any other ``outcome`` word of a result is said under the badge.
    """
    words = _STATUS_WORDS.get(view.status, view.status)
    if view.status == "failed":
        message = (view.error or {}).get("message")
        return "failed", words, _line(str(message)) if message else None
    if view.status != "completed":
        return view.status, words, None
    result = view.result or {}
    if result.get("isError") is True:
        return "failed", "Failed", _line(_result_text(result) or "")
    if view.exit_state in _NOT_APPROVED:
        if view.exit_state == "rejected":
            who = f"Rejected by {refused_by}" if refused_by else "Rejected"
            return "rejected", "Rejected", f"{who}: nothing was done"
        if view.exit_state == "escalated":
            return "expired", "Expired", "Escalated, then expired: no decision before the deadline"
        return "expired", "Expired", "Expired: no decision before the deadline"
    structured = result.get("structuredContent")
    said = structured if isinstance(structured, Mapping) else {}
    outcome, action = said.get("outcome"), said.get("action")
    if outcome in _DECLINED or (outcome is None and action in _DECLINED):
        return "declined", "Declined", None
    if isinstance(outcome, str) and outcome:
        return "completed", words, "Outcome: " + outcome.replace("_", " ")
    return "completed", words, None


def _line(text: str) -> str | None:
    """``text`` on one line of at most ``_MAX_LINE`` characters (None when it is empty)."""
    line = " ".join(text.split())
    return (line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + "…") or None


def _result_text(result: Mapping[str, Any]) -> str | None:
    texts = [
        str(block.get("text", ""))
        for block in result.get("content") or ()
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    return _cut("\n".join(texts)) if texts else None


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "\n…"
