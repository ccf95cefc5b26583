"""``longtools serve`` and ``longtools keygen`` as a person runs them: real processes, real signals."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from longtools.temporal import start_dev_server
from tests.conftest import (
    PAYLOAD_KEY,
    STATE_KEY,
    URL_LINE,
    Served,
    free_port,
    spawn,
    start_server,
    wait_for_line,
)
from tests.wire import error, post, result

_LONGTOOLS = str(Path(sys.executable).with_name("longtools"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_url_answers_health_and_stops_cleanly_on_a_signal(tmp_path: Path, sig: int) -> None:
    served = start_server(tmp_path)
    assert httpx.get(f"{served.base}/livez").json() == {"status": "ok"}
    assert httpx.get(f"{served.base}/readyz").json() == {"status": "ok"}
    assert httpx.get(f"{served.base}/healthz").status_code == 404  # replaced by the two above
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


def test_without_state_keys_serve_keeps_a_generated_ring_in_its_data_dir(tmp_path: Path) -> None:
    served = start_server(tmp_path, env={"LONGTOOLS_STATE_KEYS": ""})
    served.stop()
    assert '"key_file_created"' in served.log_text()
    assert (tmp_path / "data" / "keys.json").exists()


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # The key rings a deployment has (as spawn gives them), so that what a test checks is reached.
    keys = {"LONGTOOLS_STATE_KEYS": STATE_KEY, "LONGTOOLS_PAYLOAD_KEYS": PAYLOAD_KEY}
    return subprocess.run(
        [_LONGTOOLS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **keys, **(env or {})},
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


def test_a_second_serve_on_the_same_data_dir_is_refused_naming_the_first_and_writes_nothing(
    tmp_path: Path,
) -> None:
    first = start_server(tmp_path)  # its data dir is tmp_path/data; its key rings come from the environment
    data = tmp_path / "data"
    try:
        names = sorted(path.name for path in data.iterdir())
        lock = (data / "serve.lock").read_text()
        # Without rings in the environment it would make keys.json, had it got that far.
        no_keys = {"LONGTOOLS_STATE_KEYS": "", "LONGTOOLS_PAYLOAD_KEYS": "", "LONGTOOLS_TEMPORAL_PORT": "0"}
        second = _run("serve", "--port", "0", "--data-dir", str(data), env=no_keys)
        assert second.returncode == 1
        assert second.stderr.startswith(
            f"longtools: the data dir {data} is in use by another `longtools serve`"
            f" (pid {first.process.pid}: longtools serve --port 0 --data-dir"
        )
        assert "another --data-dir (LONGTOOLS_DATA_DIR)" in second.stderr
        assert sorted(path.name for path in data.iterdir()) == names
        assert (data / "serve.lock").read_text() == lock
    finally:
        assert first.stop() == 0


def test_the_data_dir_is_free_again_once_its_serve_is_gone_even_by_sigkill(tmp_path: Path) -> None:
    first = start_server(tmp_path)
    first.stop(signal.SIGKILL)  # no clean-up of its own: the kernel drops the lock
    second = start_server(tmp_path)
    assert second.stop() == 0


def test_a_start_refused_for_a_port_in_use_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        no_keys = {"LONGTOOLS_STATE_KEYS": "", "LONGTOOLS_PAYLOAD_KEYS": ""}
        done = _run("serve", "--port", str(port), "--data-dir", str(data), env=no_keys)
    assert done.returncode == 1
    assert "address already in use" in done.stderr.lower()
    assert not data.exists()  # no data dir, no keys.json, no lock, no temporal.db


def test_serve_says_once_that_its_session_manager_started_and_once_that_it_stopped(tmp_path: Path) -> None:
    """The API runs two of the SDK's session managers (one streams, one answers in JSON)."""
    served = start_server(tmp_path)
    assert served.stop() == 0
    log = served.log_text()
    assert log.count("StreamableHTTP session manager started") == 1
    assert log.count("StreamableHTTP session manager shutting down") == 1


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
    from longtools.cli._launch import bind as _bind

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


def test_serve_stops_its_embedded_temporal_with_it(tmp_path: Path) -> None:
    served = start_server(tmp_path)
    started = next(line for line in served.log_text().splitlines() if '"temporal_started"' in line)
    host, port = json.loads(started)["address"].rsplit(":", 1)
    assert (tmp_path / "data" / "temporal.db").is_file()
    assert served.stop() == 0
    with socket.socket() as probe:
        assert probe.connect_ex((host, int(port))) != 0  # nobody listens there any more


