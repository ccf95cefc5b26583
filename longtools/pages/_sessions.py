"""Who is signed in to the pages: a sealed session cookie, and the CSRF token of every form.
API process.

A session is made only by a sign-in (a token checked by the bearer verifier, an OpenID Connect
sign-in, or on a server without authentication a visit from this computer), never taken from a
request: a value that did not come out of ``Sessions.new`` does not open (session fixation). It is
sealed (``longtools._sealing``, its own label, bound to the cookie's name) over the principal, the
name shown, the subject, scopes and groups of the token it was made with, when the person signed in,
an expiry, a random CSRF secret and a random session id, and is kept nowhere but the browser's
cookie: any replica reads it.

A session ends with what made it, checked at every request:
- its expiry: the sign-in's TTL, or sooner the time ``/mcp`` stops taking the JWT it was made with;
- a static token's session keeps a keyed fingerprint of the token (never the token), and ends once
  the configuration no longer has that token for that principal;
- a sign-out, recorded in Temporal (``_signouts``), so a copy of the cookie ends on every replica.

Every form of the pages carries the session's CSRF secret, and every POST must send it back: a
page of another site can make the browser POST with its cookie, but cannot read the secret. The
sign-in form, before there is a session, has its own short-lived cookie for the same purpose.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import urlencode

import structlog
from starlette.requests import Request
from starlette.responses import Response

from longtools._sealing import Sealer, Unsealable
from longtools._settings import Settings, is_loopback
from longtools.auth import BearerVerifier, Caller
from longtools.pages._signouts import SignOuts

__all__ = ["PageSession", "Sessions", "cookie_name", "secure_request"]

log = structlog.get_logger("longtools.pages")

_SESSION_LABEL: Final = "longtools page sessions"
_FORM_LABEL: Final = "longtools page sign-in forms"
_FINGERPRINT_LABEL: Final = b"longtools page session token fingerprints"
_FORM_TTL_S: Final = 1800.0
"""How long a sign-in form may stay open before it is sent."""
_MAX_GROUPS: Final = 50
_MAX_GROUPS_CHARS: Final = 1500
"""Most groups a session keeps of its token's claim, and their characters in all: the sealed cookie
must stay under ``MAX_SEALED`` (4,096). A claim past these (a directory's hundreds of groups) is
cut, and logged: a rule of a group left out does not admit that person on the pages."""

SessionKind = Literal["token", "oidc", "local"]


@dataclass(frozen=True)
class PageSession:
    principal: str
    name: str
    """Who is signed in, as the pages say it."""
    csrf: str
    expires_at: float
    kind: SessionKind
    session_id: str
    """Random; what a sign-out records (``_signouts``)."""
    fingerprint: str | None = None
    """A static token's session: its token's keyed fingerprint (``BearerVerifier.static_fingerprint``)."""
    subject: str | None = None
    """The ``sub`` of the token it was made with (a static token's name), as ``/mcp`` gives it in
    ``Caller.subject``; None for a local session (and one made before sessions kept it)."""
    scopes: frozenset[str] = frozenset()
    """The scopes of the token it was made with (a JWT's, an ID token's ``scope`` if any)."""
    groups: frozenset[str] = frozenset()
    """The groups its token's claim named (``LONGTOOLS_GROUPS_CLAIM``: a JWT's, an ID token's); none
    for a static token's or a local session (``LONGTOOLS_GROUPS`` applies to every kind by name)."""
    signed_in_at: float | None = None
    """When the person signed in (Unix time): at the issuer, for OIDC (the ID token's ``auth_time``),
    else when the token was pasted or the local session made. None for a session made before
    sessions kept it: never recent enough for a ``step_up="recent"`` approval."""

    @property
    def caller(self) -> Caller:
        """Who answers from this session, as a tool's ``authorize=`` check and a decision's rule see
        them: the caller that the same person's bearer token on ``/mcp`` is, as far as the sign-in
        saw it."""
        return Caller(principal=self.principal, scopes=self.scopes, subject=self.subject, groups=self.groups)


def signed_in_within(session: PageSession, max_age_s: float) -> float | None:
    """When ``session``'s person signed in, if within ``max_age_s`` (a step-up: a ``recent``
    approval, adding a passkey); None if longer ago, or not known (a session made before sessions
    kept it). A server without authentication: nobody signs in, nor could again; its one person is
    whoever is at this computer (``Frame``), now."""
    now = time.time()
    if session.kind == "local":
        return now
    at = session.signed_in_at
    return None if at is None or now - at > max_age_s else at


def sign_in_again(path: str) -> str:
    """The sign-in page for a recent sign-in (``SignIn``: OIDC with ``max_age``, or the token
    again), leading back to ``path``."""
    return f"/signin?{urlencode({'next': path, 'recent': '1'})}"


def secure_request(request: Request) -> bool:
    """Whether cookies of this request's site must be ``Secure``: everywhere but plain HTTP to this
    computer (behind a proxy that ends TLS, the ``Host`` is the public name, so they are)."""
    host = request.url.hostname or ""
    return not (request.url.scheme == "http" and is_loopback(host))


def cookie_name(base: str, request: Request) -> str:
    """The name of the pages' cookie ``base`` for this request's site."""
    if secure_request(request):
        # The __Host- prefix: the browser takes the cookie only if Secure, for this host alone, Path=/.
        return f"__Host-{base}"
    # Plain HTTP to this computer: a browser sends a host's cookies to every port of it, and takes
    # them from every port. With the port in the name, another server of this computer (another
    # longtools, another app) sets cookies of other names, and does not replace or sign out this
    # one's. It still receives this one's cookies, and can still set a cookie of this name on
    # purpose (docs/security.md, "Plain HTTP on this computer").
    return f"{base}-{request.url.port or 80}"


class Sessions:
    """Makes, reads and ends the pages' sessions. ``verifier`` is None on a server without
    authentication (whose sessions are all ``local``)."""

    def __init__(self, settings: Settings, verifier: BearerVerifier | None, signouts: SignOuts) -> None:
        ring = settings.require_state_keys()
        self._sessions = Sealer(ring, _SESSION_LABEL)
        self._forms = Sealer(ring, _FORM_LABEL)
        self.ttl_s = settings.page_session_ttl_s
        self._verifier = verifier
        self._signouts = signouts
        # A static token's session keeps a keyed fingerprint of its token, not the principal alone
        # (a token replaced for the same principal must end its sessions) and not the token: the
        # cookie is sealed, but a leaked state key ring, which forges page sessions, must not also
        # give tokens that /mcp takes. An HMAC under a key of the ring, not a bare hash, so the
        # fingerprint cannot be checked against guessed tokens without the ring either.
        # Made under the first key, recognised under every key: a rotation ends no session.
        self._fingerprint_key = hmac.new(ring[0], _FINGERPRINT_LABEL, hashlib.sha256).digest()
        self._configured: dict[str, str] = {}
        """The fingerprint of every static token of the configuration, with its principal."""
        if verifier is not None:
            for key in ring:
                derived = hmac.new(key, _FINGERPRINT_LABEL, hashlib.sha256).digest()
                self._configured.update(verifier.static_fingerprints(derived))

    async def current(self, request: Request) -> tuple[PageSession | None, bool]:
        """The request's session, and whether it carried one that has expired, or whose token is no
        longer configured (so the sign-in page can say why it is shown).

        Costs one Temporal read for a live token or OIDC session (``SignOuts.ended``), none for others.

        Raises:
            RPCError: Temporal did not answer whether it was signed out (deny on error: the page
                answers "unavailable")."""
        name = cookie_name("longtools-session", request)
        token = request.cookies.get(name)
        if token is None:
            return None, False
        try:
            # Bound to the cookie's name: a value set under another port's name does not open here.
            value = self._sessions.open(token, name)
        except Unsealable:
            return None, False
        principal, shown, csrf, expires, kind, session_id, fingerprint, subject = (
            value.get(k) for k in ("p", "n", "c", "e", "k", "s", "f", "u")
        )
        scopes = value.get("sc", [])
        groups = value.get("g", [])
        signed_in_at = value.get("i")  # absent from a cookie made before sessions kept it
        if not (
            isinstance(principal, str)
            and isinstance(shown, str)
            and isinstance(csrf, str)
            and isinstance(expires, int | float)
            and kind in ("token", "oidc", "local")
            and isinstance(session_id, str)
            and (fingerprint is None or isinstance(fingerprint, str))
            and (subject is None or isinstance(subject, str))
            and isinstance(scopes, list)
            and all(isinstance(scope, str) for scope in scopes)
            and isinstance(groups, list)
            and all(isinstance(group, str) for group in groups)
            and (signed_in_at is None or isinstance(signed_in_at, int | float))
        ):
            return None, False
        # Made while the server ran in the other mode (the same keys, with or without authentication):
        # a local session must not stand for anyone once people sign in, nor a sign-in without them.
        if (kind == "local") != (self._verifier is None):
            return None, False
        if time.time() >= expires:
            return None, True
        # A token session with a fingerprint was made with a static token; one without, with a JWT,
        # and its expiry is the JWT's already (``new``).
        if fingerprint is not None and self._configured.get(fingerprint) != principal:
            return None, True
        session = PageSession(
            principal,
            shown,
            csrf,
            float(expires),
            kind,
            session_id,
            fingerprint,
            subject=subject,
            scopes=frozenset(scopes),
            groups=frozenset(groups),
            signed_in_at=None if signed_in_at is None else float(signed_in_at),
        )
        # A local session is anyone on this computer (no sign-in, no sign-out that would hold): nothing
        # to read for it.
        if kind != "local" and await self._signouts.ended(session_id):
            return None, False
        return session, False

    def new(
        self,
        principal: str,
        name: str,
        kind: SessionKind,
        *,
        until: float | None = None,
        fingerprint: str | None = None,
        subject: str | None = None,
        scopes: frozenset[str] = frozenset(),
        groups: frozenset[str] = frozenset(),
        signed_in_at: float | None = None,
    ) -> PageSession:
        """A new session; it expires after the TTL, or at ``until`` (Unix time) if that is sooner.
        ``subject``, ``scopes`` and ``groups`` are the token's it was made with (``PageSession.caller``);
        ``signed_in_at``, when the person signed in (an ID token's ``auth_time``), else now."""
        now = time.time()
        expires = now + self.ttl_s
        if until is not None:
            expires = min(expires, until)
        return PageSession(
            principal,
            name,
            secrets.token_urlsafe(24),
            expires,
            kind,
            secrets.token_urlsafe(16),
            fingerprint,
            subject=subject,
            scopes=scopes,
            groups=_kept_groups(groups),
            signed_in_at=now if signed_in_at is None else signed_in_at,
        )

    def fingerprint(self, token: str) -> str | None:
        """What a session made with ``token`` keeps of it: its fingerprint if it is a static token."""
        if self._verifier is None:
            return None
        return self._verifier.static_fingerprint(token, self._fingerprint_key)

    async def end(self, session: PageSession) -> None:
        """End ``session`` on every replica, for every copy of its cookie (a sign-out).

        Raises:
            RPCError: Temporal did not take the sign-out."""
        if session.kind != "local":
            await self._signouts.end(session.session_id, session.expires_at)

    def set(self, response: Response, request: Request, session: PageSession) -> None:
        value = {
            "p": session.principal,
            "n": session.name,
            "c": session.csrf,
            "e": session.expires_at,
            "k": session.kind,
            "s": session.session_id,
        }
        if session.fingerprint is not None:
            value["f"] = session.fingerprint
        if session.subject is not None:
            value["u"] = session.subject
        if session.scopes:
            value["sc"] = sorted(session.scopes)
        if session.groups:
            value["g"] = sorted(session.groups)
        if session.signed_in_at is not None:
            value["i"] = session.signed_in_at
        name = cookie_name("longtools-session", request)
        secure = secure_request(request)
        # No Max-Age: the browser keeps it until it closes, and the sealed expiry ends it before
        # that; an expired one still comes back, so the sign-in can say why it is asked again.
        response.set_cookie(
            name,
            self._sessions.seal(value, name),
            path="/",
            secure=secure,
            httponly=True,
            samesite="lax",
        )

    def clear(self, response: Response, request: Request) -> None:
        secure = secure_request(request)
        response.delete_cookie(
            cookie_name("longtools-session", request),
            path="/",
            secure=secure,
            httponly=True,
            samesite="lax",
        )

    @staticmethod
    def new_form_token() -> str:
        """The CSRF token of a sign-in form, before there is a session (``set_form_token``)."""
        return secrets.token_urlsafe(24)

    def set_form_token(self, response: Response, request: Request, token: str) -> None:
        """Keep a sign-in form's token in a short-lived cookie, for ``form_token_matches``."""
        secure = secure_request(request)
        response.set_cookie(
            cookie_name("longtools-signin", request),
            self._forms.seal({"c": token, "e": time.time() + _FORM_TTL_S}),
            max_age=int(_FORM_TTL_S),
            path="/",
            secure=secure,
            httponly=True,
            samesite="lax",
        )

    def form_token_matches(self, request: Request, sent: str | None) -> bool:
        cookie = request.cookies.get(cookie_name("longtools-signin", request))
        if cookie is None or not sent:
            return False
        try:
            value = self._forms.open(cookie)
        except Unsealable:
            return False
        token, expires = value.get("c"), value.get("e")
        if not isinstance(token, str) or not isinstance(expires, int | float) or time.time() >= expires:
            return False
        return hmac.compare_digest(token.encode(), sent.encode())


def _kept_groups(groups: frozenset[str]) -> frozenset[str]:
    """``groups`` as far as a session keeps them (``_MAX_GROUPS``, ``_MAX_GROUPS_CHARS``), the same
    ones whatever order the claim gave them in."""
    kept: list[str] = []
    chars = 0
    for group in sorted(groups):
        chars += len(group) + 3  # as JSON in a list: its quotes and a comma
        if len(kept) >= _MAX_GROUPS or chars > _MAX_GROUPS_CHARS:
            log.warning("page_session_groups_cut", claimed=len(groups), kept=len(kept))
            break
        kept.append(group)
    return frozenset(kept)


def csrf_matches(session: PageSession, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(session.csrf.encode(), sent.encode())
