"""Faults, measured: 2 APIs, 2 workers and Temporal, one of them killed with SIGKILL every few
seconds, while 10 clients of every kind run long tools that ask.

The cluster: a standalone ``temporal server start-dev`` on a SQLite file (so a kill -9 loses
nothing it acknowledged) on a fixed port, two ``longtools api`` on fixed ports and two ``longtools
worker``, all on one data dir and one pair of key rings, each client a principal of its own. The
tool is ``chaos_job`` (``tests/chaos_tools.py``): it works a second, asks one yes/no form, then
runs an activity that appends its label to ``chaos-effects.txt`` only if no earlier attempt did,
and works a second more. Every job's label is also its idempotency key.

The kill loop (the main thread, since a child dies with the thread that spawned it): every 2 to 4 s
it kills one of api1, api2, worker1, worker2, temporal with SIGKILL, in two shuffled rounds of all
five (each kind killed twice), restarts it on the same port (Temporal after 5 to 7 s down: it is
back in under a second otherwise, which the API's own RPC retries hide) and waits (bounded) until
it is ready and both APIs answer /readyz. Clients start new jobs until the second round is done,
then finish the one they have; the test fails if that is not over within ``FINISH_S``, saying what
is missing.

The clients, each on its own thread, each request to an API picked at random (as behind a
balancer), a retry to the other one than the one that failed:

- ``tasks-2026`` (2): 2026-07-28 with the tasks extension. ``tools/call`` -> CreateTaskResult,
  ``tasks/get`` until the task asks, ``tasks/update`` with the answer, ``tasks/get`` until it ends.
- ``mrtr-2026`` (2): 2026-07-28 with elicitation and no extension: held MRTR rounds; each
  ``input_required`` round is answered (its ``requestState`` and ``inputResponses``), a state-only
  "still working" round is sent back as it is, until the result.
- ``stream-2025`` (2, one at 2025-11-25 and one at 2025-06-18): ``initialize``, then one
  ``tools/call`` held open as an SSE stream that pushes ``elicitation/create``; the answer is a
  POST of the JSON-RPC response, to either replica.
- ``tasks-2025`` (2): 2025-11-25 tasks: ``tools/call`` with ``params.task``, then ``tasks/result``,
  whose stream pushes the question, and a last ``tasks/get``.
- ``tools-2026`` and ``tools-2025`` (1 each): neither elicitation nor tasks: the call answers with
  the task in words and ``structuredContent``, followed with ``task_status`` / ``task_answer``.

What a client retries, and how: a transport failure (refused, reset, a stream cut short: the
replica was killed), an HTTP 503, and a JSON-RPC -32603 (the server's "unavailable" / "restarting",
Temporal being down) are retried after a short pause (0.2 to 0.5 s), on the other replica, without
limit until the bound. A retried ``tools/call`` carries the same idempotency key and arguments, so
it comes back to the same task; an MRTR round is sent again exactly as it was (its state, its
answers); a 2025-era stream that breaks is replaced by the same call again, which pushes any
question still open; ``tasks/result`` is simply asked again. An answer (``tasks/update``,
``task_answer``) whose request failed is not sent again blindly: the client reads the task again
and answers what is still open. A pushed question's answer POST is retried up to 5 times, then the
call is made again. Anything else (another HTTP 5xx, a JSON-RPC error that is not -32603, a result
that is not the job's) is an anomaly: written down, and the job started over with the same key. A
2025-era stream that says nothing but keep-alives for ``STALL_S`` after its answer was accepted is
one too (the client keeps waiting on it: the job ends in seconds once answered). So is a
``tasks/update`` acked within ``SETTLED_S`` after which the task still asks that question: an ack
waits up to 2 s (``LONGTOOLS_ANSWER_SETTLE_S``) for the workflow to take the answer.

At the end: every job completed, every label in ``chaos-effects.txt`` exactly once and no other,
one completed workflow per job in Temporal, no HTTP 5xx other than 503, no anomaly, no process that
died by itself. The figures (kills per kind, jobs and retries per client kind, statuses, side
effects and activity attempts, the longest requests, answer boxes left in Temporal, time) are
printed and kept in ``chaos-figures.json`` in the test's tmp dir; every request is in
``requests.jsonl`` beside the servers' logs.

Measured, not asserted: views of a task (``tasks/get``, the task tools' ``structuredContent``)
older than one the same client was already shown (``stale_views``). A replica answers a working
task from memory until its own watch hears of a change, which may be a few milliseconds after
another replica's has; docs/operations.md says it does so only "when that cannot be stale".
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import secrets
import signal
import subprocess
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import httpx
import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from tests.chaos_tools import attempts, effects
from tests.conftest import (
    NO_VERSION_CHECK,
    TEMPORAL,
    Served,
    _die_with_parent,
    free_port,
    server_ready,
    spawn,
    worker_ready,
)
from tests.wire import TASKS_EXTENSION, headers_for, meta

TARGETS = ("api1", "api2", "worker1", "worker2", "temporal")
KILLS_BOUND_S = 200.0
"""No kill starts later than this after the first (restarts take 5 to 20 s on a loaded 2-core host)."""
FINISH_S = 60.0
"""How long the clients have, once the last kill is over, to finish the jobs they have."""
PAUSE_S = (2.0, 4.0)
TEMPORAL_DOWN_S = (5.0, 7.0)
"""Longer than the API's Temporal RPC timeout (5 s), so that requests meet the outage."""
IDEMPOTENCY = "longtools.dev/idempotency-key"
YES = {"action": "accept", "content": {"go": True}}
TOOL = "chaos_job"
WORK_S = 1.0
ENV = {
    # Rounds held for a few seconds only, so that a round's wait is short next to the kill period.
    "LONGTOOLS_MRTR_WAIT_S": "5",
    "LONGTOOLS_TASK_TOOL_WAIT_S": "3",
}
# connect: a killed replica refuses at once; read: above every wait the server holds a request
# for (held round 5 s, keep-alive 15 s), so a read timeout means a request the server forgot.
TIMEOUT = httpx.Timeout(10, connect=2, read=40)
ONCE_WORKFLOW = "longtools.Once"
"""The workflow type of run-once records and pushed questions' answer boxes (longtools/workflows/_once.py)."""
SETTLED_S = 1.5
"""Below the API's answer settle time (2 s): a tasks/update acked sooner says its answer was taken."""
STALL_S = 45.0
"""A 2025-era stream silent this long after its answer was accepted has lost the answer."""
T = TypeVar("T")


