"""What B9 (``bench._approving``) and B10 (``bench._notifying``) share: a stack whose API knows people
by static tokens, the requester's MCP client and an approver's browser (both over httpx, as
tests/pages.py drives the pages), and Temporal's histories read back for the phases.

The stack is a Temporal dev server, a ``longtools worker`` and a ``longtools api`` (pinned), with
``bench.servers.longtools_person_tools`` and ``LONGTOOLS_AUTH_TOKENS`` for ``alice`` (who asks),
``bob`` and ``dave`` (who approve): a vote needs a person signed in to the pages, and a person's
question needs a person who asked. The clients run in the generator, a subprocess on longtools'
interpreter (httpx, aiosmtpd and the Temporal client are there); httpx, the Temporal client and
aiosmtpd are imported only there, so the harness imports this module without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from bench._procs import (
    LONGTOOLS_ENV,
    ROOT,
    SERVING,
    WORKER_READY,
    Child,
    Stack,
    spawn,
    start_ready,
    start_temporal,
)
from bench.load import VERSION, Failed, cpu_seconds, meta, percentile

if TYPE_CHECKING:
    import httpx

TOOLS: Final = "bench.servers.longtools_person_tools"
PEOPLE: Final = ("alice", "bob", "dave")
ROLES: Final = ("api", "temporal", "worker")
TASKS_CAPS: Final[dict[str, Any]] = {
    "elicitation": {"form": {}},
    "extensions": {"io.modelcontextprotocol/tasks": {}},
}
TERMINAL: Final = ("completed", "failed", "cancelled")
WAIT_S: Final = 30.0
"""The longest a client waits for one thing (a frame, a mail): past it the run fails."""
_ACK: Final = "notifications/subscriptions/acknowledged"
_END_S: Final = 5.0
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')
_ANSWER_FORM = re.compile(r'<form method="post" class="answer".*?</form>', re.S)


class PeopleStack(Stack):
    """Temporal, a worker and an API (on ``api_cpus``) with B9's and B10's tools, and a static token
    for each of ``PEOPLE``; ``env`` is added to both longtools processes."""

    def __init__(
        self,
        python: Path,
        work: Path,
        api_cpus: set[int] | None,
        env: Mapping[str, str] | None = None,
        code: Path = ROOT,
    ) -> None:
        super().__init__()
        self._python = python
        self._work = work
        self._api_cpus = api_cpus
        self.tokens = {name: secrets.token_urlsafe(24) for name in PEOPLE}
        self.temporal_address = ""
        self._env = {
            **LONGTOOLS_ENV,
            "PYTHONPATH": str(ROOT if code == ROOT else _paths(code, work)),
            "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in self.tokens.items()),
            **(env or {}),
        }

    def _longtools(self, name: str, *args: str, cpus: set[int] | None = None) -> Child:
        return spawn(
            name,
            [
                str(self._python.parent / "longtools"),
                *args,
                "--tools",
                TOOLS,
                "--data-dir",
                str(self._work / name),
            ],
            log_dir=self._work,
            cwd=ROOT,
            env=self._env,
            cpus=cpus,
        )

    def start(self) -> None:
        self.children["temporal"], self.temporal_address = start_temporal(self._python.parent, self._work)
        address = self.temporal_address
        self.children["worker"] = start_ready(
            lambda attempt: self._longtools(f"worker-{attempt}", "worker", "--temporal-address", address),
            WORKER_READY,
        )
        api = self._longtools(
            "api", "api", "--port", "0", "--no-examples", "--temporal-address", address, cpus=self._api_cpus
        )
        self.children["api"] = api
        self.port = int(api.wait_for(SERVING, 60).group(1))


def _paths(code: Path, work: Path) -> Path:
    """A directory for ``PYTHONPATH`` where ``longtools`` is ``code``'s and ``bench`` (the tools) this
    tree's, whatever else ``code`` holds: an A/B of longtools with the same benchmark."""
    found = work / "path"
    found.mkdir(parents=True, exist_ok=True)
    (found / "longtools").symlink_to(code.resolve() / "longtools", target_is_directory=True)
    (found / "bench").symlink_to(ROOT / "bench", target_is_directory=True)
    return found


# The generator's side: clients of the API, Temporal's histories.


