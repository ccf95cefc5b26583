"""Bearer token verification: static tokens and JWTs (HS256, RS256, ES256). API process.

``BearerVerifier`` is the SDK's ``TokenVerifier``: it answers an ``AccessToken`` or None and never
raises for a bad token; why a token was refused goes to the ``token_refused`` log event, never the
token. ``principal_id`` is the string tasks and requestState are bound to.

Which algorithms are accepted is decided by the configuration alone, never by a token's header:
HS256 only with ``jwt_secret``, RS256/ES256 only with keys from ``jwt_jwks``. So an HS256 token
"signed" with the public key cannot pass for an RS256 one, and ``alg: none`` never passes.

Every JWT must name this server in ``aud`` (RFC 8707): ``jwt_audience``, or else ``resource_url``,
which any JWT setting requires. An identity provider issues tokens for many APIs; without the
audience check a token meant for any of them would be accepted here.

The verifier's answer is final: ``exp`` and ``nbf`` get ``LEEWAY_S`` here, and ``_auth.VerifiedBearer``
does not check them a second time.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import jwt
import structlog
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mcp.server.auth.provider import AccessToken

from longtools._settings import KEYGEN_HINT, Settings, is_loopback_url, parse_static_tokens

__all__ = [
    "LEEWAY_S",
    "MAX_TOKEN_CHARS",
    "STATIC_ISSUER",
    "AuthConfigError",
    "BearerVerifier",
    "JwksUrl",
    "principal_hash",
    "principal_id",
]

log = structlog.get_logger("longtools.auth")

STATIC_ISSUER = "longtools:static"
"""The ``iss`` a static token's AccessToken carries; a JWT claiming it is refused, so the two never mix."""

LEEWAY_S = 30.0
"""Seconds of clock skew allowed on ``exp`` and ``nbf``: a token expired 10 s ago is still accepted."""
JWKS_REFETCH_INTERVAL_S = 60.0
# A key the IdP withdrew (rotated out, compromised) stops working within this long, IdP reachable.
JWKS_MAX_AGE_S = 3600.0
JWKS_FETCH_TIMEOUT_S = 5.0
# Far above any real JWT, far below what would make parsing one a cost worth attacking.
MAX_TOKEN_CHARS = 16_384
_HS_MIN_SECRET_BYTES = 32  # RFC 7518 §3.2: an HS256 key is at least as long as the hash
_RSA_MIN_BITS = 2048
_ASYMMETRIC_ALGS = frozenset({"RS256", "ES256"})


class AuthConfigError(Exception):
    """The authentication settings cannot be used; the message says which and how to fix it."""


