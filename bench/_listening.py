"""B8: hundreds of open ``subscriptions/listen`` streams on one API process: what they cost at rest.

Each stream follows one task of its own (``notifications.taskIds`` with one id), and every task is
``change_later`` (``bench/servers/longtools_waiting.py``, B7's tool) sleeping on a durable timer
far beyond the run, so no task changes while it is measured: what is left is the cost of
following. A stream is served by the API's ``Changes``: one history long poll per followed
workflow, which Temporal answers, empty, every 20 s (``history.longPollExpirationInterval``) and
the watch asks again; and the SDK's SSE transport writes a ``: ping`` comment on a stream that has
been silent for 15 s.

On a fresh stack (a Temporal dev server, a ``longtools worker``, a ``longtools api`` pinned to CPU
0 with ``LONGTOOLS_MAX_LISTENS_PER_PRINCIPAL`` raised, and the generator, a subprocess ``python -m
bench._listening --generate``, pinned to CPU 1):

1. ``streams`` tasks are started with the Tasks extension (each ``tools/call`` answers a
   ``CreateTaskResult``), then the harness waits until the stack is idle;
2. a quiet window with no stream open: CPU seconds per second of the API, Temporal and the worker
   (the cost of idle tasks nobody follows), and the API's ``VmRSS``;
3. one stream per task, all opened at once, each on its own raw connection; a stream is open once
   its acknowledgement (the task's id, and only it) and the task's snapshot (``working``) arrived;
   then each keeps reading, counting pings and any other frame;
4. once the stack is idle again, a second quiet window with every stream open, and ``VmRSS``;
5. every connection is closed, and the API's ``longtools_listen_streams`` gauge must drop to 0.

The windows are 60 s by default: the pings (every 15 s) and the long polls' answers (every 20 s)
of streams opened at once come in bursts, so a window that is a multiple of both counts every
burst the same whatever its phase (a 30 s window holds one or two rounds of long polls).

``python -m bench._listening [--streams N] [--quick] [--json PATH]`` runs it alone and prints the
Markdown section.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from bench import _waiting
from bench._parked import rss_mib
from bench._procs import (
    ROOT,
    Generator,
    StartFailed,
    row_arguments,
    row_main,
    wait_idle,
)
from bench.load import (
    VERSION,
    Connection,
    CpuWindow,
    Failed,
    cpu_seconds,
    http_request,
    meta,
    percentile,
    read_response,
    result_of,
    tree,
)

SCENARIO: Final = "B8"
TOOL: Final = _waiting.TOOL
ROLES: Final = ("api", "temporal", "worker")
STREAMS: Final = 200
QUIET_S: Final = 60.0
"""Seconds of each quiet window: a multiple of the 15 s ping and of the 20 s long poll."""
DELAY_S: Final = 3600.0
"""How long each task sleeps before its question: far beyond the run (the tool's maximum)."""
START_CONNECTIONS: Final = 16
PING_S: Final = 15.0
"""The SDK's ``_SSE_PING_INTERVAL``: a stream silent this long gets a ``: ping`` comment."""
LONG_POLL_S: Final = 20.0
"""Temporal's ``history.longPollExpirationInterval``: when an idle history long poll is answered."""
LISTEN_LIMIT: Final = "100000"
_TASKS_CAPS: Final[dict[str, Any]] = {
    "elicitation": {"form": {}},
    "extensions": {"io.modelcontextprotocol/tasks": {}},
}
_ACK: Final = "notifications/subscriptions/acknowledged"
_TASK: Final = "notifications/tasks"
_SETTLE_MIN_S: Final = 3.0
_SETTLE_TIMEOUT_S: Final = 90.0
_CLOSE_TIMEOUT_S: Final = 30.0


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # noqa: T201


# The generator: a subprocess pinned to CPU 1, one operation per invocation (JSON in, JSON out).


async def start_tasks(spec: dict[str, Any]) -> dict[str, Any]:
    """``tasks`` tasks of ``change_later`` with the Tasks extension, over a few connections."""
    port, count = int(spec["port"]), int(spec["tasks"])
    params = {"name": TOOL, "arguments": {"delay_s": float(spec["delay_s"])}, "_meta": meta(_TASKS_CAPS)}
    task_ids: list[str] = []
    numbers = iter(range(count))

    async def one() -> None:
        conn = Connection(port)
        try:
            for n in numbers:
                body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
                await conn.send(http_request(port, "/mcp", "tools/call", TOOL, json.dumps(body).encode()))
                task = result_of(await conn.receive())
                task_id = task.get("taskId")
                if task.get("resultType") != "task" or not isinstance(task_id, str):
                    raise Failed(f"not a CreateTaskResult: {json.dumps(task)[:300]}")
                if task.get("status", "working") != "working":
                    raise Failed(f"task {task_id} is {task.get('status')} at its start")
                task_ids.append(task_id)
        finally:
            conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(min(START_CONNECTIONS, count))))
    seconds = time.perf_counter() - started
    return {"ok": True, "task_ids": task_ids, "seconds": seconds, "tasks_per_s": count / seconds}


