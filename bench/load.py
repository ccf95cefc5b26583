"""The load generator: raw keep-alive HTTP/1.1 over asyncio streams, in a process of its own.

Run as ``python -m bench.load`` with a JSON spec on stdin (see `Spec`); it prints one JSON object.
It uses the standard library only, so any interpreter runs it.

Each of ``connections`` connections sends a pre-built request, reads the answer with minimal
parsing (status line, then ``Content-Length``, ``Transfer-Encoding: chunked`` or read-to-close; an
SSE body's JSON-RPC message is its last ``data:`` line) and sends the next one at once. A ``call``
operation is one request; an ``mrtr`` operation is a two-round exchange whose second request
carries ``inputResponses`` and the ``requestState`` of the first answer. After ``warmup_s`` it
measures for ``duration_s``: the operations that end inside the window, their latencies, its own
CPU time (``getrusage``), and the CPU time of the server processes (``/proc/<pid>/stat``, each
root pid with its descendants) read at the window's edges.

With ``"check": true`` it runs one operation on one connection and validates every answer fully
(JSON-RPC result, ``resultType``, the echoed text), so each server is checked before it is timed.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

VERSION: Final = "2026-07-28"
CLIENT_CAPABILITIES: Final[dict[str, Any]] = {"elicitation": {"form": {}}}
_CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")
_CONFIRM: Final = {"confirm": {"action": "accept", "content": {"confirm": True}}}


class Failed(Exception):
    """An answer that is not what the scenario expects (the message says what was wrong)."""


C = TypeVar("C")
"""A client of a timed run (`Flows`)."""


@dataclass
class Spec:
    """What to run: where, which operation, how hard and for how long."""

    port: int
    kind: str  # "call" (one tools/call) or "mrtr" (two rounds: question, then answer)
    tool: str
    text: str
    path: str = "/mcp"
    connections: int = 32
    warmup_s: float = 2.0
    duration_s: float = 10.0
    check: bool = False
    server_pids: list[int] = field(default_factory=list)
    aux_pids: list[int] = field(default_factory=list)


@dataclass
class Response:
    status: int
    body: bytes
    head: bytes = b""
    """The status line and headers, as sent (``header`` reads one)."""


def header(head: bytes, name: bytes) -> str | None:
    """The value of header ``name`` (lower case) in a response ``head``, or None."""
    lower = head.lower()
    start = lower.find(b"\r\n" + name + b":")
    if start < 0:
        return None
    end = lower.index(b"\r\n", start + 2)
    return head[start + len(name) + 3 : end].strip().decode("latin-1")


def meta(capabilities: Mapping[str, Any] = CLIENT_CAPABILITIES) -> dict[str, Any]:
    """The request ``_meta`` every generator sends (2026-07-28: version, capabilities, client)."""
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "longtools-bench", "version": "0"},
    }


def http_request(port: int, path: str, method: str, name: str, body: bytes) -> bytes:
    """One raw 2026-07-28 POST with the headers every server gets, then ``body``."""
    head = (
        f"POST {path} HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: {VERSION}\r\n"
        f"Mcp-Method: {method}\r\n"
        f"Mcp-Name: {name}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _params(spec: Spec) -> dict[str, Any]:
    return {"name": spec.tool, "arguments": {"text": spec.text}, "_meta": meta()}


def first_request(spec: Spec) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": _params(spec)}).encode()
    return http_request(spec.port, spec.path, "tools/call", spec.tool, body)


class AnswerTemplate:
    """The second round's request, pre-built around the one part that changes: the requestState."""

    def __init__(self, spec: Spec) -> None:
        self._spec = spec
        params = {**_params(spec), "inputResponses": _CONFIRM, "requestState": "\x00"}
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
        prefix, suffix = body.split(json.dumps("\x00"))
        self._prefix = prefix.encode()
        self._suffix = suffix.encode()

    def build(self, state: str) -> bytes:
        body = self._prefix + json.dumps(state).encode() + self._suffix
        return http_request(self._spec.port, self._spec.path, "tools/call", self._spec.tool, body)


