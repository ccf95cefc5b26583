"""The helpdesk example's backend: tickets in SQLite, and the activities that touch them.

The store runs in the API process (quick tools) and in the worker process (activities), both on
the same file: WAL lets readers run beside the one writer, the busy timeout makes a second writer
wait instead of failing, and every write is one ``BEGIN IMMEDIATE`` transaction that checks and
changes together. Every state change appends a history row; history rows are never changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from temporalio import activity

_BUSY_TIMEOUT_S = 10.0
_HEARTBEAT_EVERY_S = 0.2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tickets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    customer TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    close_reason TEXT,
    closed_by TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tickets_by_customer ON tickets (customer, status);
CREATE TABLE IF NOT EXISTS ticket_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ticket_id INTEGER NOT NULL REFERENCES tickets (id),
    at TEXT NOT NULL,
    event TEXT NOT NULL,
    detail TEXT NOT NULL
);
-- Tickets never reopen, so a second "closed" row can only be a bug: the database refuses it.
CREATE UNIQUE INDEX IF NOT EXISTS one_close_per_ticket ON ticket_history (ticket_id) WHERE event = 'closed';
CREATE TRIGGER IF NOT EXISTS history_no_update BEFORE UPDATE ON ticket_history
    BEGIN SELECT RAISE(ABORT, 'ticket_history is append-only'); END;
CREATE TRIGGER IF NOT EXISTS history_no_delete BEFORE DELETE ON ticket_history
    BEGIN SELECT RAISE(ABORT, 'ticket_history is append-only'); END;
-- A connected mailbox: never its password (the simulated connection uses it and keeps nothing).
CREATE TABLE IF NOT EXISTS mailboxes (
    address TEXT PRIMARY KEY,
    connection TEXT NOT NULL,
    connected_at TEXT NOT NULL
);
"""


class CloseReason(StrEnum):
    """Why a ticket was closed (the values people pick from in the form)."""

    resolved = "Resolved"
    duplicate = "Duplicate"
    cancelled = "Cancelled"


CloseResult = Literal["closed", "already_closed", "not_found"]
"""``closed``: this operation closed it (now or in an earlier attempt); ``already_closed``: another did."""


def ticket_ref(number: int) -> str:
    """The id people see: ``T-<n>``."""
    return f"T-{number}"


def ticket_number(ref: str) -> int:
    """The row id behind ``T-<n>``; a ValueError for anything else."""
    if not ref.startswith("T-") or not ref[2:].isdigit():
        raise ValueError(f"not a ticket id: {ref!r}")
    return int(ref[2:])


class HistoryEntry(BaseModel):
    at: str
    """ISO 8601, UTC."""
    event: Literal["created", "closed"]
    detail: str


class Ticket(BaseModel):
    id: str
    title: str
    customer: str
    status: Literal["open", "closed"]
    close_reason: CloseReason | None
    closed_by: str | None
    created_at: str
    history: list[HistoryEntry]


