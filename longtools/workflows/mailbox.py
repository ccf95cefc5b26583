"""``connect_mailbox``: connect the helpdesk to a support mailbox, asking a person for its password.
Workflow code.

The example of a secret: the password is asked with ``sensitive=True``, so it is answered only on
the answer page, never through the client, its model or ``tasks/get``; it reaches this workflow
encrypted like every payload. The result shows only a fingerprint of it, which proves it arrived.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools.workflows._ask import ask_form, report


class ConnectMailboxInput(BaseModel):
    address: str = Field(
        pattern=r"^[^@\s]+@[^@\s]+$",
        max_length=200,
        description="The support mailbox to connect, e.g. support@example.com.",
    )


class MailboxPassword(BaseModel):
    password: str = Field(min_length=8, max_length=200, description="The mailbox's app password.")


class ConnectMailboxOutput(BaseModel):
    address: str
    outcome: Literal["connected", "declined"]
    fingerprint: str | None = None
    """The first 12 hex digits of the password's SHA-256: it arrived, and nobody sees it."""


@workflow.defn(name="connect_mailbox")
class ConnectMailbox:
    """Connect a support mailbox: asks a person for its app password, on the answer page only."""

    @workflow.run
    async def run(self, args: ConnectMailboxInput) -> ConnectMailboxOutput:
        report(f"Waiting for the password of {args.address}")
        answer = await ask_form(f"The app password of {args.address}", MailboxPassword, sensitive=True)
        if answer.content is None:
            return ConnectMailboxOutput(address=args.address, outcome="declined")
        secret = answer.content.password.encode()
        report(f"Connected {args.address}")
        fingerprint = hashlib.sha256(secret).hexdigest()[:12]
        return ConnectMailboxOutput(address=args.address, outcome="connected", fingerprint=fingerprint)
