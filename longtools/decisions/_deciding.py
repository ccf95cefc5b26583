"""A decision being taken, inside the workflow that asked: votes counted as they arrive, under the
question's rule, on its proposal. Workflow code (Temporal's sandbox): deterministic.

The API checks a vote before it sends it (the voter's sign-in, the rule, one vote each, the
proposal the person saw) and stamps it (``Stamp``); the workflow checks it again on arrival,
because it trusts nothing it did not check itself, and records each vote in the ledger, counted
or not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Generic, TypeVar

from mcp_types import ElicitRequest, ElicitRequestFormParams
from pydantic import BaseModel, ValidationError
from temporalio import workflow

from longtools.decisions._decision import (
    DECISION_META,
    Ballot,
    DecisionState,
    Stamp,
    asserted_challenge,
    passkey_challenge,
)
from longtools.decisions._ledger import EntryKind, ledger_time
from longtools.decisions._rules import Voter

__all__ = ["Deciding", "with_decision"]

M = TypeVar("M", bound=BaseModel)


def with_decision(request: ElicitRequest, state: DecisionState) -> ElicitRequest:
    """``request`` carrying ``state`` in its ``_meta`` (the rest of its ``_meta`` kept)."""
    params = request.params
    assert isinstance(params, ElicitRequestFormParams)
    wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
    wire["_meta"] = {**(wire.get("_meta") or {}), DECISION_META: state.wire()}
    return ElicitRequest(params=ElicitRequestFormParams.model_validate(wire))


class Deciding(Generic[M]):
    """One open decision: its question's key, its state, and the form its approvals fill in."""

    def __init__(self, key: str, state: DecisionState, model: type[M]) -> None:
        self.key = key
        self.state = state
        self.model = model
        self.content: M | None = None
        """The form as the approval that met the rule filled it in."""
        self.changed = False

    def take(
        self, response: Mapping[str, Any], record: Callable[[EntryKind, Mapping[str, Any]], None]
    ) -> None:
        """Count ``response`` as a vote, if its stamp says it may be one; ``record`` it in the
        task's ledger either way."""
        stamp = Stamp.of(response)
        action = response.get("action")
        decision = "approve" if action == "accept" else "reject"
        entry: dict[str, Any] = {
            "question": self.key,
            "by": None if stamp is None else stamp.principal,
            "via": None if stamp is None else stamp.via,
            "decision": decision,
            "proposal": None if stamp is None else stamp.digest,
        }
        if stamp is not None and stamp.passkey is not None:
            entry["passkey"] = dict(stamp.passkey)  # for ``longtools audit verify`` to check
        if stamp is not None and stamp.signed_in_at is not None:
            entry["signedInAt"] = stamp.signed_in_at
        why = self._refused(stamp)
        if why is None and decision == "approve":
            why = self._stepped_up(stamp)
        content: M | None = None
        if why is None and decision == "approve":
            try:
                content = self.model.model_validate(response.get("content") or {})
            except ValidationError:
                why = "the form does not fit"
        if why is not None:
            record("vote", {**entry, "counted": False, "why": why})
            return
        assert stamp is not None
        record("vote", {**entry, "counted": True})
        if decision == "reject":
            self.state = replace(self.state, outcome="rejected", by=stamp.principal)
        else:
            at = ledger_time(workflow.now())
            self.state = self.state.with_vote(Ballot(principal=stamp.principal, at=at))
            if self.state.outcome == "approved":
                self.content = content
        self.changed = True

    def _stepped_up(self, stamp: Stamp | None) -> str | None:
        """Why an approval lacks the step-up its question asks for, if it does. The API checked the
        passkey's signature; this checks it was made over this vote's challenge (the signature is
        checked again offline, by ``verify_entries``)."""
        if self.state.step_up == "recent" and (stamp is None or stamp.signed_in_at is None):
            return "no recent sign-in"
        if self.state.step_up != "passkey":
            return None
        if stamp is None or stamp.passkey is None:
            return "no passkey"
        expected = passkey_challenge(
            workflow.info().workflow_id, self.key, stamp.principal, self.state.digest
        )
        if asserted_challenge(stamp.passkey) != expected:
            return "a passkey assertion for another vote"
        return None

    def _refused(self, stamp: Stamp | None) -> str | None:
        if stamp is None or stamp.via != "page":
            return "not given on the answer page"
        if stamp.digest != self.state.digest:
            return "cast on another proposal"
        if self.state.voted(stamp.principal):
            return "voted already"
        if not self.state.admits(Voter(principal=stamp.principal, groups=stamp.groups)):
            return "not admitted by the rule"
        return None
