"""Who is signed in to the pages: a sealed session cookie, and the CSRF token of every form.
API process.

A session is made only by a sign-in (a token checked by the bearer verifier, an OpenID Connect
sign-in, or on a server without authentication a visit from this computer), never taken from a
request: a value that did not come out of ``Sessions.new`` does not open (session fixation). It is
sealed (``longtools._sealing``, its own label) over the principal, the name shown, an expiry and
a random CSRF secret, and is kept nowhere but the browser's cookie: any replica reads it.

Every form of the pages carries the session's CSRF secret, and every POST must send it back: a
page of another site can make the browser POST with its cookie, but cannot read the secret. The
sign-in form, before there is a session, has its own short-lived cookie for the same purpose.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Final, Literal

from starlette.requests import Request
from starlette.responses import Response

from longtools._sealing import Sealer, Unsealable
from longtools._settings import Settings, is_loopback

__all__ = ["PageSession", "Sessions", "secure_request"]

_SESSION_LABEL: Final = "longtools page sessions"
_FORM_LABEL: Final = "longtools page sign-in forms"
_FORM_TTL_S: Final = 1800.0
"""How long a sign-in form may stay open before it is sent."""

SessionKind = Literal["token", "oidc", "local"]


@dataclass(frozen=True)
class PageSession:
    principal: str
    name: str
    """Who is signed in, as the pages say it."""
    csrf: str
    expires_at: float
    kind: SessionKind


def secure_request(request: Request) -> bool:
    """Whether cookies of this request's site must be ``Secure``: everywhere but plain HTTP to this
    computer (behind a proxy that ends TLS, the ``Host`` is the public name, so they are)."""
    host = request.url.hostname or ""
    return not (request.url.scheme == "http" and is_loopback(host))


def _cookie(base: str, secure: bool) -> str:
    # The __Host- prefix: the browser takes the cookie only if Secure, for this host alone, Path=/.
    return f"__Host-{base}" if secure else base


class Sessions:
    def __init__(self, settings: Settings) -> None:
        ring = settings.require_state_keys()
        self._sessions = Sealer(ring, _SESSION_LABEL)
        self._forms = Sealer(ring, _FORM_LABEL)
        self.ttl_s = settings.page_session_ttl_s

    def current(self, request: Request) -> tuple[PageSession | None, bool]:
        """The request's session, and whether it carried one that has expired (so the sign-in page
        can say why it is shown)."""
        token = request.cookies.get(_cookie("longtools-session", secure_request(request)))
        if token is None:
            return None, False
        try:
            value = self._sessions.open(token)
        except Unsealable:
            return None, False
        principal, name, csrf, expires, kind = (value.get(k) for k in ("p", "n", "c", "e", "k"))
        if not (
            isinstance(principal, str)
            and isinstance(name, str)
            and isinstance(csrf, str)
            and isinstance(expires, int | float)
            and kind in ("token", "oidc", "local")
        ):
            return None, False
        if time.time() >= expires:
            return None, True
        return PageSession(principal, name, csrf, float(expires), kind), False

    def new(self, principal: str, name: str, kind: SessionKind) -> PageSession:
        return PageSession(principal, name, secrets.token_urlsafe(24), time.time() + self.ttl_s, kind)

    def set(self, response: Response, request: Request, session: PageSession) -> None:
        value = {"p": session.principal, "n": session.name, "c": session.csrf, "e": session.expires_at}
        sealed = self._sessions.seal({**value, "k": session.kind})
        secure = secure_request(request)
        # No Max-Age: the browser keeps it until it closes, and the sealed expiry ends it before
        # that; an expired one still comes back, so the sign-in can say why it is asked again.
        response.set_cookie(
            _cookie("longtools-session", secure),
            sealed,
            path="/",
            secure=secure,
            httponly=True,
            samesite="lax",
        )

    def clear(self, response: Response, request: Request) -> None:
        secure = secure_request(request)
        response.delete_cookie(
            _cookie("longtools-session", secure), path="/", secure=secure, httponly=True, samesite="lax"
        )

    @staticmethod
    def new_form_token() -> str:
        """The CSRF token of a sign-in form, before there is a session (``set_form_token``)."""
        return secrets.token_urlsafe(24)

    def set_form_token(self, response: Response, request: Request, token: str) -> None:
        """Keep a sign-in form's token in a short-lived cookie, for ``form_token_matches``."""
        secure = secure_request(request)
        response.set_cookie(
            _cookie("longtools-signin", secure),
            self._forms.seal({"c": token, "e": time.time() + _FORM_TTL_S}),
            max_age=int(_FORM_TTL_S),
            path="/",
            secure=secure,
            httponly=True,
            samesite="lax",
        )

    def form_token_matches(self, request: Request, sent: str | None) -> bool:
        cookie = request.cookies.get(_cookie("longtools-signin", secure_request(request)))
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


def csrf_matches(session: PageSession, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(session.csrf.encode(), sent.encode())
