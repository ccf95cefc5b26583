"""Shared fixtures: real ``longtools serve`` processes on real loopback ports, always stopped."""

from __future__ import annotations

import base64
import ctypes
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

_URL_LINE = re.compile(r"longtools serving MCP at (http://\S+/mcp)")
_LONGTOOLS = str(Path(sys.executable).with_name("longtools"))
STATE_KEY = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


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


def start_server(tmp: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30) -> Served:
    """Start ``longtools serve --port 0`` and wait (bounded) for its URL line and /healthz."""
    log_path = tmp / f"server-{secrets.token_hex(4)}.log"
    full_env = {
        **os.environ,
        "LONGTOOLS_LOG_FORMAT": "json",
        "LONGTOOLS_STATE_KEYS": STATE_KEY,
        # Each server gets its own embedded Temporal on a free port (7233 may be taken).
        "LONGTOOLS_TEMPORAL_PORT": "0",
        **(env or {}),
    }
    with log_path.open("w") as log_file:
        process = subprocess.Popen(
            [_LONGTOOLS, "serve", "--port", "0", "--data-dir", str(tmp / "data"), *args],
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env=full_env,
            preexec_fn=_die_with_parent,
        )
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    url = None
    while url is None and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        found = _URL_LINE.search(line)
        url = found.group(1) if found else None
    if url is None:
        process.kill()
        process.wait()
        process.stdout.close()
        raise RuntimeError(f"longtools serve did not start:\n{log_path.read_text()}")
    served = Served(process=process, url=url, log_path=log_path)
    while time.monotonic() < deadline:
        if httpx.get(f"{served.base}/healthz").status_code == 200:
            return served
    served.stop()
    raise RuntimeError("longtools serve never became healthy")


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