async def read_response(reader: asyncio.StreamReader) -> tuple[Response, bool]:
    """One HTTP/1.1 response and whether the server closes the connection after it."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    start = lower.find(b"\r\ncontent-length:")
    if start >= 0:
        end = lower.index(b"\r\n", start + 2)
        body = await reader.readexactly(int(lower[start + 17 : end]))
    elif b"\r\ntransfer-encoding: chunked" in lower:
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers are expected: the blank line ends it
                break
            parts.append((await reader.readexactly(size + 2))[:-2])
        body = b"".join(parts)
    else:
        body = await reader.read()
        return Response(status, body, head), True
    return Response(status, body, head), b"\r\nconnection: close" in lower


def message(response: Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or SSE answer (an SSE stream's last ``data:`` line)."""
    body = response.body
    if body.startswith((b"event:", b"data:", b"id:", b":")):
        lines = [line for line in body.split(b"\n") if line.startswith(b"data:")]
        if not lines:
            raise Failed(f"an SSE answer without data: {body[:300]!r}")
        body = lines[-1][5:]
    decoded = json.loads(body)
    if not isinstance(decoded, dict):
        raise Failed(f"not a JSON-RPC message: {body[:300]!r}")
    return decoded


def result_of(response: Response) -> dict[str, Any]:
    if response.status != 200:
        raise Failed(f"HTTP {response.status}: {response.body[:300]!r}")
    decoded = message(response)
    result = decoded.get("result")
    if not isinstance(result, dict):
        raise Failed(f"no result: {json.dumps(decoded)[:300]}")
    return result


def check_complete(result: dict[str, Any], text: str) -> None:
    """A complete, successful CallToolResult that carries ``text`` in a text block."""
    if result.get("resultType", "complete") != "complete" or result.get("isError"):
        raise Failed(f"not a successful result: {json.dumps(result)[:300]}")
    blocks = [block.get("text", "") for block in result.get("content", []) if isinstance(block, dict)]
    if not any(text in block for block in blocks):
        raise Failed(f"the text {text!r} is not in the result: {json.dumps(result)[:300]}")


def request_state(result: dict[str, Any]) -> str:
    """The requestState of an ``input_required`` answer that asks the ``confirm`` question."""
    state = result.get("requestState")
    requests = result.get("inputRequests")
    if result.get("resultType") != "input_required" or not isinstance(state, str):
        raise Failed(f"not an input_required result with a requestState: {json.dumps(result)[:300]}")
    if not isinstance(requests, dict) or "confirm" not in requests:
        raise Failed(f"the confirm question is missing: {json.dumps(result)[:300]}")
    return state


class Flows(Generic[C]):
    """What `measure` drives: the window flags, and what was measured inside the window. Each
    ``connection()`` is one client (``C``) doing ``one`` operation after another until
    ``stopping``; a subclass says how a client opens, runs one operation and closes."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.expect = spec.text.encode()
        self.measuring = False
        self.stopping = False
        self.latencies: list[float] = []
        self.errors = 0
        self.error_sample = ""

    async def open(self) -> C:
        raise NotImplementedError

    async def one(self, client: C) -> bool:
        """One operation on the hot path; True when every answer was the expected one."""
        raise NotImplementedError

    def close(self, client: C) -> None:
        raise NotImplementedError

    def _error(self, what: str) -> None:
        if self.measuring:
            self.errors += 1
        if not self.error_sample:
            self.error_sample = what

    async def connection(self) -> None:
        client = await self.open()
        try:
            while not self.stopping:
                started = time.perf_counter()
                ok = await self.one(client)
                if self.measuring and ok:
                    self.latencies.append(time.perf_counter() - started)
        finally:
            self.close(client)


class Run(Flows["Connection"]):
    """B1 and B2: one keep-alive connection per client, the requests pre-built."""

    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        self.first = first_request(spec)
        self.answer = AnswerTemplate(spec)

    async def open(self) -> Connection:
        return Connection(self.spec.port)

    async def one(self, client: Connection) -> bool:
        await client.send(self.first)
        response = await client.receive()
        if self.spec.kind == "mrtr":
            try:
                state = request_state(result_of(response))
            except (Failed, ValueError) as exc:
                self._error(f"round 1: {exc}")
                return False
            await client.send(self.answer.build(state))
            response = await client.receive()
        if response.status != 200 or self.expect not in response.body:
            self._error(f"HTTP {response.status} {response.body[:200]!r}")
            return False
        return True

    def close(self, client: Connection) -> None:
        client.close()


class Connection:
    """A keep-alive connection that reconnects when the server closes it after an answer."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def send(self, request: bytes) -> None:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self._port, limit=1 << 20)
        self._writer.write(request)

    @property
    def reader(self) -> asyncio.StreamReader:
        """The open connection's stream, for an answer read piece by piece (an SSE stream)."""
        assert self._reader is not None
        return self._reader

    async def receive(self) -> Response:
        assert self._reader is not None
        response, closed = await read_response(self._reader)
        if closed:
            self.close()
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


