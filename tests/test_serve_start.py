"""What makes ``longtools serve`` start fast, checked without a clock (issue 25; the figures are in
bench/README.md, "serve start"): the embedded Temporal is launched before the server side is
imported, and the worker names its code without the SDK's default build id, which compiles every
loaded module when there are no .pyc files.
"""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
from pathlib import Path

from longtools._settings import Settings
from longtools.temporal import build_worker, connect, start_dev_server
from longtools.temporal._worker import build_id
from longtools.tools import default_registry
from tests.conftest import PAYLOAD_KEY

_HEAVY = ("fastapi", "uvicorn", "mcp", "temporalio", "longtools.server", "longtools.tools")


def test_the_dev_server_is_launched_before_the_server_side_is_imported(tmp_path: Path) -> None:
    # A fresh interpreter: what launching Temporal costs is what `serve` pays before it starts.
    script = f"""
import sys
from pathlib import Path
from longtools.cli._launch import launch
from longtools.temporal import DevServerStart
start = DevServerStart(Path({str(tmp_path / "temporal.db")!r}))
start.launch()
start.discard()
print(sorted({{name.split(".")[0] if not name.startswith("longtools.") else ".".join(name.split(".")[:2])
              for name in sys.modules}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = set(eval(done.stdout))
    assert not loaded & set(_HEAVY), loaded & set(_HEAVY)


def test_the_worker_names_its_code_without_the_sdks_default_build_id(tmp_path: Path) -> None:
    async def built() -> str:
        dev = await start_dev_server(tmp_path / "temporal.db")
        try:
            settings = Settings(temporal_address=dev.address, payload_keys=PAYLOAD_KEY, data_dir=tmp_path)
            client = await connect(settings)
            worker = build_worker(settings, client, default_registry(settings))
            return str(worker.config()["build_id"])
        finally:
            dev.stop()

    # Given, so the SDK's default (a hash of every loaded module's bytecode) is never computed.
    assert asyncio.run(built()).startswith("longtools-")


def test_the_build_id_changes_with_the_tools_source(tmp_path: Path) -> None:
    module = tmp_path / "build_id_tools.py"
    module.write_text("def step() -> int:\n    return 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        tools = importlib.import_module("build_id_tools")
        first = build_id([tools.step])
        assert build_id([tools.step]) == first
        module.write_text("def step() -> int:\n    return 2\n")
        assert build_id([tools.step]) != first
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("build_id_tools", None)
