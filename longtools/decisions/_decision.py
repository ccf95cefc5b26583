"""A decision as a question carries it: the proposal, its digest, the rule, the deadline, the votes
so far; and what the workflow gets back. Pure data, shared by workflows, the API and the pages.

Everything a person decides on travels in the question's ``params._meta`` under
:data:`DECISION_META`, which the workflow writes and nobody else: the API and the pages read it
from the task's memo (any replica, no worker needed), and show it as it is.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, Generic, Literal, TypeVar, get_args

from pydantic import BaseModel

from longtools.decisions._ledger import canonical
from longtools.decisions._rules import Approvers, Voter, name_of

__all__ = [
    "ANSWERED_META",
    "DECISION_META",
    "EXIT_STATES",
    "REDACTED",
    "Approved",
    "Ballot",
    "Decision",
    "DecisionEnd",
    "DecisionState",
    "ExitState",
    "Expired",
    "Proposal",
    "Rejected",
    "Stamp",
    "approvers_decision",
    "decision_of",
    "redacted",
    "sensitive_fields",
    "unstamped",
]

DECISION_META: Final = "longtools.dev/decision"
"""``_meta`` key of a person's question: :class:`DecisionState` as wire JSON."""
ANSWERED_META: Final = "longtools.dev/answered"
"""``_meta`` key the API puts on every answer it delivers (:class:`Stamp`): who answered, how, on
which proposal. The API writes it over anything a client sent under that key."""
REDACTED: Final = "[redacted]"

ExitState = Literal["completed", "rejected", "expired", "cancelled", "escalated", "failed"]
"""How a task's approval ended: approved and ``completed``; ``rejected`` by a refusal; ``expired``
at its deadline; ``escalated`` at its deadline after an escalation; ``cancelled``; or ``failed``
(the task failed, before or after the decision)."""
EXIT_STATES: Final[tuple[ExitState, ...]] = (
    "completed",
    "rejected",
    "expired",
    "cancelled",
    "escalated",
    "failed",
)

Via = Literal["page", "form", "model", "pushed"]
"""How an answer came in: the answer page, a host's form, a model (``task_answer``), or pushed
(2025 era). Only the page answers a person's question or casts a vote."""

DecisionEnd = Literal["approved", "rejected", "expired", "escalated"]
"""How a decision ended: its rule met, a refusal, its deadline, its deadline once escalated."""

M = TypeVar("M", bound=BaseModel)


def sensitive_fields(model: type[BaseModel]) -> frozenset[str]:
    """The wire names of the fields its author marked sensitive
    (``Field(json_schema_extra={"sensitive": True})``): shown to people as :data:`REDACTED`."""
    return frozenset(
        info.alias or name
        for name, info in model.model_fields.items()
        if isinstance(info.json_schema_extra, Mapping) and info.json_schema_extra.get("sensitive") is True
    )


def redacted(model: BaseModel, *, given_only: bool = False) -> dict[str, Any]:
    """``model`` as the call gave it (wire names, JSON values; ``given_only``: without the defaults
    it left), every sensitive field (``sensitive_fields``) shown as :data:`REDACTED`."""
    shown = model.model_dump(mode="json", by_alias=True, exclude_unset=given_only)
    if not isinstance(shown, dict):  # a RootModel's input: nothing named to hide
        return {"": shown}
    for name in sensitive_fields(type(model)) & shown.keys():
        shown[name] = REDACTED
    return shown


@dataclass(frozen=True)
class Proposal:
    """What exactly will happen if the decision is yes: the one version people decide on."""

    tool: str
    title: str
    arguments: Mapping[str, Any]
    """As the call gave them, sensitive fields redacted."""
    requester: str
    """The principal who started the task."""
    started_at: str
    """ISO 8601."""
    summary: str | None = None
    """The workflow's own words on what will happen (the tickets that will close, say)."""

    def wire(self) -> dict[str, Any]:
        body = {
            "tool": self.tool,
            "title": self.title,
            "arguments": dict(self.arguments),
            "requester": self.requester,
            "startedAt": self.started_at,
        }
        if self.summary is not None:
            body["summary"] = self.summary
        return body

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> Proposal:
        arguments = body.get("arguments")
        summary = body.get("summary")
        return cls(
            tool=str(body.get("tool", "")),
            title=str(body.get("title", "")),
            arguments=dict(arguments) if isinstance(arguments, Mapping) else {},
            requester=str(body.get("requester", "")),
            started_at=str(body.get("startedAt", "")),
            summary=None if summary is None else str(summary),
        )

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of the proposal's canonical JSON: what a vote is cast on."""
        return hashlib.sha256(b"longtools proposal\n" + canonical(self.wire())).hexdigest()

    @property
    def fingerprint(self) -> str:
        """The digest's first 16 hex digits in groups of four, for people to compare by eye."""
        head = self.digest[:16]
        return " ".join(head[i : i + 4] for i in range(0, 16, 4))


