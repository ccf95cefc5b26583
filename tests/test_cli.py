"""``longtools serve`` and ``longtools keygen`` as a person runs them: real processes, real signals."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import start_server
from tests.wire import post, result

_LONGTOOLS = str(Path(sys.executable).with_name("longtools"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_url_answers_health_and_stops_cleanly_on_a_signal(tmp_path: Path, sig: int) -> None:
    served = start_server(tmp_path)
    assert httpx.get(f"{served.base}/healthz").json() == {"status": "ok"}
    assert result(post(served.url, "server/discover"))["supportedVersions"] == ["2026-07-28"]
    assert served.stop(sig) == 0
    log = served.log_text()
    assert "Traceback" not in log
    assert '"event": "stopped"' in log


def test_serve_writes_one_json_event_per_request_without_bodies(tmp_path: Path) -> None:
    served = start_server(tmp_path, "--conformance-fixtures")
    try:
        post(served.url, "tools/call", {"name": "echo", "arguments": {"text": "secret-argument-value"}})
        post(served.url, "tools/explode")
        post(served.url, "tools/call", {"name": "test_error_handling", "arguments": {}})
    finally:
        served.stop()
    events = [line for line in served.log_text().splitlines() if '"mcp_request"' in line]
    assert len(events) == 3
    assert '"method": "tools/call"' in events[0] and '"tool": "echo"' in events[0]
    assert '"outcome": "complete"' in events[0] and '"duration_ms"' in events[0]
    assert '"outcome": "error -32601"' in events[1] and '"status": 404' in events[1]
    assert '"outcome": "tool_error"' in events[2]
    assert "secret-argument-value" not in served.log_text()


def test_without_state_keys_serve_warns_loudly_and_still_serves(tmp_path: Path) -> None:
    served = start_server(tmp_path, env={"LONGTOOLS_STATE_KEYS": ""})
    served.stop()
    assert "state_keys_unset" in served.log_text()


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_LONGTOOLS, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def test_a_malformed_state_key_is_one_clear_line_naming_the_fix(tmp_path: Path) -> None:
    done = _run(
        "serve", "--port", "0", "--data-dir", str(tmp_path), env={"LONGTOOLS_STATE_KEYS": "not-a-key"}
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "URL-safe base64 of 32 bytes" in done.stderr
    assert "longtools keygen" in done.stderr


def test_a_port_in_use_fails_with_a_clear_message(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run("serve", "--port", str(port), "--data-dir", str(tmp_path))
    assert done.returncode == 1
    assert "address already in use" in done.stderr.lower()
    assert "Traceback" not in done.stderr


def test_keygen_prints_a_key_serve_accepts() -> None:
    done = _run("keygen")
    key = done.stdout.strip()
    assert len(base64.urlsafe_b64decode(key)) == 32


def test_a_configured_public_host_is_served_behind_a_proxy_and_others_are_refused(tmp_path: Path) -> None:
    """DNS-rebinding guard: loopback and configured hosts only; a proxy's public name is configurable."""
    served = start_server(
        tmp_path,
        env={
            "LONGTOOLS_ALLOWED_HOSTS": "mcp.example.com",
            "LONGTOOLS_ALLOWED_ORIGINS": "https://app.example.com",
        },
    )
    try:
        proxied = post(served.url, "server/discover", headers={"host": "mcp.example.com"})
        assert result(proxied)["supportedVersions"] == ["2026-07-28"]
        assert post(served.url, "server/discover", headers={"host": "evil.example.net"}).status_code == 421
        allowed = post(served.url, "server/discover", headers={"origin": "https://app.example.com"})
        assert allowed.status_code == 200
        assert (
            post(served.url, "server/discover", headers={"origin": "https://evil.example.net"}).status_code
            == 403
        )
    finally:
        served.stop()


def test_the_listening_socket_is_tcp_so_responses_are_not_delayed() -> None:
    """Regression: with proto 0 asyncio skips TCP_NODELAY and each two-part response waited ~40 ms
    for a delayed ACK (echo p50 44 ms instead of 2 ms). Pinned here by cause, since timing belongs
    to the benchmarks, not the tests."""
    from service._cli import _bind

    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_console_logs_are_lines_for_people_not_json(tmp_path: Path) -> None:
    served = start_server(tmp_path, env={"LONGTOOLS_LOG_FORMAT": "console"})
    try:
        post(served.url, "server/discover")
    finally:
        served.stop()
    lines = [line for line in served.log_text().splitlines() if "mcp_request" in line]
    assert len(lines) == 1
    assert not lines[0].lstrip().startswith("{")
    assert "method=server/discover" in lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--port", "70000"), "port: Input should be less than or equal to 65535"),
        (("--port", "0", "--data-dir", "/proc/longtools-cannot-be-here"), "cannot create the data directory"),
    ],
)
def test_bad_options_are_one_line_with_exit_2(args: tuple[str, ...], expected: str) -> None:
    done = _run("serve", *args)
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
