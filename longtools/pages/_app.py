"""The pages' routes: answer a question through its link, follow a task, list one's tasks, sign in
and out. API process, on the port of ``/mcp``.

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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from importlib import resources
from typing import Any, Final, Protocol
from urllib.parse import parse_qs, urlencode

import structlog
from jinja2 import Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from temporalio.service import RPCError

from longtools._sealing import Sealer, Unsealable
from longtools._settings import Settings, is_loopback
from longtools.auth import ANONYMOUS, AuthConfigError, BearerVerifier, principal_id
from longtools.pages._forms import FORM_ERROR, content_of, fields_of, schema_errors
from longtools.pages._oidc import OidcSignIn, SignInFailed
from longtools.pages._sessions import PageSession, Sessions, csrf_matches, secure_request
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
    public_base,
)
from longtools.temporal import PayloadDecryptError, unreachable
from longtools.tools import Registry
from longtools.workflows import marking_of

__all__ = ["Holds", "Pages"]

log = structlog.get_logger("longtools.pages")

_HEADERS: Final = {
    # Nothing but this server's own files, never inside another site's frame (clickjacking), no
    # address of a page (with its link) sent on to anyone, nothing kept by a cache.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
}
_MAX_FORM_BYTES: Final = 65_536
_LIVE_WAIT_S: Final = 25.0
"""How long a page's request for news is held when nothing changes: under what proxies allow."""
_LIST_WAIT_S: Final = 15.0
"""The same for the list of tasks, which also shows tasks started since (those no watch sees)."""
_LIST_SIZE: Final = 25
_LIST_FOLLOWED: Final = 10
"""Open tasks of a listing whose changes end its wait (each is a watch of its own)."""
_OIDC_COOKIE: Final = "longtools-oidc"
_LOCAL_NAME: Final = "you, on this computer"
_STATIC: Final = {"page.css": "text/css; charset=utf-8", "page.js": "text/javascript; charset=utf-8"}


class Holds(Protocol):
    """The held-request bounds of the process (``HeldRounds``): a page's wait for news is one."""

    def hold_if_free(self, principal: str) -> AbstractContextManager[bool]: ...


