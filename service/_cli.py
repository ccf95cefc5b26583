"""The ``longtools`` command line. Runs in the foreground process it was started in."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import structlog
import typer
import uvicorn
from pydantic import ValidationError

from service._app import create_app
from service._logging import configure_logging
from service._settings import Settings

cli = typer.Typer(
    name="longtools",
    help="An MCP server (2026-07-28, stateless Streamable HTTP) for long-running tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
log = structlog.get_logger("longtools.cli")


@cli.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind [env LONGTOOLS_HOST, default 127.0.0.1].")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind; 0 picks a free one [default 8000].")] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Directory for local state [env LONGTOOLS_DATA_DIR, default .longtools]."),
    ] = None,
    conformance_fixtures: Annotated[
        bool | None,
        typer.Option(
            "--conformance-fixtures/--no-conformance-fixtures",
            help="Also serve the official conformance suite's fixtures (off by default).",
        ),
    ] = None,
) -> None:
    """Run the service until Ctrl-C or SIGTERM; prints the MCP URL once it accepts requests."""
    overrides: dict[str, Any] = {
        key: value
        for key, value in {
            "host": host,
            "port": port,
            "data_dir": data_dir,
            "conformance_fixtures": conformance_fixtures,
        }.items()
        if value is not None
    }
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        _fail(f"invalid configuration: {_first_error(exc)}")
    configure_logging(settings)
    try:
        sock = _bind(settings.host, settings.port)
    except OSError as exc:
        _fail(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}", code=1)
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        sock.close()
        _fail(f"cannot create the data directory {settings.data_dir}: {exc.strerror or exc}")
    app = create_app(settings)
    server = _Server(
        uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_config=None,
            lifespan="on",
            timeout_graceful_shutdown=10,
        )
    )
    code = asyncio.run(_serve(server, sock, settings.host))
    raise typer.Exit(code)


@cli.command()
def keygen() -> None:
    """Print a new requestState key (for LONGTOOLS_STATE_KEYS)."""
    typer.echo(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())


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
    code = await task
    if code == 0:
        log.info("stopped")
    return code


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
    try:
        cli()
    except KeyboardInterrupt:
        sys.exit(130)
