"""The benchmark harness runs end to end with tiny counts (bench/, issue 6).

Only the floor and longtools, both of which this venv has, so the test installs nothing and needs
no network. It asserts that the harness produced its rows and that the figures are positive, never
how fast anything was: timings are the benchmark's business, not the test suite's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(120)
def test_a_quick_b1_and_b1l_run_measures_the_floor_and_longtools(tmp_path: Path) -> None:
    """Ours: `python -m bench --quick` starts each server, checks it, loads it and writes the results;
    B1L drives the same longtools through the 2025-era generator (a session per connection)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--only",
            "B1,B1L",
            "--impl",
            "floor,longtools",
            "--out",
            str(tmp_path),
            "--python-peers",
            sys.executable,
            "--python-longtools",
            sys.executable,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: dict[str, Any] = json.loads((tmp_path / "latest.json").read_text())
    rows = {(row["scenario"], row["impl"]): row for row in results["rows"]}
    assert sorted(rows) == [("B1", "floor"), ("B1", "longtools"), ("B1L", "longtools")]
    for row in rows.values():
        assert "problem" not in row, row["problem"]
        for figure in ("rate", "p50_ms", "p99_ms", "server_cpu_ms", "gen_cpu_share"):
            assert row[figure] > 0, (row["impl"], figure, row[figure])
    assert rows["B1", "floor"]["rate_vs_floor"] == 1
    assert rows["B1", "longtools"]["rate_vs_floor"] > 0
    for run in results["runs"]:
        assert run["ok"] and run["errors"] == 0
        echoed = run["answers"][-1]["structuredContent"]
        assert echoed in ({"result": "0123456789abcdef"}, {"text": "0123456789abcdef"})
    opened = next(run["answers"][0] for run in results["runs"] if run["scenario"] == "B1L")
    assert opened == {"initialize": opened["initialize"], "session": True}
    assert opened["initialize"]["protocolVersion"] == "2025-11-25"
    table = (tmp_path / "latest.md").read_text()
    assert "| Starlette floor |" in table and "| longtools api |" in table
    assert "| longtools api (sealed session) |" in table
