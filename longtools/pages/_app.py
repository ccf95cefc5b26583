"""The pages' routes: answer a question through its link (``_answers``), follow a task, list one's
tasks, cancel one, list the decisions waiting for one (``_decisions``), and the sign-in's
(``_signin``). API process, on the port of ``/mcp``.

Every page is rendered on the server (Jinja2, autoescaped); ``page.js`` only follows a task (or a
list) live, by asking ``.../live`` for the part that changed. Each answer goes the way ``tasks/update``'s
goes (``Tasks.answer``, checked the same, signalled through Temporal), so any replica serves any page.

Who may see what: a page shows only the signed-in principal's own tasks, and a link opens only for
the principal it was made for (``AnswerLinks``): another's link reads exactly as a made-up one. A
decision's approvers' link, and ``/decisions``, show an approver the decision (its proposal, rule
and votes) while its rule admits them, never the task's own page.

What a page that follows its tasks costs (``_live``): its wait for news holds a place of the
pages' own, ends when the browser leaves, and starts from the listing it shows; a task started
since is seen by one small visibility read a second per person, not by reading every task again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from importlib import resources
from typing import Any, Final, Protocol
from urllib.parse import urlencode

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from temporalio.client import Client

from longtools._sealing import Sealer, Unsealable
from longtools._settings import Settings
from longtools.auth import BearerVerifier
from longtools.pages._answers import Answers
from longtools.pages._decisions import Decisions, Verdicts
from longtools.pages._frame import Frame, Refused
from longtools.pages._ledgers import Ledgers
from longtools.pages._live import Arrivals, Listing, Listings, PageWaits, pace, while_here
from longtools.pages._passkeys import Passkeys
from longtools.pages._sessions import PageSession, Sessions
from longtools.pages._signin import SignIn
from longtools.pages._signouts import SignOuts
from longtools.pages._views import TaskCard, Verdict, card_of, signature
from longtools.people import Directory
from longtools.tasks import (
    ANSWER_PATH,
    TERMINAL,
    AnswerLinks,
    RunOnce,
    TaskNotFound,
    Tasks,
    TaskView,
)
from longtools.tools import Registry

__all__ = ["Holds", "Pages"]

log = structlog.get_logger("longtools.pages")

_LIVE_WAIT_S: Final = 25.0
"""How long a page's request for news is held when nothing changes: under what proxies allow."""
_LIST_SIZE: Final = 25
_ARRIVALS_S: Final = 1.0
"""How often visibility is asked for a person's first page of tasks while a list of theirs waits:
a task started elsewhere shows within about this much, plus visibility's own lag (1.1 s measured
on the dev server; it took up to 15 s, the list's wait, before)."""
_STATIC: Final = {
    "page.css": "text/css; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
    "passkey.js": "text/javascript; charset=utf-8",
}


class Holds(Protocol):
    """The held-request bounds of the process (``HeldRounds``): an answer's or a cancel's moment
    for the workflow to take it counts in them, as a ``tasks/update``'s does."""

    def hold_if_free(self, principal: str) -> AbstractContextManager[bool]: ...


