"""Who is calling, as the MCP layer sees it. API process.

Authentication happens at the HTTP edge (``_app.py``: the SDK's bearer backend with our
``BearerVerifier``); by the time a handler runs, the request's scope carries the verified token, or
nothing when the server runs without authentication. Everything a caller owns (tasks, sealed
``requestState``, idempotency records) is bound to ``Caller.principal``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from service._settings import Settings
from service._tokens import principal_id

ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Caller:
    """The authenticated principal of one request (``anonymous`` when authentication is off)."""

    principal: str
    scopes: frozenset[str] = frozenset()
    subject: str | None = None
    """The token's ``sub`` (a static token's principal name)."""


Authorize: TypeAlias = Callable[[Caller, Any], Awaitable[bool]]
"""A tool's own authorization check, run on every round of a call with the parsed arguments."""


def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
    scope = getattr(ctx.request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if not isinstance(user, AuthenticatedUser):
        return Caller(principal=ANONYMOUS)
    token = user.access_token
    return Caller(principal=principal_id(token), scopes=frozenset(token.scopes), subject=token.subject)


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str:
    return caller_of(ctx).principal


def _resource_url(settings: Settings, scope: Scope) -> str:
    if settings.resource_url:
        return settings.resource_url
    host = Headers(scope=scope).get("host", "localhost")
    return f"{scope.get('scheme', 'http')}://{host}/mcp"


def _metadata_url(resource: str) -> str:
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path.rstrip('/')}"


class RequireBearer:
    """Lets a request through only with a verified bearer token (set by the SDK's bearer backend).

    Otherwise 401 in the MCP authorization shape: ``WWW-Authenticate: Bearer`` naming the OAuth
    Protected Resource Metadata (RFC 9728), where a client finds the authorization server. Every
    refusal is the same response, whatever was wrong with the token (the reason is logged).
    """

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self._app = app
        self._settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or isinstance(scope.get("user"), AuthenticatedUser):
            await self._app(scope, receive, send)
            return
        presented = "authorization" in Headers(scope=scope)
        challenge = f'Bearer resource_metadata="{_metadata_url(_resource_url(self._settings, scope))}"'
        body: dict[str, str] = {"error": "invalid_request", "error_description": "Authentication required"}
        if presented:
            # RFC 6750 section 3.1: name the error only when a token was sent.
            challenge += ', error="invalid_token", error_description="The access token is not valid"'
            body = {"error": "invalid_token", "error_description": "The access token is not valid"}
        response = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge})
        await response(scope, receive, send)


def protected_resource_metadata(settings: Settings) -> Callable[[Request], Awaitable[Response]]:
    """The RFC 9728 document: this resource, and where its tokens come from."""
    servers = settings.authorization_servers or ([settings.jwt_issuer] if settings.jwt_issuer else [])

    async def metadata(request: Request) -> Response:
        document: dict[str, Any] = {
            "resource": _resource_url(settings, request.scope),
            "bearer_methods_supported": ["header"],
            "resource_name": settings.server_name,
        }
        if servers:
            document["authorization_servers"] = servers
        return JSONResponse(document, headers={"Cache-Control": "max-age=300"})

    return metadata
