"""Child processes of the benchmark: started in their own process group, always stopped.

Every child gets ``PR_SET_PDEATHSIG`` (SIGTERM when the harness dies, even by SIGKILL) and its own
session, so `Child.stop` can signal the whole group. Output goes to a log file in the run's
temporary directory; readiness is a line in that log (each server prints its URL once it accepts
connections). A child may be pinned to a set of CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ctypes
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.load import Failed, cpu_seconds, tree

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LOG_TAIL = 2_000


class StartFailed(Exception):
    """A child exited or never became ready (the message ends with its log's tail)."""


def child_setup(cpus: set[int] | None) -> Callable[[], None]:
    """A ``preexec_fn``: die with the parent, and run on ``cpus`` when given."""

    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


class Child:
    """A running child process and its log."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.name = name
        self.process = process
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text[-_LOG_TAIL:]

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        """The first log line that matches ``pattern``, waiting up to ``timeout`` seconds.

        Raises:
            StartFailed: the child exited first, or the time ran out.
        """
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                found = pattern.search(self.log_path.read_text(errors="replace"))
                if found is not None:
                    return found
            if self.process.poll() is not None:
                code = self.process.returncode
                raise StartFailed(f"{self.name} exited with code {code}; its log ends:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise StartFailed(
                    f"{self.name} was not ready within {timeout:g} s; its log ends:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the group, then SIGKILL after ``timeout`` seconds; safe to call twice."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever of the group is still there
        self.process.wait()


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    log_dir: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    cpus: set[int] | None = None,
) -> Child:
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            preexec_fn=child_setup(cpus),  # safe: the harness runs no other threads
        )
    return Child(name, process, log_path)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, child: Child, timeout: float) -> None:
    """Until 127.0.0.1:``port`` accepts a connection.

    Raises:
        StartFailed: the child exited first, or the time ran out.
    """
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if child.process.poll() is not None:
            raise StartFailed(
                f"{child.name} exited with code {child.process.returncode}:\n{child.log_tail()}"
            )
        if time.monotonic() > deadline:
            raise StartFailed(
                f"{child.name} did not listen on {port} within {timeout:g} s:\n{child.log_tail()}"
            )
        time.sleep(0.05)


def wait_idle(pids: list[int], *, share: float = 0.05, window: float = 0.5, timeout: float = 60.0) -> float:
    """Until ``pids`` (with descendants) use less than ``share`` of a core over ``window`` seconds,
    at most ``timeout`` seconds; returns the seconds waited. Keeps a backlog one run left behind
    (e.g. Temporal finishing workflows) out of the next run's window."""
    started = time.monotonic()
    group = tree(pids)
    before = cpu_seconds(group)
    while time.monotonic() - started < timeout:
        time.sleep(window)
        after = cpu_seconds(group)
        if after - before < share * window:
            break
        before = after
    return time.monotonic() - started


ROOT = Path(__file__).resolve().parent.parent
SERVING = re.compile(r"serving MCP at http://127\.0\.0\.1:(\d+)/mcp")
"""The line `longtools serve`/`api` prints once it accepts connections; group 1 is the port."""
WORKER_READY = re.compile(r"longtools worker polling")
KEY_RINGS: Mapping[str, str] = {
    # One ring of each per benchmark run, shared by its `api`, `worker` and `serve` processes as a
    # deployment's are: `api` and `worker` refuse to start without them.
    "LONGTOOLS_STATE_KEYS": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    "LONGTOOLS_PAYLOAD_KEYS": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
}
BENCH_LIMITS: Mapping[str, str] = {
    # Every benchmark client is the one anonymous principal, and B5 parks 10,000 tasks: the
    # per-principal bounds that protect a deployment would refuse the load itself.
    "LONGTOOLS_MAX_ACTIVE_TASKS_PER_PRINCIPAL": "1000000",
    "LONGTOOLS_MAX_HELD_ROUNDS_PER_PRINCIPAL": "100000",
    "LONGTOOLS_MAX_HELD_ROUNDS": "100000",
    # B8 opens its 200 streams at once.
    "LONGTOOLS_MAX_LISTEN_OPENS_PER_MINUTE": "100000",
}
LONGTOOLS_ENV: Mapping[str, str] = {
    "PYTHONPATH": str(ROOT),
    "LONGTOOLS_LOG_FORMAT": "json",
    **KEY_RINGS,
    **BENCH_LIMITS,
}


def longtools_python() -> Path:
    """The repository's venv interpreter when longtools is installed there, else this one."""
    repo_venv = ROOT / ".venv" / "bin" / "python"
    return repo_venv if (ROOT / ".venv" / "bin" / "longtools").exists() else Path(sys.executable)


def start_temporal(bin_dir: Path, work: Path, *, on_disk: bool = True) -> tuple[Child, str]:
    """A Temporal dev server with the flags `longtools serve` uses; returns it and its host:port.
    ``on_disk=False`` leaves out the database file: Temporal keeps everything in memory."""
    port = free_port()
    database = ["--db-filename", str(work / "temporal.db")] if on_disk else []
    temporal = spawn(
        "temporal",
        [
            str(bin_dir / "temporal"),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            *database,
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            "synchronous=full",
            "--namespace",
            "default",
            "--log-level",
            "warn",
            "--headless",
            "--dynamic-config-value",
            "frontend.enableServerVersionCheck=false",
        ],
        log_dir=work,
        cwd=work,
    )
    wait_for_port(port, temporal, 30)
    return temporal, f"127.0.0.1:{port}"


def start_ready(start: Callable[[int], Child], ready: re.Pattern[str]) -> Child:
    """``start(attempt)`` until its child logs ``ready``: the Temporal frontend may listen a moment
    before its namespace answers, so a first worker can fail; three attempts."""
    for attempt in range(3):
        child = start(attempt)
        try:
            child.wait_for(ready, 60)
        except StartFailed:
            child.stop()
            if attempt == 2:
                raise
            time.sleep(1)
            continue
        return child
    raise AssertionError("unreachable")


def start_worker(bin_dir: Path, work: Path, temporal: str, tools: str) -> Child:
    """A `longtools worker` for the tool module ``tools``, once it polls."""
    argv = [str(bin_dir / "longtools"), "worker", "--tools", tools, "--temporal-address", temporal]
    return start_ready(
        lambda attempt: spawn(
            f"worker-{attempt}",
            [*argv, "--data-dir", str(work / "worker")],
            log_dir=work,
            cwd=ROOT,
            env=LONGTOOLS_ENV,
        ),
        WORKER_READY,
    )


class Stack:
    """One run's processes by role (``temporal``, ``worker``, ``api``); a subclass starts them."""

    def __init__(self) -> None:
        self.children: dict[str, Child] = {}
        self.port = 0

    @property
    def roots(self) -> dict[str, list[int]]:
        return {role: [child.pid] for role, child in self.children.items()}

    @property
    def pids(self) -> list[int]:
        return [child.pid for child in self.children.values()]

    def logs(self) -> str:
        return "\n".join(f"--- {role}:\n{child.log_tail()}" for role, child in self.children.items())

    def stop(self) -> None:
        """The API first, then the worker, then Temporal."""
        for role in ("api", "worker", "temporal"):
            child = self.children.pop(role, None)
            if child is not None:
                child.stop()


Operation = Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]


