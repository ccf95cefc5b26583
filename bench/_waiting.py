"""B7: 1,000 clients waiting on running tasks against one API process: what the waiting costs.

Each client calls ``change_later`` (``bench/servers/longtools_waiting.py``), a long tool whose task
sleeps on a durable timer, then asks one question at a moment set for it. The clients wait for
that question in one of two ways:

- **held**: a ``tools/call`` without the Tasks extension; the API holds the MRTR round open while
  the task works (``LONGTOOLS_MRTR_WAIT_S`` is 120 here, so one round covers the wait);
- **poll**: a ``tools/call`` with the Tasks extension, then ``tasks/get`` every ``pollIntervalMs``
  the server suggests, until the task is ``input_required``.

The modes are run in turn: all held, all polling, and half and half (**mix**). The clients start
over a ramp (``RAMP_RATE`` a second). Once the last has started, and before the first question is
due, a quiet window measures CPU seconds per second of the API, of Temporal and of the worker, and
the requests per second the clients send. Then the questions come, spread over 20 seconds, and
each client records the time from the question (its moment in the workflow) to its answer.

Each mode runs on two longtools: this tree, and the tree of ``BASE`` (extracted with ``git
archive``), the last commit before waiting changed, whose every waiter polls
``DescribeWorkflowExecution`` itself. Each mode of each tree gets a fresh stack (nothing of the
last mode's tasks lingers): a Temporal dev server, a ``longtools worker`` and a ``longtools api``,
the API pinned to CPU 0 and the generator (a subprocess, ``python -m bench._waiting --generate``)
to CPU 1. First an echo ``tools/call`` load on 8 connections gives the API's CPU per request, for
the ratio of a ``tasks/get`` poll to an echo call.

``python -m bench._waiting [--clients N] [--quick]`` runs it alone and prints the Markdown section.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from bench._procs import (
    BENCH_LIMITS,
    KEY_RINGS,
    ROOT,
    SERVING,
    WORKER_READY,
    Child,
    Generator,
    Stack,
    StartFailed,
    row_arguments,
    row_main,
    spawn,
    start_ready,
    start_temporal,
    wait_idle,
)
from bench.load import (
    Connection,
    CpuWindow,
    Failed,
    http_request,
    meta,
    percentile,
    read_response,
    result_of,
)

SCENARIO: Final = "B7"
BASE: Final = "016e750"
"""The last commit before issue 14: its held rounds, settles and duplicates each poll Temporal."""
TOOLS: Final = "b7_tools"
TOOL: Final = "change_later"
PREFIX: Final = "asked at "
MODES: Final = ("held", "poll", "mix")
ROLES: Final = ("api", "worker", "temporal")
CLIENTS: Final = 1000
RAMP_RATE: Final = 40.0
"""Clients started a second: each start is a workflow start, which the API must finish first."""
QUIET_S: Final = 20.0
"""Seconds of the quiet window, after the ramp, before the first question."""
SPREAD_S: Final = 20.0
"""The questions come over this many seconds: 50 a second for 1,000 clients."""
ECHO_S: Final = 5.0
_TASKS_CAPS: Final[dict[str, Any]] = {
    "elicitation": {"form": {}},
    "extensions": {"io.modelcontextprotocol/tasks": {}},
}
_FORM_CAPS: Final[dict[str, Any]] = {"elicitation": {"form": {}}}
# BASE's tree is from before the one ``longtools`` package (its command was ``service.cli``), which
# it must find first: the installed ``longtools`` is this tree's.
_LAUNCH: Final = (
    "import sys\n"
    "try:\n    from service.cli import main\n"
    "except ImportError:\n    from longtools.cli import main\n"
    "sys.argv[0] = 'longtools'; sys.exit(main())"
)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # noqa: T201


# The generator: a subprocess pinned to CPU 1, one operation per invocation (JSON in, JSON out).


def _post(port: int, method: str, name: str, request_id: int, params: Mapping[str, Any]) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return http_request(port, "/mcp", method, name, json.dumps(body).encode())


def _asked_at(result: Mapping[str, Any]) -> float | None:
    """The moment the question in ``result`` was asked (epoch seconds), or None if it has none."""
    for request in (result.get("inputRequests") or {}).values():
        message = str(request.get("params", {}).get("message", ""))
        if message.startswith(PREFIX):
            return int(message[len(PREFIX) :]) / 1000
    return None


class _Tally:
    """What the clients did, and the requests they sent inside the measured window."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.requests = 0
        self.created = 0
        """Tasks of polling clients created so far (held rounds are counted by the API's gauge)."""
        self.window: tuple[float, float] | None = None

    def sent(self) -> None:
        now = time.time()
        if self.window is not None and self.window[0] <= now < self.window[1]:
            self.requests += 1


