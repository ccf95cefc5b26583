"""The directory of people who signed in to the pages: read and written through Temporal, where every
API replica and the worker already reach. API process (sign-ins write) and worker (notifications read).

Each person is one small workflow, ``longtools.Person`` (``longtools.workflows.people``), under an id
made of a hash of their principal (``person_id``); their :class:`Profile` is its memo. Why there:

- no new database: Temporal is the one store longtools has (sign-outs are kept there the same way,
  ``longtools.pages._signouts``), and it is shared by every replica and the worker already;
- a read needs no worker and no history: one ``DescribeWorkflowExecution``, answered NOT_FOUND for a
  person who never signed in;
- a write is one signal-with-start, made only when something changed (a sign-in reads first): the
  first creates the record with its memo in the same call, so it reads back at once; a change to a
  running record is applied by the worker, which upserts the memo;
- the memo is a payload like any other, so the payload codec encrypts it at rest (an email is
  personal data); the id is a hash, so no name shows in Temporal's list of workflows.

A record runs until an operator ends it (``temporal workflow terminate``: the person is forgotten;
their next sign-in makes a new record); its history stays short (``continue_as_new``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Final

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from longtools._settings import Settings
from longtools.people._profile import (
    PERSON_WORKFLOW,
    PROFILE_MEMO,
    PROFILE_SIGNAL,
    Passkey,
    Profile,
    ProfileChange,
    person_id,
)

__all__ = ["Directory"]

_READ_BACK_S: Final = 10.0
"""How long a passkey's change waits to read back (a worker applies it: milliseconds)."""
_READS_AT_ONCE: Final = 8
"""Describes in flight for one lookup of many people (a group's members)."""


class Directory:
    """The people who signed in, by principal. ``connection``: the process's Temporal client."""

    def __init__(self, settings: Settings, connection: Callable[[], Client]) -> None:
        self._connection = connection
        self._task_queue = settings.task_queue
        self._rpc_timeout = timedelta(seconds=settings.temporal_rpc_timeout_s)
        # The issuer OIDC sign-ins are made with: their principal is `jwt:<issuer>|<sub>`.
        self._issuer = settings.oidc_issuer or settings.jwt_issuer

    async def profile(self, principal: str) -> Profile | None:
        """``principal``'s profile, or none if they have no record (never signed in, or forgotten).

        Raises:
            RPCError: Temporal did not answer.
        """
        handle = self._connection().get_workflow_handle(person_id(principal))
        try:
            described = await handle.describe(rpc_timeout=self._rpc_timeout)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        if described.status != WorkflowExecutionStatus.RUNNING:
            return None  # ended by an operator: forgotten
        found = await described.memo_value(PROFILE_MEMO, None)
        profile = None if found is None else Profile.model_validate(found)
        return profile if profile is not None and profile.principal == principal else None

    async def remember_email(self, principal: str, email: str | None) -> bool:
        """Record ``email`` (verified at a sign-in just now; none: that sign-in verified none) as
        ``principal``'s; whether it changed anything. A person without a record and without an email
        gets none.

        Raises:
            RPCError: Temporal did not answer.
        """
        known = await self.profile(principal)
        if (known.email if known is not None else None) == email:
            return False
        await self._change(principal, ProfileChange(changes=["email"], email=email))
        return True

    async def save_passkeys(self, principal: str, passkeys: list[Passkey]) -> None:
        """Make ``passkeys`` ``principal``'s, and return once the directory reads them back (the
        worker applies a change to a running record: the next page must see it).

        Raises:
            RPCError: Temporal did not answer.
            TimeoutError: no worker applied it within ``_READ_BACK_S``.
        """
        await self._change(principal, ProfileChange(changes=["passkeys"], passkeys=passkeys))
        async with asyncio.timeout(_READ_BACK_S):
            while True:
                known = await self.profile(principal)
                if known is not None and known.passkeys == passkeys:
                    return
                await asyncio.sleep(0.05)

    async def _change(self, principal: str, change: ProfileChange) -> None:
        """Signal ``change`` to ``principal``'s record, made now (with it) if there is none."""
        profile = change.applied(Profile(principal=principal))
        await self._connection().start_workflow(
            PERSON_WORKFLOW,
            profile,
            id=person_id(principal),
            task_queue=self._task_queue,
            # A new record holds the profile from its first moment; a running one takes the change.
            memo={PROFILE_MEMO: profile.model_dump(mode="json")},
            start_signal=PROFILE_SIGNAL,
            start_signal_args=[change],
            rpc_timeout=self._rpc_timeout,
        )

    def principal_of(self, name: str) -> str | None:
        """The principal an OIDC sign-in gives the person a rule calls ``name``: a whole ``jwt:``
        principal as it is, a bare name as the issuer's subject; none for a static token's."""
        if name.startswith("jwt:"):
            return name
        if name.startswith("token:") or self._issuer is None:
            return None
        return f"jwt:{self._issuer}|{name}"

    async def emails(self, names: Iterable[str]) -> dict[str, str]:
        """The verified email of each of ``names`` (as rules name people, or whole principals) who
        has one, by name.

        Raises:
            RPCError: Temporal did not answer.
        """
        wanted = {name: principal for name in set(names) if (principal := self.principal_of(name))}
        limit = asyncio.Semaphore(_READS_AT_ONCE)

        async def read(principal: str) -> Profile | None:
            async with limit:
                return await self.profile(principal)

        found = await asyncio.gather(*(read(principal) for principal in wanted.values()))
        return {
            name: profile.email
            for name, profile in zip(wanted, found, strict=True)
            if profile is not None and profile.email is not None
        }
