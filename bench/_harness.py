"""``python -m bench``: start each server, check it, load it, stop it; alternate; write the results.

Every (scenario, implementation) pair runs ``rounds`` times; each round starts every server
afresh, in an order rotated by one each round, so slow drift of the machine hits all alike. The
measured server is pinned to CPU 0 and the load generator to CPU 1 (when there are two), so the
two never share a core. What a row runs is data (`bench._scenarios.LAUNCHES`). longtools' rows run
``longtools api`` (the API process, the one measured) against a Temporal dev server and a
``longtools worker``; fastmcp-tasks on Redis runs against a ``redis-server``. These backends are
started once, when a row first needs them, and shared by all later rows; their CPU is reported
as backend CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import _approving, _listening, _notifying, _parked, _waiting
from bench._procs import (
    ROOT,
    SERVING,
    Child,
    StartFailed,
    child_setup,
    free_port,
    longtools_python,
    spawn,
    start_temporal,
    start_worker,
    wait_for_port,
    wait_idle,
)
from bench._report import write_chart, write_markdown
from bench._scenarios import (
    BACKEND_LABELS,
    LAUNCHES,
    PARKED,
    PAYLOAD,
    SCENARIOS,
    TOOLS_MODULE,
    WAITING,
    Impl,
    Launch,
    Need,
    Scenario,
)

# Redis's durability in the benchmark: no RDB snapshots, an append-only file fsynced once a second
# (Redis's own recommended setting); and, for the durable peer row, fsynced at every write, as
# Temporal's SQLite is (synchronous=full, an fsync at every commit): that Redis loses nothing a
# kill -9 can take. bench/README.md says so next to the figures.
_REDIS_DURABILITY = ("--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
_REDIS_FSYNC: dict[Need, str] = {"redis": "everysec", "redis-always": "always"}
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
    window_given: bool
    """--warmup, --duration or --quick was given: every scenario uses the run's window."""
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
    parser.add_argument("--warmup", type=float, help="seconds of load before the window (default 2)")
    parser.add_argument("--duration", type=float, help="seconds in the measured window (default 8)")
    parser.add_argument(
        "--python-peers", type=Path, default=Path(sys.executable), help="interpreter of the floor and peers"
    )
    parser.add_argument(
        "--python-longtools",
        type=Path,
        default=longtools_python(),
        help="interpreter with longtools",
    )
    parser.add_argument("--render", action="store_true", help="only redo latest.md and .png from latest.json")
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin the server and the generator to CPUs"
    )
    args = parser.parse_args(argv)
    known = {scenario.id for scenario in SCENARIOS} | {PARKED, WAITING, _listening.SCENARIO}
    known |= {_approving.SCENARIO, _notifying.SCENARIO}
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
        warmup_s=args.warmup if args.warmup is not None else (0.5 if args.quick else 2.0),
        duration_s=args.duration if args.duration is not None else (1.5 if args.quick else 8.0),
        window_given=args.quick or args.warmup is not None or args.duration is not None,
        python_peers=args.python_peers,
        python_longtools=args.python_longtools,
        pin=not args.no_pin and (os.cpu_count() or 1) >= 2,
        quick=args.quick,
        render=args.render,
    )


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # noqa: T201


class Backends:
    """What rows need running besides themselves, each started on first need and kept to the end:
    the Temporal dev server (the flags `longtools serve` uses), a `longtools worker`, Redis."""

    def __init__(self, python: Path, tmp: Path) -> None:
        self._bin = python.parent
        self._tmp = tmp
        self._children: dict[Need, Child] = {}
        self.temporal = ""
        """host:port of the Temporal frontend, once started."""
        self.redis: dict[Need, str] = {}
        """redis:// URL of each Redis, once started ("redis", "redis-always")."""

    def names(self) -> dict[int, Need]:
        return {child.pid: need for need, child in self._children.items()}

    def pids(self, needs: tuple[Need, ...] | None = None) -> list[int]:
        """The pids of ``needs`` (all started ones when None)."""
        return [child.pid for need, child in self._children.items() if needs is None or need in needs]

    def ensure(self, needs: tuple[Need, ...]) -> None:
        for need in needs:
            if need in self._children:
                continue
            say(f"starting {need} for the rows that need it")
            if need == "temporal":
                self._start_temporal()
            elif need == "worker":
                self.ensure(("temporal",))
                self._start_worker()
            else:
                self._start_redis(need)

    def _start_temporal(self) -> None:
        self._children["temporal"], self.temporal = start_temporal(self._bin, self._tmp)

    def _start_worker(self) -> None:
        self._children["worker"] = start_worker(self._bin, self._tmp, self.temporal, TOOLS_MODULE)

    def _start_redis(self, need: Need) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StartFailed("redis-server is not installed: apt-get install -y redis-server")
        port = free_port()
        data = self._tmp / need
        data.mkdir(exist_ok=True)
        durability = (*_REDIS_DURABILITY[:-1], _REDIS_FSYNC[need])
        redis = spawn(
            need,
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(data),
                "--daemonize",
                "no",
                *durability,
            ],
            log_dir=self._tmp,
            cwd=data,
        )
        self._children[need] = redis
        wait_for_port(port, redis, 30)
        self.redis[need] = f"redis://127.0.0.1:{port}/0"

    def stop(self) -> None:
        for child in reversed(list(self._children.values())):
            child.stop()
        self._children.clear()