async def _held(port: int, n: int, delay_s: float, tally: _Tally) -> None:
    conn = Connection(port)
    params: dict[str, Any] = {"name": TOOL, "arguments": {"delay_s": delay_s}, "_meta": meta(_FORM_CAPS)}
    try:
        while True:
            tally.sent()
            await conn.send(_post(port, "tools/call", TOOL, n, params))
            result = result_of(await conn.receive())
            asked = _asked_at(result)
            if asked is not None:
                tally.latencies.append(time.time() - asked)
                return
            state = result.get("requestState")
            if result.get("resultType") != "input_required" or not isinstance(state, str):
                raise Failed(f"neither the question nor a round to go on: {json.dumps(result)[:300]}")
            params = {**params, "requestState": state, "inputResponses": {}}  # "not yet": go on
    finally:
        conn.close()


async def _poll(port: int, n: int, delay_s: float, tally: _Tally) -> None:
    conn = Connection(port)
    try:
        call = {"name": TOOL, "arguments": {"delay_s": delay_s}, "_meta": meta(_TASKS_CAPS)}
        await conn.send(_post(port, "tools/call", TOOL, n, call))
        task = result_of(await conn.receive())
        task_id = task.get("taskId")
        if task.get("resultType") != "task" or not isinstance(task_id, str):
            raise Failed(f"not a CreateTaskResult: {json.dumps(task)[:300]}")
        tally.created += 1
        while True:
            await asyncio.sleep(int(task.get("pollIntervalMs", 1000)) / 1000)
            tally.sent()
            get = {"taskId": task_id, "_meta": meta(_TASKS_CAPS)}
            await conn.send(_post(port, "tasks/get", task_id, n, get))
            task = result_of(await conn.receive())
            asked = _asked_at(task)
            if asked is not None:
                tally.latencies.append(time.time() - asked)
                return
            if task.get("status") != "working":
                raise Failed(f"task {task_id} is {task.get('status')} before its question")
    finally:
        conn.close()


async def _held_rounds(port: int) -> float:
    """The API's ``longtools_mrtr_held_rounds`` gauge."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        response, _ = await read_response(reader)
    finally:
        writer.close()
    for line in response.body.decode().splitlines():
        if line.startswith("longtools_mrtr_held_rounds "):
            return float(line.split()[1])
    return 0.0


def _per_second(measured: Mapping[str, Any]) -> dict[str, Any]:
    """A ``CpuWindow``'s seconds as cores: CPU seconds per second of the window."""
    wall = float(measured["wall_s"])
    return {
        "wall_s": wall,
        "cpu_per_s": {role: seconds / wall for role, seconds in measured["cpu_s"].items()},
        "gen_cpu_per_s": measured["gen_cpu_s"] / wall,
        "other_cpu_per_s": measured["other_cpu_s"] / wall,
    }


async def wait_load(spec: dict[str, Any]) -> dict[str, Any]:
    """``clients`` clients, each waiting ``mode``'s way for a question due after the ramp."""
    port, clients, roots = int(spec["port"]), int(spec["clients"]), spec["roles"]
    kinds = {"held": ["held"] * clients, "poll": ["poll"] * clients}.get(
        spec["mode"], ["held" if n % 2 == 0 else "poll" for n in range(clients)]
    )
    ramp_s = clients / float(spec["ramp_rate"])
    started = time.time()
    first_question = started + ramp_s + float(spec["quiet_s"])
    tally = _Tally()
    loop = asyncio.get_running_loop()
    jobs: list[asyncio.Task[None]] = []
    for n, kind in enumerate(kinds):
        delay = started + n / float(spec["ramp_rate"]) - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        asked = first_question + float(spec["spread_s"]) * n / clients
        waiting = _held if kind == "held" else _poll
        jobs.append(loop.create_task(waiting(port, n, asked - time.time(), tally)))
    # The window opens once every task has started: each poller has its task, and the API holds
    # every held round (its own gauge says so), so no start's cost falls inside it.
    held = kinds.count("held")
    while tally.created < clients - held or await _held_rounds(port) < held:
        if time.time() > first_question - 4.0:
            for job in jobs:
                job.cancel()
            raise Failed(
                f"after {time.time() - started:.1f} s only {tally.created} tasks and "
                f"{await _held_rounds(port):.0f} held rounds were up: no quiet window was left"
            )
        await asyncio.sleep(0.25)
    ramped = time.time()
    window_start = ramped + 1.0
    window_end = first_question - 0.5
    tally.window = (window_start, window_end)
    await asyncio.sleep(window_start - time.time())
    window = CpuWindow(roots)
    await asyncio.sleep(window_end - time.time())
    measured = _per_second(window.close())
    outcomes = await asyncio.gather(*jobs, return_exceptions=True)
    errors = [f"{type(exc).__name__}: {exc}" for exc in outcomes if isinstance(exc, BaseException)]
    ordered = sorted(tally.latencies)
    if not ordered:
        raise Failed(f"no client saw its question; first error: {errors[0] if errors else 'none'}")
    return {
        "ok": True,
        "mode": spec["mode"],
        "clients": clients,
        "saw": len(ordered),
        "errors": len(errors),
        "error_sample": errors[0] if errors else "",
        "ramp_s": ramped - started,
        "requests_per_s": tally.requests / measured["wall_s"],
        "p50_ms": percentile(ordered, 0.5) * 1000,
        "p99_ms": percentile(ordered, 0.99) * 1000,
        "max_ms": ordered[-1] * 1000,
        **measured,
    }


