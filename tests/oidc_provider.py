"""A small but real OpenID Connect provider for the tests: authorization code with PKCE (S256).

Starlette served by uvicorn on 127.0.0.1 in a thread of its own, so it answers while a test's event
loop (or a browser) waits on it; authlib does the cryptography (the RSA key, the JWTs, the S256
challenge). Attributes of the provider make it misbehave on purpose: ``id_token_audience``,
``id_token_ttl_s``, ``id_token_issuer``, ``id_token_nonce`` and ``id_token_claims`` shape the next ID
tokens, ``auto_user`` signs in without the form, ``remember_sign_ins`` keeps a sign-in in the browser
(and answers ``max_age`` from it, as a real provider does, or ignores it: ``honour_max_age``).

    with OidcProvider() as idp:
        idp.register_client("longtools-pages", ["https://mcp.example.com/signin/callback"])
        ...  # LONGTOOLS_OIDC_ISSUER=idp.issuer, LONGTOOLS_JWT_JWKS=idp.jwks_url
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import html
import json
import re
import secrets
import socket
import threading
import time
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit

import uvicorn
from authlib.oauth2.rfc7636 import create_s256_code_challenge  # type: ignore[import-untyped]
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

with warnings.catch_warnings(record=True):
    # authlib.jose warns on import that joserfc replaces it in authlib 2.0; pytest turns warnings into
    # errors, and authlib's own "always" filter would let this one through a plain "ignore".
    warnings.simplefilter("ignore", DeprecationWarning)
    from authlib.jose import JsonWebKey, jwt  # type: ignore[import-untyped]

__all__ = ["AUTHORIZATION_CODE_TTL_S", "OidcProvider"]

AUTHORIZATION_CODE_TTL_S = 60.0
"""Seconds an authorization code may wait to be exchanged (RFC 6749 4.1.2: short; used once)."""
_START_TIMEOUT_S = 10.0
_VERIFIER = re.compile(r"[A-Za-z0-9\-._~]{43,128}")  # RFC 7636 4.1
_MAX_AGE = re.compile(r"[0-9]{1,9}")  # seconds (OpenID Connect Core 3.1.2.1)
_AUTHORIZE_PARAMS = (
    "client_id",
    "redirect_uri",
    "response_type",
    "scope",
    "state",
    "nonce",
    "code_challenge",
    "code_challenge_method",
    "max_age",
)


@dataclass(frozen=True)
class _Client:
    redirect_uris: tuple[str, ...]
    secret: str | None


@dataclass(frozen=True)
class _Grant:
    """What an authorization code stands for until it is exchanged."""

    client_id: str
    redirect_uri: str
    user: str
    nonce: str | None
    code_challenge: str
    expires_at: float
    auth_time: int
    """When ``user`` signed in here (Unix time): the ID token's ``auth_time``."""


class _BadAuthorization(Exception):
    """An authorization request that must not be answered with a redirect (RFC 6749 4.1.2.1)."""