class _Tally:
    """What the open streams received inside the measured window."""

    def __init__(self) -> None:
        self.measuring = False
        self.pings = 0
        self.frames = 0
        self.bytes = 0
        self.sample = ""


class _Stream:
    """One ``subscriptions/listen`` request on a raw connection of its own, and its SSE body."""

    def __init__(self, port: int, number: int, task_id: str) -> None:
        self.task_id = task_id
        self._port = port
        self._number = number
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._buffer = b""
        self._chunked = False
        self.closing = False
        self.ack_s = 0.0
        self.snapshot_s = 0.0

    def _request(self) -> bytes:
        params = {"notifications": {"taskIds": [self.task_id]}, "_meta": meta(_TASKS_CAPS)}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self._number, "method": "subscriptions/listen", "params": params}
        ).encode()
        head = (
            "POST /mcp HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{self._port}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"MCP-Protocol-Version: {VERSION}\r\n"
            "Mcp-Method: subscriptions/listen\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def open(self) -> None:
        """Send the request, then read until the acknowledgement and the task's snapshot came."""
        started = time.perf_counter()
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self._port, limit=1 << 20)
        self._writer.write(self._request())
        head = await self._reader.readuntil(b"\r\n\r\n")
        lower = head.lower()
        if int(head[9:12]) != 200 or b"content-type: text/event-stream" not in lower:
            # Not a stream: a JSON answer (an error), whose body says why.
            start = lower.find(b"\r\ncontent-length:")
            length = int(lower[start + 17 : lower.index(b"\r\n", start + 2)]) if start >= 0 else 0
            body = await self._reader.readexactly(length) if length else b""
            raise Failed(f"not a stream: {head[:12]!r} {body[:300]!r}")
        self._chunked = b"\r\ntransfer-encoding: chunked" in lower
        ack = await self._message()
        self.ack_s = time.perf_counter() - started
        told = ack.get("params", {}).get("notifications", {}).get("taskIds")
        if ack.get("method") != _ACK or told != [self.task_id]:
            raise Failed(f"not the acknowledgement of {self.task_id}: {json.dumps(ack)[:300]}")
        snapshot = await self._message()
        self.snapshot_s = time.perf_counter() - started
        task = snapshot.get("params", {})
        if snapshot.get("method") != _TASK or task.get("taskId") != self.task_id:
            raise Failed(f"not the snapshot of {self.task_id}: {json.dumps(snapshot)[:300]}")
        if task.get("status") != "working":
            raise Failed(f"task {self.task_id} is {task.get('status')}, not working")

    async def _event(self) -> bytes:
        """The next SSE event (its lines, without the blank line that ends it)."""
        assert self._reader is not None
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end >= 0:
                event, self._buffer = self._buffer[:end], self._buffer[end + 4 :]
                return event
            if self._chunked:
                size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    raise Failed(f"the stream of {self.task_id} ended")
                self._buffer += (await self._reader.readexactly(size + 2))[:-2]
            else:
                data = await self._reader.read(1 << 16)
                if not data:
                    raise Failed(f"the stream of {self.task_id} was closed")
                self._buffer += data

    async def _message(self) -> dict[str, Any]:
        """The next JSON-RPC message, past any ping."""
        while True:
            data = _data(await self._event())
            if data:
                decoded: dict[str, Any] = json.loads(data)
                return decoded

    async def pump(self, tally: _Tally) -> None:
        """Read and count whatever comes, until the connection is closed by ``close``."""
        try:
            while True:
                event = await self._event()
                lines = event.split(b"\r\n")
                if all(line.startswith(b":") for line in lines):
                    if tally.measuring:
                        tally.pings += 1
                        tally.bytes += len(event) + 4
                    continue
                if tally.measuring:
                    tally.frames += 1
                    tally.bytes += len(event) + 4
                    tally.sample = tally.sample or event[:300].decode(errors="replace")
                data = _data(event)
                if data and "id" in json.loads(data):  # the final result (or an error): the end
                    raise Failed(f"the stream of {self.task_id} ended: {data[:300]!r}")
        except (OSError, asyncio.IncompleteReadError, Failed):
            if not self.closing:
                raise

    def close(self) -> None:
        self.closing = True
        if self._writer is not None:
            self._writer.close()