async def echo_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Echo ``tools/call`` back to back on 8 connections for ``seconds``: the API's CPU per call."""
    port, seconds = int(spec["port"]), float(spec["seconds"])
    params = {"name": "echo", "arguments": {"text": "0123456789abcdef"}, "_meta": meta()}
    request = _post(port, "tools/call", "echo", 1, params)
    calls = 0
    stop_at = time.monotonic() + seconds

    async def one() -> None:
        nonlocal calls
        conn = Connection(port)
        try:
            while time.monotonic() < stop_at:
                await conn.send(request)
                result_of(await conn.receive())
                calls += 1
        finally:
            conn.close()

    window = CpuWindow(spec["roles"])
    await asyncio.gather(*(one() for _ in range(8)))
    api_cpu = window.close()["cpu_s"]["api"]
    return {"ok": True, "calls": calls, "api_cpu_ms_per_call": api_cpu / max(calls, 1) * 1000}


_OPERATIONS = {"wait": wait_load, "echo": echo_load}


# The orchestrator: a stack per tree, the modes, the figures.


def base_tree(work: Path) -> Path:
    """``BASE``'s files, from this repository's history."""
    target = work / f"longtools-{BASE}"
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", BASE, "service", "workflows", "activities"],
        capture_output=True,
        check=True,
    ).stdout
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


class _Stack(Stack):
    """Temporal, a worker and an API of one longtools tree, with B7's tool module."""

    def __init__(self, python: Path, code: Path, work: Path, api_cpus: set[int] | None) -> None:
        super().__init__()
        self._python = python
        self._code = code
        self._work = work
        self._api_cpus = api_cpus
        tools = work / "tools"
        tools.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "bench" / "servers" / "longtools_waiting.py", tools / f"{TOOLS}.py")
        self._env = {
            "PYTHONPATH": f"{code}{os.pathsep}{tools}",
            "LONGTOOLS_LOG_FORMAT": "json",
            "LONGTOOLS_MRTR_WAIT_S": "120",
            **KEY_RINGS,
            **BENCH_LIMITS,
        }

    def _longtools(self, name: str, *args: str, cpus: set[int] | None = None) -> Child:
        return spawn(
            name,
            [str(self._python), "-c", _LAUNCH, *args, "--tools", TOOLS, "--data-dir", str(self._work / name)],
            log_dir=self._work,
            cwd=self._code,
            env=self._env,
            cpus=cpus,
        )

    def start(self) -> None:
        self.children["temporal"], address = start_temporal(self._python.parent, self._work)
        self.children["worker"] = start_ready(
            lambda attempt: self._longtools(f"worker-{attempt}", "worker", "--temporal-address", address),
            WORKER_READY,
        )
        api = self._longtools(
            "api",
            "api",
            "--no-auth",
            "--port",
            "0",
            "--no-examples",
            "--temporal-address",
            address,
            cpus=self._api_cpus,
        )
        self.children["api"] = api
        self.port = int(api.wait_for(SERVING, 60).group(1))


