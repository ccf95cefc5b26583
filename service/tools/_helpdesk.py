"""Helpdesk quick tools: ``close_ticket`` asks why (MRTR) and only then closes. API process.

The ticket store is a SQLite file in the data directory. Closing happens after the answer has
been validated, and closing a closed ticket changes nothing, so a retried final round is harmless.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import anyio.to_thread
from pydantic import BaseModel, Field

from service._registry import Registry, ToolError, ToolReturn
from service._round import Round
from service._settings import Settings
from workflows._inputs import elicit

_REASON_KEY = "close_reason"
# Carried in requestState so an answer is only used for the question it belongs to.
_QUESTION_ID = "close_reason/v1"


class CloseReason(StrEnum):
    resolved = "resolved"
    duplicate = "duplicate"
    wont_fix = "wont_fix"


class CloseTicketInput(BaseModel):
    ticket_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$", description="The ticket to close.")


class ReasonForm(BaseModel):
    reason: CloseReason = Field(description="Why the ticket is closed.")
    note: str = Field("", max_length=500, description="Optional note for the requester.")


class CloseTicketOutput(BaseModel):
    ticket_id: str
    status: str
    reason: str | None = None
    note: str | None = None


class TicketStore:
    """Closed tickets in one SQLite file; every write is a single idempotent statement."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def _connect(self) -> sqlite3.Connection:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._path, timeout=10)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS closed_tickets (ticket_id TEXT PRIMARY KEY, reason TEXT NOT NULL,"
            " note TEXT NOT NULL, closed_at TEXT NOT NULL)"
        )
        return conn

    def close(self, ticket_id: str, reason: str, note: str) -> tuple[str, str]:
        """Close once; returns the (reason, note) the ticket is closed with, old or new."""
        with self._connect() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO closed_tickets VALUES (?, ?, ?, ?)",
                (ticket_id, reason, note, datetime.now(UTC).isoformat()),
            )
            row = conn.execute(
                "SELECT reason, note FROM closed_tickets WHERE ticket_id = ?", (ticket_id,)
            ).fetchone()
        return row[0], row[1]


def register_helpdesk(registry: Registry, settings: Settings) -> None:
    store = TicketStore(settings.data_dir / "helpdesk.sqlite3")

    @registry.tool("close_ticket", input=CloseTicketInput, output=CloseTicketOutput)
    async def close_ticket(args: CloseTicketInput, rnd: Round) -> ToolReturn:
        """Close a helpdesk ticket; asks for the reason first."""
        answer = rnd.elicited(_REASON_KEY, ReasonForm) if rnd.request_state == _QUESTION_ID else None
        if answer is None:
            question = elicit(f"Why is ticket {args.ticket_id} being closed?", ReasonForm)
            if not rnd.supports(question):
                raise ToolError("close_ticket needs a client that supports form elicitation")
            return rnd.ask({_REASON_KEY: question}, state=_QUESTION_ID)
        if answer.content is None:
            return CloseTicketOutput(ticket_id=args.ticket_id, status="open")
        form = answer.content
        reason, note = await anyio.to_thread.run_sync(
            store.close, args.ticket_id, form.reason.value, form.note
        )
        return CloseTicketOutput(ticket_id=args.ticket_id, status="closed", reason=reason, note=note or None)
