"""Running the service: settings, Temporal, a worker, the API, until stopped. The ``serve``, ``api``
and ``worker`` commands' process.

Kept apart from the command definitions (``_commands.py``) so that the terminal client's commands
start without importing the server side (FastAPI, uvicorn, Temporal's worker). This module does
what comes before those imports (settings, the checks that fail in one line, the MCP socket, the
embedded Temporal's launch), so that a cold start's seconds of imports overlap the dev server's
start; ``_running`` does the rest.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, NoReturn

import structlog
import typer
from pydantic import SecretStr, ValidationError

from longtools._logging import configure_logging
from longtools._settings import (
    KEYGEN_HINT,
    PAYLOAD_KEYS_VAR,
    STATE_KEYS_VAR,
    Settings,
    encode_key,
    is_loopback,
)
from longtools.cli._datadir import DataDirInUse, DataDirLock
from longtools.temporal import (
    KEY_FILE,
    DevServerError,
    DevServerStart,
    KeyFileError,
    load_or_create,
    read_key_file,
)

log = structlog.get_logger("longtools.cli")

HTTP_KEEP_ALIVE_S = 75
"""Seconds uvicorn keeps an idle client connection open. A proxy in front must close its idle
upstream connections sooner (nginx: ``keepalive_timeout`` in the upstream block), or it may send a
request on a connection uvicorn is closing and answer 502."""
HTTP_SHUTDOWN_S = 10
"""Seconds a stopping API gives requests in flight to finish. Held MRTR rounds do not need it: they
answer "not yet" as soon as the stop begins, and their clients retry on another replica."""


def settings_of(**overrides: Any) -> Settings:
    """The settings of a command (its options over the environment; None means not given), with
    logging configured; an invalid one is one line naming the setting and exit 2."""
    try:
        settings = Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as exc:
        fail(f"invalid configuration: {_first_error(exc)}")
    configure_logging(settings)
    return settings


def _settings(**overrides: Any) -> Settings:
    settings = settings_of(**overrides)
    try:
        # Private when made here: it may hold the key rings (keys.json) and what the tools store.
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot create the data directory {settings.data_dir}: {exc.strerror or exc}")
    return settings


def _given_rings(settings: Settings, *, listen: bool) -> None:
    """Refuse an `api` or `worker` without the deployment's key rings.

    A key made per process would break every other replica and every restart (requestState,
    idempotency ids, every payload stored in Temporal), so only `serve`, which owns its data dir,
    makes keys, and keeps them there (`_kept_rings`); `api` and `worker` must be given the rings.
    """
    if listen and settings.state_keys is None:
        fail(
            f"{STATE_KEYS_VAR} is not set: every `longtools api` replica needs the same requestState "
            f"key ring (a key per process breaks the other replicas and every restart); generate a "
            f"key with: {KEYGEN_HINT}"
        )
    if settings.payload_keys is None:
        fail(
            f"{PAYLOAD_KEYS_VAR} is not set: `longtools api` and every `longtools worker` need the "
            f"same key ring to encrypt and read what they store in Temporal; generate a key with: "
            f"{KEYGEN_HINT}"
        )


def _needs_kept_rings(settings: Settings) -> bool:
    return settings.state_keys is None or settings.payload_keys is None


def _check_key_file(settings: Settings) -> None:
    """Refuse a `serve` whose key file is there but unusable, reading it only (a missing one is made
    by `_kept_rings` once every check has passed)."""
    try:
        read_key_file(settings.data_dir / KEY_FILE)
    except FileNotFoundError:
        pass
    except KeyFileError as exc:
        fail(str(exc))


def _kept_rings(settings: Settings) -> Settings:
    """Fill in the rings `serve` was not given from ``<data-dir>/keys.json``, made on first start.

    A configured variable always wins over the file.
    """
    path = settings.data_dir / KEY_FILE
    try:
        rings, created = load_or_create(path)
    except KeyFileError as exc:
        fail(str(exc))
    update: dict[str, Any] = {}
    if settings.state_keys is None:
        update["state_keys"] = SecretStr(",".join(encode_key(key) for key in rings.state))
    if settings.payload_keys is None:
        update["payload_keys"] = SecretStr(",".join(encode_key(key) for key in rings.payload))
    taken = [f"LONGTOOLS_{name.upper()}" for name in update]
    if created:
        log.warning(
            "key_file_created",
            path=str(path),
            uses=taken,
            detail="back this file up with temporal.db: without it the stored tasks cannot be read",
        )
    else:
        log.info("key_file_read", path=str(path), uses=taken)
    return settings.model_copy(update=update)


def payload_keys_of(settings: Settings) -> list[bytes]:
    """The payload key ring an operator's command reads with: configured, or a `serve` data dir's.

    ``codec-server`` and ``task show`` decrypt what the API and workers wrote, so they take the
    same ring and never make one (a new key would decrypt nothing).
    """
    configured = settings.payload_key_ring()
    if configured is not None:
        return configured
    path = settings.data_dir / KEY_FILE
    try:
        return read_key_file(path).payload
    except FileNotFoundError:
        fail(
            f"no payload keys: set {PAYLOAD_KEYS_VAR} to the ring the API and workers use, or pass "
            f"--data-dir of the `longtools serve` whose {KEY_FILE} to use (none at {path}); a new key "
            f"would decrypt nothing (generate one with: {KEYGEN_HINT})"
        )
    except KeyFileError as exc:
        fail(str(exc))


def _auth_mode(settings: Settings, *, loopback_default: bool) -> Settings:
    """Authentication is on with any token or JWT setting; off only when asked (or by `serve` on loopback)."""
    if settings.auth_configured:
        if settings.no_auth:
            fail("--no-auth contradicts the token/JWT settings given; drop one of them")
        return settings
    if not settings.no_auth:
        if not (loopback_default and is_loopback(settings.host)):
            fail(
                "authentication is not configured: set LONGTOOLS_AUTH_TOKENS (token=principal,...) or "
                "LONGTOOLS_JWT_SECRET / LONGTOOLS_JWT_JWKS, or pass --no-auth to serve everyone as one user"
            )
        settings = settings.model_copy(update={"no_auth": True})
    log.warning(
        "auth_off",
        detail="serving without authentication: every caller is the same user and can see every task",
    )
    return settings


TEMPORAL_PORT_OPTION = "--temporal-port (LONGTOOLS_TEMPORAL_PORT)"
TEMPORAL_UI_PORT_OPTION = "--temporal-ui-port (LONGTOOLS_TEMPORAL_UI_PORT)"


def launch(options: dict[str, Any], *, listen: bool, worker: bool, embedded: bool) -> NoReturn:
    """What every command does with its options: settings, socket, Temporal, tools, then run until stopped.

    What can fail in one line without the server side's imports is checked first. For `serve`, these
    checks write nothing: only once all of them have passed does it make its data dir, take its lock,
    launch the embedded Temporal and make its key file. The embedded Temporal is launched before the
    server side's imports and awaited only when the worker connects.
    """
    if not embedded:
        settings = _settings(**options)
        _given_rings(settings, listen=listen)
        if listen:
            settings = _auth_mode(settings, loopback_default=False)
        sock = _listen(settings) if listen else None
        _run(settings, sock=sock, temporal=None, worker=worker)
    settings = settings_of(**options)
    if _needs_kept_rings(settings):
        _check_key_file(settings)
    owns_temporal = settings.temporal_address is None
    # One serve per data dir when it runs Temporal there: checked before the ports, whose refusal
    # would hide the real conflict when both use the defaults.
    lock = _lock_of(settings.data_dir) if owns_temporal else None
    if listen:
        settings = _auth_mode(settings, loopback_default=True)
    sock = _listen(settings) if listen else None
    temporal = _check_temporal(settings, sock) if owns_temporal else None
    # Every check has passed: from here the start writes.
    try:
        _hold(lock, settings.data_dir)
        if temporal is not None:
            temporal.launch()
        if _needs_kept_rings(settings):
            settings = _kept_rings(settings)
    except BaseException as exc:
        if temporal is not None:
            temporal.discard()
        if sock is not None:
            sock.close()
        if isinstance(exc, DevServerError):
            fail(str(exc), code=1)
        raise
    _run(settings, sock=sock, temporal=temporal, worker=worker)


def _run(
    settings: Settings, *, sock: socket.socket | None, temporal: DevServerStart | None, worker: bool
) -> NoReturn:
    try:
        from longtools.cli import _running  # the seconds of imports, while Temporal starts
    except BaseException:
        if temporal is not None:
            temporal.discard()
        if sock is not None:
            sock.close()
        raise
    # From here _running owns the socket and the dev server, and stops the server on every way out.
    raise typer.Exit(_running.run(settings, sock=sock, temporal=temporal, worker=worker))


def _lock_of(data_dir: Path) -> DataDirLock:
    try:
        return DataDirLock(data_dir)
    except DataDirInUse as exc:
        fail(str(exc), code=1)
    except OSError as exc:
        fail(f"cannot use the data directory {data_dir}: {exc.strerror or exc}")


def _hold(lock: DataDirLock | None, data_dir: Path) -> None:
    """Make the data dir (private when made here: it holds the key rings and what the tools store)
    and hold its lock."""
    try:
        if lock is not None:
            lock.hold()
        else:
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except DataDirInUse as exc:  # another serve took it since the check
        fail(str(exc), code=1)
    except OSError as exc:
        fail(f"cannot create the data directory {data_dir}: {exc.strerror or exc}")


def _check_temporal(settings: Settings, sock: socket.socket | None) -> DevServerStart:
    """The embedded Temporal, checked (binary, path, ports) and not launched yet."""
    try:
        return DevServerStart(
            settings.data_dir / "temporal.db",
            port=settings.temporal_port,
            ui_port=settings.temporal_ui_port,
            port_options=(TEMPORAL_PORT_OPTION, TEMPORAL_UI_PORT_OPTION),
        )
    except DevServerError as exc:
        if sock is not None:
            sock.close()
        fail(str(exc), code=1)


def bind(host: str, port: int) -> socket.socket:
    """Bind before uvicorn starts, so a taken port is one clear line and port 0 is resolved."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on accepted sockets that say they are TCP,
    # and without it every response written in two parts waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _listen(settings: Settings) -> socket.socket:
    try:
        return bind(settings.host, settings.port)
    except OSError as exc:
        fail(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}; choose another "
            "port with --port (LONGTOOLS_PORT), 0 for any free one",
            code=1,
        )


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"longtools: {message}", err=True)
    raise typer.Exit(code)
