"""OpenID Connect sign-in for the answer page: authorization code with PKCE (S256). API process.

The page's routes call ``begin`` to send a person's browser to the issuer, and ``finish`` when the
browser comes back to the callback. ``finish`` answers the principal the same person's bearer tokens
have (``jwt:<iss>|<sub>``, as ``longtools.auth._tokens.principal_id`` makes it), so the tasks they
started from an MCP client are theirs on the page too.

All a browser carries between the two calls is one sealed value (state, nonce, PKCE verifier, where
to go back to, an expiry) that the caller keeps in a short-lived cookie. No replica stores anything,
and a callback completes only in the browser that began the sign-in: the ``state`` in the callback
must match the cookie's.

The ID token is checked as strictly as a bearer token: RS256/ES256 with keys from the issuer's JWKS
only (the same key rules), ``iss`` exactly, this client in ``aud``, ``exp`` with the same leeway, and
this sign-in's nonce. Nothing a token holds is logged or put in a message.

A sign-in for a ``step_up="recent"`` approval asks the issuer for one within ``max_age`` seconds
(OpenID Connect Core 3.1.2.1), sealed with the rest, and takes the ID token only if its
``auth_time`` says so: an issuer that ignores ``max_age`` (answers from an older sign-in of its
own) signs nobody in by it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import math
import secrets
import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import httpx
import jwt
import structlog

from longtools._sealing import Sealer, Unsealable
from longtools._settings import Settings, is_loopback_url

# The bearer verifier's key rules and limits, shared on purpose: a person's ID token is held to
# exactly what their MCP client's tokens are held to.
from longtools.auth import (
    LEEWAY_S,
    MAX_TOKEN_CHARS,
    STATIC_ISSUER,
    AuthConfigError,
    JwksUrl,
)

__all__ = ["OidcSignIn", "SignInFailed", "SignedIn"]

log = structlog.get_logger("longtools.pages")

SEALER_LABEL = "longtools page sign-in"
"""The ``Sealer`` label of the pending sign-in: a value sealed for any other use never opens as one."""
PENDING_TTL_S = 600.0
"""Seconds a person has, from ``begin``, to come back to the callback."""
HTTP_TIMEOUT_S = 5.0
DISCOVERY_MAX_AGE_S = 3600.0
DISCOVERY_RETRY_S = 30.0
"""Seconds a failed discovery is answered again without asking the issuer: sign-in attempts against
an issuer that is down (anyone may begin one) cost it one request, and this server one wait of up to
``HTTP_TIMEOUT_S``, per this long, not one each."""
# Far longer than any path of the page, and short enough that the sealed cookie stays far below
# Sealer's MAX_SEALED (a longer value would not open again).
MAX_NEXT_PATH = 1024
_MAX_EMAIL = 254  # RFC 5321's limit on a path, less its angle brackets
_NOT_IN_EMAIL = frozenset(',;:<>()[]\\"')
_RANDOM_BYTES = 32  # state, nonce and PKCE verifier: 256 bits each, 43 characters of base64url
_ASYMMETRIC_ALGS = frozenset({"RS256", "ES256"})
# Error codes of RFC 6749 (4.1.2.1, 5.2) and OpenID Connect Core (3.1.2.6). Only these are logged: the
# callback's query comes from the browser, and what anyone can put in it has no place in the log.
_OAUTH_ERRORS = frozenset(
    {
        "access_denied",
        "invalid_request",
        "unauthorized_client",
        "unsupported_response_type",
        "invalid_scope",
        "server_error",
        "temporarily_unavailable",
        "invalid_client",
        "invalid_grant",
        "unsupported_grant_type",
        "interaction_required",
        "login_required",
        "account_selection_required",
        "consent_required",
        "invalid_request_uri",
        "invalid_request_object",
        "request_not_supported",
        "request_uri_not_supported",
        "registration_not_supported",
    }
)

_AGAIN = "This sign-in has expired or was begun in another browser. Please sign in again."
_BROKEN = "This sign-in could not be completed. Please sign in again."
_DECLINED = "The sign-in was cancelled at the identity provider."
_ISSUER_REFUSED = "The identity provider did not sign you in."
_UNREACHABLE = "The identity provider cannot be reached right now. Please try again in a moment."
_MISCONFIGURED = "Signing in with the identity provider is not set up correctly on this server."
_UNVERIFIED = "The identity provider's answer could not be verified, so you are not signed in."
_NOT_RECENT = (
    "The identity provider did not confirm a recent sign-in, which this approval needs, so you are not "
    "signed in again. Please try again."
)
_INTERNAL = "Signing in failed. Please try again."


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
    subject: str | None = None
    """The ID token's ``sub``: what the person's bearer tokens give as ``Caller.subject``."""
    scopes: frozenset[str] = frozenset()
    """The ID token's ``scope`` (or ``scp``), if it has one (most do not)."""
    groups: frozenset[str] = frozenset()
    """The groups the ID token's claim named by ``LONGTOOLS_GROUPS_CLAIM`` lists, if it is set."""
    email: str | None = None
    """The ID token's ``email``, only when its ``email_verified`` is true (one plain address)."""
    signed_in_at: float = 0.0
    """When the person signed in at the issuer (Unix time): the ID token's ``auth_time``, else (it
    has none) the time of this sign-in; never later than now (``finish`` always sets it)."""