@dataclass(frozen=True)
class Ballot:
    """One vote counted on a question (a refusal ends it, so only approvals are listed)."""

    principal: str
    at: str
    """ISO 8601, workflow time."""

    @property
    def name(self) -> str:
        return name_of(self.principal)

    def wire(self) -> dict[str, Any]:
        return {"principal": self.principal, "name": self.name, "at": self.at}


StepUp = Literal["passkey", "recent"]
"""What a vote takes beyond a signed-in page (``ask_form(step_up=...)``): ``passkey``, a WebAuthn
assertion over :func:`passkey_challenge` by a passkey the voter registered, with user verification;
``recent``, a sign-in within the deployment's ``step_up_max_age_s``."""


def passkey_challenge(task_id: str, question: str, principal: str, digest: str) -> bytes:
    """The WebAuthn challenge of one vote: the proposal's digest, the task and question it is asked
    in, and the voter. An assertion over it approves this proposal, there, by them, and nothing else;
    an auditor computes it again from the ledger's vote entry (``verify_entries``)."""
    parts = ("longtools passkey vote", task_id, question, principal, digest)
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def asserted_challenge(assertion: Mapping[str, str]) -> bytes | None:
    """The challenge a WebAuthn assertion (as a :class:`Stamp` keeps it) was made over, as its
    ``clientDataJSON`` says; none if that cannot be read."""
    try:
        client = json.loads(_unbase64url(assertion.get("clientDataJSON", "")))
        return _unbase64url(str(client["challenge"])) if client.get("type") == "webauthn.get" else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _unbase64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class DecisionState:
    """A person's question's decision so far (under :data:`DECISION_META`)."""

    proposal: Proposal
    rule: Approvers | None = None
    """None: the requester decides (``by="person"``)."""
    deadline: str | None = None
    """ISO 8601, or None: it waits for as long as the task lives."""
    escalated_at: str | None = None
    votes: tuple[Ballot, ...] = ()
    outcome: DecisionEnd | None = None
    by: str | None = None
    """Who refused, for a rejected question."""
    step_up: StepUp | None = None
    """What an approval takes beyond the page (a refusal never needs more)."""

    @property
    def digest(self) -> str:
        return self.proposal.digest

    @property
    def needed(self) -> int:
        return 1 if self.rule is None else self.rule.quorum

    def admits(self, voter: Voter) -> bool:
        """Whether ``voter`` may vote now (decided questions take no vote)."""
        if self.outcome is not None or any(vote.principal == voter.principal for vote in self.votes):
            return False
        if self.rule is None:
            return voter.principal == self.proposal.requester
        return self.rule.admits(voter, self.proposal.requester, escalated=self.escalated_at is not None)

    def voted(self, principal: str) -> bool:
        return any(vote.principal == principal for vote in self.votes)

    def with_vote(self, ballot: Ballot) -> DecisionState:
        votes = (*self.votes, ballot)
        return replace(self, votes=votes, outcome="approved" if len(votes) >= self.needed else None)

    def wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "proposal": self.proposal.wire(),
            "digest": self.digest,
            "fingerprint": self.proposal.fingerprint,
            "rule": None if self.rule is None else self.rule.wire(),
            "needed": self.needed,
            "votes": [vote.wire() for vote in self.votes],
        }
        for name, value in (
            ("deadline", self.deadline),
            ("escalatedAt", self.escalated_at),
            ("outcome", self.outcome),
            ("by", self.by),
            ("stepUp", self.step_up),
        ):
            if value is not None:
                body[name] = value
        return body

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> DecisionState:
        rule = body.get("rule")
        outcome = body.get("outcome")
        return cls(
            proposal=Proposal.from_wire(body.get("proposal") or {}),
            rule=Approvers.from_wire(rule) if isinstance(rule, Mapping) else None,
            deadline=body.get("deadline"),
            escalated_at=body.get("escalatedAt"),
            votes=tuple(
                Ballot(principal=str(vote.get("principal", "")), at=str(vote.get("at", "")))
                for vote in body.get("votes") or ()
                if isinstance(vote, Mapping)
            ),
            outcome=outcome if outcome in get_args(DecisionEnd) else None,
            by=body.get("by"),
            step_up=step_up if (step_up := body.get("stepUp")) in get_args(StepUp) else None,
        )

    def said(self) -> str:
        """The decision so far in words, for ``statusMessage`` and the pages."""
        if self.outcome == "rejected":
            return f"Rejected by {name_of(self.by or '')}"
        if self.outcome in ("expired", "escalated"):
            return "Expired: no decision before the deadline" + (
                " (escalated)" if self.outcome == "escalated" else ""
            )
        votes = ", ".join(f"{vote.name} {_clock(vote.at)}" for vote in self.votes)
        who = "the requester" if self.rule is None else _rule_words(self.rule, self.escalated_at is not None)
        said = f"{len(self.votes)} of {self.needed} approval{'s' if self.needed != 1 else ''}"
        said += f": {votes}" if votes else ""
        return f"{said}; waiting for {who}" if self.outcome is None else said


