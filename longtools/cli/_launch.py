"""Running the service: settings, Temporal, a worker, the API, until stopped. The ``serve``, ``api``
and ``worker`` commands' process.

Kept apart from the command definitions (``_commands.py``) so that the terminal client's commands
start without importing the server side (FastAPI, uvicorn, Temporal's worker).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn

import structlog
import typer
import uvicorn
from fastapi import FastAPI
from prometheus_client import start_http_server
from pydantic import SecretStr, ValidationError
from temporalio.worker import Worker

from longtools._logging import configure_logging
from longtools._metrics import Metrics
from longtools._settings import (
    KEYGEN_HINT,
    PAYLOAD_KEYS_VAR,
    STATE_KEYS_VAR,
    Settings,
    encode_key,
    is_loopback,
)
from longtools._tracing import TracingUnavailable, configure_tracing
from longtools.auth import AuthConfigError
from longtools.server import create_app, front_door
from longtools.temporal import (
    KEY_FILE,
    DevServerError,
    KeyFileError,
    build_worker,
    connect,
    key_id,
    load_or_create,
    start_dev_server,
)
from longtools.tools import Registry, ToolModuleError, default_registry

log = structlog.get_logger("longtools.cli")

HTTP_KEEP_ALIVE_S = 75
"""Seconds uvicorn keeps an idle client connection open. A proxy in front must close its idle
upstream connections sooner (nginx: ``keepalive_timeout`` in the upstream block), or it may send a
request on a connection uvicorn is closing and answer 502."""
HTTP_SHUTDOWN_S = 10
"""Seconds a stopping API gives requests in flight to finish. Held MRTR rounds do not need it: they
answer "not yet" as soon as the stop begins, and their clients retry on another replica."""


def _settings(**overrides: Any) -> Settings:
    try:
        settings = Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as exc:
        fail(f"invalid configuration: {_first_error(exc)}")
    configure_logging(settings)
    try:
        # Private when made here: it may hold the key rings (keys.json) and what the tools store.
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot create the data directory {settings.data_dir}: {exc.strerror or exc}")
    return settings


def _key_rings(settings: Settings, *, listen: bool, embedded: bool) -> Settings:
    """Settings with the key rings this command needs: configured, kept by `serve`, or a refusal.

    A key made per process would break every other replica and every restart (requestState,
    idempotency ids, every payload stored in Temporal), so only `serve`, which owns its data dir,
    makes keys, and keeps them there; `api` and `worker` must be given the deployment's rings.
    """
    if embedded:
        if settings.state_keys is None or settings.payload_keys is None:
            settings = _kept_rings(settings)
    else:
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
    payload = settings.require_payload_keys()
    log.info("payload_keys", encrypting=key_id(payload[0]), decrypting=[key_id(key) for key in payload])
    return settings


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


def _registry(settings: Settings) -> Registry:
    try:
        return default_registry(settings)
    except ToolModuleError as exc:
        fail(str(exc))


def launch(options: dict[str, Any], *, listen: bool, worker: bool, embedded: bool) -> NoReturn:
    """What every command does with its options: settings, tools, socket, then run until stopped."""
    settings = _key_rings(_settings(**options), listen=listen, embedded=embedded)
    if listen:
        settings = _auth_mode(settings, loopback_default=embedded)
    registry = _registry(settings)
    sock = _listen(settings) if listen else None
    try:
        flush_traces = configure_tracing(settings)
    except TracingUnavailable as exc:
        fail(str(exc))
    code = asyncio.run(_run(settings, registry, sock=sock, worker=worker, embedded=embedded))
    if flush_traces is not None:
        flush_traces()
    raise typer.Exit(code)


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
        fail(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}", code=1)


async def _run(
    settings: Settings, registry: Registry, *, sock: socket.socket | None, worker: bool, embedded: bool
) -> int:
    """Start what this command runs, in order (Temporal, worker, API), then stop it in reverse."""
    code = await _run_parts(settings, registry, sock=sock, worker=worker, embedded=embedded)
    if code == 0:
        log.info("stopped")
    return code


async def _run_parts(
    settings: Settings, registry: Registry, *, sock: socket.socket | None, worker: bool, embedded: bool
) -> int:
    async with contextlib.AsyncExitStack() as stack:
        if sock is not None:
            stack.callback(sock.close)  # closing twice is harmless; uvicorn closes it on a normal exit
        if embedded and settings.temporal_address is None:
            try:
                dev = await start_dev_server(settings.data_dir / "temporal.db", port=settings.temporal_port)
            except DevServerError as exc:
                typer.echo(f"longtools: {exc}", err=True)
                return 1
            stack.callback(dev.stop)
            settings = settings.model_copy(update={"temporal_address": dev.address})
            log.info(
                "temporal_started",
                address=dev.address,
                metrics=dev.metrics_url,
                db=str(settings.data_dir / "temporal.db"),
            )
        metrics = Metrics()
        worker_task: asyncio.Task[None] | None = None
        if worker:
            # Task ends and times are recorded by the worker's workflows through this runtime; the
            # drain moves them into the registry /metrics shows.
            draining = asyncio.create_task(metrics.drain_forever())
            stack.push_async_callback(_cancel, draining)
            try:
                client = await connect(settings, runtime=metrics.runtime())
            except RuntimeError as exc:  # the SDK's "Failed client connect"
                typer.echo(
                    f"longtools: cannot reach Temporal at {settings.temporal_address}: {exc}", err=True
                )
                return 1
            running = build_worker(settings, client, registry)
            worker_task = asyncio.create_task(running.run())
            stack.push_async_callback(_stop_worker, running, worker_task)
        if sock is not None:
            try:  # made only now: the app needs the embedded Temporal's address
                app = create_app(settings, registry, metrics, worker_client=client if worker else None)
            except AuthConfigError as exc:
                typer.echo(f"longtools: {exc}", err=True)
                return 2
            return await serve_until_stopped(
                _uvicorn(settings, app), sock, settings.host, "serving MCP", "/mcp"
            )
        assert worker_task is not None
        if settings.worker_metrics_port is not None:
            server, _thread = start_http_server(
                settings.worker_metrics_port, addr=settings.host, registry=metrics.registry
            )
            stack.callback(server.shutdown)
            log.info("metrics_serving", url=f"http://{settings.host}:{server.server_port}/metrics")
        print(  # noqa: T201
            f"longtools worker polling task queue {settings.task_queue!r} at {settings.temporal_address}",
            flush=True,
        )
        return await _until_signal_or_failure(worker_task)
    return 0


async def _until_signal_or_failure(worker_task: asyncio.Task[None]) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({stopped, worker_task}, return_when=asyncio.FIRST_COMPLETED)
    failed = worker_task.done()  # a worker that stopped by itself has failed; _stop_worker says why
    stopped.cancel()
    return 1 if failed else 0


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _stop_worker(running: Worker, task: asyncio.Task[None]) -> None:
    if not task.done():
        await running.shutdown()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception as exc:  # a worker that died on its own: said once, then a clean exit path
        log.error("worker_failed", error=str(exc))


def _uvicorn(settings: Settings, app: FastAPI) -> Server:
    # uvicorn's HTTP parser is its default ("auto"): httptools, which longtools installs (bench/
    # README.md, B1). Its loop setting does not apply: uvicorn serves in the loop `launch` runs,
    # which Temporal's client and worker share.
    return Server(
        uvicorn.Config(
            front_door(app),
            host=settings.host,
            port=settings.port,
            log_config=None,
            lifespan="on",
            timeout_keep_alive=HTTP_KEEP_ALIVE_S,
            timeout_graceful_shutdown=HTTP_SHUTDOWN_S,
        ),
        on_stop=app.state.stop_waiting,
    )


async def serve_until_stopped(
    server: Server, sock: socket.socket, host: str, what: str, path: str = ""
) -> int:
    """Serve on ``sock`` until stopped; says ``longtools <what> at <url>`` once it accepts requests."""

    async def run() -> int:
        try:
            await server.serve(sockets=[sock])
        except SystemExit as exc:  # uvicorn's way out of a failed startup (already logged)
            return exc.code if isinstance(exc.code, int) else 1
        return 0 if server.started else 1

    task = asyncio.create_task(run())
    ready = asyncio.create_task(server.ready.wait())
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if server.started:
        port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        print(f"longtools {what} at http://{shown}:{port}{path}", flush=True)  # noqa: T201
    return await task


class Server(uvicorn.Server):
    """uvicorn that says when it accepts requests, calls ``on_stop`` as soon as a stop begins (the
    API lets its held rounds go then), and exits 0 (not by re-raising) on a stop signal."""

    def __init__(self, config: uvicorn.Config, *, on_stop: Callable[[], None] = lambda: None) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()
        self._on_stop = on_stop

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_stop()
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.ready.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"longtools: {message}", err=True)
    raise typer.Exit(code)
