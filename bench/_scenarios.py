"""The scenarios, for each the implementations that do the same work, and how each one is started.

Roles: the ``floor`` is what the bare stack costs (HTTP for B1/B2, Temporal for B3/B6), the
``peer``s are what a user would pick instead of longtools, ``ours`` are longtools' rows. Ratios in
the table are to the best peer and to the floor.

Rows are data: an `Impl` names a `Launch` in `LAUNCHES`, which says what to run and what must run
first (the Temporal dev server, a ``longtools worker``, Redis). Adding a way to run longtools is
one `Launch` and one `Impl` per scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from bench._procs import BENCH_LIMITS, KEY_RINGS

Role = Literal["floor", "peer", "ours"]
Kind = Literal[
    "call", "mrtr", "legacy-call", "legacy-elicit", "task-latency", "task-input", "task-throughput"
]
"""``legacy-*``: a 2025-era client (`bench.legacy_load`); ``task-*``: `bench.task_load`; the rest
`bench.load`."""
Figure = Literal["throughput", "latency", "duration"]
Need = Literal["temporal", "worker", "redis", "redis-always"]

PAYLOAD = "0123456789abcdef"  # 16 bytes of text, echoed back by every implementation
TOOLS_MODULE = "bench.servers.longtools_tools"
PARKED = "B5"
"""10,000 tasks parked in input_required: not a load run like the others, see `bench._parked`."""
WAITING = "B7"
"""1,000 clients waiting on running tasks, before and after issue 14: see `bench._waiting`."""
_LONGTOOLS_ENV = (
    ("PYTHONPATH", "{root}"),
    ("LONGTOOLS_LOG_FORMAT", "json"),
    *KEY_RINGS.items(),
    *BENCH_LIMITS.items(),
)
_LONGTOOLS_ARGS = ("--no-auth", "--port", "0", "--no-examples", "--tools", TOOLS_MODULE)
_SERVE = (
    *("{longtools}", "serve", *_LONGTOOLS_ARGS, "--temporal-address", "{temporal}"),
    *("--task-queue", "bench-serve", "--data-dir", "{data}"),
)


@dataclass(frozen=True)
class Launch:
    """How to start one implementation.

    ``argv`` and ``env`` values are templates: ``{peers_python}``, ``{longtools_python}``,
    ``{longtools}`` (the ``longtools`` script), ``{root}`` (the repository), ``{data}`` (a
    directory of this launch's own in the run's temporary directory), ``{temporal}`` (the dev
    server's host:port), ``{redis}`` and ``{redis_always}`` (the ``redis://`` URL of Redis,
    fsyncing every second or at every write). ``needs`` are started once,
    before the first row that needs them, and kept for every later row; their CPU is the row's
    *backend CPU*.
    """

    argv: tuple[str, ...]
    needs: tuple[Need, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    self_measured: bool = False
    """A program that runs the scenario itself and prints the figures (the Temporal floor), instead
    of a server that prints its URL and is loaded by the generator."""


LAUNCHES: dict[str, Launch] = {
    "floor": Launch(("{peers_python}", "-m", "bench.servers.floor_starlette")),
    "sdk": Launch(("{peers_python}", "-m", "bench.servers.sdk_echo")),
    "fastmcp": Launch(("{peers_python}", "-m", "bench.servers.fastmcp_echo")),
    # 2025-era sessions kept in the process, JSON answers: the peers' fastest shape for a 2025-era
    # client (B1L); stateless, each request builds a transport and a server task of its own.
    "sdk-stateful": Launch(("{peers_python}", "-m", "bench.servers.sdk_echo", "--stateful")),
    "fastmcp-stateful": Launch(("{peers_python}", "-m", "bench.servers.fastmcp_echo", "--stateful")),
    # The same with SSE answers: the shape in which a 2025-era tool can ask (B2L); a JSON answer
    # has no room for the question.
    "sdk-stateful-sse": Launch(("{peers_python}", "-m", "bench.servers.sdk_echo", "--stateful", "--sse")),
    "fastmcp-stateful-sse": Launch(
        ("{peers_python}", "-m", "bench.servers.fastmcp_echo", "--stateful", "--sse")
    ),
    "fastmcp-tasks-memory": Launch(
        ("{peers_python}", "-m", "bench.servers.fastmcp_tasks", "--docket-url", "memory://")
    ),
    "fastmcp-tasks-redis": Launch(
        ("{peers_python}", "-m", "bench.servers.fastmcp_tasks", "--docket-url", "{redis}"),
        needs=("redis",),
    ),
    # The durable peer: Redis fsyncs its append-only file at every write, as Temporal's SQLite
    # does at every commit, so a kill -9 loses nothing either takes.
    "fastmcp-tasks-redis-always": Launch(
        ("{peers_python}", "-m", "bench.servers.fastmcp_tasks", "--docket-url", "{redis_always}"),
        needs=("redis-always",),
    ),
    "temporal-floor": Launch(
        ("{longtools_python}", "-m", "bench.servers.temporal_floor", "--temporal-address", "{temporal}"),
        needs=("temporal",),
        env=(("PYTHONPATH", "{root}"),),
        self_measured=True,
    ),
    "temporal-floor-eager": Launch(
        (
            "{longtools_python}",
            "-m",
            "bench.servers.temporal_floor",
            "--temporal-address",
            "{temporal}",
            "--eager",
        ),
        needs=("temporal",),
        env=(("PYTHONPATH", "{root}"),),
        self_measured=True,
    ),
    # `longtools serve` on the dev server: the API and a worker in one process (the one measured),
    # so new tasks start eagerly. Its own task queue keeps the shared `longtools worker` out of it.
    "longtools-serve": Launch(_SERVE, needs=("temporal",), env=_LONGTOOLS_ENV),
    # The same, answering a task that completes within 100 ms with its result (the server's choice).
    "longtools-serve-inline": Launch(
        _SERVE, needs=("temporal",), env=(*_LONGTOOLS_ENV, ("LONGTOOLS_TASK_INLINE_MS", "100"))
    ),
    # longtools' API process (the one measured) against the dev server and a `longtools worker`.
    "longtools": Launch(
        ("{longtools}", "api", *_LONGTOOLS_ARGS, "--temporal-address", "{temporal}", "--data-dir", "{data}"),
        needs=("temporal", "worker"),
        env=_LONGTOOLS_ENV,
    ),
}

BACKEND_LABELS: dict[tuple[Need, ...], str] = {
    ("temporal", "worker"): "Temporal + longtools worker",
    ("temporal",): "Temporal",
    ("redis",): "Redis",
    ("redis-always",): "Redis (appendfsync always)",
}


@dataclass(frozen=True)
class Impl:
    key: str
    """Unique within a scenario; ``--impl`` selects by it."""
    label: str
    role: Role
    server: str
    """A key of `LAUNCHES`."""
    tool: str
    floor: str | None = None
    """The key of the floor row this row is compared with (None: the scenario's first floor)."""


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    kind: Kind
    figure: Figure
    """What the table leads with: operations/s, latency (p50/p99) or seconds per run."""
    unit: str
    """What one operation is: a call, an exchange, a task, a run."""
    connections: int
    impls: tuple[Impl, ...]
    load: dict[str, Any] = field(default_factory=dict)
    """Generator settings of this scenario (`bench.task_load.TaskSpec` fields)."""
    quick_load: dict[str, Any] = field(default_factory=dict)
    """What ``--quick`` changes in ``load``."""
    rounds: int | None = None
    """Rounds when fewer than the run's (a long scenario); None: the run's."""
    window: tuple[float, float] | None = None
    """Warm-up and measured seconds when not the run's (``--warmup``, ``--duration`` override it)."""


FLOOR = "Starlette floor"
SDK = "mcp SDK 2.3.0 (MCPServer)"
FASTMCP = "fastmcp 4.1.4"
SDK_STATEFUL = "mcp SDK 2.3.0 (MCPServer), stateful, JSON"
SDK_STATEFUL_SSE = "mcp SDK 2.3.0 (MCPServer), stateful, SSE"
FASTMCP_STATEFUL = "fastmcp 4.1.4, stateful, JSON"
FASTMCP_STATEFUL_SSE = "fastmcp 4.1.4, stateful, SSE"
TEMPORAL_FLOOR = "Temporal floor (execute_workflow, worker in-process)"
FASTMCP_TASKS_MEMORY = "fastmcp-tasks 4.1.4, memory://"
FASTMCP_TASKS_REDIS = "fastmcp-tasks 4.1.4, Redis"
FASTMCP_TASKS_REDIS_ALWAYS = "fastmcp-tasks 4.1.4, Redis fsync always (durable)"
TEMPORAL_FLOOR_EAGER = "Temporal floor, eager start"
LONGTOOLS_API = "longtools api + worker"
LONGTOOLS_SERVE = "longtools serve (API + worker in one process, eager start)"
LONGTOOLS_INLINE = "longtools serve, LONGTOOLS_TASK_INLINE_MS=100"


def _task_rows(tool: str, *, floor: bool, inline: bool = False) -> tuple[Impl, ...]:
    # Each longtools row is compared with the floor of its kind of start: `api` + a separate
    # worker with the plain floor, `serve` (eager start) with the eager floor.
    floors = (
        Impl("floor", TEMPORAL_FLOOR, "floor", "temporal-floor", tool),
        Impl("floor-eager", TEMPORAL_FLOOR_EAGER, "floor", "temporal-floor-eager", tool),
    )
    rows = (
        *(floors if floor else ()),
        Impl("fastmcp-tasks-memory", FASTMCP_TASKS_MEMORY, "peer", "fastmcp-tasks-memory", tool),
        Impl("fastmcp-tasks-redis", FASTMCP_TASKS_REDIS, "peer", "fastmcp-tasks-redis", tool),
        Impl(
            "fastmcp-tasks-redis-always",
            FASTMCP_TASKS_REDIS_ALWAYS,
            "peer",
            "fastmcp-tasks-redis-always",
            tool,
        ),
        Impl("longtools", LONGTOOLS_API, "ours", "longtools", tool, floor="floor"),
        Impl("longtools-serve", LONGTOOLS_SERVE, "ours", "longtools-serve", tool, floor="floor-eager"),
    )
    if inline:
        key = "longtools-serve-inline"
        rows = (*rows, Impl(key, LONGTOOLS_INLINE, "ours", key, tool, floor="floor-eager"))
    return rows


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="B1",
        title="plain tools/call of an echo tool, 16-byte text, 32 connections",
        kind="call",
        figure="throughput",
        unit="calls",
        connections=32,
        impls=(
            Impl("floor", FLOOR, "floor", "floor", "echo"),
            Impl("sdk", SDK, "peer", "sdk", "echo"),
            Impl("fastmcp", FASTMCP, "peer", "fastmcp", "echo"),
            Impl("longtools", "longtools api", "ours", "longtools", "echo"),
        ),
    ),
    Scenario(
        id="B2",
        title="2-round MRTR exchange (one elicitation, answered at once), 32 connections",
        kind="mrtr",
        figure="throughput",
        unit="exchanges",
        connections=32,
        impls=(
            Impl("floor", FLOOR, "floor", "floor", "confirm"),
            Impl("sdk", SDK, "peer", "sdk", "confirm"),
            Impl("fastmcp", FASTMCP, "peer", "fastmcp", "confirm"),
            Impl("longtools", "longtools api, idempotentHint", "ours", "longtools", "confirm"),
            Impl(
                "longtools-once",
                "longtools api, no annotations (single-use record in Temporal)",
                "ours",
                "longtools",
                "confirm_once",
            ),
        ),
    ),
    Scenario(
        id="B1L",
        title="B1 for a 2025-11-25 client: session opened once per connection, then tools/call of "
        "echo, 32 connections",
        kind="legacy-call",
        figure="throughput",
        unit="calls",
        connections=32,
        impls=(
            Impl("sdk", SDK_STATEFUL, "peer", "sdk-stateful", "echo"),
            Impl("fastmcp", FASTMCP_STATEFUL, "peer", "fastmcp-stateful", "echo"),
            Impl("longtools", "longtools api (sealed session)", "ours", "longtools", "echo"),
        ),
    ),
    Scenario(
        id="B2L",
        title="B2 for a 2025-11-25 client: elicitation/create pushed on the call's SSE stream, "
        "answered by a POST; 32 clients of 2 connections",
        kind="legacy-elicit",
        figure="throughput",
        unit="exchanges",
        connections=32,
        impls=(
            Impl("sdk", SDK_STATEFUL_SSE, "peer", "sdk-stateful-sse", "confirm"),
            Impl("fastmcp", FASTMCP_STATEFUL_SSE, "peer", "fastmcp-stateful-sse", "confirm"),
            Impl(
                "longtools", "longtools api, idempotentHint (sealed session)", "ours", "longtools", "confirm"
            ),
        ),
    ),
    Scenario(
        id="B3",
        title="no-op long tool as a task: tools/call, then tasks/get back to back until completed; "
        "one client, sequential",
        kind="task-latency",
        figure="latency",
        unit="tasks",
        connections=1,
        impls=_task_rows("noop", floor=True, inline=True),
        # 100 tasks a round, 3 rounds, 7 rows: about 1.5 minutes with the servers' start-ups, which
        # keeps the whole bench/run under 20 minutes on a fresh clone (it took 18.5 with 150).
        load={"expect": {"done": True}, "poll_s": 0.0, "ops": 100, "warmup_ops": 10},
        quick_load={"ops": 20, "warmup_ops": 3},
    ),
    Scenario(
        id="B4",
        title="2 s of work before each of 3 questions, each answered at once with tasks/update; "
        "tasks/get every 50 ms",
        kind="task-input",
        figure="duration",
        unit="runs",
        connections=1,
        impls=_task_rows("three_questions", floor=False),
        load={"expect": {"confirmed": 3}, "poll_s": 0.05, "ops": 1, "warmup_ops": 0},
        # One round: fastmcp-tasks' two rows take 18 s each, and all three rows are 2 s sleeps
        # plus overhead (runs varied by 0.1 s); more rounds would break the time budget.
        rounds=1,
    ),
    Scenario(
        id="B6",
        title="no-op tasks created and completed, 32 concurrent flows (tasks/get every 20 ms), one worker",
        kind="task-throughput",
        figure="throughput",
        unit="tasks",
        connections=32,
        impls=_task_rows("noop", floor=True),
        load={"expect": {"done": True}, "poll_s": 0.02},
        window=(2.0, 6.0),  # shorter than B1/B2's 3 + 10 s, to keep bench/run under 20 minutes
    ),
)