async def check(spec: Spec) -> dict[str, Any]:
    """One operation, every answer validated in full; returns the answers for the record."""
    conn = Connection(spec.port)
    answers: list[dict[str, Any]] = []
    try:
        await conn.send(first_request(spec))
        result = result_of(await conn.receive())
        answers.append(result)
        if spec.kind == "mrtr":
            await conn.send(AnswerTemplate(spec).build(request_state(result)))
            result = result_of(await conn.receive())
            answers.append(result)
        check_complete(result, spec.text)
    finally:
        conn.close()
    return {"ok": True, "answers": answers}


def tree(roots: list[int]) -> list[int]:
    """The root pids and all their descendants that are alive now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of ``pids`` (threads included), in seconds; a vanished pid counts 0."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / _CLOCK_TICKS


def busy_seconds() -> float:
    """CPU time all cores spent on anything but idle and I/O wait since boot (``/proc/stat``)."""
    with open("/proc/stat", "rb") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / _CLOCK_TICKS


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuWindow:
    """CPU seconds of each role (a process tree), of this generator and of the rest of the
    machine between opening and ``close``."""

    def __init__(self, roots: Mapping[str, list[int]]) -> None:
        self._roles = {role: tree(pids) for role, pids in roots.items()}
        self._cpu = {role: cpu_seconds(pids) for role, pids in self._roles.items()}
        self._own = own_cpu()
        self._busy = busy_seconds()
        self._wall = time.perf_counter()

    def close(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._wall
        cpu = {role: cpu_seconds(pids) - self._cpu[role] for role, pids in self._roles.items()}
        own = own_cpu() - self._own
        other = max(0.0, busy_seconds() - self._busy - sum(cpu.values()) - own)
        return {"wall_s": wall, "cpu_s": cpu, "gen_cpu_s": own, "other_cpu_s": other}


def percentile(ordered: list[float], share: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


async def timed(spec: Spec) -> dict[str, Any]:
    return await measure(Run(spec), spec)


async def measure(run: Flows[Any], spec: Spec) -> dict[str, Any]:
    """Run ``spec.connections`` of ``run``'s clients: warm-up, then the measured window."""
    tasks = [asyncio.create_task(run.connection()) for _ in range(spec.connections)]
    try:
        await asyncio.sleep(spec.warmup_s)
        for task in tasks:  # a connection that died in the warm-up is a failed run
            if task.done():
                task.result()
        server = tree(spec.server_pids)
        aux = tree(spec.aux_pids)
        server_before, aux_before = cpu_seconds(server), cpu_seconds(aux)
        own_before, busy_before, wall_before = own_cpu(), busy_seconds(), time.perf_counter()
        run.measuring = True
        await asyncio.sleep(spec.duration_s)
        run.measuring = False
        server_after, aux_after = cpu_seconds(server), cpu_seconds(aux)
        own_after, busy_after, wall_after = own_cpu(), busy_seconds(), time.perf_counter()
        run.stopping = True
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    window = wall_after - wall_before
    server_cpu, aux_cpu, gen_cpu = (
        server_after - server_before,
        aux_after - aux_before,
        own_after - own_before,
    )
    # Whatever else ran on the machine meanwhile (other processes, kernel work not charged to ours).
    other_cpu = max(0.0, busy_after - busy_before - server_cpu - aux_cpu - gen_cpu)
    ordered = sorted(run.latencies)
    ops = len(ordered)
    if ops == 0:
        raise Failed(f"no operation completed in the window; first error: {run.error_sample or 'none'}")
    return {
        "ok": True,
        "ops": ops,
        "window_s": window,
        "rate": ops / window,
        "p50_ms": percentile(ordered, 0.50) * 1000,
        "p99_ms": percentile(ordered, 0.99) * 1000,
        "mean_ms": sum(ordered) / ops * 1000,
        "errors": run.errors,
        "error_sample": run.error_sample,
        "server_cpu_s": server_cpu,
        "aux_cpu_s": aux_cpu,
        "gen_cpu_s": gen_cpu,
        "gen_cpu_share": gen_cpu / window,
        "server_cpu_share": server_cpu / window,
        "other_cpu_share": other_cpu / window,
    }


Mode = Callable[[Spec], Coroutine[Any, Any, dict[str, Any]]]


def main(check_one: Mode = check, run_timed: Mode = timed) -> None:
    """Read a `Spec` on stdin, run its check or its timed run, print the outcome as JSON."""
    spec = Spec(**json.load(sys.stdin))
    try:
        outcome = asyncio.run(check_one(spec) if spec.check else run_timed(spec))
    except (Failed, OSError, ValueError, asyncio.IncompleteReadError) as exc:
        outcome = {"ok": False, "problem": f"{type(exc).__name__}: {exc}"}
    json.dump(outcome, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
