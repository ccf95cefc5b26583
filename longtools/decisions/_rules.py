"""Who decides: approver rules, the groups people are in, and whether a rule admits a voter.

Pure data and checks, used alike by workflows (in Temporal's sandbox: deterministic), the API and
the pages. A rule names people and groups by the names an operator writes in its settings: a
static token's name (``LONGTOOLS_AUTH_TOKENS``) or a JWT subject, or a whole principal
(``token:alice``, ``jwt:<iss>|alice``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from longtools._settings import parse_groups

__all__ = ["Approvers", "Escalation", "Voter", "name_of", "names_of", "parse_groups", "tags_of"]


def name_of(principal: str) -> str:
    """The name a person goes by in rules and on the pages: a static token's name, a JWT's
    subject, or the principal as it is (``anonymous``)."""
    if principal.startswith("token:"):
        return principal.removeprefix("token:")
    if principal.startswith("jwt:") and "|" in principal:
        return principal.split("|", 1)[1]
    return principal


def names_of(principal: str) -> frozenset[str]:
    """Every name a rule may use for ``principal``: the whole principal and its short name."""
    return frozenset({principal, name_of(principal)})


@dataclass(frozen=True)
class Voter:
    """Who votes, as the API authenticated them: a principal and the groups it is in now."""

    principal: str
    groups: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return name_of(self.principal)


@dataclass(frozen=True)
class Escalation:
    """After ``after`` with no decision, the rule admits ``groups`` too (the question's deadline
    still stands). A question whose deadline passes once escalated ends ``escalated``."""

    after: timedelta
    groups: tuple[str, ...]

    def wire(self) -> dict[str, Any]:
        return {"afterSeconds": int(self.after.total_seconds()), "groups": list(self.groups)}


@dataclass(frozen=True)
class Approvers:
    """A rule for who decides a question: ``quorum`` distinct approvals from the people named in
    ``principals`` or in one of ``groups``; one refusal rejects.

    ``exclude_requester``: the person who started the task may not vote (separation of duties),
    even when a group of the rule has them. ``escalate``: widen the rule after a while.
    """

    principals: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    quorum: int = 1
    exclude_requester: bool = False
    escalate: Escalation | None = None

    def __post_init__(self) -> None:
        if isinstance(self.principals, str) or isinstance(self.groups, str):
            raise TypeError("Approvers(principals=..., groups=...) take tuples of names, not one string")
        object.__setattr__(self, "principals", tuple(self.principals))
        object.__setattr__(self, "groups", tuple(self.groups))
        if not self.principals and not self.groups:
            raise ValueError("Approvers needs at least one principal or group")
        if self.quorum < 1:
            raise ValueError("Approvers(quorum=...) must be at least 1: there is no default approval")
        if self.escalate is not None and not self.escalate.groups:
            raise ValueError("Escalation needs at least one group")

    def admits(self, voter: Voter, requester: str, *, escalated: bool = False) -> bool:
        """Whether ``voter`` may vote on a question of ``requester``'s task under this rule."""
        if self.exclude_requester and voter.principal == requester:
            return False
        groups = set(self.groups) | (set(self.escalate.groups) if escalated and self.escalate else set())
        return bool(names_of(voter.principal) & set(self.principals)) or bool(voter.groups & groups)

    def wire(self) -> dict[str, Any]:
        """The rule as the question's ``_meta`` shows it (and the ledger keeps it)."""
        body: dict[str, Any] = {
            "principals": list(self.principals),
            "groups": list(self.groups),
            "quorum": self.quorum,
            "excludeRequester": self.exclude_requester,
        }
        if self.escalate is not None:
            body["escalate"] = self.escalate.wire()
        return body

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> Approvers:
        escalate = body.get("escalate")
        return cls(
            principals=tuple(str(name) for name in body.get("principals") or ()),
            groups=tuple(str(name) for name in body.get("groups") or ()),
            quorum=int(body.get("quorum") or 1),
            exclude_requester=bool(body.get("excludeRequester")),
            escalate=None
            if not isinstance(escalate, Mapping)
            else Escalation(
                after=timedelta(seconds=int(escalate.get("afterSeconds") or 0)),
                groups=tuple(str(name) for name in escalate.get("groups") or ()),
            ),
        )

    def possible(self, known_groups: Iterable[str]) -> bool:
        """Whether anyone could meet the rule with these groups configured (a rule of groups only,
        none of which exists, can never be met)."""
        return bool(self.principals) or bool(set(self.groups) & set(known_groups))


def tags_of(ring: Sequence[bytes], name: str) -> list[str]:
    """Keyed tags of ``name`` (``p:<name>`` of a person, ``g:<group>``), one per key of ``ring``, the
    first key's first: what a task waiting on a decision is found by (a search attribute, which
    Temporal stores in plaintext, so never the name itself). The ring is the payload ring, which
    the API and every worker have, and whose old keys stay listed after a rotation."""
    return [
        hmac.new(key, b"longtools decider tag\x00" + name.encode(), hashlib.sha256).hexdigest()[:24]
        for key in ring
    ]
