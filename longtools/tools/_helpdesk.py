"""The helpdesk example: three quick tools and three long tools over one ticket store. API process.

``create_ticket`` and ``get_ticket`` answer at once. ``close_ticket`` asks why (MRTR) and closes
only on the answer round, after checking the ticket again: it may have been closed meanwhile.
``bulk_close_tickets`` is a long tool (``longtools/workflows/helpdesk.py``): it asks once, then closes each
ticket in its own activity. ``connect_mailbox`` asks a person for a secret; ``delete_customer``
waits for two leads to approve (``longtools/workflows/customers.py``). The store is
``<data_dir>/helpdesk.sqlite3``, shared with the worker.
"""

from __future__ import annotations

import secrets
from typing import Literal

import anyio.to_thread
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from longtools._settings import Settings
from longtools.activities.helpdesk import CloseReason, HelpdeskActivities, HistoryEntry, Ticket, TicketStore
from longtools.decisions import parse_groups
from longtools.tools._registry import Registry, ToolError, ToolReturn
from longtools.tools._round import Round
from longtools.workflows._inputs import elicit
from longtools.workflows.customers import DeleteCustomer, DeleteCustomerInput, DeleteCustomerOutput
from longtools.workflows.helpdesk import BulkCloseInput, BulkCloseOutput, BulkCloseTickets
from longtools.workflows.mailbox import ConnectMailbox, ConnectMailboxInput, ConnectMailboxOutput

_REASON_KEY = "close_reason"
# requestState is "<question id><exchange id>". The question id makes an answer count only for
# the question it belongs to; the exchange id (minted in the first round, sealed by the SDK) is
# who closes, so a replayed final round finds the ticket closed by itself and answers the same.
_QUESTION_ID = "close_reason/v2:"
_TICKET_ID = r"^T-[1-9][0-9]{0,17}$"


class _Wire(BaseModel):
    """camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)


class CreateTicketInput(BaseModel):
    title: str = Field(min_length=1, max_length=200, description="What the ticket is about.")
    customer: str = Field(min_length=1, max_length=200, description="The customer it is for.")


class GetTicketInput(BaseModel):
    ticket_id: str = Field(
        alias="ticketId", title="Ticket id", pattern=_TICKET_ID, description="The ticket, e.g. T-12."
    )


class CloseTicketInput(BaseModel):
    ticket_id: str = Field(
        alias="ticketId", title="Ticket id", pattern=_TICKET_ID, description="The ticket to close."
    )


class ReasonForm(BaseModel):
    reason: CloseReason = Field(description="Why the ticket is closed.")


class TicketView(_Wire):
    ticket_id: str
    title: str
    customer: str
    status: Literal["open", "closed"]
    close_reason: CloseReason | None
    created_at: str
    history: list[HistoryEntry]
    """Every state change, oldest first."""


def _view(ticket: Ticket) -> TicketView:
    return TicketView(
        ticket_id=ticket.id,
        title=ticket.title,
        customer=ticket.customer,
        status=ticket.status,
        close_reason=ticket.close_reason,
        created_at=ticket.created_at,
        history=ticket.history,
    )


def register_helpdesk(registry: Registry, settings: Settings) -> None:
    store = TicketStore(settings.data_dir / "helpdesk.sqlite3")

    async def existing(ticket_id: str) -> Ticket:
        ticket = await anyio.to_thread.run_sync(store.get, ticket_id)
        if ticket is None:
            raise ToolError(f"There is no ticket {ticket_id}.")
        return ticket

    @registry.tool(
        "create_ticket",
        input=CreateTicketInput,
        output=TicketView,
        title="Create ticket",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    async def create_ticket(args: CreateTicketInput, rnd: Round) -> ToolReturn:
        """Open a new helpdesk ticket for a customer; returns it with its id (T-<n>)."""
        ticket = await anyio.to_thread.run_sync(store.create, args.title, args.customer)
        return _view(ticket)

    @registry.tool(
        "get_ticket",
        input=GetTicketInput,
        output=TicketView,
        title="Show ticket",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def get_ticket(args: GetTicketInput, rnd: Round) -> ToolReturn:
        """Show a ticket: its status, why it was closed, and the history of every change to it."""
        return _view(await existing(args.ticket_id))

    @registry.tool("close_ticket", input=CloseTicketInput, output=TicketView, title="Close ticket")
    async def close_ticket(args: CloseTicketInput, rnd: Round) -> ToolReturn:
        """Close an open ticket after asking why (Resolved, Duplicate, Cancelled); declining keeps it open."""
        state = rnd.request_state
        exchange = state.removeprefix(_QUESTION_ID) if state and state.startswith(_QUESTION_ID) else None
        answer = rnd.elicited(_REASON_KEY, ReasonForm) if exchange is not None else None
        if exchange is None or answer is None:
            ticket = await existing(args.ticket_id)
            if ticket.status == "closed":
                raise ToolError(_already_closed(ticket))
            question = elicit(f"Why is ticket {args.ticket_id} being closed?", ReasonForm)
            if not rnd.supports(question):
                raise ToolError("close_ticket needs a client that supports form elicitation")
            exchange = exchange or secrets.token_urlsafe(12)
            return rnd.ask({_REASON_KEY: question}, state=_QUESTION_ID + exchange)
        if answer.content is None:  # declined or cancelled: nothing changes
            return _view(await existing(args.ticket_id))
        closed = await anyio.to_thread.run_sync(
            store.close, args.ticket_id, answer.content.reason, f"close_ticket call {exchange}"
        )
        ticket = await existing(args.ticket_id)  # raises for "not_found"
        if closed == "already_closed":
            raise ToolError(_already_closed(ticket))
        return _view(ticket)

    registry.long_tool(
        "bulk_close_tickets",
        workflow=BulkCloseTickets,
        input=BulkCloseInput,
        output=BulkCloseOutput,
        task_support="optional",
        title="Close all tickets of a customer",
        asks_person=True,
    )
    registry.long_tool(
        "connect_mailbox",
        workflow=ConnectMailbox,
        input=ConnectMailboxInput,
        output=ConnectMailboxOutput,
        task_support="optional",
        title="Connect a support mailbox",
        asks_person=True,
    )
    registry.long_tool(
        "delete_customer",
        workflow=DeleteCustomer,
        input=DeleteCustomerInput,
        output=DeleteCustomerOutput,
        task_support="optional",
        title="Delete a customer's tickets",
        asks_person=True,
        annotations=ToolAnnotations(destructive_hint=True),
    )
    acts = HelpdeskActivities(
        store,
        settings.helpdesk_work_s,
        approval_s=settings.helpdesk_approval_s,
        groups=parse_groups(settings.groups or ""),
        groups_claimed=settings.groups_claim is not None,
    )
    registry.add_activities(
        acts.open_tickets,
        acts.close_ticket,
        acts.connect_mailbox,
        acts.approval_policy,
        acts.customer_tickets,
        acts.delete_ticket,
    )


def _already_closed(ticket: Ticket) -> str:
    reason = ticket.close_reason.value if ticket.close_reason else "no reason given"
    return f"Ticket {ticket.id} is already closed ({reason}); nothing was changed."