class _Refused(Exception):
    """A request answered with a page instead of what it asked for (``response``)."""

    def __init__(self, response: Response) -> None:
        self.response = response


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
        self._settings = settings
        self._registry = registry
        self._tasks = tasks
        self._links = links
        self._held = held
        self._allowed_hosts = list(allowed_hosts)
        self._verifier = verifier
        if settings.oidc_client_id and settings.jwt_jwks is None and settings.jwt_secret is None:
            # A sign-in makes a `jwt:<iss>|<sub>` principal: without JWTs on /mcp it owns nothing.
            raise AuthConfigError(
                "LONGTOOLS_OIDC_CLIENT_ID signs people in as the principal of their JWTs: it needs JWT "
                "authentication on /mcp too (LONGTOOLS_JWT_JWKS, with the issuer's keys)"
            )
        self._sessions = Sessions(settings)
        self._cursors = Sealer(settings.require_state_keys(), "longtools page cursors")
        self._oidc = OidcSignIn(settings) if settings.oidc_client_id else None
        self._templates = Environment(
            loader=PackageLoader("longtools.pages", "templates"), autoescape=True, auto_reload=False
        )
        self._static = {name: resources.files("longtools.pages").joinpath("static", name) for name in _STATIC}

    @property
    def routes(self) -> list[BaseRoute]:
        page = self._page
        return [
            Route("/", page(self._home), methods=["GET"]),
            Route(ANSWER_PATH + "{token}", page(self._answer_page), methods=["GET"]),
            Route(ANSWER_PATH + "{token}", page(self._answer_post), methods=["POST"]),
            Route("/tasks", page(self._tasks_page), methods=["GET"]),
            Route("/tasks/live", page(self._tasks_live), methods=["GET"]),
            Route("/tasks/{task_id}", page(self._task_page), methods=["GET"]),
            Route("/tasks/{task_id}/live", page(self._task_live), methods=["GET"]),
            Route("/tasks/{task_id}/cancel", page(self._cancel_post), methods=["POST"]),
            Route("/signin", page(self._signin_page), methods=["GET"]),
            Route("/signin", page(self._signin_post), methods=["POST"]),
            Route("/signin/oidc", page(self._oidc_begin), methods=["GET"]),
            Route("/signin/callback", page(self._oidc_callback), methods=["GET"]),
            Route("/signout", page(self._signout), methods=["POST"]),
            Route("/_pages/{name}", page(self._static_file), methods=["GET"]),
        ]

    async def aclose(self) -> None:
        if self._oidc is not None:
            await self._oidc.aclose()

    # ----- the frame every page shares -----

    def _page(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                self._check_origin(request)
                response = await handler(request)
            except _Refused as refused:
                response = refused.response
            except (RPCError, RuntimeError, PayloadDecryptError) as exc:
                if isinstance(exc, RuntimeError) and not unreachable(exc):
                    raise
                log.error("temporal_error", operation="page", detail=type(exc).__name__)
                response = self._message(request, None, 503, "unavailable")
            response.headers.update(_HEADERS)
            return response

        return endpoint

    def _check_origin(self, request: Request) -> None:
        """Where a request may come from: a ``Host`` of this server (DNS rebinding), and on a server
        without sign-in, this computer only."""
        host = request.headers.get("host", "")
        if not any(
            host == allowed or (allowed.endswith(":*") and host.startswith(allowed[:-1]))
            for allowed in self._allowed_hosts
        ):
            raise _Refused(Response("Misdirected request", status_code=421, media_type="text/plain"))
        client = request.client.host if request.client is not None else ""
        if not self._settings.auth_configured and not is_loopback(client):
            raise _Refused(self._message(request, None, 403, "local_only"))

    def _render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self._templates.get_template(template).render(
            server_name=self._settings.server_name, **context
        )
        return HTMLResponse(html, status_code=status)

    def _message(
        self, request: Request, session: PageSession | None, status: int, kind: str, **context: Any
    ) -> HTMLResponse:
        """One page for every refusal of its kind: ``unknown`` (a link or task that is not the
        signed-in person's, made up or tampered), ``expired``, ``answered``, ``closed`` ..."""
        return self._render("message.html", status, session=session, kind=kind, **context)

    async def _signed_in(self, request: Request) -> tuple[PageSession, bool]:
        """The request's session, and whether it is new (to be set on the response); a person not
        signed in is sent to the sign-in page, which brings them back here."""
        session, expired = self._sessions.current(request)
        if session is not None:
            return session, False
        if not self._settings.auth_configured:  # this computer only (_check_origin): one principal
            return self._sessions.new(ANONYMOUS, _LOCAL_NAME, "local"), True
        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        query = {"next": back, **({"expired": "1"} if expired else {})}
        if request.method != "GET" or request.url.path.endswith("/live"):
            raise _Refused(self._message(request, None, 401, "signed_out", next=back))
        raise _Refused(RedirectResponse(f"/signin?{urlencode(query)}", status_code=303))

    def _kept(self, response: Response, request: Request, session: PageSession, fresh: bool) -> Response:
        if fresh:
            self._sessions.set(response, request, session)
        return response

    async def _form(self, request: Request, session: PageSession | None) -> dict[str, list[str]]:
        """A POSTed form, refused unless it carries the CSRF token of ``session`` (or of the
        sign-in form, before there is one)."""
        if (
            request.headers.get("content-type", "").split(";")[0].strip()
            != "application/x-www-form-urlencoded"
        ):
            raise _Refused(self._message(request, session, 415, "bad_form"))
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > _MAX_FORM_BYTES:
                raise _Refused(self._message(request, session, 413, "bad_form"))
        try:
            form = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=500)
        except (UnicodeDecodeError, ValueError):
            raise _Refused(self._message(request, session, 400, "bad_form")) from None
        sent = (form.get("csrf") or [""])[-1]
        fits = (
            csrf_matches(session, sent)
            if session is not None
            else self._sessions.form_token_matches(request, sent)
        )
        if not fits:
            log.warning("page_form_refused", path=request.url.path, reason="csrf")
            raise _Refused(self._message(request, session, 403, "stale_form"))
        return form

    # ----- answering -----

    async def _home(self, request: Request) -> Response:
        return RedirectResponse("/tasks", status_code=303)

    async def _answer_page(self, request: Request) -> Response:
        session, fresh = await self._signed_in(request)
        view, key, question = await self._question(request, session)
        return self._kept(self._answer_form(view, key, question, session), request, session, fresh)

    async def _answer_post(self, request: Request) -> Response:
        session, fresh = await self._signed_in(request)
        form = await self._form(request, session)
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
            return self._message(request, session, 409, "answered", card=self._card(closed, session))
        log.info("page_answered", task_id=view.task_id, key=key, action=response["action"])
        with self._held.hold_if_free(session.principal) as may_wait:
            if may_wait:
                # As tasks/update does: a moment for the workflow to take it, so the task page
                # (and this link, opened again) shows what comes next, not the question again.
                await self._tasks.wait(
                    view.task_id,
                    session.principal,
                    lambda now: now.status != "input_required" or key not in (now.input_requests or {}),
                    self._settings.answer_settle_s,
                    since=view,
                )
        done = RedirectResponse(f"/tasks/{view.task_id}?{urlencode({'sent': key})}", status_code=303)
        return self._kept(done, request, session, fresh)

    async def _question(
        self, request: Request, session: PageSession
    ) -> tuple[TaskView, str, Mapping[str, Any]]:
        """The task and question of the request's link, as ``session``'s principal may answer it."""
        try:
            link = self._links.open(request.path_params["token"], session.principal)
        except LinkUnknown:
            raise _Refused(self._message(request, session, 404, "unknown")) from None
        except LinkExpired:
            raise _Refused(self._message(request, session, 410, "expired")) from None
        try:
            view = await self._tasks.to_answer(link.task_id, session.principal)
        except TaskNotFound as exc:
            kind = "expired" if "expired" in str(exc) else "unknown"
            raise _Refused(self._message(request, session, 410 if kind == "expired" else 404, kind)) from None
        question = (view.input_requests or {}).get(link.key) if view.status == "input_required" else None
        if question is None or question.get("method") != "elicitation/create":
            raise _Refused(self._message(request, session, 409, "answered", card=self._card(view, session)))
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
        return self._render(
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
        session, fresh = await self._signed_in(request)
        view = await self._task(request, session)
        sent = request.query_params.get("sent")
        page = self._render(
            "task.html", session=session, card=self._card(view, session), sent=sent is not None
        )
        return self._kept(page, request, session, fresh)

    async def _task_live(self, request: Request) -> Response:
        """The part of a task's page that changes, once it differs from the version the page shows
        (``?v=``), or after ``_LIVE_WAIT_S``: a held request, counted like an MRTR round."""
        session, _ = await self._signed_in(request)
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
        html = self._templates.get_template("_task_live.html").render(card=card, session=session)
        return JSONResponse({"v": card.version, "html": html, "done": card.done})

    async def _task(self, request: Request, session: PageSession) -> TaskView:
        try:
            return await self._tasks.get(request.path_params["task_id"], session.principal)
        except TaskNotFound as exc:
            kind = "expired_task" if "expired" in str(exc) else "unknown_task"
            raise _Refused(self._message(request, session, 404, kind)) from None

    async def _cancel_post(self, request: Request) -> Response:
        session, fresh = await self._signed_in(request)
        form = await self._form(request, session)
        view = await self._task(request, session)
        await self._tasks.cancel(view)
        back = "/tasks" if (form.get("back") or [""])[-1] == "list" else f"/tasks/{view.task_id}"
        return self._kept(RedirectResponse(back, status_code=303), request, session, fresh)

    async def _tasks_page(self, request: Request) -> Response:
        session, fresh = await self._signed_in(request)
        cards, older = await self._listing(session, request.query_params.get("before"))
        page = self._render("tasks.html", session=session, cards=cards, older=older, version=_version(cards))
        return self._kept(page, request, session, fresh)

    async def _tasks_live(self, request: Request) -> Response:
        """The list of tasks once it differs from the page's (``?v=``): after a change of one of its
        open tasks, or ``_LIST_WAIT_S`` (tasks started since are seen then)."""
        session, _ = await self._signed_in(request)
        cards, _older = await self._listing(session, None)
        seen = request.query_params.get("v")
        if _version(cards) == seen:
            with self._held.hold_if_free(session.principal) as may_wait:
                if may_wait:
                    await self._any_change(session, [card for card in cards if not card.done])
                    cards, _older = await self._listing(session, None)
        html = self._templates.get_template("_tasks_live.html").render(cards=cards, session=session)
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

    # ----- signing in -----

    async def _signin_page(self, request: Request) -> Response:
        return self._signin(request, _local(request.query_params.get("next")))

    def _signin(
        self, request: Request, next_path: str, *, error: str | None = None, status: int = 200
    ) -> Response:
        session, expired = self._sessions.current(request)
        if not self._settings.auth_configured or (session is not None and error is None):
            return RedirectResponse(next_path, status_code=303)
        csrf = self._sessions.new_form_token() if self._token_sign_in else None
        response = self._render(
            "signin.html",
            status,
            session=None,
            next=next_path,
            expired=expired or request.query_params.get("expired") == "1",
            error=error,
            oidc=self._oidc is not None,
            oidc_host=_host_of(self._settings.oidc_issuer or self._settings.jwt_issuer or ""),
            csrf=csrf,
        )
        if csrf is not None:
            self._sessions.set_form_token(response, request, csrf)
        return response

    @property
    def _token_sign_in(self) -> bool:
        """Whether a person may sign in by pasting their access token: with static tokens, or with
        JWTs when no OpenID Connect sign-in is configured."""
        return self._verifier is not None and (self._oidc is None or self._settings.auth_tokens is not None)

    async def _signin_post(self, request: Request) -> Response:
        if not self._token_sign_in or self._verifier is None:
            return self._message(request, None, 404, "unknown")
        form = await self._form(request, None)
        next_path = _local((form.get("next") or ["/"])[-1])
        token = (form.get("token") or [""])[-1].strip()
        access = await self._verifier.verify_token(token) if token else None
        if access is None:
            return self._signin(
                request, next_path, error="This token was not accepted. Check it and try again.", status=401
            )
        principal = principal_id(access)
        session = self._sessions.new(principal, access.subject or principal, "token")
        log.info("page_signed_in", kind="token")
        return self._kept(RedirectResponse(next_path, status_code=303), request, session, True)

    async def _oidc_begin(self, request: Request) -> Response:
        if self._oidc is None:
            return self._message(request, None, 404, "unknown")
        try:
            url, pending = await self._oidc.begin(
                _local(request.query_params.get("next")), self._callback(request)
            )
        except SignInFailed as exc:
            return self._signin_failed(request, exc)
        response = RedirectResponse(url, status_code=303)
        secure = secure_request(request)
        response.set_cookie(
            f"__Host-{_OIDC_COOKIE}" if secure else _OIDC_COOKIE,
            pending,
            max_age=600,
            path="/",
            secure=secure,
            httponly=True,
            samesite="lax",  # the issuer's redirect back is a top-level GET: Lax cookies go with it
        )
        return response

    async def _oidc_callback(self, request: Request) -> Response:
        if self._oidc is None:
            return self._message(request, None, 404, "unknown")
        secure = secure_request(request)
        cookie = f"__Host-{_OIDC_COOKIE}" if secure else _OIDC_COOKIE
        try:
            signed = await self._oidc.finish(
                dict(request.query_params), request.cookies.get(cookie), self._callback(request)
            )
        except SignInFailed as exc:
            failed = self._signin_failed(request, exc)
            failed.delete_cookie(cookie, path="/", secure=secure, httponly=True, samesite="lax")
            return failed
        session = self._sessions.new(
            signed.principal, signed.name or signed.principal.partition("|")[2], "oidc"
        )
        log.info("page_signed_in", kind="oidc")
        response = RedirectResponse(signed.next_path, status_code=303)
        response.delete_cookie(cookie, path="/", secure=secure, httponly=True, samesite="lax")
        return self._kept(response, request, session, True)

    def _signin_failed(self, request: Request, exc: SignInFailed) -> Response:
        # Logged where it was refused (sign_in_refused, with its reason).
        return self._message(request, None, 400, "sign_in_failed", detail=str(exc))

    def _callback(self, request: Request) -> str:
        base = f"{request.url.scheme}://{request.headers.get('host', '')}"
        return public_base(self._settings, base) + "/signin/callback"

    async def _signout(self, request: Request) -> Response:
        session, _ = self._sessions.current(request)
        if session is None:
            return RedirectResponse("/signin", status_code=303)
        await self._form(request, session)
        response = self._message(request, None, 200, "signed_out_now")
        self._sessions.clear(response, request)
        return response

    async def _static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return Response(status_code=404)
        return Response(self._static[name].read_bytes(), media_type=_STATIC[name])


def _version(cards: Sequence[TaskCard]) -> str:
    """What a listing shows, as a short digest (``signature`` of each task)."""
    shown = json.dumps([[card.task_id, card.version] for card in cards]).encode()
    return hashlib.sha256(shown).hexdigest()[:16]


def _local(path: str | None) -> str:
    """``path`` if it is a path of this server, else ``/tasks``: the pages never send a browser to
    another site on a request's say-so (open redirects)."""
    if (
        not path
        or not path.startswith("/")
        or path.startswith("//")
        or "\\" in path
        or any(ord(char) < 0x20 or ord(char) == 0x7F for char in path)
    ):
        return "/tasks"
    return path


def _host_of(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0]
