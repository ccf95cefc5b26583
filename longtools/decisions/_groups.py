"""Which groups a person is in: ``LONGTOOLS_GROUPS`` for every kind of sign-in, and with JWTs a
configured claim. API process."""

from __future__ import annotations

from collections.abc import Iterable

from longtools._settings import Settings
from longtools.decisions._rules import Voter, names_of, parse_groups

__all__ = ["Groups"]


class Groups:
    """The groups of the deployment (``LONGTOOLS_GROUPS``)."""

    def __init__(self, settings: Settings) -> None:
        self.members = parse_groups(settings.groups or "")

    @property
    def names(self) -> frozenset[str]:
        """The groups the setting defines (a claim may name others)."""
        return frozenset(self.members)

    def of(self, principal: str, claimed: Iterable[str] = ()) -> frozenset[str]:
        """The groups ``principal`` is in: those that list one of its names, and those its token's
        claim named (``Caller.groups``, read by the bearer verifier or the OIDC sign-in)."""
        names = names_of(principal)
        return frozenset({group for group, members in self.members.items() if members & names} | set(claimed))

    def voter(self, principal: str, claimed: Iterable[str] = ()) -> Voter:
        return Voter(principal=principal, groups=self.of(principal, claimed))
