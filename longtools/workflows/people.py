"""A person's record in the directory of people who signed in (``longtools.people``). Workflow code.

One per person, under ``person_id(principal)``, started by a sign-in's signal-with-start with the
profile already in its memo. It only waits: each change a sign-in signals is merged into the profile
and, when it changes anything, upserted into the memo, which is what the directory reads (no worker
is needed for a read). After ``_CHANGES_PER_RUN`` changes, or when Temporal suggests it, it goes on
as a new run with the same profile, so its history never grows long.
"""

from __future__ import annotations

from typing import Final

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools.people import PERSON_WORKFLOW, PROFILE_MEMO, PROFILE_SIGNAL, Profile, ProfileChange

__all__ = ["PersonRecord"]

_CHANGES_PER_RUN: Final = 100


@workflow.defn(name=PERSON_WORKFLOW)
class PersonRecord:
    @workflow.init
    def __init__(self, profile: Profile) -> None:
        self._profile = profile
        self._changes = 0

    @workflow.run
    async def run(self, profile: Profile) -> None:
        await workflow.wait_condition(
            lambda: self._changes >= _CHANGES_PER_RUN or workflow.info().is_continue_as_new_suggested()
        )
        workflow.continue_as_new(self._profile, memo={PROFILE_MEMO: self._profile.model_dump(mode="json")})

    @workflow.signal(name=PROFILE_SIGNAL)
    def change(self, change: ProfileChange) -> None:
        changed = change.applied(self._profile)
        if changed == self._profile:
            return  # the signal of the start that made the record, or a change already made
        self._profile = changed
        self._changes += 1
        workflow.upsert_memo({PROFILE_MEMO: changed.model_dump(mode="json")})