def test_api_without_temporal_serves_quick_tools_and_says_it_is_unhealthy(tmp_path: Path) -> None:
    process, log_path = spawn(
        tmp_path,
        [
            "api",
            "--port",
            "0",
            "--no-auth",
            "--conformance-fixtures",
            "--temporal-address",
            f"127.0.0.1:{free_port()}",
        ],
        None,
    )
    api = Served(process=process, url=wait_for_line(process, log_path, URL_LINE, 30), log_path=log_path)
    try:
        live = httpx.get(f"{api.base}/livez")
        assert live.status_code == 200 and live.json() == {"status": "ok"}
        ready = httpx.get(f"{api.base}/readyz")
        assert ready.status_code == 503 and ready.json() == {"status": "temporal unavailable"}
        echoed = result(post(api.url, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
        assert echoed["structuredContent"] == {"text": "hi"}
        long_call = post(api.url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 1}})
        assert error(long_call, 200) == {  # the SDK maps -32603 to 200
            "code": -32603,
            "message": "The task service is unavailable; try again shortly",
        }
    finally:
        api.stop()
    assert "Traceback" not in api.log_text()


def test_a_worker_that_cannot_reach_temporal_says_so(tmp_path: Path) -> None:
    """A worker with no long tool still starts (it runs the run-once records; see test_promises)."""
    done = _run("worker", "--no-examples", "--data-dir", str(tmp_path), "--temporal-address", "127.0.0.1:1")
    assert done.returncode == 1
    assert "cannot reach Temporal at 127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_tool_module_that_cannot_load_is_one_line(tmp_path: Path) -> None:
    done = _run("serve", "--port", "0", "--data-dir", str(tmp_path), "--tools", "no_such_module_here")
    assert done.returncode == 2
    assert "cannot import tool module 'no_such_module_here'" in done.stderr
    assert "Traceback" not in done.stderr


def _readme_tool_module() -> str:
    """The long-tool example of README.md, verbatim, so the documentation cannot rot."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("```python\n# mytools.py", 1)[1].split("```", 1)[0]
    return "# mytools.py" + block


def test_the_readme_long_tool_module_loads_with_tools_and_runs(tmp_path: Path) -> None:
    (tmp_path / "mytools.py").write_text(_readme_tool_module())
    env = {"PYTHONPATH": str(tmp_path), "LONGTOOLS_TOOLS": "mytools"}
    served = start_server(tmp_path, "--no-examples", env=env)
    try:
        listed = {tool["name"] for tool in result(post(served.url, "tools/list"))["tools"]}
        assert {"careful_delete", "echo"} <= listed and "bulk_close_tickets" not in listed
        call = {"name": "careful_delete", "arguments": {"path": "/tmp/x"}}
        asked = result(post(served.url, "tools/call", call))
        (key,) = asked["inputRequests"]
        assert asked["inputRequests"][key]["params"]["message"] == "Delete /tmp/x?"
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        retry = {**call, "requestState": asked["requestState"], "inputResponses": answer}
        done = result(post(served.url, "tools/call", retry))
        assert done["content"] == [{"type": "text", "text": "Deleted /tmp/x"}]
    finally:
        served.stop()


@pytest.mark.parametrize("command", ["serve", "api", "worker"])
def test_help_names_the_environment_variables(command: str) -> None:
    shown = _run(command, "--help").stdout
    assert "LONGTOOLS_DATA_DIR" in shown and "LONGTOOLS_TEMPORAL_ADDRESS" in shown
    assert "--temporal-namespace" in shown and "--task-queue" in shown and "--tools MODULE" in shown


def test_serve_with_a_temporal_address_uses_that_temporal_and_starts_none(tmp_path: Path) -> None:
    temporal = asyncio.run(start_dev_server(tmp_path / "elsewhere" / "temporal.db"))
    try:
        served = start_server(tmp_path, "--conformance-fixtures", "--temporal-address", temporal.address)
        try:
            caps: dict[str, Any] = {
                "elicitation": {"form": {}},
                "extensions": {"io.modelcontextprotocol/tasks": {}},
            }
            created = result(
                post(
                    served.url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}, caps=caps
                )
            )
            assert created["resultType"] == "task"
        finally:
            served.stop()
        assert not (tmp_path / "data" / "temporal.db").exists()
        assert '"temporal_started"' not in served.log_text()
    finally:
        temporal.stop()


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (("api", "--port", "0"), {}, "authentication is not configured"),
        (("serve", "--port", "0", "--host", "0.0.0.0"), {}, "authentication is not configured"),
        (
            ("api", "--port", "0", "--no-auth"),
            {"LONGTOOLS_AUTH_TOKENS": "a-token-of-enough-length=alice"},
            "--no-auth contradicts",
        ),
        (("api", "--port", "0"), {"LONGTOOLS_AUTH_TOKENS": "short=alice"}, "at least 16 characters"),
        (("api", "--port", "0"), {"LONGTOOLS_JWT_SECRET": "too-short"}, "LONGTOOLS_JWT_SECRET"),
        (("api", "--port", "0"), {"LONGTOOLS_JWT_JWKS": "/no/such/jwks.json"}, "cannot read"),
        (("api", "--port", "0", "--no-auth"), {"LONGTOOLS_TRACES": "sideways"}, "traces"),
    ],
)
def test_an_auth_or_tracing_setup_that_cannot_work_is_refused_in_one_line(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    done = _run(*args, "--data-dir", str(tmp_path), "--temporal-address", "127.0.0.1:1", env=env)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr and "a-token-of-enough-length" not in done.stderr
