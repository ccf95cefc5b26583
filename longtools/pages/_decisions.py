"""``/decisions``: every question that waits for the signed-in person, as one of its approvers (by
name or group) or as the person who asked, newest first, followed live; and how an ended task's
decision was taken (who approved, who refused), for its page. API process.

Found two ways, each of which only narrows: every task is read before it is shown.

- ``Tasks.deciding``: the tasks whose open decision waits on the person's names or groups (or was
  asked by them), by the keyed tags its workflow puts on it. An approver's task is read through
  ``Tasks.read_as_decider``, which gives it only while its rule admits them or holds their vote:
  one no longer theirs drops out as if it had never been listed;
- the first page of their own tasks (``Tasks.owned``), for the questions they answer themselves
  (``by="person"``), which carry a proposal but no tag.

An approver sees of a task what its approvers' page shows (the proposal, the rule, the votes),
never the task's own page, which is its owner's.

Live as ``/tasks`` is (``_live``): a page's wait holds a place of ``PageWaits`` and ends at a
change of any open task it read (those it shows, and the person's own that may begin to ask), a
question newly waiting on them (``Asked``: one visibility read a second per person), a task of
theirs started since (``Arrivals``), or after the wait's bound; then the list is read again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, get_args

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from longtools.decisions import DecisionEnd, name_of
from longtools.pages._frame import Frame
from longtools.pages._live import Arrivals, Asked, PageWaits, pace, while_here
from longtools.pages._sessions import PageSession
from longtools.pages._views import DecisionCard, QuestionCard, TaskCard, Verdict, signature
from longtools.tasks import TERMINAL, TaskNotFound, Tasks, TaskView

__all__ = ["Decisions", "Row", "Verdicts", "verdict_of"]

_OWNED: Final = 25
"""The person's newest tasks read for their own questions (the first page of ``/tasks``)."""
_READS: Final = 8
"""Tasks read at once for one list."""
_KEPT_VERDICTS: Final = 1000


@dataclass(frozen=True)
class Row:
    """One question on the page: its task, as the person may see it, and the question."""

    card: TaskCard
    question: QuestionCard
    owned: bool
    """The person owns the task (its page is theirs)."""

    @property
    def decision(self) -> DecisionCard:
        assert self.question.decision is not None
        return self.question.decision


@dataclass(frozen=True)
class _Read:
    view: TaskView
    owner: str


@dataclass(frozen=True)
class _Listing:
    version: str
    shown: tuple[_Read, ...]
    """The tasks with a question for the person, newest first."""
    followed: tuple[_Read, ...]
    """Every open task read: a change of one may change the list."""
    found: tuple[str, ...]
    """The ids ``Tasks.deciding`` gave (``Asked`` compares them)."""
    owned: tuple[str, ...]
    """The ids of the person's newest tasks (``Arrivals`` compares them)."""