def _json(raw: bytes) -> dict[str, Any]:
    try:
        decoded = json.loads(raw)
    except ValueError:
        raise Unexpected(f"not JSON: {raw[:500]!r}") from None
    if not isinstance(decoded, dict):
        raise Unexpected(f"not a JSON-RPC message: {raw[:500]!r}")
    return decoded


# The cluster -------------------------------------------------------------------------------------


@dataclass
class Outage:
    target: str
    killed_at: float
    back_at: float
    how: str = "killed"


class Cluster:
    """Temporal, two APIs and two workers as separate processes, each killable and restartable."""

    def __init__(self, tmp: Path, tokens: dict[str, str]) -> None:
        self.tmp = tmp
        self.data = tmp / "data"
        self.temporal_port = free_port()
        self.api_ports = {"api1": free_port(), "api2": free_port()}
        self.env = {**ENV, "LONGTOOLS_AUTH_TOKENS": ",".join(f"{t}={n}" for n, t in tokens.items())}
        self.temporal: subprocess.Popen[bytes] | None = None
        self.served: dict[str, Served] = {}
        self.outages: list[Outage] = []
        self.restart_s: dict[str, list[float]] = {target: [] for target in TARGETS}
        self.logs: dict[str, list[str]] = {target: [] for target in TARGETS}
        self.failed_starts: list[str] = []
        self.t0 = time.monotonic()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.temporal_port}"

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/mcp" for port in self.api_ports.values()]

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def start(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        self._start_temporal()
        # Four cold starts side by side: spawn all, then wait for each.
        spawned = {name: self._spawn(name) for name in ("api1", "api2", "worker1", "worker2")}
        try:
            for name, started in spawned.items():
                self.served[name] = self._ready(name, started)
        finally:
            for name, (process, _) in spawned.items():
                if name not in self.served and process.poll() is None:
                    process.kill()
                    process.wait()
        self._all_ready()

    def _start_temporal(self) -> None:
        command = [
            str(TEMPORAL),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.temporal_port),
            "--db-filename",
            str(self.data / "temporal.db"),
            # As the embedded server runs: every commit fsynced, so what it acked survives kill -9.
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            "synchronous=full",
            "--log-level",
            "warn",
            "--headless",
            "--ui-disable-news-fetch",
            *NO_VERSION_CHECK,
        ]
        log_path = self.tmp / "temporal.log"
        with log_path.open("ab") as log:
            log.write(f"==> {self.now()} started\n".encode())
            log.flush()
            self.temporal = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=_die_with_parent
            )
        self.logs["temporal"].append(log_path.name)
        try:
            asyncio.run(_until_serving(self.temporal, self.address, within=30))
        except BaseException:
            self.temporal.kill()
            self.temporal.wait()
            raise

    def _spawn(self, name: str) -> tuple[subprocess.Popen[str], Path]:
        tools = ["--no-examples", "--tools", "tests.chaos_tools", "--temporal-address", self.address]
        if name.startswith("api"):
            return spawn(self.tmp, ["api", "--port", str(self.api_ports[name]), *tools], self.env)
        return spawn(self.tmp, ["worker", *tools], self.env)

    def _ready(self, name: str, spawned: tuple[subprocess.Popen[str], Path]) -> Served:
        self.logs[name].append(spawned[1].name)
        return server_ready(spawned, 60) if name.startswith("api") else worker_ready(spawned, 60)

    def _all_ready(self, within: float = 30) -> None:
        """Both APIs ready, which also means both reach Temporal again."""
        deadline = time.monotonic() + within
        for url in self.urls:
            base = url.removesuffix("/mcp")
            while True:
                try:
                    if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, f"{base} never became ready again"
                time.sleep(0.05)

    def kill(self, target: str) -> None:
        if target == "temporal":
            assert self.temporal is not None
            self.temporal.kill()
            self.temporal.wait(timeout=10)
        else:
            self.served[target].stop(signal.SIGKILL)

    def restart(self, target: str) -> None:
        """Start ``target`` again (three tries: a port may still be settling) and wait till all is up."""
        for attempt in range(3):
            try:
                if target == "temporal":
                    self._start_temporal()
                else:
                    self.served[target] = self._ready(target, self._spawn(target))
                break
            except (RuntimeError, TimeoutError) as exc:
                self.failed_starts.append(f"{target} at {self.now()}: {exc}"[:2000])
                if attempt == 2:
                    raise
        self._all_ready()

    def chaos_kill(self, target: str, down_s: float = 0) -> Outage:
        killed_at = self.now()
        self.kill(target)
        if down_s:
            time.sleep(down_s)  # how long the outage lasts, not a wait for anything
        self.restart(target)
        outage = Outage(target, killed_at, self.now())
        self.restart_s[target].append(round(outage.back_at - outage.killed_at, 2))
        self.outages.append(outage)
        return outage

    def revive(self) -> list[str]:
        """Restart any process that died by itself; what died."""
        died = []
        if self.temporal is not None and self.temporal.poll() is not None:
            died.append(f"temporal exited {self.temporal.returncode} at {self.now()}")
            killed_at = self.now()
            self.restart("temporal")
            self.outages.append(Outage("temporal", killed_at, self.now(), how="died"))
        for name, served in list(self.served.items()):
            if served.process.poll() is not None:
                died.append(
                    f"{name} exited {served.process.returncode} at {self.now()} ({served.log_path.name})"
                )
                killed_at = self.now()
                self.restart(name)
                self.outages.append(Outage(name, killed_at, self.now(), how="died"))
        return died

    def stop_all(self) -> list[str]:
        """SIGTERM everything, bounded; what did not stop by itself."""
        stuck = []
        for served in self.served.values():  # all at once: each takes a moment to drain
            if served.process.poll() is None:
                served.process.send_signal(signal.SIGTERM)
        for name, served in self.served.items():
            try:
                served.stop(timeout=20)
            except subprocess.TimeoutExpired:
                stuck.append(name)
        if self.temporal is not None and self.temporal.poll() is None:
            self.temporal.terminate()
            try:
                self.temporal.wait(timeout=15)
            except subprocess.TimeoutExpired:
                stuck.append("temporal")
                self.temporal.kill()
                self.temporal.wait()
        return stuck

    def workflows(self) -> Counter[str]:
        """The chaos jobs' workflows in Temporal, by status."""
        return asyncio.run(_statuses(self.address, "tests.chaos_job"))


