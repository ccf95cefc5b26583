"""How long ``longtools serve`` takes to answer, from its start on a fresh data dir (issue 25).

``python bench/serve_start.py [--longtools PATH] [--out FILE]`` starts ``longtools serve --port 0
--data-dir <new tmp dir>`` (its embedded Temporal on free ports, so nothing else on the machine is
in the way), reads the URL it prints, and from the moment of the start measures until

- ``url_s``: the URL line is printed (uvicorn accepts connections);
- ``initialize_s``: a 2025-era ``initialize`` POSTed to ``/mcp`` answers 200 with a result;
- ``readyz_s``: ``GET /readyz`` answers 200 (Temporal reached: long tools can be served).

Then it stops the server with SIGTERM, waits for it, removes the data dir, and prints one JSON line
of the three figures (also appended to ``--out``). Only the standard library: the script's own
start-up stays out of the way of what it measures. Run it under a whole-process timer for medians,
one fresh data dir a run (bench/README.md, "serve start").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

_URL_LINE = re.compile(r"longtools serving MCP at (http://\S+/mcp)")
_POLL_S = 0.01
_BOUND_S = 60.0
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "serve-start-bench", "version": "0"},
    },
}


def _initialize(url: str) -> bool:
    request = urllib.request.Request(
        url,
        data=json.dumps(_INITIALIZE).encode(),
        headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status == 200 and b'"result"' in response.read()
    except (urllib.error.URLError, OSError):
        return False


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def measure(longtools: str) -> dict[str, float]:
    data_dir = Path(tempfile.mkdtemp(prefix="serve-start-"))
    # Free ports for the embedded Temporal too: a 7233 taken by another server must not fail a run.
    env = {**os.environ, "LONGTOOLS_TEMPORAL_PORT": "0", "LONGTOOLS_LOG_FORMAT": "json"}
    for unset in ("LONGTOOLS_STATE_KEYS", "LONGTOOLS_PAYLOAD_KEYS", "LONGTOOLS_TEMPORAL_ADDRESS"):
        env.pop(unset, None)  # a first start: serve makes its key rings and its Temporal
    started = time.monotonic()
    process = subprocess.Popen(
        [longtools, "serve", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=(data_dir.parent / f"{data_dir.name}.log").open("w"),
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        url = ""
        for line in process.stdout:  # the line comes or the process ends
            found = _URL_LINE.search(line)
            if found:
                url = found.group(1)
                break
        if not url:
            raise SystemExit(f"serve exited with {process.wait()} before printing its URL")
        figures = {"url_s": time.monotonic() - started}
        deadline = started + _BOUND_S
        while not _initialize(url):
            if time.monotonic() > deadline:
                raise SystemExit(f"no initialize answer within {_BOUND_S:g} s")
            time.sleep(_POLL_S)
        figures["initialize_s"] = time.monotonic() - started
        base = url.removesuffix("/mcp")
        while not _ready(base):
            if time.monotonic() > deadline:
                raise SystemExit(f"/readyz not 200 within {_BOUND_S:g} s")
            time.sleep(_POLL_S)
        figures["readyz_s"] = time.monotonic() - started
        return figures
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
        (data_dir.parent / f"{data_dir.name}.log").unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--longtools", default=str(Path(sys.executable).with_name("longtools")))
    parser.add_argument("--out", type=Path, help="also append the JSON line to this file")
    args = parser.parse_args()
    line = json.dumps({key: round(value, 3) for key, value in measure(args.longtools).items()})
    print(line, flush=True)  # noqa: T201
    if args.out is not None:
        with args.out.open("a") as out:
            out.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