def run(
    python_longtools: Path,
    tmp: Path,
    *,
    clients: int = CLIENTS,
    quiet_s: float = QUIET_S,
    pin: bool = True,
    trees: tuple[str, ...] = ("before", "after"),
    modes: tuple[str, ...] = MODES,
) -> dict[str, Any]:
    """B7 end to end on stacks of its own; a dict of figures (``ok`` false with a ``problem``)."""
    pin = pin and (os.cpu_count() or 1) >= 2
    work = Path(tempfile.mkdtemp(prefix="b7-", dir=tmp))
    generate = Generator("bench._waiting", {1} if pin else None)
    record: dict[str, Any] = {
        "scenario": SCENARIO,
        "ok": False,
        "clients": clients,
        "base": BASE,
        "pinned": "API on CPU 0, generator on CPU 1" if pin else "not pinned",
        "rows": [],
    }
    try:
        for label in trees:
            code = base_tree(work) if label == "before" else ROOT
            say(f"B7: {label} ({code.name if label == 'before' else 'this tree'})")
            for mode in modes:  # a fresh stack each: nothing of the last mode's tasks lingers
                stack = _Stack(python_longtools, code, work / f"{label}-{mode}", {0} if pin else None)
                try:
                    stack.start()
                    base = {"port": stack.port, "roles": stack.roots}
                    echo = generate({**base, "op": "echo", "seconds": ECHO_S}, 120)
                    wait_idle(stack.pids, timeout=120)
                    spec = {
                        **base,
                        "op": "wait",
                        "mode": mode,
                        "clients": clients,
                        "ramp_rate": RAMP_RATE,
                        "quiet_s": quiet_s,
                        "spread_s": SPREAD_S,
                    }
                    outcome = generate(spec, 900)
                    row = {"tree": label, "echo_api_cpu_ms": echo["api_cpu_ms_per_call"], **outcome}
                    record["rows"].append(row)
                    say(f"B7: {label} {mode}: {_line(row)}")
                except (Failed, StartFailed, subprocess.SubprocessError) as exc:
                    record["problem"] = f"{label} {mode}: {exc}\n{stack.logs()[-3000:]}"
                    return record
                finally:
                    stack.stop()
        record["ok"] = True
        return record
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _line(row: Mapping[str, Any]) -> str:
    cpu = row["cpu_per_s"]
    return (
        f"API {cpu['api']:.2f} + Temporal {cpu['temporal']:.2f} core, {row['requests_per_s']:.0f} req/s, "
        f"p50 {row['p50_ms']:.0f} ms, p99 {row['p99_ms']:.0f} ms"
    )


def render(result: dict[str, Any]) -> str:
    lines = [
        f"**B7**: {result['clients']:,} clients waiting on running tasks (a question due after a quiet "
        f"window) against one API process; `before` is commit {result['base']} (every waiter polls "
        f"Temporal), `after` this tree; {result['pinned']}",
        "",
    ]
    if not result.get("ok"):
        lines += [f"B7 failed: {str(result.get('problem'))[:1500]}", ""]
    rows = result.get("rows", [])
    if rows:
        lines += [
            "| tree | waiting as | API core | Temporal core | API + Temporal | worker core "
            "| requests/s | API ms per request ÷ echo | change seen p50 ms | p99 ms | saw |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows:
            cpu = row["cpu_per_s"]
            per_request = (
                f"{cpu['api'] * 1000 / row['requests_per_s'] / row['echo_api_cpu_ms']:.2f}x"
                if row["requests_per_s"] >= 1
                else "-"
            )
            lines.append(
                f"| {row['tree']} | {row['mode']} | {cpu['api']:.3f} | {cpu['temporal']:.3f} "
                f"| {cpu['api'] + cpu['temporal']:.3f} | {cpu['worker']:.3f} | {row['requests_per_s']:.0f} "
                f"| {per_request} | {row['p50_ms']:.0f} | {row['p99_ms']:.0f} "
                f"| {row['saw']}/{row['clients']} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = row_arguments("bench._waiting", __doc__)
    parser.add_argument("--clients", type=int, help="waiting clients (default 1,000; --quick 100)")
    parser.add_argument("--quick", action="store_true", help="100 clients, an 8 s quiet window")
    parser.add_argument("--tree", choices=("before", "after"), help="only this tree (default: both)")
    parser.add_argument("--mode", choices=MODES, help="only this way of waiting (default: each)")
    args = parser.parse_args(argv)
    return row_main(
        args,
        _OPERATIONS,
        lambda tmp: run(
            args.python_longtools,
            tmp,
            clients=args.clients or (100 if args.quick else CLIENTS),
            quiet_s=8.0 if args.quick else QUIET_S,
            pin=not args.no_pin,
            trees=(args.tree,) if args.tree else ("before", "after"),
            modes=(args.mode,) if args.mode else MODES,
        ),
        render,
    )


if __name__ == "__main__":
    sys.exit(main())
