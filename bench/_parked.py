"""B5: thousands of tasks parked in ``input_required``: what they cost, and how fast ``tasks/get`` is.

``run`` starts its own Temporal dev server, ``longtools worker`` and ``longtools api`` (the
harness's flags, in a fresh directory, so the SQLite file starts empty), with the tool module
``bench.servers.longtools_parked``. Its long tool ``park`` asks one form question at once and
waits. Then:

1. **Parking.** Raw 2026-07-28 ``tools/call`` requests that declare the Tasks extension create the
   tasks, 32 connections, as fast as the API takes them. The generator stops at the checkpoints
   (0, 10%, 25%, 50% and 100% of the tasks; 0, 1,000, 2,500, 5,000 and 10,000 by default). At
   each, it polls ``tasks/get`` on a random sample of the batch it just created (up to 100) until
   all are ``input_required``, then waits until the API, the worker and Temporal are idle (so no
   backlog is left), then reads ``VmRSS`` of each process tree from ``/proc``.
2. **Reading.** An open-loop generator sends ``tasks/get`` at a fixed rate (100 requests/s)
   against random parked tasks for ``duration_s``. Each request has a scheduled send time and its
   latency is measured from that time, so a stall delays every request behind it in the figures
   too (no coordinated omission). Every answer must be ``input_required`` for the task asked.

The API is pinned to CPU 0 and the generator (a subprocess: ``python -m bench._parked
--generate``, standard library only) to CPU 1; Temporal and the worker are not pinned.

``python -m bench._parked [--tasks N] [--quick]`` runs it alone and prints the Markdown section.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from bench._procs import (
    LONGTOOLS_ENV,
    ROOT,
    SERVING,
    Generator,
    Stack,
    StartFailed,
    row_arguments,
    row_main,
    spawn,
    start_temporal,
    start_worker,
    wait_idle,
)
from bench.load import (
    Connection,
    CpuWindow,
    Failed,
    cpu_seconds,
    http_request,
    meta,
    percentile,
    result_of,
    tree,
)
from bench.task_load import CAPABILITIES

TOOLS_MODULE: Final = "bench.servers.longtools_parked"
TOOL: Final = "park"
ROLES: Final = ("api", "worker", "temporal")
CHECKPOINTS: Final = (0.0, 0.1, 0.25, 0.5, 1.0)
"""Where RSS is read, as shares of the tasks: 0, 1,000, 2,500, 5,000 and 10,000 of 10,000."""
CONNECTIONS: Final = 32
SAMPLE: Final = 100
_SETTLE_TIMEOUT_S: Final = 180.0
_IDLE_TIMEOUT_S: Final = 120.0
_REUSE_WITHIN_S: Final = 3.0
"""A keep-alive connection idle longer is closed, not reused: uvicorn closes them after 5 s."""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # noqa: T201


# The generator: a subprocess pinned to CPU 1, one operation per invocation (JSON in, JSON out).


def _request(port: int, method: str, name: str, body: Mapping[str, Any]) -> bytes:
    return http_request(port, "/mcp", method, name, json.dumps(body).encode())


def create_request(port: int, request_id: int) -> bytes:
    params = {"name": TOOL, "arguments": {}, "_meta": meta(CAPABILITIES)}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return _request(port, "tools/call", TOOL, body)


def get_request(port: int, request_id: int, task_id: str) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tasks/get",
        "params": {"taskId": task_id, "_meta": meta(CAPABILITIES)},
    }
    return _request(port, "tasks/get", task_id, body)


def created_task(result: dict[str, Any]) -> str:
    """The id of a ``CreateTaskResult``."""
    task_id = result.get("taskId")
    if result.get("resultType") != "task" or not isinstance(task_id, str) or not task_id:
        raise Failed(f"not a CreateTaskResult: {json.dumps(result)[:300]}")
    if result.get("status") not in ("working", "input_required"):
        raise Failed(f"a new task that is not working: {json.dumps(result)[:300]}")
    return task_id


def task_status(result: dict[str, Any], task_id: str) -> str:
    """The status of a ``tasks/get`` answer for ``task_id``; a parked one must list its question."""
    if result.get("resultType") != "complete" or result.get("taskId") != task_id:
        raise Failed(f"not a tasks/get answer for {task_id}: {json.dumps(result)[:300]}")
    status = result.get("status")
    if status == "input_required":
        requests = result.get("inputRequests")
        if not isinstance(requests, dict) or not requests:
            raise Failed(f"input_required without inputRequests: {json.dumps(result)[:300]}")
        question = next(iter(requests.values()))
        if question.get("method") != "elicitation/create":
            raise Failed(f"not the form question: {json.dumps(result)[:300]}")
    elif status != "working":
        raise Failed(f"a parked task should be working or input_required: {json.dumps(result)[:300]}")
    return str(status)


def _cpu(roles: Mapping[str, list[int]]) -> dict[str, float]:
    return {role: cpu_seconds(pids) for role, pids in roles.items()}


async def create(spec: dict[str, Any]) -> dict[str, Any]:
    """``count`` tools/call of ``park`` over ``connections`` keep-alive connections, back to back."""
    port, count = int(spec["port"]), int(spec["count"])
    ids: list[str] = []
    latencies: list[float] = []
    first: list[dict[str, Any]] = []
    claimed = 0

    async def connection() -> None:
        nonlocal claimed
        conn = Connection(port)
        try:
            while claimed < count:
                claimed += 1
                started = time.perf_counter()
                await conn.send(create_request(port, claimed))
                result = result_of(await conn.receive())
                ids.append(created_task(result))
                latencies.append(time.perf_counter() - started)
                if not first:
                    first.append(result)
        finally:
            conn.close()

    window = CpuWindow(spec["roles"])
    await asyncio.gather(*(connection() for _ in range(min(int(spec["connections"]), count))))
    measured = window.close()
    ordered = sorted(latencies)
    return {
        "ok": True,
        "ids": ids,
        "rate": len(ids) / measured["wall_s"],
        "p50_ms": percentile(ordered, 0.5) * 1000,
        "p99_ms": percentile(ordered, 0.99) * 1000,
        "answer": first[0],
        **measured,
    }


async def settle(spec: dict[str, Any]) -> dict[str, Any]:
    """``tasks/get`` on each of ``ids`` until all are ``input_required`` (or ``timeout_s`` passes)."""
    port = int(spec["port"])
    pending = list(spec["ids"])
    started = time.perf_counter()
    polls = 0
    answer: dict[str, Any] = {}
    conns = [Connection(port) for _ in range(8)]
    try:
        while pending and time.perf_counter() - started < float(spec["timeout_s"]):
            still: list[str] = []

            async def poll(conn: Connection, share: list[str], still: list[str] = still) -> None:
                nonlocal polls, answer
                for task_id in share:
                    polls += 1
                    await conn.send(get_request(port, polls, task_id))
                    result = result_of(await conn.receive())
                    if task_status(result, task_id) == "input_required":
                        answer = answer or result
                    else:
                        still.append(task_id)

            await asyncio.gather(*(poll(conn, pending[n :: len(conns)]) for n, conn in enumerate(conns)))
            pending = still
            if pending:
                await asyncio.sleep(0.2)
    finally:
        for conn in conns:
            conn.close()
    return {
        "ok": True,
        "waited_s": time.perf_counter() - started,
        "polls": polls,
        "not_parked": len(pending),
        "answer": answer,
    }


async def read_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Open loop: ``tasks/get`` of a random parked task every 1/``rate`` s, timed from its schedule."""
    port, ids, rate = int(spec["port"]), list(spec["ids"]), float(spec["rate"])
    warmup = int(rate * float(spec["warmup_s"]))
    total = warmup + int(rate * float(spec["duration_s"]))
    pick = random.Random(spec.get("seed", 5)).choice
    loop = asyncio.get_running_loop()
    idle: list[tuple[float, Connection]] = []  # (when it was last used, connection), freshest last
    opened = 0
    latencies: list[float] = []
    lags: list[float] = []
    errors: list[str] = []
    last_done = 0.0

    async def one(n: int, scheduled: float, task_id: str) -> None:
        nonlocal opened, last_done
        if idle and loop.time() - idle[-1][0] > _REUSE_WITHIN_S:
            for _, stale in idle:  # the server may be closing them: uvicorn's keep-alive is 5 s
                stale.close()
            idle.clear()
        if idle:
            conn = idle.pop()[1]
        else:
            conn = Connection(port)
            opened += 1
        try:
            await conn.send(get_request(port, n, task_id))
            response = await conn.receive()
            status = task_status(result_of(response), task_id)
            if status != "input_required":
                raise Failed(f"task {task_id} is {status}, not input_required")
        except (Failed, OSError, ValueError, asyncio.IncompleteReadError) as exc:
            conn.close()
            if n >= warmup:
                errors.append(f"{type(exc).__name__}: {exc}")
            return
        done = loop.time()
        idle.append((done, conn))
        if n >= warmup:
            latencies.append(done - scheduled)
            last_done = max(last_done, done)

    pending: list[asyncio.Task[None]] = []
    window: CpuWindow | None = None
    start = loop.time() + 0.05
    measured_from = start + warmup / rate
    for n in range(total):
        scheduled = start + n / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if n == warmup:
            window = CpuWindow(spec["roles"])
        if n >= warmup:
            lags.append(loop.time() - scheduled)
        pending.append(asyncio.create_task(one(n, scheduled, pick(ids))))
    await asyncio.gather(*pending)
    assert window is not None
    measured = window.close()
    for _, conn in idle:
        conn.close()
    ordered = sorted(latencies)
    if not ordered:
        raise Failed(f"no tasks/get answered; first error: {errors[0] if errors else 'none'}")
    sent = total - warmup
    return {
        "ok": True,
        "sent": sent,
        "answered": len(ordered),
        "errors": len(errors),
        "error_sample": errors[0] if errors else "",
        "rate_target": rate,
        "rate": len(ordered) / (last_done - measured_from),
        "p50_ms": percentile(ordered, 0.5) * 1000,
        "p90_ms": percentile(ordered, 0.9) * 1000,
        "p99_ms": percentile(ordered, 0.99) * 1000,
        "max_ms": ordered[-1] * 1000,
        "send_lag_max_ms": max(lags) * 1000,
        "connections_opened": opened,
        **measured,
    }


