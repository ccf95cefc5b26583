"""Running the service, after `_launch` checked the settings, bound the socket and launched the
embedded Temporal: the tools, the worker, the API, until stopped. The ``serve``, ``api`` and
``worker`` commands' process.

Importing this module is most of a cold start (FastAPI, the MCP SDK, Temporal's worker, the tools):
`_launch` imports it only once the dev server is on its way.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket
from collections.abc import Callable, Iterator
from types import FrameType

import structlog
import typer
import uvicorn
from fastapi import FastAPI
from prometheus_client import start_http_server
from temporalio.worker import Worker

from longtools._metrics import Metrics
from longtools._settings import Settings
from longtools._tracing import TracingUnavailable, configure_tracing
from longtools.auth import AuthConfigError
from longtools.cli._launch import HTTP_KEEP_ALIVE_S, HTTP_SHUTDOWN_S, fail
from longtools.server import create_app, front_door
from longtools.temporal import DevServerError, DevServerStart, build_worker, connect, key_id
from longtools.tools import Registry, ToolModuleError, default_registry

log = structlog.get_logger("longtools.cli")


def run(
    settings: Settings, *, sock: socket.socket | None, temporal: DevServerStart | None, worker: bool
) -> int:
    """Load the tools, then run until stopped; the exit code. Stops ``temporal`` on every way out."""
    try:
        payload = settings.require_payload_keys()
        log.info("payload_keys", encrypting=key_id(payload[0]), decrypting=[key_id(key) for key in payload])
        registry = _registry(settings)
        try:
            flush_traces = configure_tracing(settings)
        except TracingUnavailable as exc:
            fail(str(exc))
    except BaseException:
        if temporal is not None:
            temporal.discard()
        if sock is not None:
            sock.close()
        raise
    code = asyncio.run(_run(settings, registry, sock=sock, temporal=temporal, worker=worker))
    if flush_traces is not None:
        flush_traces()
    return code


def _registry(settings: Settings) -> Registry:
    try:
        return default_registry(settings)
    except ToolModuleError as exc:
        fail(str(exc))


async def _run(
    settings: Settings,
    registry: Registry,
    *,
    sock: socket.socket | None,
    temporal: DevServerStart | None,
    worker: bool,
) -> int:
    """Start what this command runs, in order (Temporal, worker, API), then stop it in reverse."""
    code = await _run_parts(settings, registry, sock=sock, temporal=temporal, worker=worker)
    if code == 0:
        log.info("stopped")
    return code


async def _run_parts(
    settings: Settings,
    registry: Registry,
    *,
    sock: socket.socket | None,
    temporal: DevServerStart | None,
    worker: bool,
) -> int:
    async with contextlib.AsyncExitStack() as stack:
        if sock is not None:
            stack.callback(sock.close)  # closing twice is harmless; uvicorn closes it on a normal exit
        if temporal is not None:
            try:
                dev = await temporal.ready()  # launched by _launch; usually up by now
            except DevServerError as exc:
                typer.echo(f"longtools: {exc}", err=True)
                return 1
            stack.callback(dev.stop)
            settings = settings.model_copy(update={"temporal_address": dev.address})
            log.info(
                "temporal_started",
                address=dev.address,
                metrics=dev.metrics_url,
                ui=dev.ui_url,
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

    _settle_heap()  # before serving: a collection of the whole heap takes about 60 ms
    task = asyncio.create_task(run())
    ready = asyncio.create_task(server.ready.wait())
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if server.started:
        port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        print(f"longtools {what} at http://{shown}:{port}{path}", flush=True)  # noqa: T201
    return await task


def _settle_heap() -> None:
    """Keep what the process made to start (modules, the app, the tools: almost all its objects)
    out of every later garbage collection.

    Each request leaves a few objects that only the collector frees (the SDK's per-request
    connection and runner refer to each other), so full collections keep coming, and each one
    walked the 200,000-odd objects of the start again. Frozen, they are not walked: the API's CPU
    per plain ``tools/call`` fell by about 10 µs (B1), per MRTR exchange by about 35 µs (B2).
    """
    gc.collect()
    gc.freeze()


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