def _data(event: bytes) -> bytes:
    """The data of an SSE event (empty for a comment, such as a ping)."""
    return b"".join(line[5:].strip() for line in event.split(b"\r\n") if line.startswith(b"data:"))


async def _gauge(port: int, name: str) -> float:
    """A gauge of the API's ``/metrics``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        response, _ = await read_response(reader)
    finally:
        writer.close()
    for line in response.body.decode().splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise Failed(f"/metrics has no {name}")


def _threads(roots: list[int]) -> int:
    """The threads of ``roots`` and their descendants: the Temporal client's runtime adds some while
    many of its calls are in flight, and each costs the RSS its stack and its allocator arena."""
    count = 0
    for pid in tree(roots):
        try:
            with open(f"/proc/{pid}/status", "rb") as status:
                count += next(int(line.split()[1]) for line in status if line.startswith(b"Threads:"))
        except (OSError, StopIteration):
            continue
    return count


async def _settle(roots: Mapping[str, list[int]]) -> float:
    """Until the stack is idle (``bench._procs.wait_idle``, without blocking the streams' reading);
    at least ``_SETTLE_MIN_S``. Returns the seconds waited."""
    started = time.monotonic()
    await asyncio.sleep(_SETTLE_MIN_S)
    group = tree([pid for pids in roots.values() for pid in pids])
    before = cpu_seconds(group)
    while time.monotonic() - started < _SETTLE_TIMEOUT_S:
        await asyncio.sleep(0.5)
        after = cpu_seconds(group)
        if after - before < 0.05 * 0.5:
            break
        before = after
    return time.monotonic() - started


async def listen_load(spec: dict[str, Any]) -> dict[str, Any]:
    """The quiet window without streams, one stream per task, the quiet window with them."""
    port, roots, quiet_s = int(spec["port"]), spec["roles"], float(spec["quiet_s"])
    task_ids: list[str] = spec["task_ids"]
    count = len(task_ids)
    window = CpuWindow(roots)
    await asyncio.sleep(quiet_s)
    idle = _waiting._per_second(window.close())
    rss_before = rss_mib(roots["api"])
    threads_before = _threads(roots["api"])

    streams = [_Stream(port, n, task_id) for n, task_id in enumerate(task_ids)]
    tally = _Tally()
    pumps: list[asyncio.Task[None]] = []
    try:
        window = CpuWindow(roots)
        started = time.perf_counter()
        opened = await asyncio.gather(*(stream.open() for stream in streams), return_exceptions=True)
        open_s = time.perf_counter() - started
        open_cpu = window.close()["cpu_s"]
        failed = [exc for exc in opened if isinstance(exc, BaseException)]
        if failed:
            raise Failed(f"{len(failed)} of {count} streams did not open; first: {failed[0]!r}")
        pumps = [asyncio.create_task(stream.pump(tally)) for stream in streams]
        held = await _gauge(port, "longtools_listen_streams")
        if held != count:
            raise Failed(f"the API holds {held:.0f} listen streams, not {count}")
        settled_s = await _settle(roots)
        tally.measuring = True
        window = CpuWindow(roots)
        await asyncio.sleep(quiet_s)
        with_streams = _waiting._per_second(window.close())
        tally.measuring = False
        rss_after = rss_mib(roots["api"])
        threads_after = _threads(roots["api"])
        for pump in pumps:
            if pump.done():
                pump.result()  # a stream that ended early fails the run
                raise Failed("a stream stopped reading")
    finally:
        for stream in streams:
            stream.close()
        await asyncio.gather(*pumps, return_exceptions=True)
    closing = time.perf_counter()
    while (left := await _gauge(port, "longtools_listen_streams")) > 0:
        if time.perf_counter() - closing > _CLOSE_TIMEOUT_S:
            raise Failed(f"{left:.0f} listen streams still held {_CLOSE_TIMEOUT_S:g} s after closing")
        await asyncio.sleep(0.1)
    closed_s = time.perf_counter() - closing
    acks = sorted(stream.ack_s for stream in streams)
    snapshots = sorted(stream.snapshot_s for stream in streams)
    return {
        "ok": True,
        "streams": count,
        "idle": idle,
        "with_streams": with_streams,
        "rss_before_mib": rss_before,
        "rss_after_mib": rss_after,
        "threads_before": threads_before,
        "threads_after": threads_after,
        "open_s": open_s,
        "open_cpu_ms_per_stream": {role: seconds * 1000 / count for role, seconds in open_cpu.items()},
        "ack_min_ms": acks[0] * 1000,
        "ack_p50_ms": percentile(acks, 0.5) * 1000,
        "ack_p99_ms": percentile(acks, 0.99) * 1000,
        "snapshot_p50_ms": percentile(snapshots, 0.5) * 1000,
        "snapshot_p99_ms": percentile(snapshots, 0.99) * 1000,
        "settled_s": settled_s,
        "pings_per_s": tally.pings / with_streams["wall_s"],
        "frames": tally.frames,
        "frame_sample": tally.sample,
        "bytes_per_s": tally.bytes / with_streams["wall_s"],
        "closed_s": closed_s,
        "rss_closed_mib": rss_mib(roots["api"]),
    }


_OPERATIONS = {"start": start_tasks, "listen": listen_load}


# The orchestrator: one stack, the two windows, the figures.


class _Stack(_waiting._Stack):
    """B7's stack of this tree (Temporal, a worker, an API with ``change_later``), with the bound
    on streams per principal raised: every benchmark stream is the one anonymous principal's."""

    def __init__(self, python: Path, work: Path, api_cpus: set[int] | None, code: Path = ROOT) -> None:
        super().__init__(python, code, work, api_cpus)
        self._env = {**self._env, "LONGTOOLS_MAX_LISTENS_PER_PRINCIPAL": LISTEN_LIMIT}


def run(
    python_longtools: Path,
    tmp: Path,
    *,
    streams: int = STREAMS,
    quiet_s: float = QUIET_S,
    pin: bool = True,
    code: Path = ROOT,
) -> dict[str, Any]:
    """B8 end to end on a stack of its own (of the tree ``code``); a dict of figures (``ok`` false
    with a ``problem``)."""
    pin = pin and (os.cpu_count() or 1) >= 2
    work = Path(tempfile.mkdtemp(prefix="b8-", dir=tmp))
    generate = Generator("bench._listening", {1} if pin else None)
    record: dict[str, Any] = {
        "scenario": SCENARIO,
        "ok": False,
        "streams": streams,
        "quiet_s": quiet_s,
        "delay_s": DELAY_S,
        "pinned": "API on CPU 0, generator on CPU 1" if pin else "not pinned",
    }
    stack = _Stack(python_longtools, work, {0} if pin else None, code)
    try:
        stack.start()
        base = {"port": stack.port, "roles": stack.roots}
        say(f"B8: starting {streams} tasks")
        started = generate({**base, "op": "start", "tasks": streams, "delay_s": DELAY_S}, 300)
        record["start_tasks_per_s"] = started["tasks_per_s"]
        record["idle_wait_s"] = wait_idle(stack.pids, timeout=120)
        say(f"B8: {quiet_s:g} s without streams, {streams} streams opened, {quiet_s:g} s with them")
        spec = {**base, "op": "listen", "task_ids": started["task_ids"], "quiet_s": quiet_s}
        outcome = generate(spec, 2 * quiet_s + 300)
        record.update({key: value for key, value in outcome.items() if key != "ok"})
        record["ok"] = True
        say(f"B8: {_line(record)}")
        return record
    except (Failed, StartFailed, subprocess.SubprocessError) as exc:
        record["problem"] = f"{exc}\n{stack.logs()[-3000:]}"
        return record
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)