_OPERATIONS = {"create": create, "settle": settle, "read": read_load}


# The orchestrator: the three processes, the checkpoints, the figures.


def rss_mib(roots: list[int], field: bytes = b"VmRSS:") -> float:
    """``VmRSS`` (or another kB ``field`` of ``/proc/<pid>/status``) of ``roots`` and their
    descendants, in MiB."""
    total_kib = 0
    for pid in tree(roots):
        try:
            with open(f"/proc/{pid}/status", "rb") as status:
                for line in status:
                    if line.startswith(field):
                        total_kib += int(line.split()[1])
                        break
        except OSError:
            continue
    return total_kib / 1024


class _Stack(Stack):
    """A Temporal dev server, a ``longtools worker`` and a ``longtools api``, all of B5's own."""

    def __init__(self, python: Path, work: Path, api_cpus: set[int] | None) -> None:
        super().__init__()
        self._bin = python.parent
        self._work = work
        self._api_cpus = api_cpus

    def start(self) -> None:
        self.children["temporal"], address = start_temporal(self._bin, self._work)
        self.children["worker"] = start_worker(self._bin, self._work, address, TOOLS_MODULE)
        api = spawn(
            "api",
            [
                str(self._bin / "longtools"),
                "api",
                "--no-auth",
                "--port",
                "0",
                "--no-examples",
                "--tools",
                TOOLS_MODULE,
                "--temporal-address",
                address,
                "--data-dir",
                str(self._work / "api"),
            ],
            log_dir=self._work,
            cwd=ROOT,
            env=LONGTOOLS_ENV,
            cpus=self._api_cpus,
        )
        self.children["api"] = api
        self.port = int(api.wait_for(SERVING, 60).group(1))

    def rss(self, field: bytes = b"VmRSS:") -> dict[str, float]:
        return {role: rss_mib(pids, field) for role, pids in self.roots.items()}