def _headers(token: str, method: str, name: str | None) -> dict[str, str]:
    headers = {
        "authorization": f"Bearer {token}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


class Requester:
    """The person who asks, through their MCP host: raw 2026-07-28 requests with the Tasks
    extension, over one httpx client (keep-alive), signed in with their bearer token."""

    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        self._http = http
        self._token = token
        self._ids = iter(range(1, 1 << 30))

    async def call(self, method: str, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": {**params, "_meta": meta(TASKS_CAPS)},
        }
        response = await self._http.post("/mcp", json=body, headers=_headers(self._token, method, name))
        if response.status_code != 200:
            raise Failed(f"{method}: HTTP {response.status_code} {response.text[:300]}")
        answer = response.json()
        if "result" not in answer:
            raise Failed(f"{method}: {json.dumps(answer)[:300]}")
        result: dict[str, Any] = answer["result"]
        return result

    async def start(self, tool: str) -> str:
        """``tools/call`` of ``tool`` (no arguments) as a task; its id."""
        task = await self.call("tools/call", tool, {"name": tool, "arguments": {}})
        task_id = task.get("taskId")
        if task.get("resultType") != "task" or not isinstance(task_id, str):
            raise Failed(f"not a CreateTaskResult: {json.dumps(task)[:300]}")
        return task_id

    async def follow(self, task_id: str) -> Following:
        """A ``subscriptions/listen`` stream of ``task_id``, once acknowledged."""
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [task_id]}, "_meta": meta(TASKS_CAPS)},
        }
        headers = _headers(self._token, "subscriptions/listen", None)
        following = Following(task_id)
        following.reading = asyncio.create_task(following.read(self._http, body, headers))
        await following.next(lambda message: message.get("method") == _ACK)
        return following


@dataclass
class Seen:
    at: float
    """``time.time()`` when the message's line was read."""
    message: dict[str, Any]


class Following:
    """One listen stream, read in the background; each JSON-RPC message with the moment it came."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self._messages: asyncio.Queue[Seen | BaseException] = asyncio.Queue()
        self.reading: asyncio.Task[None] | None = None

    async def read(self, http: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]) -> None:
        try:
            async with http.stream("POST", "/mcp", json=body, headers=headers, timeout=None) as response:
                if response.status_code != 200:
                    raise Failed(f"listen: HTTP {response.status_code}")
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        self._messages.put_nowait(Seen(time.time(), json.loads(line[5:])))
            raise Failed(f"the stream of {self.task_id} ended")
        except Exception as exc:  # handed to whoever waits next (a closed stream ends here too)
            self._messages.put_nowait(exc)

    async def next(self, wanted: Any) -> Seen:
        """The first message from now on for which ``wanted(message)`` holds (within ``WAIT_S``)."""
        async with asyncio.timeout(WAIT_S):
            while True:
                got = await self._messages.get()
                if isinstance(got, BaseException):
                    raise got
                if wanted(got.message):
                    return got

    async def task(self, wanted: Any) -> Seen:
        """The first ``notifications/tasks`` of the task for whose params ``wanted`` holds."""
        return await self.next(
            lambda message: (
                message.get("method") == "notifications/tasks"
                and message.get("params", {}).get("taskId") == self.task_id
                and wanted(message["params"])
            )
        )

    async def close(self) -> None:
        """Once the task has ended the server ends the stream (its result, then the close): wait for
        that, so its connection goes back to the pool; a stream still open then is cut."""
        if self.reading is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.reading), _END_S)
        self.reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reading


class Browser:
    """A person at the pages, signed in with their token (cookies kept), as tests/pages.py does."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def sign_in(self, token: str) -> None:
        form = await self._http.get("/signin?next=/tasks")
        hidden = dict(_HIDDEN.findall(form.text))
        signed = await self._http.post("/signin", data={**hidden, "token": token})
        if signed.status_code != 303:
            raise Failed(f"sign-in: HTTP {signed.status_code} {signed.text[:300]}")

    async def open(self, path: str) -> list[tuple[str, str]]:
        """The answer page at ``path``; the hidden fields of its form (``csrf``, ``digest``)."""
        page = await self._http.get(path)
        form = _ANSWER_FORM.search(page.text)
        if page.status_code != 200 or form is None:
            raise Failed(f"{path}: HTTP {page.status_code}, no answer form: {page.text[:300]}")
        return _HIDDEN.findall(form.group(0))

    async def send(self, path: str, hidden: list[tuple[str, str]], fields: list[tuple[str, str]]) -> str:
        """The form as a browser posts it (urlencoded, ``action=accept``); the page's heading."""
        posted = await self._http.post(path, data=dict([*hidden, *fields, ("action", "accept")]))
        heading = re.search(r"<h1>(.*?)</h1>", posted.text, re.S)
        if posted.status_code not in (200, 303):
            raise Failed(f"{path}: HTTP {posted.status_code} {posted.text[:300]}")
        return re.sub(r"<[^>]+>", "", heading.group(1)).strip() if heading else ""