class Pages:
    """The pages of one API process (built once; what it keeps of requests only saves reads)."""

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        tasks: Tasks,
        links: AnswerLinks,
        held: Holds,
        *,
        allowed_hosts: Sequence[str],
        verifier: BearerVerifier | None,
        connection: Callable[[], Client],
        once: RunOnce,
    ) -> None:
        """``connection``: the API's Temporal connection (sign-outs and people who signed in are kept
        there); ``once``: the API's claims, which make an answer on the page taken once (``_answers``)."""
        self._registry = registry
        self._tasks = tasks
        self._links = links
        self._held = held
        signouts = SignOuts(settings, connection)
        self._frame = frame = Frame(settings, Sessions(settings, verifier, signouts), allowed_hosts)
        people = Directory(settings, connection)
        self._signin = SignIn(frame, settings, verifier, people)
        self._passkeys = Passkeys(frame, settings, people)
        self._cursors = Sealer(settings.require_state_keys(), "longtools page cursors")
        self._settle_s = settings.answer_settle_s
        self._static = {name: resources.files("longtools.pages").joinpath("static", name) for name in _STATIC}
        self._waits = PageWaits(
            per_principal=settings.max_held_rounds_per_principal, total=settings.max_held_rounds
        )
        self._arrivals = Arrivals(tasks, _ARRIVALS_S, _LIST_SIZE)
        self._listings = Listings()
        self._decisions = Decisions(
            frame,
            tasks,
            self._waits,
            self._arrivals,
            self._card,
            every_s=_ARRIVALS_S,
            live_wait_s=_LIVE_WAIT_S,
        )
        self._verdicts = Verdicts(tasks)
        self._answers = Answers(settings, frame, tasks, links, once, self._card, self._settle, self._passkeys)
        self._ledgers = Ledgers(frame, tasks, verifier)

    @property
    def routes(self) -> list[BaseRoute]:
        page = self._frame.page
        return [
            Route("/", page(self._home), methods=["GET"]),
            Route(ANSWER_PATH + "{token}", page(self._answers.page), methods=["GET"]),
            Route(ANSWER_PATH + "{token}", page(self._answers.post), methods=["POST"]),
            Route("/tasks", page(self._tasks_page), methods=["GET"]),
            Route("/tasks/live", page(self._tasks_live), methods=["GET"]),
            Route("/tasks/{task_id}", page(self._task_page), methods=["GET"]),
            Route("/tasks/{task_id}/live", page(self._task_live), methods=["GET"]),
            Route("/decisions", page(self._decisions.page), methods=["GET"]),
            Route("/decisions/live", page(self._decisions.live), methods=["GET"]),
            Route("/tasks/{task_id}/ledger", page(self._ledgers.export), methods=["GET"]),
            Route("/tasks/{task_id}/cancel", page(self._cancel_page), methods=["GET"]),
            Route("/tasks/{task_id}/cancel", page(self._cancel_post), methods=["POST"]),
            *self._signin.routes,
            *self._passkeys.routes,
            Route("/_pages/{name}", page(self._static_file), methods=["GET"]),
        ]

    async def aclose(self) -> None:
        await self._arrivals.aclose()
        await self._decisions.aclose()
        await self._signin.aclose()

    async def _home(self, request: Request) -> Response:
        return RedirectResponse("/tasks", status_code=303)

    def _card(self, view: TaskView, session: PageSession, *, verdict: Verdict | None = None) -> TaskCard:
        voter = self._tasks.groups.voter(session.principal, session.groups)
        return card_of(view, self._registry, self._links, voter, verdict=verdict)

    async def _task_card(self, view: TaskView, session: PageSession) -> TaskCard:
        """``_card``, saying who approved or rejected its decision once it has ended (its ledger)."""
        return self._card(view, session, verdict=await self._verdicts.of(view))

    async def _settle(
        self, view: TaskView, session: PageSession, done: Callable[[TaskView], bool], owner: str | None = None
    ) -> TaskView:
        """``view``'s task once ``done`` (the workflow took an answer), or after
        ``answer_settle_s``: as ``tasks/update`` does, so the next page shows what comes next. A
        courtesy: at a held-request bound it is skipped. ``owner``: whose task it is, when not the
        session's (an approver's vote): it is read as theirs, as the gateway keeps it."""
        with self._held.hold_if_free(session.principal) as may_wait, contextlib.suppress(TaskNotFound):
            return await self._tasks.wait(
                view.task_id, owner or session.principal, done, self._settle_s if may_wait else 0, since=view
            )
        return view

    # ----- one task -----

    async def _task_page(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        view = await self._task(request, session)
        card = await self._task_card(view, session)
        sent = request.query_params.get("sent")
        page = self._frame.render("task.html", session=session, card=card, sent=sent is not None)
        return self._frame.kept(page, request, session, fresh)

    async def _task_live(self, request: Request) -> Response:
        """The part of a task's page that changes, once it differs from the version the page shows
        (``?v=``), or after ``_LIVE_WAIT_S``; sooner when the browser leaves."""
        session, _ = await self._frame.signed_in(request)
        try:
            view = await self._tasks.get(request.path_params["task_id"], session.principal)
        except TaskNotFound:
            return JSONResponse({"gone": True}, status_code=404)
        seen, held = request.query_params.get("v"), True
        if signature(view) == seen and view.status not in TERMINAL:
            with self._waits.hold_if_free(session.principal) as held:
                if held:
                    with contextlib.suppress(TaskNotFound):
                        waited = await while_here(
                            request,
                            self._tasks.wait(
                                view.task_id,
                                session.principal,
                                lambda now: signature(now) != seen,
                                _LIVE_WAIT_S,
                                since=view,
                            ),
                        )
                        if waited is None:
                            return Response(status_code=204)  # nobody is there to read it
                        view = waited
        card = await self._task_card(view, session)
        html = self._frame.fragment("_task_live.html", card=card, session=session)
        return JSONResponse({"v": card.version, "html": html, "done": card.done, **pace(held)})

    async def _task(self, request: Request, session: PageSession) -> TaskView:
        try:
            return await self._tasks.get(request.path_params["task_id"], session.principal)
        except TaskNotFound as exc:
            kind = "expired_task" if "expired" in str(exc) else "unknown_task"
            raise Refused(self._frame.message(session, 404, kind)) from None

    # ----- cancelling -----

    async def _cancel_page(self, request: Request) -> Response:
        """Whether to cancel, asked on a page of its own: a cancel cannot be undone, so one click (or
        Enter on a list of tasks) never makes one. No script needed."""
        session, fresh = await self._frame.signed_in(request)
        view = await self._task(request, session)
        page = self._confirm_cancel(view, session, request.query_params.get("back"))
        return self._frame.kept(page, request, session, fresh)

    def _confirm_cancel(self, view: TaskView, session: PageSession, back: str | None) -> Response:
        card = self._card(view, session)
        if card.done:
            return RedirectResponse(f"/tasks/{view.task_id}", status_code=303)
        back_path = "/tasks" if back == "list" else f"/tasks/{view.task_id}"
        return self._frame.render("cancel.html", session=session, card=card, back=back_path)

    async def _cancel_post(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        form = await self._frame.form(request, session)
        view = await self._task(request, session)
        if (form.get("confirm") or [""])[-1] != "yes":  # a form of before the confirmation, or a made-up one
            back = (form.get("back") or [""])[-1]
            return self._frame.kept(self._confirm_cancel(view, session, back), request, session, fresh)
        await self._tasks.cancel(view)
        log.info("page_cancelled", task_id=view.task_id)
        # A moment for it to end, so its page shows how it ended (and what its tool said last);
        # one that takes longer is followed there.
        await self._settle(view, session, lambda now: now.status in TERMINAL)
        to_task = RedirectResponse(f"/tasks/{view.task_id}", status_code=303)
        return self._frame.kept(to_task, request, session, fresh)

    # ----- the list of one's tasks -----

    async def _tasks_page(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        before = request.query_params.get("before") or ""
        listing = await self._listing(session, before)
        live = "/tasks/live" + ("?" + _query(before=before) if before else "")
        page = self._frame.render(
            "tasks.html",
            session=session,
            cards=self._cards(listing, session),
            older=listing.older,
            version=listing.version,
            live=live,
        )
        return self._frame.kept(page, request, session, fresh)

    async def _tasks_live(self, request: Request) -> Response:
        """The list of tasks once it differs from the page's (``?v=``): after a change of one of its
        open tasks, a task started since (on the first page), or ``_LIVE_WAIT_S``; sooner when the
        browser leaves.

        The wait starts from the listing the page shows when this replica has it (``Listings``), so
        it costs no read of Temporal but the visibility read of ``Arrivals``; and after a change,
        only the tasks that changed are read again.
        """
        session, _ = await self._frame.signed_in(request)
        before = request.query_params.get("before") or ""
        seen = request.query_params.get("v") or ""
        listing = self._listings.get(session.principal, before, seen)
        if listing is None:
            listing = await self._listing(session, before)
        held = True
        if listing.version == seen:
            with self._waits.hold_if_free(session.principal) as held:
                if held:
                    news = await while_here(request, self._news(session, before, listing))
                    if news is None:
                        return Response(status_code=204)  # nobody is there to read it
                    listing = news
        html = self._frame.fragment("_tasks_live.html", cards=self._cards(listing, session), session=session)
        return JSONResponse({"v": listing.version, "html": html, "done": False, **pace(held)})

    async def _news(self, session: PageSession, before: str, listing: Listing) -> Listing:
        """``listing`` once one of its open tasks changes, or (on the first page) a task is started
        since, or after ``_LIVE_WAIT_S``: as it is then, read again only where it changed."""
        principal = session.principal
        # Every open task it shows, each by its watch (shared with every other page and poll of that
        # task): a change of one not followed would show only once the whole list is read again.
        followed = [view for view in listing.views if view.status not in TERMINAL]
        changes = {
            asyncio.ensure_future(
                self._tasks.wait(view.task_id, principal, _changed_from(view), _LIVE_WAIT_S, since=view)
            ): view
            for view in followed
        }
        others: list[asyncio.Future[Any]] = [asyncio.ensure_future(self._tasks.until_stopping())]
        if not before:  # a new task goes on the first page
            others.append(asyncio.ensure_future(self._arrivals.after(principal, listing.ids, _LIVE_WAIT_S)))
        try:
            done, _ = await asyncio.wait(
                [*changes, *others], timeout=_LIVE_WAIT_S, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiting in [*changes, *others]:
                waiting.cancel()
            await asyncio.gather(*changes, *others, return_exceptions=True)
        changed: dict[str, TaskView | None] = {}
        for future, was in changes.items():
            if future in done:
                try:
                    now = future.result()
                except TaskNotFound:  # expired meanwhile: the listing is read again
                    changed[was.task_id] = None
                    continue
                if signature(now) != signature(was):
                    changed[was.task_id] = now
        arrived = any(future in done and future.result() is True for future in others[1:])
        if not changed and not arrived:
            return listing  # nothing it shows has changed: no read
        if arrived or None in changed.values():
            # A task started since (or one gone): the list again, reading only the tasks new to it.
            # The others are as their views say up to their marks, and the page's next wait starts
            # from those marks: a change made since ends that wait at once.
            kept = {view.task_id: view for view in listing.views}
            kept.update({task_id: view for task_id, view in changed.items() if view is not None})
            return await self._listing(session, before, kept)
        views = tuple(changed.get(view.task_id) or view for view in listing.views)
        return self._keep(session, before, views, listing.ids, listing.older)

    async def _listing(
        self, session: PageSession, before: str, known: dict[str, TaskView] | None = None
    ) -> Listing:
        """One page of the principal's tasks, newest first, and the cursor of the next (older)
        page. Each task is read (``get``), but those of ``known``, read already."""
        token = b""
        if before:
            try:
                token = bytes.fromhex(str(self._cursors.open(before, session.principal).get("t", "")))
            except (Unsealable, ValueError):
                token = b""
        ids, following = await self._tasks.owned(session.principal, _LIST_SIZE, token)
        reading = asyncio.Semaphore(8)

        async def read(task_id: str) -> TaskView | None:
            if known is not None and task_id in known:
                return known[task_id]
            async with reading:
                try:
                    return await self._tasks.get(task_id, session.principal)
                except TaskNotFound:  # expired, or visibility's hash matched another's
                    return None

        views = [view for view in await asyncio.gather(*(read(task_id) for task_id in ids)) if view]
        older = self._cursors.seal({"t": following.hex()}, session.principal) if following else None
        return self._keep(session, before, views, tuple(ids), older)

    def _keep(
        self,
        session: PageSession,
        before: str,
        views: Sequence[TaskView],
        ids: tuple[str, ...],
        older: str | None,
    ) -> Listing:
        # Newest first: visibility lists open tasks before closed ones.
        shown = tuple(sorted(views, key=lambda view: view.created_at, reverse=True))
        listing = Listing(version=_version(shown), views=shown, ids=ids, older=older)
        self._listings.keep(session.principal, before, listing)
        return listing

    def _cards(self, listing: Listing, session: PageSession) -> list[TaskCard]:
        return [self._card(view, session) for view in listing.views]

    async def _static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return Response(status_code=404)
        return Response(self._static[name].read_bytes(), media_type=_STATIC[name])


def _changed_from(was: TaskView) -> Callable[[TaskView], bool]:
    seen = signature(was)
    return lambda now: signature(now) != seen


def _query(**params: str) -> str:
    return urlencode(params)


def _version(views: Sequence[TaskView]) -> str:
    """What a listing shows, as a short digest (``signature`` of each task)."""
    shown = json.dumps([[view.task_id, signature(view)] for view in views]).encode()
    return hashlib.sha256(shown).hexdigest()[:16]