async def _until_serving(process: subprocess.Popen[bytes], address: str, within: float) -> None:
    deadline = time.monotonic() + within
    client: Client | None = None
    while process.poll() is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"Temporal never answered on {address}")
        try:
            if client is None:
                client = await asyncio.wait_for(Client.connect(address), remaining)
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace="default"), timeout=timedelta(seconds=remaining)
            )
            return
        # RuntimeError is how the SDK's core reports a refused connect.
        except (RuntimeError, RPCError, TimeoutError):
            await asyncio.sleep(0.05)
    raise RuntimeError(f"Temporal exited with {process.returncode} while starting")


async def _statuses(address: str, workflow_type: str) -> Counter[str]:
    client = await Client.connect(address)
    found: Counter[str] = Counter()
    async for wf in client.list_workflows(f'WorkflowType="{workflow_type}"'):
        status = wf.status.name if isinstance(wf.status, WorkflowExecutionStatus) else str(wf.status)
        found[status] += 1
    return found


@pytest.fixture
def tokens() -> dict[str, str]:
    return {name: secrets.token_urlsafe(24) for name, _ in CLIENTS}


@pytest.fixture
def cluster(tmp_path: Path, tokens: dict[str, str]) -> Iterator[Cluster]:
    made = Cluster(tmp_path, tokens)
    try:
        made.start()
        yield made
    finally:
        stuck = made.stop_all()
        assert not stuck, f"did not stop on SIGTERM: {stuck}"


# The clients -------------------------------------------------------------------------------------


class Again(Exception):
    """What a client retries: a transport failure, a 503, a -32603; its reason."""


