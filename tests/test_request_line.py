"""The one log event per request (``mcp_request``), which the gate writes itself with JSON lines: it
must read as structlog's own JSON line of the same event would, field for field and in the same
order. Ours (issue 35: structlog's pipeline was a tenth of a plain call's CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

_PROGRAM = """
import structlog
from longtools._logging import configure_logging, log_request
from longtools._settings import Settings

configure_logging(Settings(log_format={log_format!r}, state_keys=None))
fields = {{
    "http_method": "POST", "status": 200, "duration_ms": 1.25, "method": "tools/call",
    "tool": "caf\\u00e9 \\"quoted\\"", "era": "2026-07-28", "round": 1, "outcome": "complete",
}}
structlog.contextvars.bind_contextvars(request_tag="bound")
structlog.get_logger("longtools.http").info("mcp_request", **fields)
log_request(dict(fields))
"""


def _lines(log_format: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM.format(log_format=log_format)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stderr.splitlines()


def test_the_request_line_is_structlogs_json_line_of_the_same_event() -> None:
    structlogs, ours = (json.loads(line) for line in _lines("json"))
    assert list(ours) == list(structlogs)
    assert {**ours, "timestamp": None} == {**structlogs, "timestamp": None}
    assert ours["request_tag"] == "bound" and ours["tool"] == 'café "quoted"'
    # The same ISO 8601 UTC stamp, written once a second and the microseconds each time.
    stamped = datetime.fromisoformat(ours["timestamp"].replace("Z", "+00:00"))
    assert stamped.tzinfo == UTC and abs((datetime.now(UTC) - stamped).total_seconds()) < 60
    assert ours["timestamp"] == stamped.isoformat().replace("+00:00", "Z")


def test_a_console_request_line_is_structlogs_own() -> None:
    structlogs, ours = _lines("console")
    assert ours.split(" ", 1)[1] == structlogs.split(" ", 1)[1]  # the same but for the time