def _rule_words(rule: Approvers, escalated: bool) -> str:
    names = [*rule.principals, *(f"group {group}" for group in rule.groups)]
    if escalated and rule.escalate is not None:
        names += [f"group {group}" for group in rule.escalate.groups]
    said = " or ".join(names)
    return said + (", not the requester" if rule.exclude_requester else "")


def _clock(at: str) -> str:
    try:
        return datetime.fromisoformat(at).strftime("%H:%M")
    except ValueError:
        return at


def decision_of(question: Mapping[str, Any]) -> DecisionState | None:
    """The decision a question (as wire JSON) carries, if it is a person's question."""
    params = question.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    found = meta.get(DECISION_META) if isinstance(meta, Mapping) else None
    return DecisionState.from_wire(found) if isinstance(found, Mapping) else None


def approvers_decision(question: Mapping[str, Any]) -> DecisionState | None:
    """The decision a question carries, if approvers decide it (a rule): one link for all of them,
    one vote each. None for any other question, the requester's own ``by="person"`` included."""
    decision = decision_of(question)
    return decision if decision is not None and decision.rule is not None else None


@dataclass(frozen=True)
class Stamp:
    """Who gave an answer, and how, as the API delivers it (under :data:`ANSWERED_META`)."""

    principal: str
    via: Via
    groups: frozenset[str] = frozenset()
    digest: str | None = None
    """The proposal digest the person saw when they answered (a person's question only)."""
    passkey: Mapping[str, str] | None = None
    """The WebAuthn assertion the API checked for a ``passkey`` step-up: ``credential``,
    ``publicKey`` (COSE), ``authenticatorData``, ``clientDataJSON``, ``signature`` (base64url)."""
    signed_in_at: str | None = None
    """When the voter signed in (ISO 8601), as the API checked it for a ``recent`` step-up."""

    def wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"principal": self.principal, "via": self.via, "groups": sorted(self.groups)}
        if self.digest is not None:
            body["digest"] = self.digest
        if self.passkey is not None:
            body["passkey"] = dict(self.passkey)
        if self.signed_in_at is not None:
            body["signedInAt"] = self.signed_in_at
        return body

    @classmethod
    def of(cls, answer: Mapping[str, Any]) -> Stamp | None:
        meta = answer.get("_meta")
        body = meta.get(ANSWERED_META) if isinstance(meta, Mapping) else None
        if not isinstance(body, Mapping) or not isinstance(body.get("principal"), str):
            return None
        via = body.get("via")
        digest = body.get("digest")
        passkey = body.get("passkey")
        signed_in_at = body.get("signedInAt")
        return cls(
            principal=body["principal"],
            via=via if via in ("page", "form", "model", "pushed") else "form",
            groups=frozenset(str(group) for group in body.get("groups") or ()),
            digest=digest if isinstance(digest, str) else None,
            passkey={str(k): str(v) for k, v in passkey.items()} if isinstance(passkey, Mapping) else None,
            signed_in_at=signed_in_at if isinstance(signed_in_at, str) else None,
        )


def unstamped(answer: Any) -> Any:
    """``answer`` (wire JSON) as its answerer sent it: without the API's :class:`Stamp`."""
    if not isinstance(answer, Mapping) or not isinstance(answer.get("_meta"), Mapping):
        return answer
    meta = {name: value for name, value in answer["_meta"].items() if name != ANSWERED_META}
    body = {name: value for name, value in answer.items() if name != "_meta"}
    return {**body, "_meta": meta} if meta else body


@dataclass(frozen=True)
class Approved(Generic[M]):
    """The rule was met: ``content`` is the form as the approval that met it filled it in."""

    content: M
    votes: tuple[Ballot, ...]
    digest: str


@dataclass(frozen=True)
class Rejected:
    """Someone the rule admits refused (one refusal is enough)."""

    by: str
    digest: str


@dataclass(frozen=True)
class Expired:
    """The deadline passed with the rule not met: nothing may happen. ``escalated``: it had been."""

    escalated: bool = False
    votes: tuple[Ballot, ...] = ()


Decision = Approved[M] | Rejected | Expired
"""What ``ask_form(..., by=Approvers(...))`` or ``ask_form(..., timeout=...)`` returns: a workflow
handles each (there is no default approval)."""