class Bench:
    def __init__(self, options: Options, tmp: Path) -> None:
        self.options = options
        self.tmp = tmp
        self.backends = Backends(options.python_longtools, tmp)
        self.server_cpus = {0} if options.pin else None
        self.generator_cpus = {1} if options.pin else None

    def _command(self, launch: Launch, server: str) -> tuple[list[str], dict[str, str]]:
        """``launch``'s argv and environment, with its templates filled in."""
        data = self.tmp / server
        data.mkdir(exist_ok=True)
        values = {
            "peers_python": str(self.options.python_peers),
            "longtools_python": str(self.options.python_longtools),
            "longtools": str(self.options.python_longtools.parent / "longtools"),
            "root": str(ROOT),
            "data": str(data),
            "temporal": self.backends.temporal,
            "redis": self.backends.redis.get("redis", ""),
            "redis_always": self.backends.redis.get("redis-always", ""),
        }
        argv = [part.format(**values) for part in launch.argv]
        env = {name: value.format(**values) for name, value in launch.env}
        return argv, env

    def _run_json(
        self, argv: list[str], spec: dict[str, Any], cpus: set[int] | None, env: dict[str, str]
    ) -> dict[str, Any]:
        """Run a program that reads ``spec`` on stdin and prints one JSON object."""
        timeout = float(spec.get("warmup_s", 0)) + float(spec.get("duration_s", 0)) + 180
        done = subprocess.run(
            argv,
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, **env},
            timeout=timeout,
            check=False,
            preexec_fn=child_setup(cpus),  # safe: the harness runs no other threads
        )
        if done.returncode != 0:
            return {"ok": False, "problem": f"{argv[-1]} failed: {done.stderr[-1000:]}"}
        outcome: dict[str, Any] = json.loads(done.stdout)
        return outcome

    def _generate(self, scenario: Scenario, spec: dict[str, Any]) -> dict[str, Any]:
        module = "bench.load"
        if scenario.kind.startswith("task-"):
            module = "bench.task_load"
        elif scenario.kind.startswith("legacy-"):
            module = "bench.legacy_load"
        return self._run_json([sys.executable, "-m", module], spec, self.generator_cpus, {})

    def _spec(self, scenario: Scenario, impl: Impl) -> dict[str, Any]:
        """What the generator (or a self-measuring program) is asked to do, for the timed run."""
        if not scenario.kind.startswith("task-"):
            return {
                "kind": scenario.kind,
                "tool": impl.tool,
                "text": PAYLOAD,
                "connections": scenario.connections,
                "warmup_s": self.options.warmup_s,
                "duration_s": self.options.duration_s,
            }
        warmup_s, duration_s = _window(scenario, self.options)
        spec = {
            "kind": scenario.kind.removeprefix("task-"),
            "tool": impl.tool,
            "connections": scenario.connections,
            "warmup_s": warmup_s,
            "duration_s": duration_s,
            **scenario.load,
        }
        if self.options.quick:
            spec.update(scenario.quick_load)
        return spec

    def run_one(self, scenario: Scenario, impl: Impl, round_no: int) -> dict[str, Any]:
        record = self._run_one(scenario, impl, round_no)
        each = record.pop("aux_cpu_each_s", None)
        if each:  # backend CPU per operation, by backend process: {"temporal": ms, "worker": ms}
            names = self.backends.names()
            record["backend_cpu_ms_each"] = {
                names.get(int(pid), pid): seconds / record["ops"] * 1000 for pid, seconds in each.items()
            }
        return record

    def _run_one(self, scenario: Scenario, impl: Impl, round_no: int) -> dict[str, Any]:
        record: dict[str, Any] = {"scenario": scenario.id, "impl": impl.key, "round": round_no}
        launch = LAUNCHES[impl.server]
        spec = self._spec(scenario, impl)
        try:
            self.backends.ensure(launch.needs)
            if self.backends.pids():
                # Keep a backlog the last run left (e.g. Temporal finishing workflows) out of this one.
                record["idle_wait_s"] = round(wait_idle(self.backends.pids()), 2)
        except StartFailed as exc:
            return {**record, "ok": False, "problem": str(exc)}
        argv, env = self._command(launch, impl.server)
        aux = self.backends.pids(launch.needs)
        if launch.self_measured:  # no server and no check: the program fails on any error itself
            measured = self._run_json(argv, {**spec, "port": 0, "aux_pids": aux}, self.server_cpus, env)
            return {**record, **measured}
        started = time.monotonic()
        name = f"{scenario.id}-{impl.key}-{round_no}"
        server = spawn(name, argv, log_dir=self.tmp, cwd=ROOT, env=env, cpus=self.server_cpus)
        try:
            port = int(server.wait_for(SERVING, 60).group(1))
            record["server_start_s"] = round(time.monotonic() - started, 2)
            spec["port"] = port
            # B4's one run is itself validated in full; checking it first would double its time.
            if scenario.kind != "task-input":
                checked = self._generate(scenario, {**spec, "check": True})
                if not checked.get("ok"):
                    problem = (
                        f"check failed: {checked.get('problem')}; the server's log ends:\n{server.log_tail()}"
                    )
                    return {**record, "ok": False, "problem": problem}
                if round_no == 1:
                    record["answers"] = checked["answers"]
            measured = self._generate(scenario, {**spec, "server_pids": [server.pid], "aux_pids": aux})
            if not measured.get("ok"):
                measured["problem"] = (
                    f"{measured.get('problem')}; the server's log ends:\n{server.log_tail()}"
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
            rounds = _rounds(scenario, self.options)
            for round_no in range(1, rounds + 1):
                shift = (round_no - 1) % max(1, len(impls))
                for impl in impls[shift:] + impls[:shift]:
                    record = self.run_one(scenario, impl, round_no)
                    say(_progress(scenario, impl, record, rounds))
                    runs.append(record)
        return runs

    def close(self) -> None:
        self.backends.stop()


def _window(scenario: Scenario, options: Options) -> tuple[float, float]:
    """Warm-up and window seconds: the scenario's own unless the command line set them."""
    if scenario.window is None or options.window_given:
        return options.warmup_s, options.duration_s
    return scenario.window


def _rounds(scenario: Scenario, options: Options) -> int:
    """The run's rounds; a scenario may ask for fewer (B4's runs are long)."""
    return min(options.rounds, scenario.rounds or options.rounds)


def _progress(scenario: Scenario, impl: Impl, record: dict[str, Any], rounds: int) -> str:
    where = f"{scenario.id} round {record['round']}/{rounds} {impl.key}"
    if not record.get("ok"):
        return f"{where}: FAILED {str(record.get('problem'))[:2000]}"
    cpu = f"server CPU {record['server_cpu_s'] / record['ops'] * 1000:.3f} ms/op"
    if record.get("aux_cpu_s"):
        cpu += f", backend {record['aux_cpu_s'] / record['ops'] * 1000:.3f} ms/op"
        each = record.get("backend_cpu_ms_each", {})
        if len(each) > 1:
            cpu += " (" + ", ".join(f"{name} {ms:.2f}" for name, ms in each.items()) + ")"
    if scenario.figure == "duration":
        figure = f"{record['mean_ms'] / 1000:.2f} s, {record['polls_per_task']:.0f} polls"
    elif scenario.figure == "latency":
        figure = (
            f"p50 {record['p50_ms']:.1f} ms, p99 {record['p99_ms']:.1f} ms, "
            f"tools/call p50 {record['create_p50_ms']:.1f} ms, {record['polls_per_task']:.2f} polls/task"
        )
    else:
        figure = (
            f"{record['rate']:,.0f} {scenario.unit}/s, p50 {record['p50_ms']:.1f} ms, "
            f"p99 {record['p99_ms']:.1f} ms"
        )
        if "create_p50_ms" in record:
            figure += (
                f", tools/call p50 {record['create_p50_ms']:.1f} ms, "
                f"{record['polls_per_task']:.2f} polls/task"
            )
    return (
        f"{where}: {figure}, {cpu}, generator {record['gen_cpu_share']:.0%} of a core, "
        f"other {record['other_cpu_share']:.0%}"
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
            launch = LAUNCHES[impl.server]
            row: dict[str, Any] = {
                "scenario": scenario.id,
                "impl": impl.key,
                "label": impl.label,
                "role": impl.role,
                "unit": scenario.unit,
                "rounds": len(mine),
                "backend": BACKEND_LABELS.get(launch.needs),
                "self_measured": launch.self_measured,
            }
            good = [run for run in mine if run.get("ok")]
            if len(good) < len(mine):
                row["problem"] = next(str(run.get("problem")) for run in mine if not run.get("ok"))
            if good:
                row.update(_medians(good))
            scenario_rows.append(row)
        _ratios(scenario, scenario_rows)
        rows.extend(scenario_rows)
    return rows


def _medians(good: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [run["rate"] for run in good]
    seconds = [run["mean_ms"] / 1000 for run in good]
    row: dict[str, Any] = {
        "rate": statistics.median(rates),
        "rate_min": min(rates),
        "rate_max": max(rates),
        "p50_ms": statistics.median(run["p50_ms"] for run in good),
        "p99_ms": statistics.median(run["p99_ms"] for run in good),
        "seconds": statistics.median(seconds),
        "seconds_min": min(seconds),
        "seconds_max": max(seconds),
        "server_cpu_ms": statistics.median(run["server_cpu_s"] / run["ops"] * 1000 for run in good),
        "backend_cpu_ms": statistics.median(run["aux_cpu_s"] / run["ops"] * 1000 for run in good),
        "server_cpu_share": statistics.median(run["server_cpu_share"] for run in good),
        "backend_cpu_share": statistics.median(run["aux_cpu_s"] / run["window_s"] for run in good),
        "gen_cpu_share": statistics.median(run["gen_cpu_share"] for run in good),
        "gen_cpu_share_max": max(run["gen_cpu_share"] for run in good),
        "other_cpu_share": statistics.median(run["other_cpu_share"] for run in good),
    }
    each = [run["backend_cpu_ms_each"] for run in good if run.get("backend_cpu_ms_each")]
    if each:
        row["backend_cpu_ms_each"] = {name: statistics.median(ms[name] for ms in each) for name in each[0]}
    if "polls_per_task" in good[0]:  # the task scenarios
        row.update(
            polls_per_task=statistics.median(run["polls_per_task"] for run in good),
            create_p50_ms=statistics.median(run["create_p50_ms"] for run in good),
            created_tasks=sum(run["created_tasks"] for run in good),
            direct_results=sum(run["direct_results"] for run in good),
        )
    return row


def _ratios(scenario: Scenario, rows: list[dict[str, Any]]) -> None:
    """Each row against the best peer and its floor, in the direction of the scenario's figure.

    A row's floor is the one its Impl names, else the scenario's first floor.
    """
    measured = [row for row in rows if "rate" in row]
    peers = [row for row in measured if row["role"] == "peer"]
    floors = {row["impl"]: row for row in measured if row["role"] == "floor"}
    named = {impl.key: impl.floor for impl in scenario.impls}
    best_cpu = min((row["server_cpu_ms"] for row in peers), default=None)
    for row in measured:
        floor = floors.get(named.get(row["impl"]) or "", next(iter(floors.values()), None))
        if scenario.figure == "throughput":  # higher is better: rate ÷ best
            best = max((peer["rate"] for peer in peers), default=None)
            if best:
                row["rate_vs_best_peer"] = row["rate"] / best
            if floor:
                row["rate_vs_floor"] = row["rate"] / floor["rate"]
        elif scenario.figure == "latency":  # lower is better: p50 ÷ best (below 1 beats it)
            best = min((peer["p50_ms"] for peer in peers), default=None)
            if best:
                row["p50_vs_best_peer"] = row["p50_ms"] / best
            if floor:
                row["p50_vs_floor"] = row["p50_ms"] / floor["p50_ms"]
        else:  # duration, lower is better: the speed-up, best peer's seconds ÷ this row's
            best = min((peer["seconds"] for peer in peers), default=None)
            if best:
                row["speedup_vs_best_peer"] = best / row["seconds"]
        if best_cpu:
            row["cpu_vs_best_peer"] = row["server_cpu_ms"] / best_cpu
        if floor:
            row["cpu_vs_floor"] = row["server_cpu_ms"] / floor["server_cpu_ms"]


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
        "generator": "bench/load.py, bench/legacy_load.py and bench/task_load.py "
        "(Python asyncio, raw HTTP/1.1 keep-alive)",
        "redis": "redis-server "
        + " ".join(part or '""' for part in _REDIS_DURABILITY)
        + "; the durable row's with --appendfsync always",
        "peers_env": _versions(options.python_peers),
        "longtools_env": _versions(options.python_longtools),
        "scenarios": [
            {
                "id": s.id,
                "title": s.title,
                "figure": s.figure,
                "unit": s.unit,
                "connections": s.connections,
                "rounds": _rounds(s, options),
                "window_s": _window(s, options),
                "load": s.load,
            }
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
        b5 = _parked_run(options, Path(tmp)) if PARKED in options.only else None
        b7 = _waiting_run(options, Path(tmp)) if WAITING in options.only else None
        b8 = _listening_run(options, Path(tmp)) if _listening.SCENARIO in options.only else None
        b9 = _approving_run(options, Path(tmp)) if _approving.SCENARIO in options.only else None
        b10 = _notifying_run(options, Path(tmp)) if _notifying.SCENARIO in options.only else None
    results = {"meta": meta(options, started), "rows": summarize(runs, options), "runs": runs}
    if b5 is not None:
        results[PARKED] = b5
    if b7 is not None:
        results[WAITING] = b7
    if b8 is not None:
        results[_listening.SCENARIO] = b8
    if b9 is not None:
        results[_approving.SCENARIO] = b9
    if b10 is not None:
        results[_notifying.SCENARIO] = b10
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
    alone = [b for b in (b5, b7, b8, b9, b10) if b is not None]
    return 1 if failed or any(not b.get("ok") for b in alone) else 0


def _waiting_run(options: Options, tmp: Path) -> dict[str, Any]:
    """B7 runs on stacks of its own, one per tree it compares."""
    say("B7: clients waiting on running tasks, before and after (about 8 minutes in full)")
    if options.quick:
        return _waiting.run(options.python_longtools, tmp, pin=options.pin, clients=100, quiet_s=8.0)
    return _waiting.run(options.python_longtools, tmp, pin=options.pin)


def _listening_run(options: Options, tmp: Path) -> dict[str, Any]:
    """B8 runs on a stack of its own (a fresh Temporal, so only its own tasks are there)."""
    say("B8: idle tasks followed by listen streams (about 3 minutes in full)")
    if options.quick:
        return _listening.run(options.python_longtools, tmp, pin=options.pin, streams=50, quiet_s=8.0)
    return _listening.run(options.python_longtools, tmp, pin=options.pin)


def _approving_run(options: Options, tmp: Path) -> dict[str, Any]:
    """B9 runs on a stack of its own (static tokens for the people who ask and approve)."""
    say("B9: decisions of two approvers, from the last vote to completed (about 2 minutes in full)")
    if options.quick:
        return _approving.run(
            options.python_longtools, tmp, pin=options.pin, decisions=10, warmup=2, probes=5
        )
    return _approving.run(options.python_longtools, tmp, pin=options.pin)


def _notifying_run(options: Options, tmp: Path) -> dict[str, Any]:
    """B10 runs on a stack of its own, which mails an SMTP server in the generator."""
    say("B10: a person's question, from waiting to its mail (about 1.5 minutes in full)")
    if options.quick:
        return _notifying.run(
            options.python_longtools, tmp, pin=options.pin, questions=10, warmup=2, probes=5
        )
    return _notifying.run(options.python_longtools, tmp, pin=options.pin)


def _parked_run(options: Options, tmp: Path) -> dict[str, Any]:
    """B5 runs on processes of its own (a fresh Temporal, so it counts only its own tasks)."""
    say("B5: parking tasks in input_required (about 5 minutes in full)")
    if options.quick:
        return _parked.run(options.python_longtools, tmp, pin=options.pin, tasks=300, duration_s=5.0)
    return _parked.run(options.python_longtools, tmp, pin=options.pin)