def generate_main(operations: Mapping[str, Operation]) -> None:
    """A generator subprocess: one operation, its spec as JSON on stdin, its outcome on stdout."""
    spec = json.load(sys.stdin)
    try:
        outcome: dict[str, Any] = asyncio.run(operations[spec["op"]](spec))
    except (Failed, OSError, ValueError, asyncio.IncompleteReadError) as exc:
        outcome = {"ok": False, "problem": f"{type(exc).__name__}: {exc}"}
    json.dump(outcome, sys.stdout)
    sys.stdout.write("\n")


def row_arguments(module: str, doc: str | None, *, code: bool = False) -> argparse.ArgumentParser:
    """A row's command line, with the arguments every row takes: the interpreter with longtools,
    ``--no-pin``, ``--json``, the hidden ``--generate`` (``row_main``), and with ``code`` the tree
    whose ``longtools/`` is measured, for an A/B."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=(doc or "").split("\n\n")[0])
    parser.add_argument(
        "--python-longtools", type=Path, default=longtools_python(), help="interpreter with longtools"
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin the API and the generator")
    if code:
        parser.add_argument(
            "--code", type=Path, default=ROOT, help="the tree whose longtools/ is measured (default: here)"
        )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    return parser


def row_main(
    args: argparse.Namespace,
    operations: Mapping[str, Operation],
    measure: Callable[[Path], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """A row's ``main`` once its arguments are parsed (``row_arguments``): as a generator, one
    operation (``generate_main``); else ``measure`` in a temporary directory, its figures printed
    (and written to ``--json``); 0 when they are ``ok``."""
    if args.generate:
        generate_main(operations)
        # The outcome is written. The Temporal client's runtime threads may still call into Python
        # while the interpreter finalizes (once a fatal "PyGILState_Release" at exit): leave at once.
        sys.stdout.flush()
        os._exit(0)
    with tempfile.TemporaryDirectory(prefix="longtools-bench-") as tmp:
        result = measure(Path(tmp))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(render(result))  # noqa: T201
    return 0 if result["ok"] else 1


class Generator:
    """Runs one operation in ``python -m module --generate``, pinned to ``cpus`` (see ``generate_main``),
    on ``python`` (default: this interpreter; B9 and B10 use longtools' for its httpx, aiosmtpd and
    Temporal client)."""

    def __init__(self, module: str, cpus: set[int] | None, python: Path | None = None) -> None:
        self._module = module
        self._cpus = cpus
        self._python = python or Path(sys.executable)

    def __call__(self, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        done = subprocess.run(
            [str(self._python), "-m", self._module, "--generate"],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout,
            check=False,
            preexec_fn=child_setup(self._cpus),  # safe: the harness runs no other threads
        )
        if done.returncode != 0:
            raise Failed(f"the generator failed ({spec['op']}): {done.stderr[-1500:]}")
        outcome: dict[str, Any] = json.loads(done.stdout)
        if not outcome.get("ok"):
            raise Failed(f"{spec['op']}: {outcome.get('problem')}")
        return outcome