def _difference(result: Mapping[str, Any], role: str) -> float:
    after: float = result["with_streams"]["cpu_per_s"][role]
    before: float = result["idle"]["cpu_per_s"][role]
    return after - before


def _line(result: Mapping[str, Any]) -> str:
    per_stream = {role: _difference(result, role) * 1e6 / result["streams"] for role in ROLES}
    return ", ".join(f"{role} {value:+.0f} µs/s per stream" for role, value in per_stream.items())


def render(result: dict[str, Any]) -> str:
    streams = result["streams"]
    lines = [
        f"**B8**: {streams:,} `subscriptions/listen` streams, each following its own idle task "
        f"(`change_later` on a {result['delay_s']:.0f} s durable timer), on one API process; "
        f"quiet windows of {result['quiet_s']:g} s; {result['pinned']}",
        "",
    ]
    if not result.get("ok"):
        return "\n".join([*lines, f"B8 failed: {str(result.get('problem'))[:1500]}", ""])
    lines += [
        f"| role | idle tasks, no stream (core) | with {streams:,} streams (core) | difference (core) "
        "| per stream (µs CPU per s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for role in (*ROLES, "all three"):
        roles = ROLES if role == "all three" else (role,)
        idle = sum(result["idle"]["cpu_per_s"][one] for one in roles)
        busy = sum(result["with_streams"]["cpu_per_s"][one] for one in roles)
        per_stream = (busy - idle) * 1e6 / streams
        lines.append(f"| {role} | {idle:.4f} | {busy:.4f} | {busy - idle:+.4f} | {per_stream:+.1f} |")
    rss_delta = result["rss_after_mib"] - result["rss_before_mib"]
    opening = result["open_cpu_ms_per_stream"]
    idle, busy = result["idle"], result["with_streams"]
    lines += [
        "",
        f"- API RSS: {result['rss_before_mib']:.1f} MiB before the streams, {result['rss_after_mib']:.1f} "
        f"MiB with them, {rss_delta * 1024 / streams:+.1f} KiB per stream; "
        f"{result['rss_closed_mib']:.1f} MiB once all were closed ({result['closed_s']:.2f} s for the API "
        f"to let go of them); {result.get('threads_before', '?')} threads before, "
        f"{result.get('threads_after', '?')} with them.",
        f"- Opening all {streams:,} at once: {result['open_s']:.2f} s; acknowledgement min "
        f"{result['ack_min_ms']:.0f} ms, p50 {result['ack_p50_ms']:.0f} ms, p99 {result['ack_p99_ms']:.0f} "
        f"ms; snapshot p50 {result['snapshot_p50_ms']:.0f} ms, p99 {result['snapshot_p99_ms']:.0f} ms; CPU "
        f"per stream opened: API {opening['api']:.2f} ms, Temporal {opening['temporal']:.2f} ms, worker "
        f"{opening['worker']:.2f} ms.",
        f"- In the window with streams the clients got {result['pings_per_s']:.1f} pings/s "
        f"({streams / PING_S:.1f} expected: one per stream per {PING_S:g} s), {result['bytes_per_s']:.0f} "
        f"bytes/s in all, and {result['frames']} other frames.",
        f"- Other activity on the machine: {idle['other_cpu_per_s']:.3f} core in the window without "
        f"streams, {busy['other_cpu_per_s']:.3f} in the one with them; the generator "
        f"{busy['gen_cpu_per_s']:.4f} core with them.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = row_arguments("bench._listening", __doc__, code=True)
    parser.add_argument("--streams", type=int, help=f"listen streams (default {STREAMS}; --quick 50)")
    parser.add_argument(
        "--quiet", type=float, help=f"seconds of each quiet window (default {QUIET_S:g}; --quick 8)"
    )
    parser.add_argument("--quick", action="store_true", help="50 streams, 8 s windows")
    args = parser.parse_args(argv)
    return row_main(
        args,
        _OPERATIONS,
        lambda tmp: run(
            args.python_longtools,
            tmp,
            streams=args.streams or (50 if args.quick else STREAMS),
            quiet_s=args.quiet or (8.0 if args.quick else QUIET_S),
            pin=not args.no_pin,
            code=args.code,
        ),
        render,
    )


if __name__ == "__main__":
    sys.exit(main())