def _cpu_split(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {role: after[role] - before[role] for role in before}


def run(
    python_longtools: Path,
    tmp: Path,
    *,
    tasks: int = 10_000,
    rate: float = 100.0,
    duration_s: float = 20.0,
    pin: bool = True,
) -> dict[str, Any]:
    """B5 end to end, on processes of its own; a dict of figures (``ok`` false with a ``problem``)."""
    started = time.monotonic()
    pin = pin and (os.cpu_count() or 1) >= 2
    work = Path(tempfile.mkdtemp(prefix="b5-", dir=tmp))
    stack = _Stack(python_longtools, work, {0} if pin else None)
    generate = Generator("bench._parked", {1} if pin else None)
    record: dict[str, Any] = {
        "scenario": "B5",
        "ok": False,
        "tasks": tasks,
        "connections": CONNECTIONS,
        "pinned": "API on CPU 0, generator on CPU 1" if pin else "not pinned",
    }
    targets = sorted({round(tasks * share) for share in CHECKPOINTS})
    ids: list[str] = []
    checkpoints: list[dict[str, Any]] = []
    batches: list[dict[str, Any]] = []
    try:
        stack.start()
        record["start_s"] = round(time.monotonic() - started, 2)
        roots = stack.roots
        base = {"port": stack.port, "roles": roots}
        for target in targets:
            batch: dict[str, Any] = {"from": len(ids), "to": target}
            phase_started = time.perf_counter()
            cpu_before = _cpu({role: tree(pids) for role, pids in roots.items()})
            if target > len(ids):
                made = generate(
                    {**base, "op": "create", "count": target - len(ids), "connections": CONNECTIONS}, 900
                )
                new: list[str] = made.pop("ids")
                ids.extend(new)
                record.setdefault("answers", {})["tools/call"] = made.pop("answer")
                batch["create"] = made
                sample = random.Random(target).sample(new, min(SAMPLE, len(new)))
                settled = generate(
                    {**base, "op": "settle", "ids": sample, "timeout_s": _SETTLE_TIMEOUT_S}, 900
                )
                record["answers"]["tasks/get"] = settled.pop("answer")
                batch["settle"] = settled
                if settled["not_parked"]:
                    raise Failed(
                        f"{settled['not_parked']} of {len(sample)} sampled tasks were not input_required "
                        f"after {settled['waited_s']:.0f} s"
                    )
            batch["idle_wait_s"] = wait_idle(stack.pids, timeout=_IDLE_TIMEOUT_S)
            batch["wall_s"] = time.perf_counter() - phase_started
            batch["cpu_s"] = _cpu_split(cpu_before, _cpu({role: tree(pids) for role, pids in roots.items()}))
            rss = stack.rss()
            checkpoints.append(
                {
                    "parked": len(ids),
                    "rss_mib": rss,
                    "rss_anon_mib": stack.rss(b"RssAnon:"),  # without mapped files (binaries, libraries)
                    "idle_wait_s": batch["idle_wait_s"],
                }
            )
            batches.append(batch)
            say(
                f"B5: {len(ids):,} parked in {batch['wall_s']:.1f} s; RSS MiB "
                + ", ".join(f"{role} {rss[role]:.0f}" for role in ROLES)
            )
        record["read"] = generate(
            {**base, "op": "read", "ids": ids, "rate": rate, "duration_s": duration_s, "warmup_s": 1.0},
            duration_s + 120,
        )
        record["rss_after_read_mib"] = stack.rss()
        record["ok"] = True
    except (Failed, StartFailed, subprocess.TimeoutExpired, OSError, ValueError) as exc:
        record["problem"] = f"{exc}\n{stack.logs()}"
    finally:
        stack.stop()
    record["checkpoints"] = checkpoints
    record["batches"] = batches
    record.update(_summary(checkpoints, batches))
    record["elapsed_s"] = round(time.monotonic() - started, 1)
    return record


def _summary(checkpoints: list[dict[str, Any]], batches: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    creating = [batch for batch in batches if "create" in batch]
    if creating:
        created = sum(batch["to"] - batch["from"] for batch in creating)
        create_wall = sum(batch["create"]["wall_s"] for batch in creating)
        park_wall = sum(batch["wall_s"] for batch in creating)
        cpu = {role: sum(batch["cpu_s"][role] for batch in creating) for role in ROLES}
        create_cpu = {role: sum(batch["create"]["cpu_s"][role] for batch in creating) for role in ROLES}
        summary["creation"] = {
            "created": created,
            "wall_s": create_wall,
            "rate": created / create_wall,
            "p50_ms": max(batch["create"]["p50_ms"] for batch in creating),
            "p99_ms": max(batch["create"]["p99_ms"] for batch in creating),
            "core_share": {role: create_cpu[role] / create_wall for role in ROLES},
            "gen_core_share": sum(batch["create"]["gen_cpu_s"] for batch in creating) / create_wall,
            "other_core_share": sum(batch["create"]["other_cpu_s"] for batch in creating) / create_wall,
            "park_wall_s": park_wall,
            "park_rate": created / park_wall,
            "cpu_ms_per_task": {role: cpu[role] / created * 1000 for role in ROLES},
        }
    if len(checkpoints) >= 2:
        first, second, last = checkpoints[0], checkpoints[1], checkpoints[-1]

        def slope(a: dict[str, Any], b: dict[str, Any], role: str) -> float:
            grown = float(b["rss_mib"][role] - a["rss_mib"][role])
            return grown / max(1, int(b["parked"]) - int(a["parked"])) * 1000

        summary["growth_mib_per_1000"] = {
            role: {"all": slope(first, last, role), "after_first": slope(second, last, role)}
            for role in ROLES
        }
    return summary


# The Markdown section.

_LABELS: Final = {"api": "API", "worker": "worker", "temporal": "Temporal"}


def _mib(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def render(result: dict[str, Any]) -> str:
    tasks = result["tasks"]
    lines = [
        f"**B5**: {tasks:,} tasks parked in `input_required` (`park`: a long tool that asks one form "
        f"question with `ask_form` at once, then waits), {result['pinned']}",
        "",
    ]
    if not result.get("ok"):
        lines += [f"B5 failed: {str(result.get('problem'))[:1500]}", ""]
    checkpoints = result.get("checkpoints", [])
    if checkpoints:
        lines += [
            "| parked tasks | API RSS MiB | worker RSS MiB | Temporal RSS MiB "
            "| time to park the batch s | idle wait s |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for point, batch in zip(checkpoints, result.get("batches", []), strict=False):
            rss = point["rss_mib"]
            lines.append(
                f"| {point['parked']:,} | {_mib(rss['api'])} | {_mib(rss['worker'])} "
                f"| {_mib(rss['temporal'])} "
                f"| {batch['wall_s']:.1f} | {point['idle_wait_s']:.1f} |"
            )
        lines.append("")
    growth = result.get("growth_mib_per_1000")
    if growth:
        second = checkpoints[1]["parked"]
        parts = [
            f"{_LABELS[role]} {growth[role]['all']:+.1f} "
            f"({growth[role]['after_first']:+.1f} after {second:,})"
            for role in ROLES
        ]
        lines += ["RSS growth per 1,000 parked tasks, MiB: " + ", ".join(parts) + ".", ""]
    creation = result.get("creation")
    if creation:
        shares = ", ".join(f"{_LABELS[role]} {creation['core_share'][role]:.0%}" for role in ROLES)
        per_task = ", ".join(f"{_LABELS[role]} {creation['cpu_ms_per_task'][role]:.2f}" for role in ROLES)
        lines += [
            f"Creation: {creation['created']:,} `tools/call` acknowledged in {creation['wall_s']:.1f} s, "
            f"**{creation['rate']:,.0f} tasks/s** over {result['connections']} connections (p50 "
            f"{creation['p50_ms']:.1f} ms, p99 {creation['p99_ms']:.1f} ms, worst batch). Cores busy "
            f"meanwhile: {shares}, generator {creation['gen_core_share']:.0%}, other "
            f"{creation['other_core_share']:.0%}. Until every batch was parked and the backend idle: "
            f"{creation['park_wall_s']:.1f} s, {creation['park_rate']:,.0f} tasks/s; CPU per parked task "
            f"(ms): {per_task}.",
            "",
        ]
    read = result.get("read")
    if read:
        cpu = read["cpu_s"]
        shares = ", ".join(f"{_LABELS[role]} {cpu[role] / read['wall_s']:.0%}" for role in ROLES)
        lines += [
            f"`tasks/get` of random parked tasks, open loop at {read['rate_target']:g} requests/s for "
            f"{read['sent'] / read['rate_target']:g} s (latency from the scheduled send time):",
            "",
            "| requests | achieved req/s | p50 ms | p90 ms | p99 ms | max ms | errors | API CPU ms/req |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {read['answered']:,} | {read['rate']:.1f} | {read['p50_ms']:.1f} | {read['p90_ms']:.1f} "
            f"| {read['p99_ms']:.1f} | {read['max_ms']:.1f} | {read['errors']} "
            f"| {cpu['api'] / max(1, read['answered']) * 1000:.2f} |",
            "",
            f"Cores busy meanwhile: {shares}, generator {read['gen_cpu_s'] / read['wall_s']:.0%}, other "
            f"{read['other_cpu_s'] / read['wall_s']:.0%}; Temporal CPU per request "
            f"{cpu['temporal'] / max(1, read['answered']) * 1000:.2f} ms. The generator's sends were at "
            f"most {read['send_lag_max_ms']:.1f} ms late.",
            "",
        ]
    lines.append(f"B5 took {result.get('elapsed_s', 0):.0f} s in all.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = row_arguments("bench._parked", __doc__)
    parser.add_argument("--tasks", type=int, help="tasks to park (default 10,000; --quick 300)")
    parser.add_argument("--rate", type=float, default=100.0, help="tasks/get per second (default 100)")
    parser.add_argument("--duration", type=float, help="seconds of tasks/get load (default 20; --quick 5)")
    parser.add_argument("--quick", action="store_true", help="300 tasks and 5 s of tasks/get")
    args = parser.parse_args(argv)
    return row_main(
        args,
        _OPERATIONS,
        lambda tmp: run(
            args.python_longtools,
            tmp,
            tasks=args.tasks or (300 if args.quick else 10_000),
            rate=args.rate,
            duration_s=args.duration if args.duration is not None else (5.0 if args.quick else 20.0),
            pin=not args.no_pin,
        ),
        render,
    )


if __name__ == "__main__":
    sys.exit(main())
