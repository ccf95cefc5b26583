"""What ``longtools serve`` says when it cannot start: one line naming the place and the fix (issue 25).

Real processes: a tool module that cannot load, a port already taken, and the options that choose
every port serve binds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import PAYLOAD_KEY, STATE_KEY, free_port, start_server

_LONGTOOLS = str(Path(sys.executable).with_name("longtools"))


def _serve(
    tmp: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run ``longtools serve`` that is expected to fail; its exit code and its one line for a person."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    keys = {"LONGTOOLS_STATE_KEYS": STATE_KEY, "LONGTOOLS_PAYLOAD_KEYS": PAYLOAD_KEY}
    done = subprocess.run(
        [_LONGTOOLS, "serve", "--port", "0", "--data-dir", str(tmp / "data"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**base, **keys, "LONGTOOLS_LOG_FORMAT": "json", "LONGTOOLS_TEMPORAL_PORT": "0", **(env or {})},
    )
    assert "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip() and not _is_log_event(line)]
    assert len(said) == 1, done.stderr
    return done.returncode, said[0]


def _is_log_event(line: str) -> bool:
    try:
        return "event" in json.loads(line)
    except ValueError:
        return False


BROKEN_MODULES = {
    "syntax": ("def register(registry, settings):\n    tools = (\n", 2, "SyntaxError: '(' was never closed"),
    "import": (
        "import os\nfrom no_such_dependency_here import thing\n",
        2,
        "ModuleNotFoundError: No module named 'no_such_dependency_here'",
    ),
    "top_level": ("LIMIT = 10\nRATIO = LIMIT / 0\n", 2, "ZeroDivisionError: division by zero"),
    "register": (
        "def _schema():\n    raise KeyError('ticket')\n\n\n"
        "def register(registry, settings):\n    _schema()\n",
        2,
        "register() failed",
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN_MODULES))
def test_a_broken_tool_module_is_one_line_with_its_file_and_line(tmp_path: Path, kind: str) -> None:
    source, line, what = BROKEN_MODULES[kind]
    module = tmp_path / f"broken_{kind}.py"
    module.write_text(source)
    code, said = _serve(tmp_path, "--tools", module.stem, env={"PYTHONPATH": str(tmp_path)})
    assert code == 2
    assert said.startswith("longtools: ") and f"'{module.stem}'" in said
    assert f"{module}:{line}: " in said, said
    assert what in said, said
    if kind == "register":
        assert "KeyError: 'ticket'" in said


def test_a_tool_module_only_in_the_current_directory_says_to_put_it_on_the_path(tmp_path: Path) -> None:
    (tmp_path / "mytools.py").write_text("def register(registry, settings):\n    pass\n")
    code, said = _serve(tmp_path, "--tools", "mytools", cwd=tmp_path)
    assert code == 2
    assert f"{tmp_path / 'mytools.py'} is in the current directory" in said
    assert "PYTHONPATH=." in said


def test_a_tool_module_nowhere_says_how_to_make_it_importable(tmp_path: Path) -> None:
    code, said = _serve(tmp_path, "--tools", "no_such_tools_anywhere", cwd=tmp_path)
    assert code == 2
    assert "no module named 'no_such_tools_anywhere'" in said and "PYTHONPATH" in said


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def test_a_taken_api_port_names_the_option_that_moves_it(tmp_path: Path, taken_port: int) -> None:
    code, said = _serve(tmp_path, "--port", str(taken_port))
    assert code == 1
    assert f"127.0.0.1:{taken_port}" in said and "in use" in said
    assert "--port" in said and "LONGTOOLS_PORT" in said


@pytest.mark.parametrize(
    ("option", "variable"),
    [("--temporal-port", "LONGTOOLS_TEMPORAL_PORT"), ("--temporal-ui-port", "LONGTOOLS_TEMPORAL_UI_PORT")],
)
def test_a_taken_temporal_port_names_the_option_that_moves_it(
    tmp_path: Path, taken_port: int, option: str, variable: str
) -> None:
    code, said = _serve(tmp_path, option, str(taken_port))
    assert code == 1
    assert f"port {taken_port} on 127.0.0.1 is already in use" in said
    assert f"{option} ({variable})" in said


def test_serve_help_lists_every_port_it_binds() -> None:
    shown = subprocess.run([_LONGTOOLS, "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    for option in ("--port", "--temporal-port", "--temporal-ui-port"):
        assert f"{option} <int>" in shown, shown
    for variable in ("LONGTOOLS_PORT", "LONGTOOLS_TEMPORAL_PORT", "LONGTOOLS_TEMPORAL_UI_PORT"):
        assert variable in shown
    assert "HTTP API and metrics" in " ".join(shown.split())


def test_the_embedded_temporal_serves_its_web_ui_on_the_port_asked_for(tmp_path: Path) -> None:
    ui_port = free_port()
    served = start_server(tmp_path, "--temporal-ui-port", str(ui_port))
    try:
        deadline = time.monotonic() + 30
        status = 0
        while time.monotonic() < deadline:
            try:
                status = httpx.get(f"http://127.0.0.1:{ui_port}/", timeout=5).status_code
            except httpx.TransportError:
                status = 0
            if status == 200:
                break
            time.sleep(0.1)
        assert status == 200
        started = [
            json.loads(line) for line in served.log_text().splitlines() if '"temporal_started"' in line
        ]
        assert started and started[0]["ui"] == f"http://127.0.0.1:{ui_port}"
    finally:
        served.stop()
