"""What the directory keeps of a person, as data: their profile, the change a sign-in makes to it,
and where it is kept in Temporal (a workflow per person, its memo). Pure data: used in Temporal's
sandbox by the person's workflow (``longtools.workflows.people``) and by the directory's readers.
"""

from __future__ import annotations

import hashlib
from typing import Final, Literal

from pydantic import BaseModel

__all__ = [
    "PERSON_WORKFLOW",
    "PROFILE_MEMO",
    "PROFILE_SIGNAL",
    "Passkey",
    "Profile",
    "ProfileChange",
    "person_id",
]

PERSON_WORKFLOW: Final = "longtools.Person"
PROFILE_SIGNAL: Final = "longtools.person.change"
PROFILE_MEMO: Final = "longtools.person"
"""Memo key of a person's workflow: their :class:`Profile` (JSON), what the directory reads."""


class Passkey(BaseModel):
    """A passkey a person registered on the pages (WebAuthn): what checks their assertions."""

    id: str
    """The credential's id (base64url)."""
    public_key: str
    """Its public key, COSE (base64url)."""
    sign_count: int = 0
    """The authenticator's signature counter at its last use (0: it keeps none)."""
    name: str
    """What the person called it."""
    created_at: str
    transports: list[str] = []


class Profile(BaseModel):
    """One person who signed in to the pages."""

    principal: str
    """``jwt:<iss>|<sub>``, as their bearer tokens and their page sessions have it."""
    email: str | None = None
    """The ``email`` of their latest OIDC sign-in, when its ID token said ``email_verified``."""
    passkeys: list[Passkey] = []


class ProfileChange(BaseModel):
    """What one writer changes: the fields ``changes`` names, and only those, so a writer of one (a
    sign-in's email, a passkey page) never undoes another's. Named, not read from which fields were
    set: a signal's payload carries every field."""

    changes: list[Literal["email", "passkeys"]]
    email: str | None = None
    passkeys: list[Passkey] = []
    """The whole list (its writer read it and changed it: registered, removed, a counter moved)."""

    def applied(self, profile: Profile) -> Profile:
        return profile.model_copy(update={name: getattr(self, name) for name in self.changes})


def person_id(principal: str) -> str:
    """The workflow id of ``principal``'s record: a hash, so no name or issuer shows in Temporal's
    list of workflows (one who guesses a principal can still confirm that it signed in)."""
    return "longtools-person-" + hashlib.sha256(principal.encode()).hexdigest()[:32]