@dataclass(frozen=True)
class _Metadata:
    """The parts of the issuer's discovery document the sign-in uses."""

    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


@dataclass(frozen=True)
class _Pending:
    state: str
    nonce: str
    verifier: str
    next_path: str
    max_age: int | None = None
    """The ``max_age`` the authorization request asked for (a step-up's), if any."""


class OidcSignIn:
    """Signs people in to the answer page with the OIDC issuer of ``Settings``.

    ``http`` is used instead of a client of its own (and is then not closed by ``aclose``); ``clock``
    (monotonic seconds) paces discovery and JWKS refetches; ``pending_ttl_s`` is how long a person
    has from ``begin`` to the callback.

    Raises:
        AuthConfigError: no ``oidc_client_id``, no issuer (``oidc_issuer`` or ``jwt_issuer``), or an
            issuer that is not an https:// URL (http:// only on loopback).
        MissingKeyRing: no state keys to seal the pending sign-in with.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        pending_ttl_s: float = PENDING_TTL_S,
    ) -> None:
        client_id = settings.oidc_client_id
        issuer = settings.oidc_issuer or settings.jwt_issuer
        if not client_id:
            raise AuthConfigError(
                "OIDC sign-in needs LONGTOOLS_OIDC_CLIENT_ID, the page's client id at the issuer"
            )
        if not issuer:
            raise AuthConfigError(
                "OIDC sign-in needs an issuer: set LONGTOOLS_OIDC_ISSUER (or LONGTOOLS_JWT_ISSUER)"
            )
        # The issuer is where people's browsers and this server's token requests go; and its `iss`
        # must be one a bearer token may have, or page and MCP principals would never match.
        if not _secure_url(issuer) or urlsplit(issuer).query or issuer == STATIC_ISSUER or "|" in issuer:
            raise AuthConfigError(
                "the OIDC issuer must be an https:// URL without query, fragment or '|' "
                "(http:// only on loopback)"
            )
        self._issuer = issuer
        self._client_id = client_id
        self._client_secret = (
            None if settings.oidc_client_secret is None else settings.oidc_client_secret.get_secret_value()
        )
        scopes = settings.oidc_scopes.split()
        # Without `openid` the issuer answers plain OAuth, with no ID token to sign anyone in with.
        if "openid" not in scopes:
            scopes.insert(0, "openid")
        self._scope = " ".join(scopes)
        self._groups_claim = settings.groups_claim
        self._sealer = Sealer(settings.require_state_keys(), SEALER_LABEL)
        self._pending_ttl_s = pending_ttl_s
        self._clock = clock
        self._http = http
        self._owns_http = http is None
        self._metadata: _Metadata | None = None
        self._discovered_at = 0.0
        self._discovering = asyncio.Lock()
        """One discovery at a time: sign-ins that need one meanwhile wait for its outcome."""
        self._failed: SignInFailed | None = None
        self._failed_at = 0.0
        self._jwks: JwksUrl | None = None
        """The issuer's keys (its discovery names where), fetched as bearer tokens' are."""

    async def begin(
        self, next_path: str, redirect_uri: str, *, max_age: int | None = None
    ) -> tuple[str, str]:
        """The authorization URL to send the browser to, and the sealed value of the short-lived
        sign-in cookie (state, nonce, PKCE verifier, ``next_path``, ``max_age``) that ``finish`` needs.

        ``max_age`` (seconds): the issuer must have signed the person in within it (a step-up), and
        ``finish`` takes only an ID token whose ``auth_time`` says so.

        ``next_path`` that is not a path of this server (another host, a scheme, ``//``, a backslash,
        a control character) becomes ``/``: the sign-in is never an open redirect.

        Raises:
            SignInFailed: the issuer cannot be reached or its discovery document cannot be used."""
        try:
            metadata = await self._discover()
            state, nonce, verifier = (secrets.token_urlsafe(_RANDOM_BYTES) for _ in range(3))
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
            params = {
                "response_type": "code",
                "client_id": self._client_id,
                "redirect_uri": redirect_uri,
                "scope": self._scope,
                "state": state,
                "nonce": nonce,
                "code_challenge": challenge.decode(),
                "code_challenge_method": "S256",
            }
            if max_age is not None:
                params["max_age"] = str(max_age)
            pending: dict[str, Any] = {
                "state": state,
                "nonce": nonce,
                "verifier": verifier,
                "next": _local_path(next_path),
                # Wall-clock time: the callback may reach another replica than the one that began.
                "exp": time.time() + self._pending_ttl_s,
            }
            if max_age is not None:
                pending["max_age"] = max_age
            # Bound to the redirect URI: the code is exchanged with the one it was asked for with.
            sealed = self._sealer.seal(pending, redirect_uri)
            return _with_query(metadata.authorization_endpoint, params), sealed
        except SignInFailed:
            raise
        except Exception as exc:
            _internal_error(exc)

    async def finish(self, query: Mapping[str, str], pending: str | None, redirect_uri: str) -> SignedIn:
        """Complete the sign-in from the callback's query and the sign-in cookie.

        Raises:
            SignInFailed: any failure (an error from the issuer, a wrong state, nonce, audience,
                issuer or signature, an expired ID token, an unreachable issuer)."""
        try:
            return await self._finish(query, pending, redirect_uri)
        except SignInFailed:
            raise
        except Exception as exc:
            _internal_error(exc)

    async def aclose(self) -> None:
        """Close the HTTP client this sign-in made for itself (an injected one is left open)."""
        if self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _finish(self, query: Mapping[str, str], pending: str | None, redirect_uri: str) -> SignedIn:
        began = self._open_pending(pending, redirect_uri)
        error = query.get("error")
        if error is not None:
            known = error if error in _OAUTH_ERRORS else "other"
            _refuse(_DECLINED if error == "access_denied" else _ISSUER_REFUSED, "authorization error", known)
        state = query.get("state")
        if not state:
            _refuse(_BROKEN, "missing state")
        # Constant time: how much of a guessed state matched must not show in how long the answer took.
        if not hmac.compare_digest(state.encode(), began.state.encode()):
            _refuse(_BROKEN, "state mismatch")
        code = query.get("code")
        if not code:
            _refuse(_BROKEN, "missing code")
        # RFC 9207: an issuer that says who it is must be ours (a mix-up with another issuer otherwise).
        callback_issuer = query.get("iss")
        if callback_issuer is not None and callback_issuer != self._issuer:
            _refuse(_BROKEN, "callback issuer mismatch")
        metadata = await self._discover()
        id_token = await self._exchange(metadata, code, began.verifier, redirect_uri)
        claims = await self._verify(metadata, id_token, began.nonce)
        signed_in_at = _signed_in_at(claims, began.max_age)
        return SignedIn(
            principal=f"jwt:{claims['iss']}|{claims['sub']}",
            name=_display_name(claims),
            next_path=began.next_path,
            subject=claims["sub"],
            scopes=_scopes(claims),
            groups=_groups(claims, self._groups_claim),
            email=_verified_email(claims),
            signed_in_at=signed_in_at,
        )

    def _open_pending(self, pending: str | None, redirect_uri: str) -> _Pending:
        if pending is None:
            _refuse(_AGAIN, "no pending sign-in")
        try:
            value = self._sealer.open(pending, redirect_uri)
        except Unsealable:
            _refuse(_AGAIN, "pending unsealable")
        state, nonce, verifier, next_path, expiry, max_age = (
            value.get(name) for name in ("state", "nonce", "verifier", "next", "exp", "max_age")
        )
        if not (
            isinstance(state, str)
            and isinstance(nonce, str)
            and isinstance(verifier, str)
            and isinstance(next_path, str)
            and isinstance(expiry, int | float)
            and (max_age is None or (isinstance(max_age, int) and not isinstance(max_age, bool)))
        ):
            _refuse(_AGAIN, "pending unsealable")
        if time.time() >= expiry:
            _refuse(_AGAIN, "pending expired")
        return _Pending(
            state=state, nonce=nonce, verifier=verifier, next_path=_local_path(next_path), max_age=max_age
        )

    async def _discover(self) -> _Metadata:
        """The issuer's endpoints, from its discovery document (fetched again after an hour; after a
        failure, not before ``DISCOVERY_RETRY_S``)."""
        async with self._discovering:
            now = self._clock()
            if self._metadata is not None and now - self._discovered_at < DISCOVERY_MAX_AGE_S:
                return self._metadata
            failed = self._failed
            if failed is not None and now - self._failed_at < DISCOVERY_RETRY_S:
                log.warning("sign_in_refused", reason=failed.reason, issuer_asked=False)
                raise SignInFailed(str(failed), failed.reason)
            try:
                self._metadata = await self._fetch_metadata()
            except SignInFailed as exc:
                self._failed, self._failed_at = exc, now
                raise
            self._discovered_at = now
            self._failed = None
            return self._metadata

    async def _fetch_metadata(self) -> _Metadata:
        url = f"{self._issuer.rstrip('/')}/.well-known/openid-configuration"
        response = await self._request("GET", url, "discovery")
        if not response.is_success:
            _refuse(_UNREACHABLE, "discovery http error")
        document = _json_object(response)
        if document is None:
            _refuse(_MISCONFIGURED, "discovery malformed")
        # OpenID Connect Discovery 4.3: exactly the configured issuer, or a document served there may
        # speak for another one.
        if document.get("issuer") != self._issuer:
            _refuse(_MISCONFIGURED, "discovery issuer mismatch")
        endpoints = [document.get(name) for name in ("authorization_endpoint", "token_endpoint", "jwks_uri")]
        authorization, token, jwks = endpoints
        # The code, the client secret and the keys travel to these: https, or http on loopback only.
        if not (
            isinstance(authorization, str)
            and isinstance(token, str)
            and isinstance(jwks, str)
            and all(_secure_url(url) for url in (authorization, token, jwks))
        ):
            _refuse(_MISCONFIGURED, "discovery malformed")
        return _Metadata(authorization_endpoint=authorization, token_endpoint=token, jwks_uri=jwks)

    async def _exchange(self, metadata: _Metadata, code: str, verifier: str, redirect_uri: str) -> str:
        """The ID token the token endpoint gives for ``code``."""
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": self._client_id,
            "code_verifier": verifier,
        }
        auth = None
        if self._client_secret is not None:
            # client_secret_basic; RFC 6749 2.3.1 has both parts form-encoded before they are joined.
            auth = httpx.BasicAuth(quote(self._client_id, safe=""), quote(self._client_secret, safe=""))
        response = await self._request(
            "POST", metadata.token_endpoint, "token endpoint", data=form, auth=auth
        )
        document = _json_object(response)
        if not response.is_success:
            error = None if document is None else document.get("error")
            _refuse(_ISSUER_REFUSED, "token request refused", error if error in _OAUTH_ERRORS else "other")
        if document is None:
            _refuse(_UNVERIFIED, "token response malformed")
        id_token = document.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            _refuse(_UNVERIFIED, "no id token")
        return id_token

    async def _verify(self, metadata: _Metadata, id_token: str, nonce: str) -> dict[str, Any]:
        """The claims of ``id_token``, verified (OpenID Connect Core 3.1.3.7), with ``iss`` and ``sub``
        non-empty strings."""
        if len(id_token) > MAX_TOKEN_CHARS:
            _refuse(_UNVERIFIED, "id token too long")
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError:
            _refuse(_UNVERIFIED, "malformed id token")
        alg = header.get("alg")
        kid = header.get("kid")
        if not isinstance(alg, str) or (kid is not None and not isinstance(kid, str)):
            _refuse(_UNVERIFIED, "malformed id token")
        # Never from the token's say-so alone: `none` and HS* (a public key used as an HMAC secret)
        # must not get near the decoder.
        if alg not in _ASYMMETRIC_ALGS:
            _refuse(_UNVERIFIED, "algorithm not allowed")
        key = await self._public_key(metadata.jwks_uri, kid, alg)
        if key is None:
            _refuse(_UNVERIFIED, "unknown key")
        try:
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key,
                algorithms=[alg],
                audience=self._client_id,
                issuer=self._issuer,
                leeway=LEEWAY_S,
                options={
                    "require": ["iss", "sub", "aud", "exp", "iat", "nonce"],
                    "enforce_minimum_key_length": True,
                },
            )
        except jwt.ExpiredSignatureError:
            _refuse(_UNVERIFIED, "expired")
        except jwt.ImmatureSignatureError:
            _refuse(_UNVERIFIED, "not yet valid")
        except jwt.MissingRequiredClaimError as exc:
            _refuse(_UNVERIFIED, f"missing {exc.claim}")
        except jwt.InvalidAudienceError:
            _refuse(_UNVERIFIED, "wrong audience")
        except jwt.InvalidIssuerError:
            _refuse(_UNVERIFIED, "wrong issuer")
        except jwt.InvalidSignatureError:
            _refuse(_UNVERIFIED, "bad signature")
        except jwt.PyJWTError:
            _refuse(_UNVERIFIED, "invalid id token")
        iss = claims["iss"]
        if not isinstance(iss, str):
            _refuse(_UNVERIFIED, "malformed iss")
        # As for bearer tokens: a JWT never passes for a static token, and principal_id's "|" join
        # stays unambiguous.
        if iss == STATIC_ISSUER:
            _refuse(_UNVERIFIED, "reserved issuer")
        if "|" in iss:
            _refuse(_UNVERIFIED, "malformed iss")
        # Core 3.1.3.7 (4, 5): with several audiences the token must say it was issued to us.
        aud = claims["aud"]
        azp = claims.get("azp")
        if (isinstance(aud, list) and len(aud) > 1 and azp is None) or (
            azp is not None and azp != self._client_id
        ):
            _refuse(_UNVERIFIED, "wrong azp")
        # The nonce ties the token to this browser's sign-in: a token captured elsewhere is not replayed.
        token_nonce = claims["nonce"]
        if not isinstance(token_nonce, str) or not hmac.compare_digest(token_nonce.encode(), nonce.encode()):
            _refuse(_UNVERIFIED, "nonce mismatch")
        sub = claims["sub"]
        if not isinstance(sub, str) or not sub:
            _refuse(_UNVERIFIED, "malformed sub")
        return claims

    async def _public_key(self, jwks_uri: str, kid: str | None, alg: str) -> Any | None:
        if self._jwks is None or self._jwks.url != jwks_uri:
            self._jwks = JwksUrl(jwks_uri, self._client, self._clock)
        return await self._jwks.find(kid, alg)

    async def _request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._client().request(method, url, timeout=HTTP_TIMEOUT_S, **kwargs)
        except httpx.HTTPError:
            _refuse(_UNREACHABLE, f"{what} unreachable")

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient()
        return self._http


def _refuse(message: str, reason: str, error: str | None = None) -> NoReturn:
    """Log the refusal (its reason, and the issuer's OAuth error code if it sent a known one) and raise it."""
    if error is None:
        log.warning("sign_in_refused", reason=reason)
    else:
        log.warning("sign_in_refused", reason=reason, error=error)
    # `from None`: an exception being handled (a decoder's, say) stays out of any traceback shown.
    raise SignInFailed(message, reason) from None


def _internal_error(exc: Exception) -> NoReturn:
    # Deny on error, as the bearer verifier does: a bug refuses one sign-in rather than failing the page
    # with a 500. Only the type is logged, and the chain is dropped: either could quote a token.
    log.warning("sign_in_refused", reason="internal error", error=type(exc).__name__)
    raise SignInFailed(_INTERNAL, "internal error") from None


def _local_path(value: object) -> str:
    """``value`` if it is a path of this server, else ``/``: where a sign-in may send the browser back to.

    A browser reads ``//host``, ``/\\host`` (it treats ``\\`` as ``/``) and a path with a tab or
    newline in it (which it drops) as another host, so none of those pass."""
    if (
        not isinstance(value, str)
        or not value.startswith("/")
        or value.startswith("//")
        or len(value) > MAX_NEXT_PATH
        or "\\" in value
        or any(unicodedata.category(char) == "Cc" for char in value)
    ):
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return "/"
    return value


def _secure_url(url: str) -> bool:
    """An https:// URL (http:// on loopback) with a host and no fragment."""
    parts = urlsplit(url)
    secure = parts.scheme == "https" or (parts.scheme == "http" and is_loopback_url(url))
    return secure and bool(parts.hostname) and not parts.fragment


def _with_query(endpoint: str, params: Mapping[str, str]) -> str:
    """``endpoint`` with ``params`` added to its query (RFC 6749 3.1: a query it has is kept)."""
    parts = urlsplit(endpoint)
    query = urlencode(params)
    return urlunsplit(parts._replace(query=f"{parts.query}&{query}" if parts.query else query))


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        document = response.json()
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _signed_in_at(claims: Mapping[str, Any], max_age: int | None) -> float:
    """When the issuer signed the person in: the ID token's ``auth_time`` (never later than now: a
    clock ahead of ours does not make a sign-in last longer), else now.

    With ``max_age`` asked, ``auth_time`` must be there (OpenID Connect Core 2, 3.1.2.1) and within
    it (3.1.3.7, 13), or the sign-in is refused: without this, an issuer that ignores ``max_age``
    would pass an old sign-in for a recent one.

    Raises:
        SignInFailed: ``max_age`` was asked and ``auth_time`` is missing, malformed or older."""
    now = time.time()
    found = claims.get("auth_time")
    auth_time = None
    if isinstance(found, int | float) and not isinstance(found, bool) and math.isfinite(found):
        auth_time = float(found)
    if max_age is not None:
        if auth_time is None:
            _refuse(_NOT_RECENT, "no auth_time")
        if now - auth_time > max_age:
            _refuse(_NOT_RECENT, "auth_time older than max_age")
    return now if auth_time is None else min(auth_time, now)


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes an ID token carries (``scope``, a space-separated string, or ``scp``, a list), as
    a bearer token's are read; none when it has none or they are malformed (a sign-in is not
    refused for a claim OpenID Connect does not define)."""
    scope = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return frozenset(scope.split())
    if isinstance(scope, list) and all(isinstance(item, str) for item in scope):
        return frozenset(scope)
    return frozenset()


def _groups(claims: Mapping[str, Any], claim: str | None) -> frozenset[str]:
    """The groups the ID token's ``claim`` names, read as a bearer token's are (a list of names, or
    names in one string, space-separated); none without the setting, or when it is malformed (a
    sign-in is not refused for it: the person is then in the groups ``LONGTOOLS_GROUPS`` gives)."""
    value = claims.get(claim) if claim else None
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def _display_name(claims: Mapping[str, Any]) -> str | None:
    for name in ("name", "preferred_username", "email"):
        value = claims.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _verified_email(claims: Mapping[str, Any]) -> str | None:
    """The ``email`` claim when ``email_verified`` says the issuer verified it (OpenID Connect Core
    5.1), and it is one plain address; else none (a sign-in is not refused for it). An address the
    issuer did not verify could be anyone's, and the mail sent to it carries the person's links."""
    email, verified = claims.get("email"), claims.get("email_verified")
    # JSON true (not 1, which equals True in Python); a few issuers send the string "true".
    if not (verified is True or verified == "true") or not isinstance(email, str):
        return None
    local, at, domain = email.partition("@")
    if (
        not (local and at and domain)
        or "@" in domain
        or len(email) > _MAX_EMAIL
        or any(char in _NOT_IN_EMAIL or unicodedata.category(char)[0] in "CZ" for char in email)
    ):
        return None  # not one address (a list, a display name, a control character): not guessed at
    return email