class TicketStore:
    """Tickets and their history in one SQLite file (created, with its tables, on first use)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._ready = False
        self._init_lock = threading.Lock()

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        # One connection per call: calls arrive on worker threads, and a SQLite connection is cheap to open.
        self._ensure_schema()
        conn = sqlite3.connect(self._path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, holding the write lock from its first statement (no upgrade races)."""
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _ensure_schema(self) -> None:
        with self._init_lock:
            if self._ready:
                return
            self._path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self._path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")  # persistent: stored in the file
                # Both processes may get here at once: one transaction, so one creates and one waits.
                conn.executescript(f"BEGIN IMMEDIATE;\n{_SCHEMA}\nCOMMIT;")
            finally:
                conn.close()
            self._ready = True

    def create(self, title: str, customer: str) -> Ticket:
        now = _now()
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO tickets (title, customer, created_at) VALUES (?, ?, ?)", (title, customer, now)
            )
            number = cursor.lastrowid
            assert number is not None  # an INSERT into a rowid table always sets it
            conn.execute(
                "INSERT INTO ticket_history (ticket_id, at, event, detail) VALUES (?, ?, 'created', ?)",
                (number, now, f"for {customer}: {title}"),
            )
        ticket = self.get(ticket_ref(number))
        assert ticket is not None
        return ticket

    def get(self, ref: str) -> Ticket | None:
        """The ticket with its whole history, oldest first; None if there is no such ticket."""
        number = ticket_number(ref)
        with self._connection() as conn:
            row = conn.execute(
                "SELECT title, customer, status, close_reason, closed_by, created_at"
                " FROM tickets WHERE id = ?",
                (number,),
            ).fetchone()
            if row is None:
                return None
            history = conn.execute(
                "SELECT at, event, detail FROM ticket_history WHERE ticket_id = ? ORDER BY seq", (number,)
            ).fetchall()
        title, customer, status, reason, closed_by, created_at = row
        return Ticket(
            id=ref,
            title=title,
            customer=customer,
            status=status,
            close_reason=reason,
            closed_by=closed_by,
            created_at=created_at,
            history=[HistoryEntry(at=at, event=event, detail=detail) for at, event, detail in history],
        )

    def open_ids(self, customer: str) -> list[str]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT id FROM tickets WHERE customer = ? AND status = 'open' ORDER BY id", (customer,)
            ).fetchall()
        return [ticket_ref(number) for (number,) in rows]

    def connect_mailbox(self, address: str, connection: str) -> str:
        """Record ``address`` as connected under ``connection``; the connection it has then (a
        retry of the same connection finds its own)."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO mailboxes (address, connection, connected_at) VALUES (?, ?, ?) "
                "ON CONFLICT (address) DO UPDATE SET connection = excluded.connection, "
                "connected_at = excluded.connected_at WHERE connection != excluded.connection",
                (address, connection, _now()),
            )
            row = conn.execute("SELECT connection FROM mailboxes WHERE address = ?", (address,)).fetchone()
        return str(row[0])

    def close(self, ref: str, reason: CloseReason, by: str) -> CloseResult:
        """Close the ticket if it is open, in one transaction, recording ``by`` as the closer.

        ``by`` identifies the operation: a ticket already closed by the same ``by`` reports
        ``closed`` again without writing anything, so an operation retried after its commit
        (a worker that died before reporting) neither fails nor closes twice.
        """
        number = ticket_number(ref)
        with self._write() as conn:
            row = conn.execute("SELECT status, closed_by FROM tickets WHERE id = ?", (number,)).fetchone()
            if row is None:
                return "not_found"
            status, closed_by = row
            if status == "closed":
                return "closed" if closed_by == by else "already_closed"
            now = _now()
            conn.execute(
                "UPDATE tickets SET status = 'closed', close_reason = ?, closed_by = ? WHERE id = ?",
                (reason.value, by, number),
            )
            conn.execute(
                "INSERT INTO ticket_history (ticket_id, at, event, detail) VALUES (?, ?, 'closed', ?)",
                (number, now, f"{reason.value}, by {by}"),
            )
        return "closed"


def _now() -> str:
    return datetime.now(UTC).isoformat()


# Activities ------------------------------------------------------------------------------------


class OpenTicketsInput(BaseModel):
    customer: str


class OpenTicketsResult(BaseModel):
    ticket_ids: list[str]


class CloseTicketRequest(BaseModel):
    ticket_id: str
    reason: CloseReason
    operation: str
    """Who closes, stable across retries (the workflow id): the key that makes a retry harmless."""


class CloseTicketOutcome(BaseModel):
    ticket_id: str
    result: CloseResult


class ConnectMailboxRequest(BaseModel):
    address: str
    password: str
    """The secret, as the person typed it on the answer page: only this activity's input has it."""
    operation: str
    """The task's id: a retry of the activity makes the same connection."""


class ConnectMailboxResult(BaseModel):
    connection: str


class HelpdeskActivities:
    """The helpdesk's activities, over one store; ``work_s`` simulates the backend call per ticket."""

    def __init__(self, store: TicketStore, work_s: float) -> None:
        self._store = store
        self._work_s = work_s

    @activity.defn(name="helpdesk.open_tickets")
    async def open_tickets(self, args: OpenTicketsInput) -> OpenTicketsResult:
        ids = await asyncio.to_thread(self._store.open_ids, args.customer)
        return OpenTicketsResult(ticket_ids=ids)

    @activity.defn(name="helpdesk.close_ticket")
    async def close_ticket(self, args: CloseTicketRequest) -> CloseTicketOutcome:
        """Do the (simulated) backend work, then close; a cancel during the work changes nothing."""
        current = await asyncio.to_thread(self._store.get, args.ticket_id)
        if current is not None and current.status == "open":
            await self._work(args.ticket_id)  # a cancel arrives here as CancelledError
        # A retry of an attempt that already committed skips the work and gets "closed" back.
        commit = asyncio.ensure_future(
            asyncio.to_thread(self._store.close, args.ticket_id, args.reason, f"task {args.operation}")
        )
        try:
            result = await asyncio.shield(commit)
        except asyncio.CancelledError:
            # Too late to stop: the short transaction is under way in its thread. Report what it
            # did; the workflow checks for its own cancellation after every ticket.
            result = await commit
        return CloseTicketOutcome(ticket_id=args.ticket_id, result=result)

    @activity.defn(name="helpdesk.connect_mailbox")
    async def connect_mailbox(self, args: ConnectMailboxRequest) -> ConnectMailboxResult:
        """Connect (simulated: a real one would log in with the password) and record the connection.
        Its id is made from the task, never from the password: what the result shows proves the
        password arrived and was used, and tells nothing of it."""
        if not args.password:
            raise ValueError("a mailbox cannot connect without its password")
        connection = "MBX-" + hashlib.sha256(args.operation.encode()).hexdigest()[:10].upper()
        kept = await asyncio.to_thread(self._store.connect_mailbox, args.address, connection)
        return ConnectMailboxResult(connection=kept)

    async def _work(self, ticket_id: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._work_s
        while (left := deadline - loop.time()) > 0:
            # Heartbeats are how a cancel reaches the activity, and how a dead worker is noticed.
            activity.heartbeat(ticket_id)
            await asyncio.sleep(min(_HEARTBEAT_EVERY_S, left))
