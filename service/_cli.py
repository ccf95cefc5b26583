"""The ``longtools`` command line. Runs in the foreground process it was started in."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import os
import secrets
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import structlog
import typer
import uvicorn
from fastapi import FastAPI
from prometheus_client import start_http_server
from pydantic import ValidationError
from temporalio.worker import Worker

from service import _client
from service._app import create_app
from service._devserver import DevServerError, start_dev_server
from service._logging import configure_logging
from service._metrics import Metrics
from service._registry import Registry
from service._settings import Settings
from service._temporal import build_worker, connect
from service._tokens import AuthConfigError
from service._tracing import TracingUnavailable, configure_tracing
from service.tools import ToolModuleError, default_registry

cli = typer.Typer(
    name="longtools",
    help="An MCP server (2026-07-28, stateless Streamable HTTP) for long-running tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Option help shows "[env LONGTOOLS_..., default ...]"; as rich markup those brackets vanish.
    rich_markup_mode=None,
)
log = structlog.get_logger("longtools.cli")


# Options shared by the commands; each is also an environment variable (see Settings).
_HostOpt = Annotated[
    str | None, typer.Option(help="Address to bind [env LONGTOOLS_HOST, default 127.0.0.1].")
]
_PortOpt = Annotated[int | None, typer.Option(help="Port to bind; 0 picks a free one [default 8000].")]
_DataDirOpt = Annotated[
    Path | None, typer.Option(help="Directory for local state [env LONGTOOLS_DATA_DIR, default .longtools].")
]
_FixturesOpt = Annotated[
    bool | None,
    typer.Option(
        "--conformance-fixtures/--no-conformance-fixtures",
        help="Also serve the official conformance suite's fixtures (off by default).",
    ),
]
_ExamplesOpt = Annotated[
    bool | None,
    typer.Option("--examples/--no-examples", help="Serve the helpdesk example tools (on by default)."),
]
_ToolsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        metavar="MODULE",
        help="A module of your own tools to load (repeatable); it defines register(registry, settings) "
        "[env LONGTOOLS_TOOLS, comma-separated].",
    ),
]
_AddressOpt = Annotated[
    str | None,
    typer.Option(help="Temporal frontend host:port [env LONGTOOLS_TEMPORAL_ADDRESS]."),
]
_NoAuthOpt = Annotated[
    bool | None,
    typer.Option(
        "--no-auth",
        help="Serve without authentication (every caller is one principal) [env LONGTOOLS_NO_AUTH]. "
        "The default for `serve` on a loopback address when no token or JWT setting is given.",
        show_default=False,
    ),
]
_NamespaceOpt = Annotated[str | None, typer.Option(help="Temporal namespace [default 'default'].")]
_QueueOpt = Annotated[
    str | None, typer.Option(help="Temporal task queue of the long tools [default 'longtools'].")
]


def _settings(**overrides: Any) -> Settings:
    try:
        settings = Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as exc:
        _fail(f"invalid configuration: {_first_error(exc)}")
    configure_logging(settings)
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"cannot create the data directory {settings.data_dir}: {exc.strerror or exc}")
    return settings


def _auth_mode(settings: Settings, *, loopback_default: bool) -> Settings:
    """Authentication is on with any token or JWT setting; off only when asked (or by `serve` on loopback)."""
    if settings.auth_configured:
        if settings.no_auth:
            _fail("--no-auth contradicts the token/JWT settings given; drop one of them")
        return settings
    if not settings.no_auth:
        if not (loopback_default and _is_loopback(settings.host)):
            _fail(
                "authentication is not configured: set LONGTOOLS_AUTH_TOKENS (token=principal,...) or "
                "LONGTOOLS_JWT_SECRET / LONGTOOLS_JWT_JWKS, or pass --no-auth to serve everyone as one user"
            )
        settings = settings.model_copy(update={"no_auth": True})
    log.warning(
        "auth_off",
        detail="serving without authentication: every caller is the same user and can see every task",
    )
    return settings


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _registry(settings: Settings) -> Registry:
    try:
        return default_registry(settings)
    except ToolModuleError as exc:
        _fail(str(exc))


def _launch(options: dict[str, Any], *, listen: bool, worker: bool, embedded: bool) -> NoReturn:
    """What every command does with its options: settings, tools, socket, then run until stopped."""
    settings = _settings(**options)
    if listen:
        settings = _auth_mode(settings, loopback_default=embedded)
    registry = _registry(settings)
    sock = _listen(settings) if listen else None
    try:
        flush_traces = configure_tracing(settings)
    except TracingUnavailable as exc:
        _fail(str(exc))
    code = asyncio.run(_run(settings, registry, sock=sock, worker=worker, embedded=embedded))
    if flush_traces is not None:
        flush_traces()
    raise typer.Exit(code)


@cli.command()
def serve(
    host: _HostOpt = None,
    port: _PortOpt = None,
    data_dir: _DataDirOpt = None,
    conformance_fixtures: _FixturesOpt = None,
    examples: _ExamplesOpt = None,
    tools: _ToolsOpt = None,
    temporal_address: _AddressOpt = None,
    temporal_namespace: _NamespaceOpt = None,
    task_queue: _QueueOpt = None,
    no_auth: _NoAuthOpt = None,
) -> None:
    """Run everything (Temporal, a worker, the API) until Ctrl-C or SIGTERM; prints the MCP URL when ready.

    Without --temporal-address it starts the embedded Temporal dev server with its data in
    <data-dir>/temporal.db, so tasks survive a restart.
    """
    _launch(dict(locals()), listen=True, worker=True, embedded=True)


@cli.command()
def api(
    host: _HostOpt = None,
    port: _PortOpt = None,
    data_dir: _DataDirOpt = None,
    conformance_fixtures: _FixturesOpt = None,
    examples: _ExamplesOpt = None,
    tools: _ToolsOpt = None,
    temporal_address: _AddressOpt = None,
    temporal_namespace: _NamespaceOpt = None,
    task_queue: _QueueOpt = None,
    no_auth: _NoAuthOpt = None,
) -> None:
    """Run only the MCP API (stateless; run as many as you like) against an existing Temporal."""
    _launch(dict(locals()), listen=True, worker=False, embedded=False)


@cli.command()
def worker(
    data_dir: _DataDirOpt = None,
    conformance_fixtures: _FixturesOpt = None,
    examples: _ExamplesOpt = None,
    tools: _ToolsOpt = None,
    temporal_address: _AddressOpt = None,
    temporal_namespace: _NamespaceOpt = None,
    task_queue: _QueueOpt = None,
) -> None:
    """Run only a worker for the long tools (run as many as you like) against an existing Temporal."""
    _launch(dict(locals()), listen=False, worker=True, embedded=False)


@cli.command()
def keygen() -> None:
    """Print a new requestState key (for LONGTOOLS_STATE_KEYS)."""
    typer.echo(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())


# The terminal client --------------------------------------------------------------------------

_UrlArg = Annotated[str, typer.Argument(help="The server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp.")]
_TaskIdArg = Annotated[str, typer.Argument(help="The task's id (printed when it started).")]
_TokenOpt = Annotated[
    str | None, typer.Option(envvar="LONGTOOLS_TOKEN", help="Bearer token [env LONGTOOLS_TOKEN].")
]
_AnswerOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--answer",
        metavar="FIELD=VALUE",
        help="Answer a form field without a prompt (repeatable); any form naming FIELD takes it.",
    ),
]
_DebugOpt = Annotated[bool, typer.Option("--debug", help="Show a traceback for unexpected errors.")]

task_cli = typer.Typer(
    name="task",
    help="Look at, follow, answer or cancel a task on an MCP server (Tasks extension).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
cli.add_typer(task_cli)


@cli.command()
def call(
    url: _UrlArg,
    tool: Annotated[str, typer.Argument(help="The tool to call.")],
    arguments: Annotated[
        list[str] | None,
        typer.Argument(metavar="[KEY=VALUE]...", help="Tool arguments, typed by the tool's input schema."),
    ] = None,
    json_args: Annotated[
        str | None, typer.Option("--json", metavar="ARGS", help="Tool arguments as a JSON object.")
    ] = None,
    answer: _AnswerOpt = None,
    no_task: Annotated[
        bool, typer.Option("--no-task", help="Do not declare the tasks extension (MRTR rounds only).")
    ] = False,
    detach: Annotated[
        bool, typer.Option("--detach", help="If the tool starts a task, print its id and leave it running.")
    ] = False,
    raw: Annotated[bool, typer.Option("--raw", help="Print the result as raw JSON.")] = False,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """Call a tool on any MCP 2026-07-28 server, answering its questions at the prompt.

    A long tool runs as a task: a status line shows it working; Ctrl-C offers to cancel it or to
    leave it running and print its id.
    """
    request = _client.CallRequest(
        url=url,
        tool=tool,
        pairs=arguments or [],
        json_args=json_args,
        answers=answer or [],
        task=not no_task,
        token=token,
        raw=raw,
        detach=detach,
    )
    _run_client(lambda terminal: _client.call(request, terminal), debug)


@task_cli.command("get")
def task_get(
    url: _UrlArg,
    task_id: _TaskIdArg,
    raw: Annotated[bool, typer.Option("--raw", help="Print the task as raw JSON.")] = False,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """Show a task: its status, what it asks, its result."""
    _run_client(lambda terminal: _client.task_get(url, task_id, token, raw, terminal), debug)


@task_cli.command("watch")
def task_watch(
    url: _UrlArg,
    task_id: _TaskIdArg,
    answer: _AnswerOpt = None,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """Follow a task to its end, answering what it asks at the prompt."""
    _run_client(lambda terminal: _client.task_watch(url, task_id, token, answer or [], terminal), debug)


@task_cli.command("answer")
def task_answer(
    url: _UrlArg,
    task_id: _TaskIdArg,
    fields: Annotated[
        list[str] | None, typer.Argument(metavar="[FIELD=VALUE]...", help="Form fields of the answer.")
    ] = None,
    json_responses: Annotated[
        str | None,
        typer.Option("--json", metavar="RESPONSES", help="The inputResponses object as JSON, sent as is."),
    ] = None,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """Answer what a task asks, without prompts."""
    _run_client(
        lambda terminal: _client.task_answer(url, task_id, token, fields or [], json_responses, terminal),
        debug,
    )


@task_cli.command("cancel")
def task_cancel(url: _UrlArg, task_id: _TaskIdArg, token: _TokenOpt = None, debug: _DebugOpt = False) -> None:
    """Ask the server to cancel a task."""
    _run_client(lambda terminal: _client.task_cancel(url, task_id, token, terminal), debug)


def _run_client(command: Callable[[_client.Terminal], Coroutine[Any, Any, int]], debug: bool) -> NoReturn:
    terminal = _client.Terminal()
    try:
        code = asyncio.run(command(terminal))
    except KeyboardInterrupt:
        terminal.pause()
        code = 130
    except Exception as exc:
        terminal.pause()
        message = _client.explain(exc)
        if debug:
            traceback.print_exception(exc)
        if message is None:
            message = f"unexpected error ({type(exc).__name__}: {exc}); run with --debug for details"
        typer.echo(f"longtools: {message}", err=True)
        code = 1
    raise typer.Exit(code)


def _bind(host: str, port: int) -> socket.socket:
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
        return _bind(settings.host, settings.port)
    except OSError as exc:
        _fail(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}", code=1)


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
            log.info("temporal_started", address=dev.address, db=str(settings.data_dir / "temporal.db"))
        if worker and sock is None and not any(tool.workflow for tool in registry.tools.values()):
            typer.echo("longtools: no long tools are configured; a worker has nothing to run", err=True)
            return 2
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
                app = create_app(settings, registry, metrics)
            except AuthConfigError as exc:
                typer.echo(f"longtools: {exc}", err=True)
                return 2
            return await _serve(_uvicorn(settings, app), sock, settings.host)
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


def _uvicorn(settings: Settings, app: FastAPI) -> _Server:
    return _Server(
        uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_config=None,
            lifespan="on",
            timeout_graceful_shutdown=10,
        )
    )


async def _serve(server: _Server, sock: socket.socket, host: str) -> int:
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
        print(f"longtools serving MCP at http://{shown}:{port}/mcp", flush=True)  # noqa: T201
    return await task


class _Server(uvicorn.Server):
    """uvicorn that says when it accepts requests, and exits 0 (not by re-raising) on a stop signal."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

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


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"longtools: {message}", err=True)
    raise typer.Exit(code)


def main() -> None:
    code = 0
    try:
        cli()
    except KeyboardInterrupt:
        code = 130
    except SystemExit as exc:  # typer ends every command this way, success included
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without interpreter teardown: a process that used Temporal's Rust core can abort while
    # finalizing (temporalio/sdk-python#300, exit 134) after all its work is done.
    os._exit(code)
