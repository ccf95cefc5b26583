"""``bulk_close_tickets``: close every open ticket of one customer, after asking once. Workflow code.

Runs inside the Temporal worker's sandbox: deterministic only (no I/O, no clocks, no randomness).
Every read and write of the ticket store is an activity (``longtools/activities/helpdesk.py``); each ticket
is its own activity call, so a crash resumes at the ticket it stopped on, and a retried close is
made harmless by the operation id it carries (this workflow's id).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from temporalio import workflow
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from longtools.activities.helpdesk import (
        CloseReason,
        CloseTicketRequest,
        HelpdeskActivities,
        OpenTicketsInput,
    )
    from longtools.workflows._ask import ask_form, report

_LIST_TIMEOUT = timedelta(seconds=30)
# The heartbeat timeout notices a dead worker within seconds; start-to-close only bounds a call
# that keeps heartbeating but never finishes.
_CLOSE_TIMEOUT = timedelta(minutes=10)
_CLOSE_HEARTBEAT = timedelta(seconds=2)


class BulkCloseInput(BaseModel):
    customer: str = Field(min_length=1, max_length=200, description="The customer whose open tickets close.")


# The one question, asked before anything is closed. Flat fields: it is an elicitation form (and a
# docstring here would be sent to the client as the form's description).
class BulkCloseForm(BaseModel):
    confirm: bool = Field(description="Close all of them?")
    reason: CloseReason = Field(CloseReason.resolved, description="Why they are closed.")
    note: str = Field("", max_length=200, description="A note for the customer, if any.")


class BulkCloseOutput(BaseModel):
    # camelCase on the wire (structuredContent); field names also validate, because Temporal's
    # pydantic converter stores the result by field name.
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)

    customer: str
    outcome: Literal["closed", "nothing_to_close", "declined"]
    reason: CloseReason | None = None
    note: str = ""
    closed: list[str] = []
    """Tickets this task closed."""
    already_closed: list[str] = []
    """Tickets someone else closed between the listing and this task's turn."""
    not_found: list[str] = []


@workflow.defn(name="bulk_close_tickets")
class BulkCloseTickets:
    """Close all open tickets of a customer after one confirmation: one by one, with progress; cancellable."""

    @workflow.run
    async def run(self, args: BulkCloseInput) -> BulkCloseOutput:
        found = await workflow.execute_activity_method(
            HelpdeskActivities.open_tickets,
            OpenTicketsInput(customer=args.customer),
            start_to_close_timeout=_LIST_TIMEOUT,
        )
        ids = found.ticket_ids
        if not ids:
            return BulkCloseOutput(customer=args.customer, outcome="nothing_to_close")
        # A person's question: no model, nor a client library, approves closing tickets for them.
        answer = await ask_form(
            f"Close {_tickets(len(ids))} for {args.customer}?", BulkCloseForm, by="person"
        )
        if answer.content is None or not answer.content.confirm:
            return BulkCloseOutput(customer=args.customer, outcome="declined")
        reason = answer.content.reason
        result = BulkCloseOutput(
            customer=args.customer, outcome="closed", reason=reason, note=answer.content.note
        )
        operation = workflow.info().workflow_id
        report(f"Closing {_tickets(len(ids))}")
        for done, ticket_id in enumerate(ids, start=1):
            outcome = await workflow.execute_activity_method(
                HelpdeskActivities.close_ticket,
                CloseTicketRequest(ticket_id=ticket_id, reason=reason, operation=operation),
                start_to_close_timeout=_CLOSE_TIMEOUT,
                heartbeat_timeout=_CLOSE_HEARTBEAT,
                # A cancel waits until the activity has stopped, so "cancelled" means nothing is
                # still being closed behind the task's back.
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            if outcome.result == "closed":
                result.closed.append(ticket_id)
            elif outcome.result == "already_closed":
                result.already_closed.append(ticket_id)
            else:
                result.not_found.append(ticket_id)
            if workflow.cancellation_reason() is not None:
                # The cancel came while the close was committing, so the activity finished and
                # the SDK handed back its result instead of the cancellation: stop here anyway.
                raise asyncio.CancelledError
            report(f"Closed {done} of {len(ids)}")
        return result


def _tickets(n: int) -> str:
    return f"{n} ticket" if n == 1 else f"{n} tickets"
