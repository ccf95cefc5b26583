"""``connect_mailbox``: connect the helpdesk to a support mailbox, asking a person for its password.
Workflow code.

The example of a secret: the password is asked with ``sensitive=True``, so it is answered only on
the answer page, never through the client, its model or ``tasks/get``; it reaches this workflow
encrypted like every payload. The result proves it arrived by what was done with it (the mailbox's
connection), never by anything made from it: even a few digits of its hash let whoever reads the
result test guesses against them (a dictionary check).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools.activities.helpdesk import ConnectMailboxRequest, HelpdeskActivities
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
    connection: str | None = None
    """The helpdesk's connection to the mailbox, made with the password (it arrived, and was used)."""


@workflow.defn(name="connect_mailbox")
class ConnectMailbox:
    """Connect a support mailbox: asks a person for its app password, on the answer page only."""

    @workflow.run
    async def run(self, args: ConnectMailboxInput) -> ConnectMailboxOutput:
        report(f"Waiting for the password of {args.address}")
        answer = await ask_form(f"The app password of {args.address}", MailboxPassword, sensitive=True)
        if answer.content is None:
            return ConnectMailboxOutput(address=args.address, outcome="declined")
        # Only the activity's input carries the password (encrypted at rest like every payload).
        # Before this activity the workflow completed at once: a task waiting at the question while
        # longtools is upgraded runs this afterwards, with nothing in its history to contradict.
        connected = await workflow.execute_activity_method(
            HelpdeskActivities.connect_mailbox,
            ConnectMailboxRequest(
                address=args.address, password=answer.content.password, operation=workflow.info().workflow_id
            ),
            start_to_close_timeout=timedelta(seconds=30),
        )
        report(f"Connected {args.address}")
        return ConnectMailboxOutput(
            address=args.address, outcome="connected", connection=connected.connection
        )
