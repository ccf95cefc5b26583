"""Signing in to the pages, and out: the token form, OpenID Connect at the issuer, the session that
follows. API process.

Who may sign in how: with JWTs and ``oidc_client_id``, at the issuer (``_oidc``); with static
tokens, or JWTs without OIDC, by pasting the bearer token their MCP host uses, checked as ``/mcp``
checks it; without authentication nobody signs in (``Frame.signed_in``: this computer's person).

**Signing in again for a recent sign-in** (``?recent=1``, where the answer page sends a person
whose sign-in is older than a ``step_up="recent"`` approval takes, ``Answers``): the page says why
and is shown even to a person signed in; the OIDC sign-in asks the issuer for one within
``step_up_max_age_s`` (``max_age``), the token form for the token again. Either makes a new session,
signed in now, and brings the person back to the question.

Where notifications are mailed (``notify_email``), an OIDC sign-in records the person's verified
email in the directory of people (``longtools.people``), for the worker to mail them at when the
settings give them no address. The sign-in never waits long for it, nor fails for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from longtools._settings import Settings
from longtools.auth import LEEWAY_S, AuthConfigError, BearerVerifier, principal_id
from longtools.pages._frame import Frame, local
from longtools.pages._oidc import OidcSignIn, SignedIn, SignInFailed
from longtools.pages._sessions import cookie_name, secure_request
from longtools.pages._views import said_duration
from longtools.people import Directory
from longtools.tasks import public_base

__all__ = ["SignIn"]

log = structlog.get_logger("longtools.pages")

_PENDING_S: Final = 600
"""How long the sign-in cookie of an OIDC sign-in in progress lasts (``_oidc``'s pending value)."""
_REMEMBER_S: Final = 2.0
"""How long an OIDC sign-in waits for the directory of people to take the person's email (a read, and
a write when it changed: milliseconds when Temporal answers); past it, the sign-in goes on."""


class SignIn:
    def __init__(
        self, frame: Frame, settings: Settings, verifier: BearerVerifier | None, people: Directory
    ) -> None:
        if settings.oidc_client_id and settings.jwt_jwks is None and settings.jwt_secret is None:
            # A sign-in makes a `jwt:<iss>|<sub>` principal: without JWTs on /mcp it owns nothing.
            raise AuthConfigError(
                "LONGTOOLS_OIDC_CLIENT_ID signs people in as the principal of their JWTs: it needs JWT "
                "authentication on /mcp too (LONGTOOLS_JWT_JWKS, with the issuer's keys)"
            )
        self._frame = frame
        self._settings = settings
        self._verifier = verifier
        self._oidc = OidcSignIn(settings) if settings.oidc_client_id else None
        # People's emails are kept only where something mails them.
        self._people = people if settings.notify_email is not None else None
        # With static tokens, or with JWTs when no OpenID Connect sign-in is configured.
        self._tokens = verifier is not None and (self._oidc is None or settings.auth_tokens is not None)

    @property
    def routes(self) -> list[BaseRoute]:
        page = self._frame.page
        return [
            Route("/signin", page(self._signin_page), methods=["GET"]),
            Route("/signin", page(self._signin_post), methods=["POST"]),
            Route("/signin/oidc", page(self._oidc_begin), methods=["GET"]),
            Route("/signin/callback", page(self._oidc_callback), methods=["GET"]),
            Route("/signout", page(self._signout), methods=["POST"]),
        ]

    async def aclose(self) -> None:
        if self._oidc is not None:
            await self._oidc.aclose()

    async def _signin_page(self, request: Request) -> Response:
        recent = request.query_params.get("recent") == "1"
        return await self._signin(request, local(request.query_params.get("next")), recent=recent)

    async def _signin(
        self,
        request: Request,
        next_path: str,
        *,
        error: str | None = None,
        status: int = 200,
        recent: bool = False,
    ) -> Response:
        """The sign-in page; ``recent``: for an approval that needs a recent sign-in (shown to a
        person signed in too, saying why)."""
        sessions = self._frame.sessions
        session, expired = await sessions.current(request)
        if not self._settings.auth_configured or (session is not None and error is None and not recent):
            return RedirectResponse(next_path, status_code=303)
        csrf = sessions.new_form_token() if self._tokens else None
        response = self._frame.render(
            "signin.html",
            status,
            session=None,
            next=next_path,
            expired=expired or request.query_params.get("expired") == "1",
            error=error,
            oidc=self._oidc is not None,
            oidc_host=_host_of(self._settings.oidc_issuer or self._settings.jwt_issuer or ""),
            csrf=csrf,
            recent=recent,
            max_age=said_duration(timedelta(seconds=self._settings.step_up_max_age_s)),
        )
        if csrf is not None:
            sessions.set_form_token(response, request, csrf)
        return response

    async def _signin_post(self, request: Request) -> Response:
        if not self._tokens or self._verifier is None:
            return self._frame.message(None, 404, "unknown")
        form = await self._frame.form(request, None)
        next_path = local((form.get("next") or ["/"])[-1])
        recent = (form.get("recent") or [""])[-1] == "1"
        token = (form.get("token") or [""])[-1].strip()
        access = await self._verifier.verify_token(token) if token else None
        if access is None:
            said = "This token was not accepted. Check it and try again."
            return await self._signin(request, next_path, error=said, status=401, recent=recent)
        principal = principal_id(access)
        sessions = self._frame.sessions
        # A JWT's session ends when /mcp would stop taking the JWT (its exp, with the verifier's
        # leeway); a static token's, once the configuration no longer has it (its fingerprint).
        until = None if access.expires_at is None else access.expires_at + LEEWAY_S
        session = sessions.new(
            principal,
            access.subject or principal,
            "token",
            until=until,
            fingerprint=sessions.fingerprint(token),
            subject=access.subject,
            scopes=frozenset(access.scopes),
            groups=_claimed_groups(access.claims),
        )
        log.info("page_signed_in", kind="token")
        return self._frame.kept(RedirectResponse(next_path, status_code=303), request, session, True)

    async def _oidc_begin(self, request: Request) -> Response:
        if self._oidc is None:
            return self._frame.message(None, 404, "unknown")
        # A step-up's: the issuer must have signed the person in within the approval's max age (whole
        # seconds, rounded down: never longer than it).
        max_age = int(self._settings.step_up_max_age_s) if request.query_params.get("recent") == "1" else None
        try:
            url, pending = await self._oidc.begin(
                local(request.query_params.get("next")), self._callback(request), max_age=max_age
            )
        except SignInFailed as exc:
            return self._failed(exc)
        response = RedirectResponse(url, status_code=303)
        secure = secure_request(request)
        response.set_cookie(
            cookie_name("longtools-oidc", request),
            pending,
            max_age=_PENDING_S,
            path="/",
            secure=secure,
            httponly=True,
            samesite="lax",  # the issuer's redirect back is a top-level GET: Lax cookies go with it
        )
        return response

    async def _oidc_callback(self, request: Request) -> Response:
        if self._oidc is None:
            return self._frame.message(None, 404, "unknown")
        secure = secure_request(request)
        cookie = cookie_name("longtools-oidc", request)
        try:
            signed = await self._oidc.finish(
                dict(request.query_params), request.cookies.get(cookie), self._callback(request)
            )
        except SignInFailed as exc:
            response = self._failed(exc)
        else:
            name = signed.name or signed.principal.partition("|")[2]
            # Not bounded by the ID token's exp: that says how long the token may be taken at a
            # sign-in (OpenID Connect Core 3.1.3.7), often minutes, not how long a sign-in lasts;
            # LONGTOOLS_PAGE_SESSION_TTL_S is the operator's bound (docs/security.md).
            session = self._frame.sessions.new(
                signed.principal,
                name,
                "oidc",
                subject=signed.subject,
                scopes=signed.scopes,
                groups=signed.groups,
                signed_in_at=signed.signed_in_at,
            )
            log.info("page_signed_in", kind="oidc")
            await self._remember(signed)
            response = self._frame.kept(
                RedirectResponse(signed.next_path, status_code=303), request, session, True
            )
        response.delete_cookie(cookie, path="/", secure=secure, httponly=True, samesite="lax")
        return response

    async def _remember(self, signed: SignedIn) -> None:
        """Keep the email ``signed`` verified (or that it verified none) in the directory of people.
        A failure is logged, never the sign-in's: the next sign-in tries again."""
        if self._people is None:
            return
        try:
            async with asyncio.timeout(_REMEMBER_S):
                await self._people.remember_email(signed.principal, signed.email)
        except Exception as exc:
            # The type only: an RPC error's text could quote the address.
            log.warning("person_not_remembered", error=type(exc).__name__)

    def _failed(self, exc: SignInFailed) -> Response:
        # Logged where it was refused (sign_in_refused, with its reason).
        return self._frame.message(None, 400, "sign_in_failed", detail=str(exc))

    def _callback(self, request: Request) -> str:
        base = f"{request.url.scheme}://{request.headers.get('host', '')}"
        return public_base(self._settings, base) + "/signin/callback"

    async def _signout(self, request: Request) -> Response:
        session, _ = await self._frame.sessions.current(request)
        if session is None:
            return RedirectResponse("/signin", status_code=303)
        await self._frame.form(request, session)
        # Ended where every replica looks, before the page says so: the cookie deleted below ends
        # only this browser's copy.
        await self._frame.sessions.end(session)
        response = self._frame.message(None, 200, "signed_out_now")
        self._frame.sessions.clear(response, request)
        return response


def _claimed_groups(claims: Mapping[str, Any] | None) -> frozenset[str]:
    """The groups a JWT's claim named, as the bearer verifier kept them (``claims["groups"]``, only
    with ``LONGTOOLS_GROUPS_CLAIM``); a static token has none."""
    found = (claims or {}).get("groups")
    if not isinstance(found, list):
        return frozenset()
    return frozenset(group for group in found if isinstance(group, str))


def _host_of(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0]
