"""The pages' routes: answer a question through its link, follow a task, list one's tasks (and the
sign-in's, ``_signin``). API process, on the port of ``/mcp``.

Every page is rendered on the server (Jinja2, autoescaped); ``page.js`` only follows a task live,
by asking ``/tasks/<id>/live`` for the part that changed. Each answer goes the way ``tasks/update``'s
goes (``Tasks.answer``, checked the same, signalled through Temporal), so any replica serves any page.

Who may see what: a page shows only the signed-in principal's own tasks, and a link opens only for
the principal it was made for (``AnswerLinks``): another's link reads exactly as a made-up one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from importlib import resources
from typing import Any, Final, Protocol
from urllib.parse import urlencode

import structlog
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from longtools._sealing import Sealer, Unsealable
from longtools._settings import Settings
from longtools.auth import BearerVerifier
from longtools.pages._forms import FORM_ERROR, content_of, fields_of, schema_errors
from longtools.pages._frame import Frame, Refused
from longtools.pages._sessions import PageSession, Sessions
from longtools.pages._signin import SignIn
from longtools.pages._views import TaskCard, card_of, signature
from longtools.tasks import (
    ANSWER_PATH,
    TERMINAL,
    AnswerLinks,
    AnswerRejected,
    AnswersTooLarge,
    LinkExpired,
    LinkUnknown,
    TaskNotFound,
    Tasks,
    TaskView,
)
from longtools.tools import Registry
from longtools.workflows import marking_of

__all__ = ["Holds", "Pages"]

log = structlog.get_logger("longtools.pages")

_LIVE_WAIT_S: Final = 25.0
"""How long a page's request for news is held when nothing changes: under what proxies allow."""
_LIST_WAIT_S: Final = 15.0
"""The same for the list of tasks, which also shows tasks started since (those no watch sees)."""
_LIST_SIZE: Final = 25
_LIST_FOLLOWED: Final = 10
"""Open tasks of a listing whose changes end its wait (each is a watch of its own)."""
_STATIC: Final = {"page.css": "text/css; charset=utf-8", "page.js": "text/javascript; charset=utf-8"}


class Holds(Protocol):
    """The held-request bounds of the process (``HeldRounds``): a page's wait for news is one."""

    def hold_if_free(self, principal: str) -> AbstractContextManager[bool]: ...