class Unexpected(Exception):
    """A response the client has no rule for (an anomaly): the job starts over with its key."""


class Late(Exception):
    """The test's bound has passed."""


@dataclass
class Reply:
    message: dict[str, Any]
    headers: httpx.Headers


@dataclass
class Job:
    label: str
    started: float
    finished: float | None = None
    outcome: str = "running"
    step: str = "calling"
    task_id: str | None = None
    retries: int = 0


class Journal:
    """Every request of every client, one JSON line each, for the evidence of a failure."""

    def __init__(self, path: Path, t0: float) -> None:
        self._file = path.open("a")
        self._lock = threading.Lock()
        self._t0 = t0

    def write(self, **entry: Any) -> None:
        with self._lock:
            self._file.write(json.dumps({"t": round(time.monotonic() - self._t0, 3), **entry}) + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


@dataclass
class Shared:
    urls: list[str]
    journal: Journal
    no_new_jobs: threading.Event
    give_up: threading.Event
    t0: float


class ChaosClient:
    """What every kind of client shares: a principal, a connection pool, the replica it uses next,
    what it saw, and the retry rules of the module docstring."""

    kind: ClassVar[str]
    caps: ClassVar[dict[str, Any]] = {"elicitation": {"form": {}}}

    def __init__(self, name: str, token: str, shared: Shared) -> None:
        self.name = name
        self.auth = {"authorization": f"Bearer {token}"}
        self.shared = shared
        self.http = httpx.Client(timeout=TIMEOUT)
        self.rng = random.Random(name)
        self._failed: str | None = None
        self.last_port = ""
        self.newest: dict[str, tuple[datetime, dict[str, Any]]] = {}
        self.stale: list[dict[str, Any]] = []
        self.answered_at: float | None = None
        self._ids = itertools.count(1)
        self.jobs: list[Job] = []
        self.statuses: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.unavailable: list[tuple[float, str, str]] = []
        self.anomalies: list[dict[str, Any]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, name=name, daemon=True)

    # The run ---------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self.open()
            while not self.shared.no_new_jobs.is_set():
                job = Job(
                    label=f"{self.name}-{len(self.jobs) + 1}-{secrets.token_hex(3)}", started=self.now()
                )
                self.jobs.append(job)
                self.follow(job)
                # A person's moment between two jobs; it also keeps the 2-core host's load down,
                # which is what the restarts' time depends on.
                self.shared.no_new_jobs.wait(self.rng.uniform(0.5, 1.5))
        except Late:
            pass
        except Exception as exc:  # a bug of the test's own: the thread must not die unseen
            self.anomaly("crash", repr(exc), traceback=traceback.format_exc())
        finally:
            self.http.close()
            self.done.set()

    def follow(self, job: Job) -> None:
        """One job to its end; started over (same key) after an anomaly."""
        while True:
            try:
                self.one(job)
            except Unexpected as exc:
                self.anomaly(job.step, str(exc), label=job.label)
                self.pause()
                self.recover()
                continue
            job.finished = self.now()
            return

    def open(self) -> None:
        """What a client does once before its first job."""

    def recover(self) -> None:
        """What a client does again after an anomaly."""

    def one(self, job: Job) -> None:
        raise NotImplementedError

    def finish(self, job: Job, result: dict[str, Any]) -> None:
        text = "".join(block.get("text", "") for block in result.get("content", []))
        if result.get("isError") or text != f"done {job.label}":
            job.outcome = f"not done: {result!r}"[:500]
            raise Unexpected(f"the job's result is not its own: {result!r}"[:1000])
        job.outcome = "completed"

    # Requests --------------------------------------------------------------------------------

    def now(self) -> float:
        return round(time.monotonic() - self.shared.t0, 3)

    def url(self) -> str:
        """A replica at random, as behind a balancer; after a failure, the other one."""
        failed, self._failed = self._failed, None
        return self.rng.choice([url for url in self.shared.urls if url != failed])

    def pause(self) -> None:
        """Between two tries: a client's backoff, cut short when the test gives up."""
        if self.shared.give_up.wait(self.rng.uniform(0.2, 0.5)):
            raise Late

    def until(self, job: Job, step: str, attempt: Callable[[], T]) -> T:
        """``attempt()`` until it is not a retryable failure (or the test gives up)."""
        job.step = step
        while True:
            if self.shared.give_up.is_set():
                raise Late
            try:
                return attempt()
            except Again as again:
                self.retried(job, again)
                self.pause()

    def retried(self, job: Job, again: Again) -> None:
        job.retries += 1
        self.retries[f"{job.step}: {again}"] += 1

    def anomaly(self, step: str, detail: str, **more: Any) -> None:
        self.anomalies.append({"client": self.name, "t": self.now(), "step": step, "detail": detail, **more})

    def observe(self, job: Job, task: dict[str, Any]) -> None:
        """Note a view of the task older than one the service has already shown this client."""
        shown = datetime.fromisoformat(str(task["lastUpdatedAt"]))
        summary = {key: task.get(key) for key in ("status", "statusMessage", "lastUpdatedAt")}
        newest = self.newest.get(job.label)
        if newest is not None and shown < newest[0]:
            self.stale.append(
                {
                    "t": self.now(),
                    "label": job.label,
                    "port": self.last_port,
                    "shown": summary,
                    "newer": newest[1],
                }
            )
        elif newest is None or shown > newest[0]:
            self.newest[job.label] = (shown, summary)

    def send(
        self,
        body: dict[str, Any],
        headers: dict[str, str],
        on_message: Callable[[dict[str, Any]], None] | None = None,
    ) -> Reply:
        """POST ``body`` to the next replica; its JSON-RPC response (or {} for a 202), read from JSON
        or from an SSE stream whose other messages go to ``on_message``.

        Raises:
            Again: a transport failure, a 503, a stream that ended without the response, a -32603.
        """
        url = self.url()
        self.last_port = url.split(":")[2].split("/")[0]
        method = str(body.get("method", "response"))
        entry: dict[str, Any] = {
            "client": self.name,
            "job": self.jobs[-1].label if self.jobs else None,
            "port": url.split(":")[2].split("/")[0],
            "method": method,
        }
        params = body.get("params")
        if isinstance(params, dict) and isinstance(params.get("name"), str):
            entry["tool"] = params["name"]
        began = time.monotonic()
        try:
            with self.http.stream("POST", url, content=json.dumps(body), headers=headers) as response:
                status = response.status_code
                self.statuses[str(status)] += 1
                entry["status"] = status
                if status >= 500:
                    entry["body"] = response.read().decode(errors="replace")[:500]
                    if status != 503:
                        self.anomaly(method, f"HTTP {status}: {entry['body']}", port=entry["port"])
                    raise Again(f"HTTP {status}")
                if status == 202:
                    return Reply({}, response.headers)
                if response.headers.get("content-type", "").startswith("text/event-stream"):
                    message = self._streamed(body, response, on_message)
                else:
                    message = _json(response.read())
                reply = Reply(message, response.headers)
        except httpx.TransportError as exc:
            self.statuses[f"transport {type(exc).__name__}"] += 1
            entry["transport"] = type(exc).__name__
            self._failed = url
            raise Again(type(exc).__name__) from None
        except Again:
            self._failed = url
            raise
        finally:
            entry["took"] = round(time.monotonic() - began, 3)
            self.shared.journal.write(**entry)
        error = reply.message.get("error")
        if isinstance(error, dict):
            said = f"{method} {error.get('code')} {error.get('message')}"
            self.errors[said] += 1
            self.shared.journal.write(client=self.name, method=method, error=error)
            if error.get("code") == -32603:
                self.unavailable.append((self.now(), method, str(error.get("message"))))
                raise Again("-32603")
        return reply

    def _streamed(
        self,
        body: dict[str, Any],
        response: httpx.Response,
        on_message: Callable[[dict[str, Any]], None] | None,
    ) -> dict[str, Any]:
        self.answered_at = None
        stalled = False
        for line in response.iter_lines():
            if line.startswith("data: "):
                message: dict[str, Any] = json.loads(line.removeprefix("data: "))
                if message.get("id") == body.get("id") and "method" not in message:
                    return message
                self.answered_at = None
                if on_message is not None:
                    on_message(message)
                continue
            # A keep-alive (every 15 s): nothing has come since the client's answer was accepted.
            # The job goes on in seconds once answered, or in some 25 s when a worker was killed.
            quiet = time.monotonic() - (self.answered_at or time.monotonic())
            if quiet > STALL_S and not stalled:
                stalled = True
                self.anomaly(
                    str(body.get("method")),
                    f"the stream has said nothing for {quiet:.0f} s since its answer was accepted",
                    port=self.last_port,
                    job=self.jobs[-1].label if self.jobs else None,
                )
        raise Again("stream ended without a response")

    def outcome(self, reply: Reply) -> dict[str, Any]:
        """The result of a reply; a JSON-RPC error here is one the client has no rule for."""
        if "error" in reply.message or "result" not in reply.message:
            raise Unexpected(f"{reply.message!r}"[:1000])
        result: dict[str, Any] = reply.message["result"]
        return result

    # The 2026-07-28 wire ---------------------------------------------------------------------

    def modern(self, method: str, params: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
        params = {"_meta": meta(caps), **params}
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        return self.outcome(self.send(body, {**headers_for(method, params), **self.auth}))

    def call_params(self, job: Job, caps: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": TOOL,
            "arguments": {"label": job.label, "work_s": WORK_S},
            "_meta": meta(caps, **{IDEMPOTENCY: job.label}),
        }


class TasksClient(ChaosClient):
    kind = "tasks-2026"
    caps: ClassVar[dict[str, Any]] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}

    def one(self, job: Job) -> None:
        params = self.call_params(job, self.caps)
        created = self.until(job, "tools/call", lambda: self.modern("tools/call", params, self.caps))
        if created.get("resultType") != "task":
            raise Unexpected(f"no task: {created!r}")
        task_id = job.task_id = str(created["taskId"])
        acked: dict[str, Any] | None = None
        while True:
            task = self.until(
                job, "tasks/get", lambda: self.modern("tasks/get", {"taskId": task_id}, self.caps)
            )
            self.observe(job, task)
            if acked is not None and set(acked["keys"]) & set(task.get("inputRequests") or {}):
                # An ack waits up to LONGTOOLS_ANSWER_SETTLE_S (2 s) for the workflow to take the
                # answers; one that came sooner, with the question still open after it (a view read
                # from Temporal: the task waits for input), never delivered the answer.
                self.anomaly(
                    "tasks/update",
                    "acked at once, yet the question is still open: not delivered, or not waited for",
                    label=job.label,
                    **acked,
                )
            acked = None
            if task["status"] == "completed":
                self.finish(job, task["result"])
                return
            if task["status"] in ("failed", "cancelled"):
                raise Unexpected(f"the task ended {task['status']}: {task!r}")
            if task["status"] == "input_required":
                update = {"taskId": task_id, "inputResponses": {key: YES for key in task["inputRequests"]}}
                job.step = "tasks/update"
                sent = time.monotonic()
                try:
                    self.modern("tasks/update", update, self.caps)
                    took = time.monotonic() - sent
                    if took < SETTLED_S:
                        acked = {
                            "keys": sorted(update["inputResponses"]),
                            "took": took,
                            "port": self.last_port,
                        }
                except Again as again:  # read the task again before answering again
                    self.retried(job, again)
                    self.pause()


class MrtrClient(ChaosClient):
    kind = "mrtr-2026"

    def one(self, job: Job) -> None:
        first = self.call_params(job, self.caps)
        params = first
        while True:
            # A retry sends this round again exactly: its state and its answers.
            reply = self.until(job, job.step, partial(self.modern, "tools/call", params, self.caps))
            if reply.get("resultType") != "input_required":
                self.finish(job, reply)
                return
            params = {**first, "requestState": reply["requestState"]}
            questions = reply.get("inputRequests") or {}
            if questions:
                params["inputResponses"] = {key: YES for key in questions}
            job.step = "answering" if questions else "still working"


class LegacyClient(ChaosClient):
    """What the 2025-era clients share: a sealed session, and the answers to pushed questions."""

    version: ClassVar[str] = "2025-11-25"
    session = ""
    negotiated = ""

    def headers(self) -> dict[str, str]:
        sent = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **self.auth,
        }
        if self.session:
            sent |= {"mcp-session-id": self.session, "mcp-protocol-version": self.negotiated}
        return sent

    def body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": f"{self.name}-{next(self._ids)}", "method": method, "params": params}

    def open(self) -> None:
        self.session = ""
        job = Job(label="initialize", started=self.now())

        def initialize() -> Reply:
            params = {
                "protocolVersion": self.version,
                "capabilities": self.caps,
                "clientInfo": {"name": self.name, "version": "0"},
            }
            return self.send(self.body("initialize", params), self.headers())

        reply = self.until(job, "initialize", initialize)
        self.negotiated = self.outcome(reply)["protocolVersion"]
        self.session = reply.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.until(job, "initialized", lambda: self.send(initialized, self.headers()))

    def recover(self) -> None:
        self.open()

    def legacy(
        self,
        method: str,
        params: dict[str, Any],
        on_message: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        return self.outcome(self.send(self.body(method, params), self.headers(), on_message))

    def answer_pushed(self, message: dict[str, Any]) -> None:
        """Answer a question pushed on a stream with a POST (to either replica); retried 5 times,
        after which the stream's call is made again."""
        if message.get("method") != "elicitation/create":
            return  # progress and status notifications
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": YES}
        for _ in range(5):
            try:
                reply = self.send(answer, self.headers())
            except Again as again:
                self.retries[f"answer: {again}"] += 1
                self.pause()
                continue
            if reply.message:
                self.anomaly("answer", f"the answer was refused: {reply.message!r}")
                raise Again("answer refused")
            self.answered_at = time.monotonic()
            return
        raise Again("answer not delivered")


class StreamClient(LegacyClient):
    kind = "stream-2025"

    def one(self, job: Job) -> None:
        meta_ = {IDEMPOTENCY: job.label, "progressToken": job.label}
        params = {"name": TOOL, "arguments": {"label": job.label, "work_s": WORK_S}, "_meta": meta_}
        result = self.until(job, "tools/call", lambda: self.legacy("tools/call", params, self.answer_pushed))
        self.finish(job, result)


class OldStreamClient(StreamClient):
    version: ClassVar[str] = "2025-06-18"


class LegacyTasksClient(LegacyClient):
    kind = "tasks-2025"
    caps: ClassVar[dict[str, Any]] = {"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}}

    def one(self, job: Job) -> None:
        if job.task_id is None:
            arguments = {"label": job.label, "work_s": WORK_S}
            params = {"name": TOOL, "arguments": arguments, "task": {}, "_meta": {IDEMPOTENCY: job.label}}
            created = self.until(job, "tools/call", lambda: self.legacy("tools/call", params))
            if not isinstance(created.get("task"), dict):
                raise Unexpected(f"no task: {created!r}")
            job.task_id = str(created["task"]["taskId"])
        asked = {"taskId": job.task_id}
        result = self.until(
            job, "tasks/result", lambda: self.legacy("tasks/result", asked, self.answer_pushed)
        )
        task = self.until(job, "tasks/get", lambda: self.legacy("tasks/get", asked))
        if task["status"] != "completed":
            raise Unexpected(f"tasks/result answered, yet the task is {task!r}")
        self.finish(job, result)


class ToolsClient(ChaosClient):
    """Neither elicitation nor tasks (a chat host): the task tools, at 2026-07-28."""

    kind = "tools-2026"
    caps: ClassVar[dict[str, Any]] = {}

    def tool(self, name: str, arguments: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        extra = {IDEMPOTENCY: key} if key else {}
        return self.modern(
            "tools/call", {"name": name, "arguments": arguments, "_meta": meta({}, **extra)}, {}
        )

    def one(self, job: Job) -> None:
        arguments = {"label": job.label, "work_s": WORK_S}
        shown = self.until(job, "tools/call", lambda: self.tool(TOOL, arguments, job.label))
        while True:
            task = shown.get("structuredContent")
            if not isinstance(task, dict) or "status" not in task:
                raise Unexpected(f"no task in {shown!r}")
            self.observe(job, task)
            task_id = job.task_id = str(task["taskId"])
            if task["status"] == "completed":
                self.finish(job, task["result"])
                return
            if task["status"] in ("failed", "cancelled"):
                raise Unexpected(f"the task ended {task['status']}: {task!r}")
            status = {"taskId": task_id}
            if task["status"] == "input_required":
                answers = {"taskId": task_id, "answers": {key: YES for key in task["inputRequests"]}}
                job.step = "task_answer"
                try:
                    shown = self.tool("task_answer", answers)
                    if shown.get("isError"):
                        # After an answer whose response was lost, or from a replica's stale view:
                        # the refusal shows the task as that replica sees it. The journal keeps it.
                        self.errors["task_answer refused"] += 1
                        self.shared.journal.write(client=self.name, job=job.label, refused=shown)
                    continue
                except Again as again:  # read the task again before answering again
                    self.retried(job, again)
                    self.pause()
            shown = self.until(job, "task_status", partial(self.tool, "task_status", status))


class LegacyToolsClient(LegacyClient, ToolsClient):
    """The task tools in a 2025-era session that declared nothing."""

    kind = "tools-2025"
    caps: ClassVar[dict[str, Any]] = {}

    def tool(self, name: str, arguments: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        extra = {"_meta": {IDEMPOTENCY: key}} if key else {}
        return self.legacy("tools/call", {"name": name, "arguments": arguments, **extra})

    def one(self, job: Job) -> None:
        ToolsClient.one(self, job)


CLIENTS: list[tuple[str, type[ChaosClient]]] = [
    ("tasks-a", TasksClient),
    ("tasks-b", TasksClient),
    ("mrtr-a", MrtrClient),
    ("mrtr-b", MrtrClient),
    ("stream-a", StreamClient),
    ("stream-b", OldStreamClient),
    ("legacy-tasks-a", LegacyTasksClient),
    ("legacy-tasks-b", LegacyTasksClient),
    ("tools-a", ToolsClient),
    ("tools-b", LegacyToolsClient),
]


# The test ----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(420)  # 2 to 3 minutes; the bounds above, and the figures written, first
def test_kill_9_of_any_process_every_few_seconds_loses_no_task_and_repeats_no_side_effect(
    cluster: Cluster, tokens: dict[str, str], tmp_path: Path
) -> None:
    began = time.monotonic()
    cluster.t0 = began
    journal = Journal(tmp_path / "requests.jsonl", began)
    shared = Shared(cluster.urls, journal, threading.Event(), threading.Event(), began)
    clients = [kind(name, tokens[name], shared) for name, kind in CLIENTS]
    rng = random.Random()
    plan = [*rng.sample(TARGETS, len(TARGETS)), *rng.sample(TARGETS, len(TARGETS))]
    died: list[str] = []
    try:
        for client in clients:
            client.thread.start()
        deadline = began + KILLS_BOUND_S
        for target in plan:
            if _all_done(clients, rng.uniform(*PAUSE_S)) or time.monotonic() > deadline:
                break
            died += cluster.revive()
            # Temporal is back in well under a second, within the API's own RPC retries: it stays
            # down longer, as under a supervisor's restart delay, so that clients meet its outage.
            cluster.chaos_kill(target, rng.uniform(*TEMPORAL_DOWN_S) if target == "temporal" else 0)
        # Each kind killed twice: the jobs under way (some hit by the last kill) run to their end.
        shared.no_new_jobs.set()
        finished = _all_done(clients, FINISH_S)
        died += cluster.revive()
    finally:
        shared.no_new_jobs.set()
        shared.give_up.set()
        for client in clients:
            client.thread.join(timeout=60)
        journal.close()
    took = round(time.monotonic() - began, 1)
    jobs = [job for client in clients for job in client.jobs]
    # Temporal's visibility lags a close by a moment.
    _eventually(lambda: cluster.workflows() == {"COMPLETED": len(jobs)}, within=15)

    figures = _figures(cluster, clients, took, died)
    (tmp_path / "chaos-figures.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures, indent=1))  # noqa: T201

    unfinished = [(job.label, job.step, job.outcome) for job in jobs if job.outcome != "completed"]
    assert finished and not unfinished, f"not completed {FINISH_S:g} s after the last kill: {unfinished}"
    labels = Counter(job.label for job in jobs)
    done = Counter(effects(cluster.data))
    assert done == labels, f"side effects not exactly once: {(done - labels) + (labels - done)}"
    bad = {c.name: s for c in clients for s in c.statuses if s.isdigit() and int(s) >= 500 and s != "503"}
    assert not bad, f"HTTP 5xx other than 503: {bad}"
    anomalies = [anomaly for client in clients for anomaly in client.anomalies]
    assert not anomalies, json.dumps(anomalies, indent=1)
    assert not died, f"processes that died by themselves: {died}"
    assert figures["workflows"] == {"COMPLETED": len(jobs)}, figures["workflows"]
    kills = figures["kills"]
    assert set(kills) == set(TARGETS) and all(count >= 2 for count in kills.values()), kills


def _eventually(ready: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _all_done(clients: list[ChaosClient], within: float) -> bool:
    deadline = time.monotonic() + within
    return all(client.done.wait(max(0.0, deadline - time.monotonic())) for client in clients)


def _longest(journal: Path, count: int) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    return sorted((e for e in entries if "took" in e), key=lambda e: -float(e["took"]))[:count]


def _figures(cluster: Cluster, clients: list[ChaosClient], took: float, died: list[str]) -> dict[str, Any]:
    kinds = sorted({client.kind for client in clients})

    def of(kind: str) -> list[ChaosClient]:
        return [client for client in clients if client.kind == kind]

    def during_outage(t: float) -> str | None:
        # A few seconds' grace after a restart: clients reconnect to Temporal with a backoff.
        for outage in cluster.outages:
            if outage.killed_at <= t <= outage.back_at + 3:
                return outage.target
        return None

    tried = attempts(cluster.data)
    jobs = [job for client in clients for job in client.jobs]
    durations = sorted(job.finished - job.started for job in jobs if job.finished is not None)
    return {
        "seconds": took,
        "kills": dict(Counter(outage.target for outage in cluster.outages if outage.how == "killed")),
        "restart_s": cluster.restart_s,
        "died_by_themselves": died,
        "failed_starts": cluster.failed_starts,
        "jobs": {kind: sum(len(c.jobs) for c in of(kind)) for kind in kinds},
        "jobs_completed": sum(job.outcome == "completed" for job in jobs),
        "job_s": {
            "median": round(durations[len(durations) // 2], 2) if durations else None,
            "max": round(durations[-1], 2) if durations else None,
        },
        "retries": {kind: dict(sum((c.retries for c in of(kind)), Counter[str]())) for kind in kinds},
        "retries_total": {kind: sum(sum(c.retries.values()) for c in of(kind)) for kind in kinds},
        "statuses": {client.name: dict(client.statuses) for client in clients},
        "jsonrpc_errors": dict(sum((client.errors for client in clients), Counter[str]())),
        "unavailable_outside_outages": [
            (client.name, t, method, message)
            for client in clients
            for t, method, message in client.unavailable
            if during_outage(t) is None
        ],
        "side_effects": len(effects(cluster.data)),
        "activity_attempts": len(tried),
        "activity_retries": sum(1 for line in tried if not line.endswith(" 1")),
        "workflows": dict(cluster.workflows()),
        "anomalies": len([a for c in clients for a in c.anomalies]),
        "stale_views": [view for client in clients for view in client.stale],
        "longest_requests": _longest(cluster.tmp / "requests.jsonl", 5),
        "answer_records": dict(asyncio.run(_statuses(cluster.address, ONCE_WORKFLOW))),
        "logs": cluster.logs,
        "outages": [vars(outage) for outage in cluster.outages],
    }
