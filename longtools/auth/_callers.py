"""Who is calling, as the MCP layer sees it. API process.

Authentication happens at the HTTP edge (``longtools.server``: ``VerifiedBearer`` with our
``BearerVerifier``, then ``RequireBearer``); by the time a handler runs, the request's scope carries
the verified token, or nothing when the server runs without authentication. Everything a caller owns
(tasks, sealed ``requestState``, idempotency records) is bound to ``Caller.principal``.

What the server says about itself (the protected-resource metadata, the 401 challenge's
``resource_metadata``) comes from ``LONGTOOLS_RESOURCE_URL`` alone, never from a request's ``Host``:
a client could otherwise make the server name any resource it likes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import structlog
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.context import ServerRequestContext
from starlette.authentication import AuthCredentials, AuthenticationBackend
from starlette.datastructures import Headers
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from longtools._settings import Settings
from longtools.auth._tokens import principal_id

log = structlog.get_logger("longtools.auth")

ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Caller:
    """The authenticated principal of one request (``anonymous`` when authentication is off)."""

    principal: str
    scopes: frozenset[str] = frozenset()
    subject: str | None = None
    """The token's ``sub`` (a static token's principal name)."""
    groups: frozenset[str] = frozenset()
    """Groups the token's claim names (``LONGTOOLS_GROUPS_CLAIM``); ``LONGTOOLS_GROUPS`` adds more
    where rules are checked (``longtools.decisions.Groups``)."""


Authorize: TypeAlias = Callable[[Caller, Any], Awaitable[bool]]
"""A tool's own authorization check, run on every round of a call with the parsed arguments, and
on every answer to one of its tasks with the task's arguments."""


async def authorized(
    check: Authorize | None,
    caller: Caller,
    args: Any,
    *,
    tool: str,
    hash_principal: Callable[[str], str],
    **context: Any,
) -> bool:
    """Whether a tool's own check (``authorize=``, None: the tool has none) lets ``caller`` go on
    with ``args``. The one place it runs, for a call's rounds and for answers to a task alike.

    A check that raises refuses (deny on error: a broken permission service never lets anyone
    through), logged ``authorize_failed``. Every refusal is logged ``tool_not_authorized``, the
    principal as ``hash_principal`` makes it, with ``context`` (the task answered, say).
    """
    if check is None:
        return True
    try:
        allowed = await check(caller, args)
    except Exception:  # the tool's own code: deny on error
        log.exception("authorize_failed", tool=tool, **context)
        allowed = False
    if not allowed:
        log.warning("tool_not_authorized", tool=tool, principal=hash_principal(caller.principal), **context)
    return bool(allowed)


def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
    scope = getattr(ctx.request, "scope", None)
    return _caller(scope if isinstance(scope, dict) else {})


def principal_of_scope(scope: Mapping[str, Any]) -> str:
    """The principal of an HTTP request, before any MCP handler has seen it."""
    return _caller(scope).principal


_ANONYMOUS_CALLER = Caller(principal=ANONYMOUS)  # frozen: one for every unauthenticated request


def _caller(scope: Mapping[str, Any]) -> Caller:
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        return _ANONYMOUS_CALLER
    return caller_of_token(user.access_token)


def caller_of_token(token: AccessToken) -> Caller:
    """The caller a verified bearer token is (``BearerVerifier.verify_token``'s answer), as ``/mcp``
    sees it: for a route outside ``/mcp`` that takes the same tokens (a task's ledger)."""
    claimed = (token.claims or {}).get("groups")
    groups = frozenset(str(group) for group in claimed) if isinstance(claimed, list) else frozenset()
    return Caller(
        principal=principal_id(token), scopes=frozenset(token.scopes), subject=token.subject, groups=groups
    )


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str:
    return caller_of(ctx).principal


PRM_PATH = "/.well-known/oauth-protected-resource"
"""RFC 9728 section 3.1: the metadata of ``https://host/mcp`` is at ``https://host`` + this + ``/mcp``."""


def metadata_url(resource: str) -> str:
    """Where the protected-resource metadata of ``resource`` is (RFC 9728 section 3.1)."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{PRM_PATH}{parts.path.rstrip('/')}"


class VerifiedBearer(AuthenticationBackend):
    """The bearer token of a request, as ``verifier`` judges it, and nothing more.

    Replaces the SDK's ``BearerAuthBackend``, which refuses a token once ``expires_at`` has passed,
    silently: that undid the verifier's leeway on ``exp``, so the documented leeway never applied and
    the refusal left no ``token_refused`` line. Here the verifier's answer is final (it applies the
    leeway, checks the audience and logs every refusal with its reason).
    """

    def __init__(self, verifier: TokenVerifier) -> None:
        self._verifier = verifier

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        header = conn.headers.get("authorization")
        # RFC 6750 section 2.1: the scheme is case-insensitive, one space, then the token.
        if header is None or header[:7].lower() != "bearer ":
            return None
        token = await self._verifier.verify_token(header[7:])
        if token is None:
            return None
        return AuthCredentials(token.scopes), AuthenticatedUser(token)


class RequireBearer:
    """Lets a request through only with a verified bearer token (set by ``VerifiedBearer``).

    Otherwise 401 with ``WWW-Authenticate: Bearer``; with ``LONGTOOLS_RESOURCE_URL`` set, the
    challenge names the OAuth Protected Resource Metadata (RFC 9728), where an MCP client finds the
    authorization server. Every refusal is the same response, whatever was wrong with the token (the
    reason is logged).
    """

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self._app = app
        # Fixed per process: nothing in a request goes into a refusal.
        fields = (
            [f'resource_metadata="{metadata_url(settings.resource_url)}"'] if settings.resource_url else []
        )
        self._missing = "Bearer " + ", ".join(fields) if fields else "Bearer"
        # RFC 6750 section 3.1: name the error only when a token was sent.
        invalid = 'error="invalid_token", error_description="The access token is not valid"'
        self._invalid = "Bearer " + ", ".join([*fields, invalid])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or isinstance(scope.get("user"), AuthenticatedUser):
            await self._app(scope, receive, send)
            return
        if "authorization" in Headers(scope=scope):
            body = {"error": "invalid_token", "error_description": "The access token is not valid"}
            challenge = self._invalid
        else:
            body = {"error": "invalid_request", "error_description": "Authentication required"}
            challenge = self._missing
        response = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge})
        await response(scope, receive, send)


def metadata_routes(settings: Settings, endpoint_path: str) -> list[Route]:
    """``GET`` routes serving the RFC 9728 document, or none without ``LONGTOOLS_RESOURCE_URL``.

    Served at the root path, with ``endpoint_path`` appended, and at the path the resource URL's own
    metadata URL has (a proxy may publish the endpoint under another path).
    """
    resource = settings.resource_url
    if resource is None:
        return []
    servers = settings.authorization_servers or ([settings.jwt_issuer] if settings.jwt_issuer else [])
    document: dict[str, Any] = {
        "resource": resource,
        "bearer_methods_supported": ["header"],
        "resource_name": settings.server_name,
    }
    if servers:
        document["authorization_servers"] = servers

    async def metadata(request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "max-age=300"})

    paths = dict.fromkeys([PRM_PATH, PRM_PATH + endpoint_path, urlsplit(metadata_url(resource)).path])
    return [Route(path, endpoint=metadata, methods=["GET"]) for path in paths]