class Pages:
    """The pages of one API process (built once; nothing of a request is kept)."""

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
    ) -> None:
        self._registry = registry
        self._tasks = tasks
        self._links = links
        self._held = held
        self._frame = frame = Frame(settings, Sessions(settings), allowed_hosts)
        self._signin = SignIn(frame, settings, verifier)
        self._cursors = Sealer(settings.require_state_keys(), "longtools page cursors")
        self._settle_s = settings.answer_settle_s
        self._static = {name: resources.files("longtools.pages").joinpath("static", name) for name in _STATIC}

    @property
    def routes(self) -> list[BaseRoute]:
        page = self._frame.page
        return [
            Route("/", page(self._home), methods=["GET"]),
            Route(ANSWER_PATH + "{token}", page(self._answer_page), methods=["GET"]),
            Route(ANSWER_PATH + "{token}", page(self._answer_post), methods=["POST"]),
            Route("/tasks", page(self._tasks_page), methods=["GET"]),
            Route("/tasks/live", page(self._tasks_live), methods=["GET"]),
            Route("/tasks/{task_id}", page(self._task_page), methods=["GET"]),
            Route("/tasks/{task_id}/live", page(self._task_live), methods=["GET"]),
            Route("/tasks/{task_id}/cancel", page(self._cancel_post), methods=["POST"]),
            *self._signin.routes,
            Route("/_pages/{name}", page(self._static_file), methods=["GET"]),
        ]

    async def aclose(self) -> None:
        await self._signin.aclose()

    # ----- answering -----

    async def _home(self, request: Request) -> Response:
        return RedirectResponse("/tasks", status_code=303)

    async def _answer_page(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        view, key, question = await self._question(request, session)
        return self._frame.kept(self._answer_form(view, key, question, session), request, session, fresh)

    async def _answer_post(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        form = await self._frame.form(request, session)
        view, key, question = await self._question(request, session)
        params = question.get("params") or {}
        schema = params.get("requestedSchema") or {"type": "object", "properties": {}}
        sensitive = marking_of(question).sensitive
        action = (form.get("action") or ["accept"])[-1]
        if action == "decline":
            response: dict[str, Any] = {"action": "decline"}
        else:
            fields = fields_of(schema, sensitive=sensitive)
            content, errors = content_of(fields, form)
            errors = {**schema_errors(schema, content), **errors}
            if errors:
                shown = {} if sensitive else {name: values for name, values in form.items() if name != "csrf"}
                return self._answer_form(
                    view, key, question, session, errors=errors, values=shown, status=422
                )
            response = {"action": "accept", "content": content}
        try:
            delivered = await self._tasks.answer(view, {key: response}, by="page")
        except AnswerRejected:  # the page's own check said it fits: only a newer check could differ
            errors = {
                FORM_ERROR: "This answer does not fit the question. Check each field and send it again."
            }
            return self._answer_form(view, key, question, session, errors=errors, status=422)
        except AnswersTooLarge:
            errors = {FORM_ERROR: "This task cannot take any more answers (LONGTOOLS_MAX_TASK_ANSWER_BYTES)."}
            return self._answer_form(view, key, question, session, errors=errors, status=422)
        if not delivered:  # the task moved on or ended since it was read
            closed = await self._tasks.read(view.task_id, session.principal)
            return self._frame.message(session, 409, "answered", card=self._card(closed, session))
        log.info("page_answered", task_id=view.task_id, key=key, action=response["action"])
        with self._held.hold_if_free(session.principal) as may_wait:
            if may_wait:
                # As tasks/update does: a moment for the workflow to take it, so the task page
                # (and this link, opened again) shows what comes next, not the question again.
                await self._tasks.wait(
                    view.task_id,
                    session.principal,
                    lambda now: now.status != "input_required" or key not in (now.input_requests or {}),
                    self._settle_s,
                    since=view,
                )
        done = RedirectResponse(f"/tasks/{view.task_id}?{urlencode({'sent': key})}", status_code=303)
        return self._frame.kept(done, request, session, fresh)

    async def _question(
        self, request: Request, session: PageSession
    ) -> tuple[TaskView, str, Mapping[str, Any]]:
        """The task and question of the request's link, as ``session``'s principal may answer it."""
        try:
            link = self._links.open(request.path_params["token"], session.principal)
        except LinkUnknown:
            raise Refused(self._frame.message(session, 404, "unknown")) from None
        except LinkExpired:
            raise Refused(self._frame.message(session, 410, "expired")) from None
        try:
            view = await self._tasks.to_answer(link.task_id, session.principal)
        except TaskNotFound as exc:
            kind = "expired" if "expired" in str(exc) else "unknown"
            raise Refused(self._frame.message(session, 410 if kind == "expired" else 404, kind)) from None
        question = (view.input_requests or {}).get(link.key) if view.status == "input_required" else None
        if question is None or question.get("method") != "elicitation/create":
            raise Refused(self._frame.message(session, 409, "answered", card=self._card(view, session)))
        return view, link.key, question

    def _answer_form(
        self,
        view: TaskView,
        key: str,
        question: Mapping[str, Any],
        session: PageSession,
        *,
        errors: Mapping[str, str] | None = None,
        values: Mapping[str, list[str]] | None = None,
        status: int = 200,
    ) -> HTMLResponse:
        params = question.get("params") or {}
        marking = marking_of(question)
        fields = fields_of(params.get("requestedSchema") or {}, sensitive=marking.sensitive)
        return self._frame.render(
            "answer.html",
            status,
            session=session,
            card=self._card(view, session),
            key=key,
            message=str(params.get("message") or ""),
            fields=fields,
            errors=errors or {},
            values=values,
            form_error=(errors or {}).get(FORM_ERROR),
            marking=marking,
        )

    def _card(self, view: TaskView, session: PageSession) -> TaskCard:
        return card_of(view, self._registry, self._links, session.principal)

    # ----- following tasks -----

    async def _task_page(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        view = await self._task(request, session)
        sent = request.query_params.get("sent")
        page = self._frame.render(
            "task.html", session=session, card=self._card(view, session), sent=sent is not None
        )
        return self._frame.kept(page, request, session, fresh)

    async def _task_live(self, request: Request) -> Response:
        """The part of a task's page that changes, once it differs from the version the page shows
        (``?v=``), or after ``_LIVE_WAIT_S``: a held request, counted like an MRTR round."""
        session, _ = await self._frame.signed_in(request)
        try:
            view = await self._tasks.get(request.path_params["task_id"], session.principal)
        except TaskNotFound:
            return JSONResponse({"gone": True}, status_code=404)
        seen = request.query_params.get("v")
        if signature(view) == seen and view.status not in TERMINAL:
            with self._held.hold_if_free(session.principal) as may_wait:
                if may_wait:
                    with contextlib.suppress(TaskNotFound):
                        view = await self._tasks.wait(
                            view.task_id,
                            session.principal,
                            lambda now: signature(now) != seen,
                            _LIVE_WAIT_S,
                            since=view,
                        )
        card = self._card(view, session)
        html = self._frame.fragment("_task_live.html", card=card, session=session)
        return JSONResponse({"v": card.version, "html": html, "done": card.done})

    async def _task(self, request: Request, session: PageSession) -> TaskView:
        try:
            return await self._tasks.get(request.path_params["task_id"], session.principal)
        except TaskNotFound as exc:
            kind = "expired_task" if "expired" in str(exc) else "unknown_task"
            raise Refused(self._frame.message(session, 404, kind)) from None

    async def _cancel_post(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        form = await self._frame.form(request, session)
        view = await self._task(request, session)
        await self._tasks.cancel(view)
        back = "/tasks" if (form.get("back") or [""])[-1] == "list" else f"/tasks/{view.task_id}"
        return self._frame.kept(RedirectResponse(back, status_code=303), request, session, fresh)

    async def _tasks_page(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        cards, older = await self._listing(session, request.query_params.get("before"))
        page = self._frame.render(
            "tasks.html", session=session, cards=cards, older=older, version=_version(cards)
        )
        return self._frame.kept(page, request, session, fresh)

    async def _tasks_live(self, request: Request) -> Response:
        """The list of tasks once it differs from the page's (``?v=``): after a change of one of its
        open tasks, or ``_LIST_WAIT_S`` (tasks started since are seen then)."""
        session, _ = await self._frame.signed_in(request)
        cards, _older = await self._listing(session, None)
        seen = request.query_params.get("v")
        if _version(cards) == seen:
            with self._held.hold_if_free(session.principal) as may_wait:
                if may_wait:
                    await self._any_change(session, [card for card in cards if not card.done])
                    cards, _older = await self._listing(session, None)
        html = self._frame.fragment("_tasks_live.html", cards=cards, session=session)
        return JSONResponse({"v": _version(cards), "html": html, "done": False})

    async def _any_change(self, session: PageSession, open_cards: Sequence[TaskCard]) -> None:
        """Return once one of ``open_cards``' tasks shows something new, or after ``_LIST_WAIT_S``."""

        def changed_from(seen: str) -> Callable[[TaskView], bool]:
            return lambda now: signature(now) != seen

        waits = [
            asyncio.ensure_future(
                self._tasks.wait(card.task_id, session.principal, changed_from(card.version), _LIST_WAIT_S)
            )
            for card in open_cards[:_LIST_FOLLOWED]
        ]
        try:
            if waits:
                await asyncio.wait(waits, timeout=_LIST_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.wait_for(self._tasks.until_stopping(), _LIST_WAIT_S)
        except TimeoutError:
            pass
        finally:
            for wait in waits:
                wait.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def _listing(self, session: PageSession, before: str | None) -> tuple[list[TaskCard], str | None]:
        """One page of the principal's tasks, newest first, and the cursor of the next (older) page."""
        token = b""
        if before:
            try:
                token = bytes.fromhex(str(self._cursors.open(before, session.principal).get("t", "")))
            except (Unsealable, ValueError):
                token = b""
        ids, following = await self._tasks.owned(session.principal, _LIST_SIZE, token)
        reading = asyncio.Semaphore(8)

        async def read(task_id: str) -> TaskView | None:
            async with reading:
                try:
                    return await self._tasks.get(task_id, session.principal)
                except TaskNotFound:  # expired, or visibility's hash matched another's
                    return None

        views = [view for view in await asyncio.gather(*(read(task_id) for task_id in ids)) if view]
        # Newest first: visibility lists open tasks before closed ones.
        views.sort(key=lambda view: view.created_at, reverse=True)
        cards = [self._card(view, session) for view in views]
        older = self._cursors.seal({"t": following.hex()}, session.principal) if following else None
        return cards, older

    async def _static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return Response(status_code=404)
        return Response(self._static[name].read_bytes(), media_type=_STATIC[name])


def _version(cards: Sequence[TaskCard]) -> str:
    """What a listing shows, as a short digest (``signature`` of each task)."""
    shown = json.dumps([[card.task_id, card.version] for card in cards]).encode()
    return hashlib.sha256(shown).hexdigest()[:16]
