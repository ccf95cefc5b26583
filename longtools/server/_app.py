"""``create_app(settings)``: the FastAPI application with the MCP endpoint mounted. API process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from functools import partial
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any, Final

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import LOG_LEVEL_META_KEY
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.service import RPCError

from longtools._metrics import Metrics
from longtools._settings import Settings
from longtools.auth import BearerVerifier, RequireBearer, VerifiedBearer, metadata_routes
from longtools.pages import Pages
from longtools.server._gate import McpGate
from longtools.server._handlers import build_server
from longtools.server._legacy import LegacyEra
from longtools.server._limits import HeldRounds
from longtools.server._people import People
from longtools.server._sessions import Seals
from longtools.tasks import Changes, Mailboxes, RunOnce, Tasks
from longtools.temporal import Connection, unreachable
from longtools.tools import Registry, default_registry

_LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"]
MCP_PATH = "/mcp"
READY_TIMEOUT_S = 2.0
"""How long ``/readyz`` waits for Temporal's ``GetSystemInfo``: a probe must answer before the
orchestrator's own timeout, whatever Temporal does."""
_LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


_ASKS_TO_STREAM: Final = (b"progressToken", LOG_LEVEL_META_KEY.encode())
"""The ``_meta`` keys that ask for a stream; a JSON key is in the body as it is unless escaped."""
_ESCAPED: Final = (b"\\", b"\x00")
"""A backslash (an escape could spell any key) or a NUL (a UTF-16 or -32 body): the body is read."""


def _may_stream(registry: Registry, method: str | None, name: str | None, body: bytes) -> bool:
    """Whether a request may need SSE: it asks for progress or for log messages, it is a stream of
    notifications (``subscriptions/listen``), it is a round of
    a long tool (held open while the work runs, with keep-alive pings), or a claimed round that
    may wait for a duplicate's outcome. Everything else is answered as plain JSON.

    ``method`` and ``name`` are the ``Mcp-Method`` and ``Mcp-Name`` headers: the SDK refuses a
    request whose body names another method or tool, whichever handler it goes to. So a body that
    spells none of the keys that matter literally is not parsed here (the SDK parses it anyway):
    the method and the tool decide.
    """
    if method == "subscriptions/listen":
        return True
    if not any(key in body for key in _ASKS_TO_STREAM) and not any(mark in body for mark in _ESCAPED):
        if method != "tools/call":
            return False
        # An encoded (=?base64?...?=) or unknown name: the body says which tool.
        tool = registry.tools.get(name) if name is not None and not name.startswith("=?") else None
        if tool is not None:
            if tool.handler is None:
                return True
            if tool.replay_safe or b'"requestState"' not in body:
                return False
    return _params_may_stream(registry, method, _params(body))


def _params_may_stream(registry: Registry, method: str | None, params: Mapping[str, Any]) -> bool:
    meta = params.get("_meta")
    if isinstance(meta, dict) and (meta.get("progressToken") is not None or LOG_LEVEL_META_KEY in meta):
        return True
    if method != "tools/call":
        return False
    tool = registry.tools.get(str(params.get("name")))
    if tool is None:
        return False
    return tool.handler is None or (params.get("requestState") is not None and not tool.replay_safe)


