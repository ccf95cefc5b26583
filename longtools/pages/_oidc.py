"""OpenID Connect sign-in for the answer page: authorization code with PKCE. API process.

INTERFACE ONLY (to be implemented): the pages package calls this; nothing here works yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from longtools._settings import Settings

__all__ = ["OidcSignIn", "SignInFailed", "SignedIn"]


class SignInFailed(Exception):
    """A sign-in that cannot be completed. ``str(exc)`` is a fixed sentence a person may read;
    ``reason`` is short fixed text for the log (never token content)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class SignedIn:
    principal: str
    """``jwt:<iss>|<sub>``: the principal the same person's bearer tokens have (``principal_id``)."""
    name: str | None
    """What to show as who is signed in (``name``, ``preferred_username`` or ``email``), if any."""
    next_path: str
    """The local path the sign-in began from (checked: always a path of this server)."""


class OidcSignIn:
    def __init__(self, settings: Settings, *, http: httpx.AsyncClient | None = None) -> None:
        raise NotImplementedError

    async def begin(self, next_path: str, redirect_uri: str) -> tuple[str, str]:
        """The authorization URL to send the browser to, and the sealed value of the short-lived
        sign-in cookie (state, nonce, PKCE verifier, ``next_path``) that ``finish`` needs."""
        raise NotImplementedError

    async def finish(self, query: Mapping[str, str], pending: str | None, redirect_uri: str) -> SignedIn:
        """Complete the sign-in from the callback's query and the sign-in cookie.

        Raises:
            SignInFailed: any failure (an error from the issuer, a wrong state, nonce, audience,
                issuer or signature, an expired ID token, an unreachable issuer)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError
