"""``longtools codec-server``: Temporal's remote codec protocol over the payload key ring, so an
operator can read a task's payloads in ``temporal workflow show --codec-endpoint`` or the Web UI.
Its own process.

The protocol: ``POST /decode`` and ``POST /encode`` (also under ``/<namespace>/``, for templated
endpoints) take and return ``{"payloads": [...]}``, each payload in protobuf JSON form
(``metadata`` values and ``data`` in base64). A browser (the Web UI) first sends an ``OPTIONS``
preflight; it gets the CORS headers only for an origin given with ``--allowed-origin``.

It decrypts anything for whoever reaches it, so (docs/security.md):

- it binds 127.0.0.1 unless told otherwise, and any other address needs ``LONGTOOLS_CODEC_TOKEN``
  (then every request must carry ``Authorization: Bearer <token>``; the CLI sends it with
  ``--codec-auth``);
- a request with an ``Origin`` header not listed is refused (another site open in the operator's
  browser cannot use it), and on loopback one whose ``Host`` is not a loopback name too (DNS
  rebinding);
- only ``application/json`` bodies up to 16 MiB are read (no form post from a page gets through);
- each request is logged (operation, counts, key ids, origin, client), never a payload.

A payload it cannot decrypt (a key not in the ring, altered data) is returned as it came, so the
rest of a history still shows; the log says which key id is missing.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import structlog
import typer
import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payload, Payloads

from longtools._settings import is_loopback
from longtools.cli._launch import bind, fail, payload_keys_of, settings_of
from longtools.cli._running import Server, serve_until_stopped
from longtools.temporal import (
    ENCODING,
    KEY_ID_METADATA,
    EncryptionCodec,
    PayloadDecryptError,
)

__all__ = ["MAX_BODY_BYTES", "TOKEN_VAR", "build_app", "run"]

log = structlog.get_logger("longtools.codec_server")

MAX_BODY_BYTES = 16 * 1024 * 1024
"""Largest request body read; a batch of payloads in base64 JSON is about 4/3 of their size."""
TOKEN_VAR = "LONGTOOLS_CODEC_TOKEN"
_ALLOWED_HEADERS = "content-type, x-namespace, authorization"
_MIN_TOKEN_CHARS = 16
_LOGGED_CHARS = 200
_Apply = Callable[[list[Payload]], tuple[list[Payload], int]]


def build_app(
    codec: EncryptionCodec, *, allowed_origins: list[str], token: str | None, loopback: bool
) -> Starlette:
    """The codec server's ASGI app (``run`` serves it; tests may too)."""
    guard = _Guard(allowed_origins=allowed_origins, token=token, loopback=loopback)

    async def decode(request: Request) -> Response:
        return await guard.handle(request, "decode", lambda payloads: _decode_all(codec, payloads))

    async def encode(request: Request) -> Response:
        return await guard.handle(request, "encode", lambda payloads: _encode_all(codec, payloads))

    routes = [
        Route(path, endpoint, methods=["POST", "OPTIONS"])
        for prefix in ("", "/{namespace}")
        for path, endpoint in ((f"{prefix}/decode", decode), (f"{prefix}/encode", encode))
    ]
    return Starlette(routes=routes)


def _encode_all(codec: EncryptionCodec, payloads: list[Payload]) -> tuple[list[Payload], int]:
    return [codec.encrypt(payload) for payload in payloads], 0


def _decode_all(codec: EncryptionCodec, payloads: list[Payload]) -> tuple[list[Payload], int]:
    decoded: list[Payload] = []
    failed = 0
    for payload in payloads:
        try:
            decoded.append(codec.decrypt(payload))
        except PayloadDecryptError:  # the codec logged which key id; the rest still shows
            decoded.append(payload)
            failed += 1
    return decoded, failed


class _Guard:
    """Who may use the codec server, and the one log line per request."""

    def __init__(self, *, allowed_origins: list[str], token: str | None, loopback: bool) -> None:
        self._origins = {origin.rstrip("/") for origin in allowed_origins}
        self._token = token
        self._loopback = loopback

    def _cors(self, origin: str | None) -> dict[str, str]:
        if origin is None:
            return {}
        return {
            "access-control-allow-origin": origin,
            "access-control-allow-methods": "POST, OPTIONS",
            "access-control-allow-headers": _ALLOWED_HEADERS,
            "access-control-max-age": "600",
            "vary": "Origin",
        }

    def _refusal(self, request: Request) -> tuple[int, str] | None:
        origin = request.headers.get("origin")
        if origin is not None and origin.rstrip("/") not in self._origins:
            return 403, "origin not allowed"
        if self._loopback and not is_loopback(_host_name(request.headers.get("host", ""))):
            return 403, "host not allowed"
        return None

    async def handle(self, request: Request, operation: str, apply: _Apply) -> Response:
        """Check who asks, then ``apply`` the codec to the payloads: (payloads, how many failed)."""
        refused = self._refusal(request)
        client = request.client.host if request.client is not None else None
        origin = request.headers.get("origin")
        shown_origin = None if origin is None else origin[:_LOGGED_CHARS]  # a client's value: capped
        if refused is not None:
            status, reason = refused
            log.warning(
                "codec_refused", operation=operation, reason=reason, origin=shown_origin, client=client
            )
            return Response(status_code=status)
        cors = self._cors(origin)
        if request.method == "OPTIONS":  # a browser's preflight: never carries credentials
            return Response(status_code=204, headers=cors)
        if self._token is not None and not _bearer_matches(request.headers.get("authorization"), self._token):
            log.warning("codec_refused", operation=operation, reason="bad or missing token", client=client)
            return Response(status_code=401, headers={**cors, "www-authenticate": "Bearer"})
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return Response(status_code=415, headers=cors)
        body = await _read_body(request)
        if body is None:
            return Response(status_code=413, headers=cors)
        try:
            payloads = json_format.Parse(body, Payloads(), ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError):
            return Response(status_code=400, headers=cors)
        given = list(payloads.payloads)
        result, failed = apply(given)
        log.info(
            "codec_request",
            operation=operation,
            payloads=len(given),
            encrypted=sum(1 for p in given if p.metadata.get("encoding") == ENCODING),
            undecoded=failed,
            key_ids=_key_ids(given),
            namespace=(request.path_params.get("namespace") or request.headers.get("x-namespace") or "")[
                :_LOGGED_CHARS
            ],
            origin=shown_origin,
            client=client,
        )
        # Built by hand: MessageToJson leaves out an empty list, and clients expect the key.
        answer = {"payloads": [json_format.MessageToDict(payload) for payload in result]}
        return JSONResponse(answer, headers=cors)


def _key_ids(payloads: list[Payload]) -> list[str]:
    """The key ids the payloads name, for the log: capped, as the client sent them."""
    found = {
        p.metadata[KEY_ID_METADATA][:32].decode(errors="replace")
        for p in payloads
        if KEY_ID_METADATA in p.metadata
    }
    return sorted(found)[:8]


def _host_name(host: str) -> str:
    return (urlsplit(f"//{host}").hostname or "").lower()


def _bearer_matches(header: str | None, token: str) -> bool:
    scheme, _, given = (header or "").partition(" ")
    # Compared in constant time: the token guards every decrypted payload.
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


async def _read_body(request: Request) -> bytes | None:
    """The body, or None once it passes MAX_BODY_BYTES (read no further)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


# The command ------------------------------------------------------------------------------------


def run(
    *,
    host: str,
    port: int,
    data_dir: Path | None,
    allowed_origins: list[str],
) -> NoReturn:
    """``longtools codec-server``: keys, socket, then serve until SIGINT/SIGTERM."""
    settings = settings_of(data_dir=data_dir)
    codec = EncryptionCodec(payload_keys_of(settings))
    loopback = is_loopback(host)
    token = settings.codec_token.get_secret_value() if settings.codec_token is not None else None
    if token is not None and len(token) < _MIN_TOKEN_CHARS:
        fail(f"{TOKEN_VAR} needs at least {_MIN_TOKEN_CHARS} characters")
    if not loopback and token is None:
        fail(
            f"the codec server decrypts every payload for whoever reaches it: bind it to 127.0.0.1 (the "
            f"default) and reach it through an SSH tunnel, or set {TOKEN_VAR} to require a bearer token"
        )
    for origin in allowed_origins:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            fail(f"--allowed-origin {origin!r} is not an origin such as http://localhost:8233")
    try:
        sock = bind(host.strip("[]"), port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", code=1)
    app = build_app(codec, allowed_origins=allowed_origins, token=token, loopback=loopback)
    server = Server(
        uvicorn.Config(app, log_config=None, lifespan="off", access_log=False, timeout_graceful_shutdown=5)
    )
    log.info(
        "codec_server_keys",
        encrypting=codec.encrypting_id,
        decrypting=list(codec.key_ids),
        allowed_origins=allowed_origins,
        token=token is not None,
    )
    code = asyncio.run(serve_until_stopped(server, sock, host, "codec server"))
    raise typer.Exit(code)