class _Refused(Exception):
    """A token is refused; ``reason`` is short, fixed text for the log (never token content)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _JwksError(ValueError):
    """A JWKS document cannot be used (the message is short and names no key material)."""


@dataclass(frozen=True)
class _KeySet:
    """Verification keys by (kid, alg); a key is only ever used for the one algorithm it is for."""

    keys: Mapping[tuple[str | None, str], Any]

    def find(self, kid: str | None, alg: str) -> Any | None:
        if kid is not None:
            return self.keys.get((kid, alg))
        # A token without a kid is only matched when exactly one key could have signed it.
        candidates = [key for (_, key_alg), key in self.keys.items() if key_alg == alg]
        return candidates[0] if len(candidates) == 1 else None


_EMPTY = _KeySet({})


class JwksUrl:
    """The keys a JWKS URL serves: fetched when a token names a key they lack (at most once a
    minute, however many tokens ask) and once an hour anyway, so a key the issuer withdrew stops
    working within the hour; a failed fetch keeps the keys there were."""

    def __init__(self, url: str, http: Callable[[], httpx.AsyncClient], clock: Callable[[], float]) -> None:
        self.url = url
        self.keys = _EMPTY
        self._http = http
        self._clock = clock
        self._fetched_at: float | None = None
        self._last_attempt: float | None = None
        self._lock = asyncio.Lock()

    async def find(self, kid: str | None, alg: str) -> Any | None:
        """The key for ``kid`` and ``alg`` (``_KeySet.find``), fetching the set again if it lacks it."""
        key = self.keys.find(kid, alg)
        stale = self._fetched_at is None or self._clock() - self._fetched_at >= JWKS_MAX_AGE_S
        if key is None or stale:
            await self._refetch()
            key = self.keys.find(kid, alg)
        return key

    async def _refetch(self) -> None:
        async with self._lock:
            now = self._clock()
            # Every attempt counts, failed or not: neither bogus kids nor a down IdP make us hammer it.
            last = self._last_attempt
            if last is not None and now - last < JWKS_REFETCH_INTERVAL_S:
                return
            self._last_attempt = now
            try:
                response = await self._http().get(self.url, timeout=JWKS_FETCH_TIMEOUT_S)
                if response.status_code != 200:
                    raise _JwksError(f"HTTP {response.status_code}")
                keys = _parse_jwks(response.content)
            except (httpx.HTTPError, _JwksError) as exc:
                reason = str(exc) if isinstance(exc, _JwksError) else type(exc).__name__
                log.warning("jwks_fetch_failed", reason=reason, kept_keys=len(self.keys.keys))
                return
            self.keys = keys
            self._fetched_at = now
            log.info("jwks_fetched", keys=len(keys.keys))


def principal_id(token: AccessToken) -> str:
    """The stable principal of a token this module verified: ``token:<name>`` or ``jwt:<iss>|<sub>``.

    Raises:
        ValueError: the token has no subject (it was not made by ``BearerVerifier``).
    """
    if token.subject is None:
        raise ValueError("AccessToken has no subject; principal_id needs one from BearerVerifier")
    issuer = (token.claims or {}).get("iss")
    if issuer == STATIC_ISSUER:
        return f"token:{token.subject}"
    return f"jwt:{issuer or ''}|{token.subject}"


def principal_hash(principal: str, key: bytes = b"") -> str:
    """A short, stable stand-in for a principal in logs: 16 hex chars of its HMAC-SHA-256 under
    ``key`` (a server secret, so whoever reads the logs cannot confirm a guessed name)."""
    return hmac.new(key, principal.encode(), hashlib.sha256).hexdigest()[:16]


class BearerVerifier:
    """Verifies bearer tokens against the static tokens and JWT settings of ``Settings``.

    ``http`` is used for JWKS URLs instead of a client of its own (and is then not closed by
    ``aclose``); ``clock`` (monotonic seconds) paces JWKS refetches.

    Raises:
        AuthConfigError: nothing to verify tokens with, a JWT setting without ``resource_url``, a
            too-short secret, or a JWKS file that cannot be read or holds no usable RS256/ES256 key.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._http = http
        self._owns_http = http is None
        self._groups_claim = settings.groups_claim
        # Looked up by digest: the dict's timing then depends on a hash of the presented token, which
        # tells an attacker nothing about any real token.
        self._static: dict[bytes, str] = {}
        if settings.auth_tokens is not None:
            try:
                tokens = parse_static_tokens(settings.auth_tokens.get_secret_value())
            except ValueError as exc:
                raise AuthConfigError(str(exc)) from None
            self._static = {_digest(token): principal for token, principal in tokens.items()}

        self._secret: bytes | None = None
        if settings.jwt_secret is not None:
            secret = settings.jwt_secret.get_secret_value().encode()
            if len(secret) < _HS_MIN_SECRET_BYTES:
                raise AuthConfigError(
                    f"LONGTOOLS_JWT_SECRET is shorter than {_HS_MIN_SECRET_BYTES} bytes (HS256 needs at "
                    f"least that); generate one with: {KEYGEN_HINT}"
                )
            self._secret = secret

        self._jwks_url: JwksUrl | None = None
        self._jwks_path: Path | None = None
        self._keys = _EMPTY
        """The keys of a JWKS file."""
        self._file_stamp: tuple[int, int, int] | None = None
        if settings.jwt_jwks is not None:
            source = settings.jwt_jwks.strip()
            scheme = urlparse(source).scheme.lower()
            if scheme == "https" or (scheme == "http" and is_loopback_url(source)):
                self._jwks_url = JwksUrl(source, self._client, clock)
            elif scheme == "http":
                raise AuthConfigError(
                    "LONGTOOLS_JWT_JWKS must be an https:// URL or a file path (http:// only on loopback)"
                )
            else:
                self._jwks_path = Path(source)
                self._load_file_at_start(self._jwks_path)

        self._algorithms = frozenset(
            (["HS256"] if self._secret is not None else [])
            + (sorted(_ASYMMETRIC_ALGS) if settings.jwt_jwks is not None else [])
        )
        if not self._static and not self._algorithms:
            raise AuthConfigError(
                "no way to verify bearer tokens: set LONGTOOLS_AUTH_TOKENS, LONGTOOLS_JWT_SECRET "
                "or LONGTOOLS_JWT_JWKS"
            )
        jwt_settings = (settings.jwt_secret, settings.jwt_jwks, settings.jwt_issuer, settings.jwt_audience)
        if settings.resource_url is None and any(value is not None for value in jwt_settings):
            raise AuthConfigError(
                "JWT authentication needs LONGTOOLS_RESOURCE_URL, the public URL of this MCP endpoint "
                "(e.g. https://mcp.example.com/mcp): tokens must be issued for it (their aud; "
                "LONGTOOLS_JWT_AUDIENCE may name another), and the OAuth metadata announces it"
            )
        self._issuer = settings.jwt_issuer
        self._audience = settings.jwt_audience or settings.resource_url
        # Static tokens are minted for this server, so their resource is this server's, if it has one.
        self._static_resource = settings.resource_url

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's AccessToken, or None when it is refused (the reason is logged, never raised)."""
        kind = "static"
        try:
            if len(token) > MAX_TOKEN_CHARS:
                raise _Refused("token too long")
            principal = self._static.get(_digest(token))
            if principal is not None:
                return AccessToken(
                    token=token,
                    client_id=principal,
                    subject=principal,
                    scopes=[],
                    resource=self._static_resource,
                    claims={"iss": STATIC_ISSUER},
                )
            if not self._algorithms:
                raise _Refused("unknown static token")
            kind = "jwt"
            return await self._verify_jwt(token)
        except _Refused as refused:
            log.warning("token_refused", kind=kind, reason=refused.reason)
            return None
        except Exception as exc:
            # Deny on error: a verifier bug must refuse one token, not fail the request with a 500. Only
            # the type is logged: a traceback's locals could hold the token.
            log.warning("token_refused", kind=kind, reason="verifier error", error=type(exc).__name__)
            return None

    def static_fingerprint(self, token: str, key: bytes) -> str | None:
        """A keyed fingerprint of ``token`` (under ``key``) when it is a configured static token, else
        None: what a page session made with it keeps instead of the token, so that
        ``static_fingerprints`` can tell later whether that token is still configured."""
        digest = _digest(token)
        return _fingerprint(key, digest) if digest in self._static else None

    def static_fingerprints(self, key: bytes) -> dict[str, str]:
        """The fingerprint (``static_fingerprint``) of every configured static token under ``key``,
        with the principal it is (``principal_id``'s ``token:<name>``)."""
        return {_fingerprint(key, digest): f"token:{name}" for digest, name in self._static.items()}

    async def aclose(self) -> None:
        """Close the HTTP client this verifier made for itself (an injected one is left open)."""
        if self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _verify_jwt(self, token: str) -> AccessToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _Refused("malformed") from None
        alg = header.get("alg")
        kid = header.get("kid")
        if not isinstance(alg, str) or (kid is not None and not isinstance(kid, str)):
            raise _Refused("malformed header")
        if alg not in self._algorithms:
            raise _Refused("algorithm not allowed")
        key: Any
        if alg == "HS256":
            key = self._secret
        else:
            key = await self._public_key(kid, alg)
            if key is None:
                raise _Refused("unknown key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self._audience,
                issuer=self._issuer,
                leeway=LEEWAY_S,
                # aud is always verified and required: a JWT setting without an audience never gets
                # this far (__init__ refuses it), and a token without aud is not one issued for us.
                options={"require": ["exp", "sub", "aud"], "enforce_minimum_key_length": True},
            )
        except jwt.ExpiredSignatureError:
            raise _Refused("expired") from None
        except jwt.ImmatureSignatureError:
            raise _Refused("not yet valid") from None
        except jwt.MissingRequiredClaimError as exc:
            raise _Refused(f"missing {exc.claim}") from None
        except jwt.InvalidAudienceError:
            raise _Refused("wrong audience") from None
        except jwt.InvalidIssuerError:
            raise _Refused("wrong issuer") from None
        except jwt.InvalidSignatureError:
            raise _Refused("bad signature") from None
        except jwt.PyJWTError:
            raise _Refused("invalid") from None
        return self._access_token(token, claims)

    def _access_token(self, token: str, claims: dict[str, Any]) -> AccessToken:
        sub = claims["sub"]
        if not isinstance(sub, str) or not sub:
            raise _Refused("malformed sub")
        iss = claims.get("iss")
        if iss is not None and not isinstance(iss, str):
            raise _Refused("malformed iss")
        if iss == STATIC_ISSUER:
            raise _Refused("reserved issuer")
        if iss is not None and "|" in iss:
            # principal_id joins iss and sub with "|"; refusing it here keeps that join unambiguous.
            raise _Refused("malformed iss")
        client_id = next(
            (value for name in ("azp", "client_id") if isinstance(value := claims.get(name), str) and value),
            sub,
        )
        return AccessToken(
            token=token,
            client_id=client_id,
            subject=sub,
            scopes=_scopes(claims),
            expires_at=int(claims["exp"]),
            resource=self._audience,
            claims={**({} if iss is None else {"iss": iss}), **self._groups(claims)},
        )

    def _groups(self, claims: Mapping[str, Any]) -> dict[str, list[str]]:
        """The groups the configured claim names (``LONGTOOLS_GROUPS_CLAIM``), kept as ``groups``."""
        value = claims.get(self._groups_claim) if self._groups_claim else None
        if isinstance(value, str):
            return {"groups": value.split()}
        if isinstance(value, list):
            return {"groups": [item for item in value if isinstance(item, str)]}
        return {}

    async def _public_key(self, kid: str | None, alg: str) -> Any | None:
        if self._jwks_path is not None:
            self._reload_file_if_changed(self._jwks_path)
            return self._keys.find(kid, alg)
        if self._jwks_url is None:
            return None
        return await self._jwks_url.find(kid, alg)

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient()
        return self._http

    def _load_file_at_start(self, path: Path) -> None:
        try:
            stamp = _file_stamp(path)
            self._keys = _parse_jwks(path.read_bytes())
        except OSError as exc:
            raise AuthConfigError(f"LONGTOOLS_JWT_JWKS: cannot read {path}: {exc.strerror}") from None
        except _JwksError as exc:
            raise AuthConfigError(f"LONGTOOLS_JWT_JWKS: {path} is not a usable JWKS: {exc}") from None
        self._file_stamp = stamp

    def _reload_file_if_changed(self, path: Path) -> None:
        try:
            stamp = _file_stamp(path)
            if stamp == self._file_stamp:
                return
            # Remember the stamp even if the parse fails, so one bad write warns once, not per token.
            self._file_stamp = stamp
            self._keys = _parse_jwks(path.read_bytes())
        except (OSError, _JwksError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            log.warning("jwks_reload_failed", reason=reason, kept_keys=len(self._keys.keys))
            return
        log.info("jwks_reloaded", keys=len(self._keys.keys))


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _fingerprint(key: bytes, digest: bytes) -> str:
    # Keyed, and of the digest this verifier keeps (it never keeps a token): whoever reads a
    # fingerprint without the key cannot test guessed tokens against it. 128 bits: no two of a
    # configuration's tokens share one.
    return hmac.new(key, digest, hashlib.sha256).hexdigest()[:32]


def _file_stamp(path: Path) -> tuple[int, int, int]:
    # Size and inode too: a rewrite within one mtime tick, or an atomic rename, still counts as a change.
    stat = os.stat(path)
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


def _parse_jwks(raw: bytes) -> _KeySet:
    """The RS256/ES256 signing keys of a JWKS; other keys (symmetric, encryption, other algorithms) are
    skipped, and a set with none left is an error."""
    try:
        document = json.loads(raw)
    except ValueError:
        raise _JwksError("not JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise _JwksError('no "keys" list')
    keys: dict[tuple[str | None, str], Any] = {}
    for entry in document["keys"]:
        parsed = _signing_key(entry)
        if parsed is not None:
            kid, alg, key = parsed
            keys.setdefault((kid, alg), key)
    if not keys:
        raise _JwksError("no RS256/ES256 signing key (RSA of 2048+ bits, or EC P-256)")
    return _KeySet(keys)


def _signing_key(entry: object) -> tuple[str | None, str, Any] | None:
    if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
        return None
    kid = entry.get("kid")
    # "oct" keys never make it in: a symmetric key from a JWKS would reopen algorithm confusion.
    if entry.get("kty") not in ("RSA", "EC") or (kid is not None and not isinstance(kid, str)):
        return None
    try:
        jwk = jwt.PyJWK(entry)
    except jwt.PyJWTError:
        return None
    alg = jwk.algorithm_name
    if alg not in _ASYMMETRIC_ALGS:
        return None
    key = jwk.key
    if isinstance(key, rsa.RSAPublicKey) and alg == "RS256" and key.key_size >= _RSA_MIN_BITS:
        return kid, alg, key
    if isinstance(key, ec.EllipticCurvePublicKey) and alg == "ES256" and isinstance(key.curve, ec.SECP256R1):
        return kid, alg, key
    # Private keys published by mistake, short RSA keys, a curve that does not match the alg.
    return None


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    scope = claims.get("scope", claims.get("scp"))
    if scope is None:
        return []
    if isinstance(scope, str):
        return scope.split()
    if isinstance(scope, list) and all(isinstance(item, str) for item in scope):
        return list(scope)
    raise _Refused("malformed scope")
