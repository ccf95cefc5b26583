"""The people who signed in to the pages, kept where every API replica and the worker reach them: a
small directory in Temporal (one workflow per person, their profile its memo; no other database).

Used by the pages (a sign-in records the person's verified email), the worker (notifications find
the address of a person the settings give none) and the person's workflow
(``longtools.workflows.people``, which imports only ``_profile``'s data); it builds on nothing of
theirs. A person's passkeys are kept in the same profile (the pages register them, votes check them).

- ``_profile``: a person's profile and where it is kept (pure data, used in Temporal's sandbox);
- ``_directory``: reading and writing it (API and worker).
"""

from longtools.people._directory import Directory
from longtools.people._profile import (
    PERSON_WORKFLOW,
    PROFILE_MEMO,
    PROFILE_SIGNAL,
    Passkey,
    Profile,
    ProfileChange,
    person_id,
)

__all__ = [
    "PERSON_WORKFLOW",
    "PROFILE_MEMO",
    "PROFILE_SIGNAL",
    "Directory",
    "Passkey",
    "Profile",
    "ProfileChange",
    "person_id",
]