class Decisions:
    """The page of one API process (built once by ``Pages``)."""

    def __init__(
        self,
        frame: Frame,
        tasks: Tasks,
        waits: PageWaits,
        arrivals: Arrivals,
        card: Callable[[TaskView, PageSession], TaskCard],
        *,
        every_s: float,
        live_wait_s: float,
    ) -> None:
        """``every_s``: how often visibility is asked for questions newly waiting on a person whose
        page waits; ``live_wait_s``: how long a page's request for news is held."""
        self._frame = frame
        self._tasks = tasks
        self._waits = waits
        self._arrivals = arrivals
        self._asked = Asked(tasks, every_s)
        self._card = card
        self._live_wait_s = live_wait_s

    async def aclose(self) -> None:
        await self._asked.aclose()

    async def page(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        listing = await self._listing(session)
        page = self._frame.render(
            "decisions.html",
            session=session,
            rows=self._rows(listing, session),
            version=listing.version,
            live="/decisions/live",
        )
        return self._frame.kept(page, request, session, fresh)

    async def live(self, request: Request) -> Response:
        """The list once it differs from the page's (``?v=``), or after the wait's bound; sooner
        when the browser leaves."""
        session, _ = await self._frame.signed_in(request)
        seen = request.query_params.get("v") or ""
        listing = await self._listing(session)
        held = True
        if listing.version == seen:
            with self._waits.hold_if_free(session.principal) as held:
                if held:
                    if await while_here(request, self._news(session, listing)) is None:
                        return Response(status_code=204)  # nobody is there to read it
                    listing = await self._listing(session)
        html = self._frame.fragment(
            "_decisions_live.html", rows=self._rows(listing, session), session=session
        )
        return JSONResponse({"v": listing.version, "html": html, "done": False, **pace(held)})

    async def _listing(self, session: PageSession) -> _Listing:
        principal = session.principal
        voter = self._tasks.groups.voter(principal, session.groups)
        found, (owned, _) = await asyncio.gather(
            self._tasks.deciding(voter), self._tasks.owned(principal, _OWNED, b"")
        )
        mine = set(owned)
        reading = asyncio.Semaphore(_READS)

        async def read(task_id: str) -> _Read | None:
            async with reading:
                try:
                    if task_id in mine:
                        return _Read(await self._tasks.get(task_id, principal), principal)
                    view, owner = await self._tasks.read_as_decider(task_id, voter)
                    return _Read(view, owner)
                except TaskNotFound:  # ended, no longer theirs, or visibility's tag matched another's
                    return None

        ids = list(dict.fromkeys([*found, *owned]))
        reads = [read for read in await asyncio.gather(*(read(task_id) for task_id in ids)) if read]
        shown = tuple(
            sorted(
                (read for read in reads if self._questions(read, session)),
                key=lambda read: read.view.created_at,
                reverse=True,
            )
        )
        followed = tuple(read for read in reads if read.view.status not in TERMINAL and read.view.mark)
        return _Listing(
            version=_version(shown), shown=shown, followed=followed, found=tuple(found), owned=tuple(owned)
        )

    def _questions(self, read: _Read, session: PageSession) -> list[QuestionCard]:
        """The questions of ``read``'s task that the page shows the person: those with a decision
        they decide, have voted on, or asked for."""
        card = self._card(read.view, session)
        return [q for q in card.questions if q.decision is not None and q.decision.stance != "none"]

    def _rows(self, listing: _Listing, session: PageSession) -> list[Row]:
        rows = []
        for read in listing.shown:
            card = self._card(read.view, session)
            owned = read.owner == session.principal
            for question in card.questions:
                if question.decision is not None and question.decision.stance != "none":
                    rows.append(Row(card=card, question=question, owned=owned))
        return rows

    async def _news(self, session: PageSession, listing: _Listing) -> bool:
        """True once something the list is made of may have changed, or after the wait's bound."""
        voter = self._tasks.groups.voter(session.principal, session.groups)
        within = self._live_wait_s
        waits: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(
                # As its owner: the gateway keeps what it reads of a task under the principal it
                # was read for, and the task is the owner's.
                self._tasks.wait(
                    read.view.task_id, read.owner, _changed_from(read.view), within, since=read.view
                )
            )
            for read in listing.followed
        ]
        waits += [
            asyncio.ensure_future(self._tasks.until_stopping()),
            asyncio.ensure_future(self._asked.after(voter, listing.found, within)),
            asyncio.ensure_future(self._arrivals.after(session.principal, listing.owned, within)),
        ]
        try:
            await asyncio.wait(waits, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        return True


class Verdicts:
    """How an ended task's decision was taken (who approved, or who refused), for its page: read
    from its ledger, once per task (an ended task does not change)."""

    def __init__(self, tasks: Tasks) -> None:
        self._tasks = tasks
        self._known: OrderedDict[str, Verdict | None] = OrderedDict()

    async def of(self, view: TaskView) -> Verdict | None:
        """The last decision of ``view``'s task, once it has ended ``completed`` or ``rejected``;
        None for a task that asked for none (or keeps no ledger: one of older code)."""
        if view.status != "completed" or view.exit_state not in ("completed", "rejected"):
            return None
        if view.task_id in self._known:
            self._known.move_to_end(view.task_id)
            return self._known[view.task_id]
        verdict = verdict_of(await self._tasks.ledger(view))
        self._known[view.task_id] = verdict
        if len(self._known) > _KEPT_VERDICTS:
            self._known.popitem(last=False)
        return verdict


def verdict_of(entries: Sequence[Mapping[str, Any]]) -> Verdict | None:
    """The last decision a task's ledger records, with the names of those whose votes took it."""
    approvals: dict[str, list[str]] = {}
    refusals: dict[str, str] = {}
    verdict = None
    for entry in entries:
        kind, data = entry.get("kind"), entry.get("data") or {}
        question, by = str(data.get("question")), data.get("by")
        if kind == "vote" and data.get("counted") is True and isinstance(by, str):
            if data.get("decision") == "approve":
                approvals.setdefault(question, []).append(name_of(by))
            else:
                refusals[question] = name_of(by)
        elif kind == "decided" and data.get("outcome") in get_args(DecisionEnd):
            outcome = data["outcome"]
            names = approvals.get(question, []) if outcome == "approved" else [refusals.get(question, "")]
            verdict = Verdict(outcome=outcome, by=tuple(name for name in names if name))
    return verdict


def _changed_from(was: TaskView) -> Callable[[TaskView], bool]:
    seen = signature(was)
    return lambda now: signature(now) != seen


def _version(shown: tuple[_Read, ...]) -> str:
    """What the list shows, as a short digest (each task's ``signature``)."""
    listed = json.dumps([[read.view.task_id, signature(read.view)] for read in shown]).encode()
    return hashlib.sha256(listed).hexdigest()[:16]
