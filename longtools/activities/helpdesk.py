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
from collections.abc import Iterator, Mapping
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
-- A deleted ticket (delete_customer): kept as a row, so its history stays whole, but shown to no one.
CREATE TABLE IF NOT EXISTS deletions (
    ticket_id INTEGER PRIMARY KEY REFERENCES tickets (id),
    operation TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_delete_per_ticket ON ticket_history (ticket_id) WHERE event = 'deleted';
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
DeleteResult = Literal["deleted", "already_deleted", "not_found"]
"""``deleted``: this operation deleted it (now or in an earlier attempt); ``already_deleted``: another did."""
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
    event: Literal["created", "closed", "deleted"]
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
                "SELECT title, customer, status, close_reason, closed_by, created_at FROM tickets"
                " WHERE id = ? AND id NOT IN (SELECT ticket_id FROM deletions)",
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
        return self._ids("SELECT id FROM tickets WHERE customer = ? AND status = 'open'", customer)

    def customer_ids(self, customer: str) -> list[str]:
        """Every ticket of ``customer`` not deleted, open or closed."""
        return self._ids("SELECT id FROM tickets WHERE customer = ?", customer)

    def _ids(self, query: str, customer: str) -> list[str]:
        with self._connection() as conn:
            rows = conn.execute(
                f"{query} AND id NOT IN (SELECT ticket_id FROM deletions) ORDER BY id", (customer,)
            ).fetchall()
        return [ticket_ref(number) for (number,) in rows]

    def delete(self, ref: str, by: str) -> DeleteResult:
        """Delete the ticket, in one transaction, recording ``by`` as the operation that did.

        As ``close``: a ticket already deleted by the same ``by`` reports ``deleted`` again without
        writing anything, so a retried operation neither fails nor deletes twice (and the history's
        unique index refuses a second ``deleted`` row of a ticket, whoever tries).
        """
        number = ticket_number(ref)
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM tickets WHERE id = ?", (number,)).fetchone() is None:
                return "not_found"
            row = conn.execute("SELECT operation FROM deletions WHERE ticket_id = ?", (number,)).fetchone()
            if row is not None:
                return "deleted" if row[0] == by else "already_deleted"
            now = _now()
            conn.execute(
                "INSERT INTO deletions (ticket_id, operation, at) VALUES (?, ?, ?)", (number, by, now)
            )
            conn.execute(
                "INSERT INTO ticket_history (ticket_id, at, event, detail) VALUES (?, ?, 'deleted', ?)",
                (number, now, f"by {by}"),
            )
        return "deleted"

    def deletions(self, ref: str) -> int:
        """How many times the ticket was deleted (its history's ``deleted`` rows): 0 or 1."""
        with self._connection() as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM ticket_history WHERE ticket_id = ? AND event = 'deleted'",
                (ticket_number(ref),),
            ).fetchone()
        return int(row[0])

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


class CustomerInput(BaseModel):
    customer: str


class DeleteTicketRequest(BaseModel):
    ticket_id: str
    operation: str
    """Who deletes, stable across retries (the workflow id): the key that makes a retry harmless."""


class DeleteTicketOutcome(BaseModel):
    ticket_id: str
    result: DeleteResult
    attempt: int
    """The activity's attempt that reported it (the task's ledger keeps it with the effect)."""

    def for_ledger(self) -> dict[str, str]:
        """What the task's ledger says of this effect: which ticket, and what became of it."""
        return {"ticket": self.ticket_id, "result": self.result}


class ConnectMailboxRequest(BaseModel):
    address: str
    password: str
    """The secret, as the person typed it on the answer page: only this activity's input has it."""
    operation: str
    """The task's id: a retry of the activity makes the same connection."""


class ConnectMailboxResult(BaseModel):
    connection: str


class ApprovalPolicyInput(BaseModel):
    requester: str
    """Who asks: excluded from the approvers."""


class ApprovalPolicy(BaseModel):
    """How ``delete_customer`` is approved in this deployment (its settings, read by the worker)."""

    deadline_s: float
    cannot: str | None = None
    """Why no one could ever approve it here, if so."""


APPROVERS_GROUP = "leads"
APPROVALS = 2


class HelpdeskActivities:
    """The helpdesk's activities, over one store; ``work_s`` simulates the backend call per ticket;
    ``approval_s`` and ``groups`` are the deployment's deadline for approvals and its groups."""

    def __init__(
        self,
        store: TicketStore,
        work_s: float,
        approval_s: float = 86_400.0,
        groups: Mapping[str, frozenset[str]] | None = None,
        groups_claimed: bool = False,
    ) -> None:
        self._store = store
        self._work_s = work_s
        self._approval_s = approval_s
        self._groups = dict(groups or {})
        self._groups_claimed = groups_claimed

    @activity.defn(name="helpdesk.approval_policy")
    async def approval_policy(self, args: ApprovalPolicyInput) -> ApprovalPolicy:
        """The deadline, and whether anyone but the requester can approve: with groups only from
        LONGTOOLS_GROUPS, at least two members of ``leads`` other than the requester."""
        policy = ApprovalPolicy(deadline_s=self._approval_s)
        if self._groups_claimed:
            return policy  # a token's claim may make anyone a lead: nothing to count here
        requester = {args.requester, args.requester.removeprefix("token:"), args.requester.split("|")[-1]}
        others = self._groups.get(APPROVERS_GROUP, frozenset()) - requester
        if len(others) < APPROVALS:
            policy.cannot = (
                f"delete_customer needs {APPROVALS} approvals from group {APPROVERS_GROUP!r}, not counting "
                f"the requester's, and this server has {len(others)} such member"
                f"{'' if len(others) == 1 else 's'}: set LONGTOOLS_GROUPS (e.g. "
                f"{APPROVERS_GROUP}=alice,bob,dave) or LONGTOOLS_GROUPS_CLAIM. Nothing was deleted."
            )
        return policy

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

    @activity.defn(name="helpdesk.customer_tickets")
    async def customer_tickets(self, args: CustomerInput) -> OpenTicketsResult:
        ids = await asyncio.to_thread(self._store.customer_ids, args.customer)
        return OpenTicketsResult(ticket_ids=ids)

    @activity.defn(name="helpdesk.delete_ticket")
    async def delete_ticket(self, args: DeleteTicketRequest) -> DeleteTicketOutcome:
        result = await asyncio.to_thread(self._store.delete, args.ticket_id, f"task {args.operation}")
        return DeleteTicketOutcome(ticket_id=args.ticket_id, result=result, attempt=activity.info().attempt)

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