class Roles:
    """utime+stime of each role's process tree (fixed at the start: these processes fork nothing)."""

    def __init__(self, trees: Mapping[str, list[int]]) -> None:
        self._trees = dict(trees)

    def now(self) -> dict[str, float]:
        return {role: cpu_seconds(pids) for role, pids in self._trees.items()}


def spent(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    return {role: after[role] - before[role] for role in before}


# Histories.


@dataclass(frozen=True)
class Event:
    kind: str
    """The event type without ``EVENT_TYPE_`` (``WORKFLOW_TASK_STARTED``)."""
    at: float
    """Its time in Temporal (epoch seconds): the same clock as ``time.time()`` on this machine."""
    name: str = ""
    """A signal's name, an activity's type, a child's workflow id."""
    scheduled: int = 0
    """An activity's start or completion: the id of its scheduled event."""
    event_id: int = 0


async def histories(address: str, workflow_ids: list[str]) -> dict[str, list[Event]]:
    """Each workflow's events (read without the payload codec: only types, times and names)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    client = await Client.connect(address)
    found: dict[str, list[Event]] = {}
    for workflow_id in workflow_ids:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        events: list[Event] = []
        for event in history.events:
            kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
            name, scheduled = "", 0
            if kind == "WORKFLOW_EXECUTION_SIGNALED":
                name = event.workflow_execution_signaled_event_attributes.signal_name
            elif kind == "ACTIVITY_TASK_SCHEDULED":
                name = event.activity_task_scheduled_event_attributes.activity_type.name
            elif kind == "ACTIVITY_TASK_STARTED":
                scheduled = event.activity_task_started_event_attributes.scheduled_event_id
            elif kind == "ACTIVITY_TASK_COMPLETED":
                scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            elif kind == "START_CHILD_WORKFLOW_EXECUTION_INITIATED":
                name = event.start_child_workflow_execution_initiated_event_attributes.workflow_id
            at = event.event_time.seconds + event.event_time.nanos / 1e9
            events.append(Event(kind, at, name, scheduled, event.event_id))
        found[workflow_id] = events
    return found


async def started_of(address: str, workflow_type: str) -> list[tuple[float, str]]:
    """When each workflow of ``workflow_type`` started (epoch seconds), and its id; by start."""
    from temporalio.client import Client

    client = await Client.connect(address)
    listed = client.list_workflows(f"WorkflowType = '{workflow_type}'")
    return sorted([(info.start_time.timestamp(), info.id) async for info in listed])


def busy(events: list[Event]) -> list[tuple[float, float]]:
    """When a worker held the workflow's tasks: each ``WORKFLOW_TASK_STARTED`` to its completion."""
    spans: list[tuple[float, float]] = []
    started: float | None = None
    for event in events:
        if event.kind == "WORKFLOW_TASK_STARTED":
            started = event.at
        elif event.kind in ("WORKFLOW_TASK_COMPLETED", "WORKFLOW_TASK_FAILED") and started is not None:
            spans.append((started, event.at))
            started = None
    return spans


def overlap(span: tuple[float, float], others: list[tuple[float, float]]) -> float:
    """Seconds of ``span`` that ``others`` cover too."""
    return sum(max(0.0, min(span[1], end) - max(span[0], start)) for start, end in others)


def first(events: list[Event], kind: str, after: float = 0.0, name: str | None = None) -> Event | None:
    """The first event of ``kind`` (and ``name``) at or after ``after``."""
    for event in events:
        if event.kind == kind and event.at >= after and (name is None or event.name == name):
            return event
    return None


def summary(values: list[float | None]) -> dict[str, float | int]:
    """p50, p99 and max of the measured values, in ms (``n``: how many; a None was not measured)."""
    ordered = sorted(value for value in values if value is not None)
    if not ordered:
        return {"n": 0}
    return {
        "n": len(ordered),
        "p50_ms": percentile(ordered, 0.5) * 1000,
        "p99_ms": percentile(ordered, 0.99) * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def between(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start
