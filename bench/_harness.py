"""``python -m bench``: start each server, check it, load it, stop it; alternate; write the results.

Every (scenario, implementation) pair runs ``rounds`` times; each round starts every server
afresh, in an order rotated by one each round, so slow drift of the machine hits all alike. The
measured server is pinned to CPU 0 and the load generator to CPU 1 (when there are two), so the
two never share a core. longtools' rows run ``longtools api`` (the API process, the one measured)
against a Temporal dev server and a ``longtools worker``, started once and shared by all its runs;
their CPU is reported as backend CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._procs import Child, StartFailed, child_setup, free_port, spawn, wait_for_port, wait_idle
from bench._report import write_chart, write_markdown
from bench._scenarios import PAYLOAD, SCENARIOS, Impl, Scenario

ROOT = Path(__file__).resolve().parent.parent
_URL = re.compile(r"serving MCP at http://127\.0\.0\.1:(\d+)/mcp")
_WORKER_READY = re.compile(r"longtools worker polling")
_TOOLS_MODULE = "bench.servers.longtools_tools"
_PEER_MODULES = {
    "floor": "bench.servers.floor_starlette",
    "sdk": "bench.servers.sdk_echo",
    "fastmcp": "bench.servers.fastmcp_echo",
}
_VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "names = ['mcp', 'fastmcp', 'uvicorn', 'starlette', 'h11', 'pydantic', 'anyio', 'longtools',"
    " 'temporalio', 'uvloop', 'httptools']\n"
    "found = {}\n"
    "for name in names:\n"
    "    try:\n"
    "        found[name] = m.version(name)\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "print(json.dumps({'python': sys.version.split()[0], **found}))\n"
)


@dataclass
class Options:
    only: list[str]
    impls: set[str] | None
    out: Path
    rounds: int
    warmup_s: float
    duration_s: float
    python_peers: Path
    python_longtools: Path
    pin: bool
    quick: bool
    render: bool


def parse(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="tiny counts: 1 round, 0.5 s warm-up, 1.5 s window"
    )
    parser.add_argument("--only", default="", help="scenarios to run, e.g. B1,B2 (default: all)")
    parser.add_argument(
        "--impl", default="", help="implementations to run, e.g. floor,longtools (default: all)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="where latest.* go")
    parser.add_argument("--rounds", type=int, help="rounds per implementation (default 3; --quick 1)")
    parser.add_argument("--warmup", type=float, help="seconds of load before the window (default 3)")
    parser.add_argument("--duration", type=float, help="seconds in the measured window (default 10)")
    parser.add_argument(
        "--python-peers", type=Path, default=Path(sys.executable), help="interpreter of the floor and peers"
    )
    parser.add_argument(
        "--python-longtools",
        type=Path,
        default=_default_longtools_python(),
        help="interpreter with longtools",
    )
    parser.add_argument("--render", action="store_true", help="only redo latest.md and .png from latest.json")
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin the server and the generator to CPUs"
    )
    args = parser.parse_args(argv)
    known = {scenario.id for scenario in SCENARIOS}
    only = [part.strip().upper() for part in args.only.split(",") if part.strip()] or sorted(known)
    unknown = set(only) - known
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
    impls = {part.strip() for part in args.impl.split(",") if part.strip()} or None
    return Options(
        only=only,
        impls=impls,
        out=args.out,
        rounds=args.rounds or (1 if args.quick else 3),
        warmup_s=args.warmup if args.warmup is not None else (0.5 if args.quick else 3.0),
        duration_s=args.duration if args.duration is not None else (1.5 if args.quick else 10.0),
        python_peers=args.python_peers,
        python_longtools=args.python_longtools,
        pin=not args.no_pin and (os.cpu_count() or 1) >= 2,
        quick=args.quick,
        render=args.render,
    )


def _default_longtools_python() -> Path:
    repo_venv = ROOT / ".venv" / "bin" / "python"
    return repo_venv if (ROOT / ".venv" / "bin" / "longtools").exists() else Path(sys.executable)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # noqa: T201


class Backend:
    """Temporal dev server (the flags `longtools serve` uses) and a `longtools worker`."""

    def __init__(self, python: Path, tmp: Path) -> None:
        self._bin = python.parent
        self._tmp = tmp
        self._children: list[Child] = []
        self.address = ""

    @property
    def pids(self) -> list[int]:
        return [child.pid for child in self._children]

    def start(self) -> None:
        port = free_port()
        temporal = spawn(
            "temporal",
            [
                str(self._bin / "temporal"),
                "server",
                "start-dev",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--db-filename",
                str(self._tmp / "temporal.db"),
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
            log_dir=self._tmp,
            cwd=self._tmp,
        )
        self._children.append(temporal)
        wait_for_port(port, temporal, 30)
        self.address = f"127.0.0.1:{port}"
        for attempt in range(3):  # the frontend may listen a moment before the namespace answers
            worker = spawn(
                f"worker-{attempt}",
                [
                    str(self._bin / "longtools"),
                    "worker",
                    "--tools",
                    _TOOLS_MODULE,
                    "--temporal-address",
                    self.address,
                    "--data-dir",
                    str(self._tmp / "worker"),
                ],
                log_dir=self._tmp,
                cwd=ROOT,
                env={"PYTHONPATH": str(ROOT), "LONGTOOLS_LOG_FORMAT": "json"},
            )
            try:
                worker.wait_for(_WORKER_READY, 60)
            except StartFailed:
                worker.stop()
                if attempt == 2:
                    raise
                time.sleep(1)
                continue
            self._children.append(worker)
            return

    def stop(self) -> None:
        for child in reversed(self._children):
            child.stop()
        self._children.clear()


class Bench:
    def __init__(self, options: Options, tmp: Path) -> None:
        self.options = options
        self.tmp = tmp
        self.backend: Backend | None = None
        self.server_cpus = {0} if options.pin else None
        self.generator_cpus = {1} if options.pin else None

    def _backend(self) -> Backend:
        if self.backend is None:
            say("starting the Temporal dev server and a longtools worker for the longtools rows")
            self.backend = Backend(self.options.python_longtools, self.tmp)
            self.backend.start()
        return self.backend

    def _server(self, impl: Impl, name: str) -> Child:
        if impl.server == "longtools":
            backend = self._backend()
            argv = [
                str(self.options.python_longtools.parent / "longtools"),
                "api",
                "--no-auth",
                "--port",
                "0",
                "--no-examples",
                "--tools",
                _TOOLS_MODULE,
                "--temporal-address",
                backend.address,
                "--data-dir",
                str(self.tmp / "api"),
            ]
            env = {"PYTHONPATH": str(ROOT), "LONGTOOLS_LOG_FORMAT": "json"}
        else:
            argv = [str(self.options.python_peers), "-m", _PEER_MODULES[impl.server]]
            env = {}
        return spawn(name, argv, log_dir=self.tmp, cwd=ROOT, env=env, cpus=self.server_cpus)

    def _generate(self, spec: dict[str, Any]) -> dict[str, Any]:
        timeout = float(spec.get("warmup_s", 0)) + float(spec.get("duration_s", 0)) + 120
        done = subprocess.run(
            [sys.executable, "-m", "bench.load"],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout,
            check=False,
            preexec_fn=child_setup(self.generator_cpus),  # safe: the harness runs no other threads
        )
        if done.returncode != 0:
            return {"ok": False, "problem": f"the load generator failed: {done.stderr[-1000:]}"}
        outcome: dict[str, Any] = json.loads(done.stdout)
        return outcome

    def run_one(self, scenario: Scenario, impl: Impl, round_no: int) -> dict[str, Any]:
        record: dict[str, Any] = {"scenario": scenario.id, "impl": impl.key, "round": round_no}
        try:
            if impl.server == "longtools":
                self._backend()
            if self.backend is not None:
                record["idle_wait_s"] = round(wait_idle(self.backend.pids), 2)
            started = time.monotonic()
            server = self._server(impl, f"{scenario.id}-{impl.key}-{round_no}")
        except StartFailed as exc:
            return {**record, "ok": False, "problem": str(exc)}
        try:
            port = int(server.wait_for(_URL, 60).group(1))
            record["server_start_s"] = round(time.monotonic() - started, 2)
            spec: dict[str, Any] = {"port": port, "kind": scenario.kind, "tool": impl.tool, "text": PAYLOAD}
            checked = self._generate({**spec, "check": True})
            if not checked.get("ok"):
                problem = (
                    f"check failed: {checked.get('problem')}; the server's log ends:\n{server.log_tail()}"
                )
                return {**record, "ok": False, "problem": problem}
            if round_no == 1:
                record["answers"] = checked["answers"]
            aux = self.backend.pids if self.backend is not None and impl.server == "longtools" else []
            measured = self._generate(
                {
                    **spec,
                    "connections": scenario.connections,
                    "warmup_s": self.options.warmup_s,
                    "duration_s": self.options.duration_s,
                    "server_pids": [server.pid],
                    "aux_pids": aux,
                }
            )
        except StartFailed as exc:
            return {**record, "ok": False, "problem": str(exc)}
        finally:
            server.stop()
        if measured.get("ok") and measured.get("errors"):
            measured = {
                **measured,
                "ok": False,
                "problem": f"{measured['errors']} errors: {measured['error_sample']}",
            }
        return {**record, **measured}

    def run(self) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = []
        for scenario in SCENARIOS:
            if scenario.id not in self.options.only:
                continue
            impls = [
                impl
                for impl in scenario.impls
                if self.options.impls is None or impl.key in self.options.impls
            ]
            for round_no in range(1, self.options.rounds + 1):
                shift = (round_no - 1) % max(1, len(impls))
                for impl in impls[shift:] + impls[:shift]:
                    record = self.run_one(scenario, impl, round_no)
                    say(_progress(scenario, impl, record, self.options.rounds))
                    runs.append(record)
        return runs

    def close(self) -> None:
        if self.backend is not None:
            self.backend.stop()


def _progress(scenario: Scenario, impl: Impl, record: dict[str, Any], rounds: int) -> str:
    where = f"{scenario.id} round {record['round']}/{rounds} {impl.key}"
    if not record.get("ok"):
        return f"{where}: FAILED {str(record.get('problem'))[:2000]}"
    return (
        f"{where}: {record['rate']:,.0f} {scenario.unit}/s, p50 {record['p50_ms']:.1f} ms, "
        f"p99 {record['p99_ms']:.1f} ms, "
        f"server CPU {record['server_cpu_s'] / record['ops'] * 1000:.3f} ms/op, "
        f"generator {record['gen_cpu_share']:.0%} of a core, other {record['other_cpu_share']:.0%}"
    )


def summarize(runs: list[dict[str, Any]], options: Options) -> list[dict[str, Any]]:
    """One row per (scenario, implementation): medians over its rounds, and the ratios."""
    rows: list[dict[str, Any]] = []
    for scenario in SCENARIOS:
        if scenario.id not in options.only:
            continue
        scenario_rows: list[dict[str, Any]] = []
        for impl in scenario.impls:
            mine = [run for run in runs if run["scenario"] == scenario.id and run["impl"] == impl.key]
            if not mine:
                continue
            row: dict[str, Any] = {
                "scenario": scenario.id,
                "impl": impl.key,
                "label": impl.label,
                "role": impl.role,
                "unit": scenario.unit,
                "rounds": len(mine),
            }
            good = [run for run in mine if run.get("ok")]
            if len(good) < len(mine):
                row["problem"] = next(str(run.get("problem")) for run in mine if not run.get("ok"))
            if good:
                rates = [run["rate"] for run in good]
                row.update(
                    rate=statistics.median(rates),
                    rate_min=min(rates),
                    rate_max=max(rates),
                    p50_ms=statistics.median(run["p50_ms"] for run in good),
                    p99_ms=statistics.median(run["p99_ms"] for run in good),
                    server_cpu_ms=statistics.median(run["server_cpu_s"] / run["ops"] * 1000 for run in good),
                    backend_cpu_ms=statistics.median(run["aux_cpu_s"] / run["ops"] * 1000 for run in good),
                    server_cpu_share=statistics.median(run["server_cpu_share"] for run in good),
                    gen_cpu_share=statistics.median(run["gen_cpu_share"] for run in good),
                    gen_cpu_share_max=max(run["gen_cpu_share"] for run in good),
                    other_cpu_share=statistics.median(run["other_cpu_share"] for run in good),
                )
            scenario_rows.append(row)
        _ratios(scenario_rows)
        rows.extend(scenario_rows)
    return rows


def _ratios(rows: list[dict[str, Any]]) -> None:
    measured = [row for row in rows if "rate" in row]
    peers = [row for row in measured if row["role"] == "peer"]
    floors = [row for row in measured if row["role"] == "floor"]
    best_rate = max((row["rate"] for row in peers), default=None)
    best_cpu = min((row["server_cpu_ms"] for row in peers), default=None)
    for row in measured:
        if best_rate:
            row["rate_vs_best_peer"] = row["rate"] / best_rate
        if best_cpu:
            row["cpu_vs_best_peer"] = row["server_cpu_ms"] / best_cpu
        if floors:
            row["rate_vs_floor"] = row["rate"] / floors[0]["rate"]
            row["cpu_vs_floor"] = row["server_cpu_ms"] / floors[0]["server_cpu_ms"]


def _versions(python: Path) -> dict[str, str]:
    done = subprocess.run([str(python), "-c", _VERSIONS], capture_output=True, text=True, check=False)
    try:
        found: dict[str, str] = json.loads(done.stdout)
    except ValueError:
        return {"error": done.stderr[-300:]}
    return found


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def meta(options: Options, started: float) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "elapsed_s": round(time.monotonic() - started, 1),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu_model": _cpu_model(),
            "kernel": platform.release(),
            "loadavg_at_end": os.getloadavg(),
        },
        "quick": options.quick,
        "rounds": options.rounds,
        "warmup_s": options.warmup_s,
        "duration_s": options.duration_s,
        "payload": PAYLOAD,
        "pinned": "server on CPU 0, load generator on CPU 1" if options.pin else "not pinned",
        "generator": "bench/load.py (Python asyncio, raw HTTP/1.1 keep-alive)",
        "peers_env": _versions(options.python_peers),
        "longtools_env": _versions(options.python_longtools),
        "scenarios": [
            {"id": s.id, "title": s.title, "unit": s.unit, "connections": s.connections}
            for s in SCENARIOS
            if s.id in options.only
        ],
    }


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    if options.render:
        results = json.loads((options.out / "latest.json").read_text())
        write_markdown(results, options.out / "latest.md")
        write_chart(results, options.out / "latest.png")
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="longtools-bench-") as tmp:
        bench = Bench(options, Path(tmp))
        try:
            runs = bench.run()
        finally:
            bench.close()
    results = {"meta": meta(options, started), "rows": summarize(runs, options), "runs": runs}
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    write_markdown(results, options.out / "latest.md")
    chart = write_chart(results, options.out / "latest.png")
    say(
        f"wrote {options.out}/latest.json, latest.md"
        + (", latest.png" if chart else " (no chart: no matplotlib)")
    )
    say((options.out / "latest.md").read_text())
    failed = [row for row in results["rows"] if "problem" in row]
    return 1 if failed else 0