class OidcProvider:
    """An OpenID Connect provider on loopback, started and stopped by ``with`` (always stopped).

    Endpoints: ``/.well-known/openid-configuration``, ``/authorize`` (a sign-in form: a "Username"
    field, a "Sign in" and a "Cancel" button), ``/token`` and ``/jwks``. ID tokens carry ``iss``,
    ``sub`` (the username), ``aud``, ``exp``, ``iat``, ``auth_time``, ``nonce``, ``name`` (the
    username, title-cased) and ``preferred_username``.

    ``max_age`` (OpenID Connect Core 3.1.2.1) matters only with ``remember_sign_ins``: a remembered
    sign-in answers an authorization request only if it is no older than the request's ``max_age``;
    an older one signs the person in again (the form, or ``auto_user``), with a new ``auth_time``.
    """

    def __init__(self) -> None:
        self.auto_user: str | None = None
        """When set, ``GET /authorize`` signs in as this user at once, without the form."""
        self.id_token_audience: str | list[str] | None = None
        """The next ID tokens' ``aud`` instead of the client id."""
        self.id_token_ttl_s: float = 300.0
        """Seconds the next ID tokens are valid for (negative: issued already expired)."""
        self.id_token_issuer: str | None = None
        """The next ID tokens' ``iss`` instead of ``issuer``."""
        self.id_token_nonce: str | None = None
        """The next ID tokens' ``nonce`` instead of the authorization request's."""
        self.id_token_claims: dict[str, Any] = {}
        """Claims added to (or, with None, removed from) the next ID tokens, after all the above."""
        self.id_token_alg: Literal["RS256", "HS256", "none"] = "RS256"
        """How the next ID tokens are signed: "HS256" with the public key (PEM) as the HMAC secret, the
        algorithm-confusion attack; "none" not at all."""
        self.remember_sign_ins = False
        """When set, a sign-in is remembered in the browser (a cookie of the provider's), and a later
        authorization request is granted from it without asking, as its ``max_age`` allows."""
        self.honour_max_age = True
        """When unset, a remembered sign-in is used however old, whatever ``max_age`` asks: an issuer
        that ignores it (its ID token's ``auth_time`` then says so)."""
        self.discovery_fetches = 0
        self.jwks_fetches = 0
        self._remembered: dict[str, tuple[str, int]] = {}
        """Each remembered sign-in by its cookie's value: the user and their ``auth_time``."""
        self._keys: list[Any] = [_rsa_key()]
        self._clients: dict[str, _Client] = {}
        self._grants: dict[str, _Grant] = {}
        self._lock = threading.Lock()  # clients and grants: the tests' thread and the server's
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._port = 0

    # ----- the tests' side -----

    @property
    def issuer(self) -> str:
        """``http://127.0.0.1:<port>`` (known once the provider is started)."""
        if not self._port:
            raise RuntimeError("the provider is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    def register_client(
        self, client_id: str, redirect_uris: Sequence[str], secret: str | None = None
    ) -> None:
        """Register (or replace) a client; with ``secret`` it must authenticate with client_secret_basic."""
        with self._lock:
            self._clients[client_id] = _Client(tuple(redirect_uris), secret)

    def mint_access_token(self, sub: str, audience: str, ttl_s: float = 300) -> str:
        """A JWT access token for ``sub`` (``iss``: ``issuer``), signed with the current key."""
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": sub, "aud": audience, "iat": now, "exp": now + int(ttl_s)}
        return self._sign(claims)

    def rotate_key(self) -> str:
        """Sign with a new key from now on (the JWKS keeps the old ones too); its ``kid``."""
        key = _rsa_key()
        self._keys.insert(0, key)
        return str(key.as_dict(is_private=False)["kid"])

    def reset(self) -> None:
        """Put the knobs back: well-formed ID tokens, the form, no counted fetches."""
        self.auto_user = None
        self.id_token_audience = None
        self.id_token_ttl_s = 300.0
        self.id_token_issuer = None
        self.id_token_nonce = None
        self.id_token_claims = {}
        self.id_token_alg = "RS256"
        self.remember_sign_ins = False
        self.honour_max_age = True
        self.discovery_fetches = 0
        self.jwks_fetches = 0

    def __enter__(self) -> OidcProvider:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket = sock
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            # Listening before the server runs: a connection made meanwhile waits in the backlog.
            sock.listen(128)
            self._port = sock.getsockname()[1]
            config = uvicorn.Config(
                self._app(), log_config=None, log_level="warning", access_log=False, ws="none", lifespan="on"
            )
            self._server = uvicorn.Server(config)
            self._thread = threading.Thread(target=self._run, name="oidc-provider", daemon=True)
            self._thread.start()
            if not self._ready.wait(_START_TIMEOUT_S) or not self._thread.is_alive():
                raise RuntimeError("the OIDC provider did not start")
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    def _run(self) -> None:
        assert self._server is not None and self._socket is not None
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        finally:
            self._ready.set()  # a server that died while starting must not leave __enter__ waiting

    def _stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(_START_TIMEOUT_S)
            if self._thread.is_alive():
                raise RuntimeError("the OIDC provider did not stop")
        if self._socket is not None:
            self._socket.close()

    def _sign(self, claims: Mapping[str, Any], alg: str = "RS256") -> str:
        key = self._keys[0]
        header = {"alg": alg, "kid": key.as_dict(is_private=False)["kid"], "typ": "JWT"}
        if alg == "RS256":
            token: bytes = jwt.encode(header, dict(claims), key)
            return token.decode()
        # By hand: a careful JOSE library refuses to make either of these.
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(dict(claims)).encode())}"
        signature = b""
        if alg == "HS256":
            public_pem: bytes = key.as_pem(is_private=False)
            signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(signature)}"

    # ----- the server's side -----

    def _app(self) -> Starlette:
        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            self._ready.set()
            yield

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self._discovery, methods=["GET"]),
                Route("/authorize", self._authorize_page, methods=["GET"]),
                Route("/authorize", self._authorize_form, methods=["POST"]),
                Route("/token", self._token, methods=["POST"]),
                Route("/jwks", self._jwks, methods=["GET"]),
            ],
            lifespan=lifespan,
        )

    async def _discovery(self, request: Request) -> Response:
        self.discovery_fetches += 1
        issuer = self.issuer
        return JSONResponse(
            {
                "issuer": issuer,
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"{issuer}/token",
                "jwks_uri": f"{issuer}/jwks",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
                "scopes_supported": ["openid", "profile", "email"],
                "claims_supported": [
                    "iss",
                    "sub",
                    "aud",
                    "exp",
                    "iat",
                    "auth_time",
                    "nonce",
                    "name",
                    "preferred_username",
                ],
            }
        )

    async def _jwks(self, request: Request) -> Response:
        self.jwks_fetches += 1
        keys = [{**key.as_dict(is_private=False), "alg": "RS256", "use": "sig"} for key in self._keys]
        return JSONResponse({"keys": keys})

    async def _authorize_page(self, request: Request) -> Response:
        params = dict(request.query_params)
        try:
            error = self._check_authorization(params)
        except _BadAuthorization as exc:
            return HTMLResponse(f"<p>{html.escape(str(exc))}</p>", status_code=400)
        if error is not None:
            return _back(params, {"error": error})
        remembered = self._remembered_sign_in(request, params)
        if remembered is not None:
            return self._grant(params, *remembered)
        if self.auto_user is not None:
            return self._grant(params, self.auto_user)
        hidden = "".join(
            f'<input type="hidden" name="{name}" value="{html.escape(params[name])}">'
            for name in _AUTHORIZE_PARAMS
            if name in params
        )
        return HTMLResponse(
            "<!doctype html><title>Sign in</title><form method=post action=/authorize>"
            f'{hidden}<label for="username">Username</label> <input type="text" id="username" '
            'name="username" autofocus> <button type="submit">Sign in</button> '
            '<button type="submit" name="cancel" value="1">Cancel</button></form>'
        )

    async def _authorize_form(self, request: Request) -> Response:
        form = await request.form()
        params = {name: value for name, value in form.items() if isinstance(value, str)}
        # The hidden fields came back from the browser: everything is checked again.
        try:
            error = self._check_authorization(params)
        except _BadAuthorization as exc:
            return HTMLResponse(f"<p>{html.escape(str(exc))}</p>", status_code=400)
        if error is not None:
            return _back(params, {"error": error})
        if params.get("cancel"):
            return _back(params, {"error": "access_denied"})
        username = params.get("username", "").strip()
        if not username:
            return HTMLResponse("<p>A username is needed.</p>", status_code=400)
        return self._grant(params, username)

    def _check_authorization(self, params: Mapping[str, str]) -> str | None:
        """The OAuth error to send back to the client, if any.

        Raises:
            _BadAuthorization: the client or its redirect URI is unknown: nowhere safe to send an error.
        """
        with self._lock:
            client = self._clients.get(params.get("client_id", ""))
        if client is None:
            raise _BadAuthorization("unknown client")
        if params.get("redirect_uri") not in client.redirect_uris:  # exact, as OAuth 2.1 asks
            raise _BadAuthorization("redirect_uri is not registered for this client")
        if params.get("response_type") != "code":
            return "unsupported_response_type"
        if "openid" not in params.get("scope", "").split():
            return "invalid_scope"
        if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            return "invalid_request"
        if not _MAX_AGE.fullmatch(params.get("max_age", "0")):
            return "invalid_request"
        return None

    def _cookie(self) -> str:
        # Browsers share a host's cookies across its ports: the provider's own, by its port.
        return f"idp-session-{self._port}"

    def _remembered_sign_in(self, request: Request, params: Mapping[str, str]) -> tuple[str, int] | None:
        """The browser's remembered sign-in (user, ``auth_time``), if it may answer this request."""
        if not self.remember_sign_ins:
            return None
        with self._lock:
            found = self._remembered.get(request.cookies.get(self._cookie(), ""))
        if found is None:
            return None
        max_age = params.get("max_age")
        if self.honour_max_age and max_age is not None and time.time() - found[1] > int(max_age):
            return None  # too old for this request: the person signs in again
        return found

    def _grant(self, params: Mapping[str, str], user: str, auth_time: int | None = None) -> Response:
        """Send the browser back with a code for ``user``, who signed in at ``auth_time`` (a
        remembered sign-in's), else now (and, with ``remember_sign_ins``, is remembered)."""
        code = secrets.token_urlsafe(32)
        fresh = auth_time is None
        auth_time = int(time.time()) if auth_time is None else auth_time
        grant = _Grant(
            client_id=params["client_id"],
            redirect_uri=params["redirect_uri"],
            user=user,
            nonce=params.get("nonce"),
            code_challenge=params["code_challenge"],
            expires_at=time.monotonic() + AUTHORIZATION_CODE_TTL_S,
            auth_time=auth_time,
        )
        with self._lock:
            self._grants[code] = grant
        response = _back(params, {"code": code})
        if fresh and self.remember_sign_ins:
            remembered = secrets.token_urlsafe(16)
            with self._lock:
                self._remembered[remembered] = (user, auth_time)
            response.set_cookie(self._cookie(), remembered, path="/", httponly=True, samesite="lax")
        return response

    async def _token(self, request: Request) -> Response:
        form = {name: value for name, value in (await request.form()).items() if isinstance(value, str)}
        if form.get("grant_type") != "authorization_code":
            return _token_error("unsupported_grant_type")
        client_id, secret = form.get("client_id"), None
        authorization = request.headers.get("authorization", "")
        if authorization[:6].lower() == "basic ":
            try:
                decoded = base64.b64decode(authorization[6:], validate=True).decode()
            except ValueError:
                return _token_error("invalid_client", 401)
            basic_id, _, basic_secret = decoded.partition(":")
            basic_id, secret = unquote(basic_id), unquote(basic_secret)
            if client_id is not None and client_id != basic_id:
                return _token_error("invalid_request")
            client_id = basic_id
        with self._lock:
            client = self._clients.get(client_id or "")
            # One use only, whatever happens next (RFC 6749 4.1.2): popped before anything is checked.
            grant = self._grants.pop(form.get("code", ""), None)
        if client is None:
            return _token_error("invalid_client", 401)
        if client.secret is not None and (
            secret is None or not hmac.compare_digest(secret.encode(), client.secret.encode())
        ):
            return _token_error("invalid_client", 401)
        verifier = form.get("code_verifier", "")
        if (
            grant is None
            or time.monotonic() >= grant.expires_at
            or grant.client_id != client_id
            or grant.redirect_uri != form.get("redirect_uri")
            or not _VERIFIER.fullmatch(verifier)
            or not hmac.compare_digest(create_s256_code_challenge(verifier), grant.code_challenge)
        ):
            return _token_error("invalid_grant")
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.id_token_issuer or self.issuer,
            "sub": grant.user,
            "aud": self.id_token_audience or grant.client_id,
            "exp": now + int(self.id_token_ttl_s),
            "iat": now,
            "auth_time": grant.auth_time,
            "nonce": self.id_token_nonce or grant.nonce,
            "name": grant.user.title(),
            "preferred_username": grant.user,
        }
        claims.update(self.id_token_claims)
        id_token = self._sign(
            {name: value for name, value in claims.items() if value is not None}, self.id_token_alg
        )
        access_token = self.mint_access_token(grant.user, grant.client_id)
        return JSONResponse(
            {"id_token": id_token, "access_token": access_token, "token_type": "Bearer", "expires_in": 300},
            headers={"Cache-Control": "no-store"},
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _rsa_key() -> Any:
    return JsonWebKey.generate_key("RSA", 2048, is_private=True)


def _back(params: Mapping[str, str], answer: Mapping[str, str]) -> Response:
    """The 302 back to the client's (checked) redirect URI with ``answer`` and the request's state."""
    query = dict(answer)
    if "state" in params:
        query["state"] = params["state"]
    parts = urlsplit(params["redirect_uri"])
    extra = urlencode(query)
    return RedirectResponse(
        urlunsplit(parts._replace(query=f"{parts.query}&{extra}" if parts.query else extra)), status_code=302
    )


def _token_error(error: str, status: int = 400) -> Response:
    headers = {"Cache-Control": "no-store"}
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="token"'
    return JSONResponse({"error": error}, status_code=status, headers=headers)