def _params(body: bytes) -> Mapping[str, Any]:
    """The request's params, or nothing for a body the SDK will refuse anyway."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    params = decoded.get("params") if isinstance(decoded, dict) else None
    return params if isinstance(params, dict) else {}


def longtools_version() -> str:
    try:
        return package_version("longtools")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"


def create_app(
    settings: Settings,
    registry: Registry | None = None,
    metrics: Metrics | None = None,
    *,
    worker_client: Client | None = None,
) -> FastAPI:
    """The API process's ASGI app: ``POST /mcp``, ``GET /livez``, ``GET /readyz`` and ``GET /metrics``.
    No side effects until served.

    The Temporal client is connected in the background once the app starts serving, so the API
    comes up, and answers "unavailable" at once, while Temporal does not answer yet (``/readyz``
    says which). ``metrics`` is shared with
    a worker in the same process (``serve``), so one ``/metrics`` shows both.

    ``worker_client`` is the client of a worker running in this process (``serve``). The API then
    uses it and asks Temporal for eager starts: the new workflow's first task comes back in the
    start response and runs on that worker at once, instead of going through Temporal's matching
    (what that saves is measured in bench/README.md, B3 and B6).
    """
    registry = registry if registry is not None else default_registry(settings)
    metrics = metrics if metrics is not None else Metrics()
    connection = Connection(settings, worker_client)
    closers: list[Callable[[], Awaitable[None]]] = [connection.close]
    changes = Changes(
        connection,
        settings.temporal_namespace,
        max_bytes=settings.cache_bytes // 2,
        following=metrics.watches,
    )
    closers.append(changes.aclose)
    tasks = Tasks(settings, registry, connection, changes, eager=worker_client is not None)
    once = RunOnce(settings, connection, changes, eager=worker_client is not None)
    held = HeldRounds(
        per_principal=settings.max_held_rounds_per_principal,
        total=settings.max_held_rounds,
        gauge=metrics.held_rounds,
    )
    people = People(settings)
    server = build_server(
        settings,
        registry,
        version=longtools_version(),
        tasks=tasks,
        once=once,
        metrics=metrics,
        held=held,
        people=people,
    )
    # Work whose request went away (its client left) finishes and is recorded before the exit.
    closers.append(once.drain)
    mailboxes = Mailboxes(settings, connection, changes)
    closers.append(mailboxes.aclose)
    legacy: ASGIApp = LegacyEra(
        server,
        Seals(settings.require_state_keys(), session_ttl_s=settings.session_ttl_s),
        mailboxes,
        # A pushed question may wait as long as what asked it: a quick tool's state or a long task.
        question_ttl_s=max(settings.state_ttl_s, settings.task_ttl_s),
    )
    # Behind a proxy the public host name must be listed; the guard still refuses every other Host.
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*_LOOPBACK_HOSTS, *settings.allowed_hosts],
        allowed_origins=[*_LOOPBACK_ORIGINS, *settings.allowed_origins],
    )
    # Builds the SDK's session manager; its Starlette app is not used, only the manager's handler.
    server.streamable_http_app(transport_security=security, max_request_body_size=settings.max_body_bytes)
    manager = server.session_manager
    # The same server behind the SDK's JSON-response handler, for requests that cannot stream.
    plain = StreamableHTTPSessionManager(
        app=server,
        json_response=True,
        security_settings=security,
        max_request_body_size=settings.max_body_bytes,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        connection.start()
        async with manager.run(), plain.run():
            app.state.ready = True
            yield
            app.state.ready = False
        for close in closers:
            await close()

    app = FastAPI(title="longtools", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.stop_waiting = changes.stop  # called by the server as soon as a stop begins
    app.state.ready = False

    @app.get("/metrics")
    async def prometheus() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    # Liveness and readiness apart: an orchestrator restarts a replica that fails /livez, and only
    # stops routing to one that fails /readyz. A Temporal outage must do the second, never the first
    # (restarting every replica would not bring Temporal back).
    @app.get("/livez")
    async def livez() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        if not app.state.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        try:
            # Bounded here too: a probe must answer before the orchestrator's own timeout.
            async with asyncio.timeout(READY_TIMEOUT_S):
                await connection().workflow_service.get_system_info(
                    GetSystemInfoRequest(), timeout=timedelta(seconds=READY_TIMEOUT_S)
                )
        except (RPCError, RuntimeError, TimeoutError) as exc:
            if isinstance(exc, RuntimeError) and not unreachable(exc):
                raise
            return JSONResponse({"status": "temporal unavailable"}, status_code=503)
        return JSONResponse({"status": "ok"})

    streaming: ASGIApp = manager.handle_request
    json_only: ASGIApp = plain.handle_request
    verifier = BearerVerifier(settings) if settings.auth_configured else None
    # The person's pages (answer links, their tasks, sign-in), on this same port.
    pages = Pages(
        settings,
        registry,
        tasks,
        people.links,
        held,
        allowed_hosts=[*_LOOPBACK_HOSTS, *settings.allowed_hosts],
        verifier=verifier,
        connection=connection,
        once=once,
    )
    app.router.routes.extend(pages.routes)
    closers.append(pages.aclose)
    if verifier is not None:
        backend = VerifiedBearer(verifier)
        streaming = AuthenticationMiddleware(RequireBearer(streaming, settings), backend=backend)
        json_only = AuthenticationMiddleware(RequireBearer(json_only, settings), backend=backend)
        legacy = AuthenticationMiddleware(RequireBearer(legacy, settings), backend=backend)
        app.router.routes.extend(metadata_routes(settings, MCP_PATH))
        closers.append(verifier.aclose)
    gate = McpGate(
        streaming,
        security,
        max_body_bytes=settings.max_body_bytes,
        legacy=legacy,
        plain=json_only,
        streams=partial(_may_stream, registry),
    )
    app.router.routes.append(Route(MCP_PATH, endpoint=gate))
    app.state.mcp = gate
    return app


def front_door(app: FastAPI) -> ASGIApp:
    """``app``, with requests to ``/mcp`` handed straight to its gate.

    FastAPI's middleware stack (exception handlers, body limit, exit stack, routing) cost 4% of a
    plain ``tools/call``; the gate needs none of it (it limits bodies itself, and an exception
    still reaches uvicorn, which answers 500 as FastAPI's outermost layer would).
    """
    gate: ASGIApp = app.state.mcp

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == MCP_PATH:
            await gate(scope, receive, send)
        else:
            await app(scope, receive, send)

    return asgi
