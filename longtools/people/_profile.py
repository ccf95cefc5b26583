"""What the directory keeps of a person, as data: their profile, the change a sign-in makes to it,
and where it is kept in Temporal (a workflow per person, its memo). Pure data: used in Temporal's
sandbox by the person's workflow (``longtools.workflows.people``) and by the directory's readers.
"""

from __future__ import annotations

import hashlib
from typing import Final

from pydantic import BaseModel

__all__ = ["PERSON_WORKFLOW", "PROFILE_MEMO", "PROFILE_SIGNAL", "Profile", "ProfileChange", "person_id"]

PERSON_WORKFLOW: Final = "longtools.Person"
PROFILE_SIGNAL: Final = "longtools.person.change"
PROFILE_MEMO: Final = "longtools.person"
"""Memo key of a person's workflow: their :class:`Profile` (JSON), what the directory reads."""


class Profile(BaseModel):
    """One person who signed in to the pages."""

    principal: str
    """``jwt:<iss>|<sub>``, as their bearer tokens and their page sessions have it."""
    email: str | None = None
    """The ``email`` of their latest OIDC sign-in, when its ID token said ``email_verified``."""


class ProfileChange(BaseModel):
    """What a sign-in changes: only the fields it sets (``model_fields_set``), so a writer of one
    field (a sign-in's email, later a passkey) never undoes another's."""

    email: str | None = None


def person_id(principal: str) -> str:
    """The workflow id of ``principal``'s record: a hash, so no name or issuer shows in Temporal's
    list of workflows (one who guesses a principal can still confirm that it signed in)."""
    return "longtools-person-" + hashlib.sha256(principal.encode()).hexdigest()[:32]
