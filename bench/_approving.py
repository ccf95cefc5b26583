"""B9: a decision with two approvers, from the last vote on the answer page to the task completing.

The tool is ``approve`` (``bench/servers/longtools_approve.py``): one ``ask_form`` whose rule is
``Approvers(principals=("bob", "dave"), quorum=2)``, and nothing after the approval but the task's
own end. On a fresh stack (``bench._people.PeopleStack``: a Temporal dev server, a ``longtools
worker``, a ``longtools api`` pinned to CPU 0 with static tokens for alice, bob and dave; the
generator, ``python -m bench._approving --generate`` on longtools' interpreter, pinned to CPU 1),
one decision at a time, ``GAP_S`` apart:

1. alice's host calls ``approve`` as a task and follows it on a ``subscriptions/listen`` stream
   (what a 2026 client holds to hear of its task; ``tasks/get`` would be polled every
   ``pollIntervalMs``, 2 s for a task that waits on people);
2. the stream shows the decision and its approvers' link (``_meta["longtools.dev/decisions"]``);
3. bob, signed in to the pages, opens the link and approves: the page's form POSTed as a browser
   posts it (``csrf``, the proposal's ``digest``, the note, ``action=accept``), answered "Your vote
   is in";
4. dave opens it, and the clock starts as his POST is sent: the **last vote**. It stops when alice's
   stream brings the task ``completed``. The POST's own answer time is kept too (the page waits for
   the vote to be counted).

Afterwards each task's history, and the start of each vote's claim (the ``longtools.Once`` workflow
the page starts so that a vote is taken once), split the time into phases: the page up to its
claim, the claim up to the vote's signal, the signal until a worker takes the workflow task, that
workflow task, the rest of the run, and the stream. CPU per decision per role is read over the
measured decisions (each decision whole: its start, both pages, both votes, its end), and over the
last vote alone (from its POST until both its answer and the completion came).

After the window, ``probes`` more decisions have a bare Temporal client (in the generator) long-poll
each task's close event too, as an SDK's ``handle.result()`` does: the stream's phase against what
Temporal itself takes to tell a client of the end.

``python -m bench._approving [--decisions N] [--warmup N] [--probes N] [--quick] [--json PATH]
[--code TREE]`` runs it alone and prints the Markdown section (``--code``: the ``longtools/`` of
another tree, e.g. a commit extracted with ``git archive``, with this tree's benchmark).
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
from urllib.parse import urlsplit

from bench import _people
from bench._people import ROLES, Browser, PeopleStack, Requester, Roles, between, first, spent, summary
from bench._procs import (
    ROOT,
    Generator,
    StartFailed,
    row_arguments,
    row_main,
    wait_idle,
)
from bench.load import CpuWindow, Failed, tree

SCENARIO: Final = "B9"
TOOL: Final = "approve"
DECISIONS: Final = 100
WARMUP: Final = 5
PROBES: Final = 20
"""Decisions after the window whose close event a bare Temporal client long-polls too."""
GAP_S: Final = 0.3
"""Between two decisions: the last one's tail (its claim's workflow ending) is not in the next."""
ONCE: Final = "longtools.Once"
ANSWER_SIGNAL: Final = "longtools.answer"
_DECISIONS_META: Final = "longtools.dev/decisions"
PHASES: Final = (
    ("page", "the POST until its claim started (`longtools.Once` started)"),
    ("claim", "the claim until the vote's signal (`longtools.answer`) is in the task's history"),
    ("dispatch", "the signal until a worker starts the workflow task"),
    ("workflow_task", "that workflow task (the vote counted, the decision's ledger entries signed)"),
    ("to_end", "that workflow task's end until the task's `WorkflowExecutionCompleted`"),
    ("stream", "`WorkflowExecutionCompleted` until alice's stream brings `completed`"),
)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # noqa: T201


# The generator: a subprocess pinned to CPU 1, one operation (JSON in, JSON out).


async def _close_seen(temporal: Any, task_id: str) -> float:
    """When a bare Temporal client's long poll of the task's close event (what an SDK's
    ``handle.result()`` holds) brings it: the floor of the stream's phase."""
    from temporalio.client import WorkflowHistoryEventFilterType

    events = temporal.get_workflow_handle(task_id).fetch_history_events(
        wait_new_event=True, event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
    )
    async for event in events:
        if event.HasField("workflow_execution_completed_event_attributes"):
            return time.time()
    raise Failed(f"task {task_id}: no close event")


async def _decide(
    alice: Requester, bob: Browser, dave: Browser, roles: Roles | None, temporal: Any = None
) -> dict[str, Any]:
    """One decision, end to end; the moments of its last vote, and its CPU when ``roles``. With a
    ``temporal`` client, it also long-polls the task's close event (``_close_seen``)."""
    task_id = await alice.start(TOOL)
    following = await alice.follow(task_id)
    try:
        asked = await following.task(lambda task: bool(task.get("_meta", {}).get(_DECISIONS_META)))
        [decision] = asked.message["params"]["_meta"][_DECISIONS_META].values()
        path = urlsplit(str(decision["link"])).path
        heading = await bob.send(path, await bob.open(path), [("note", "bob")])
        if heading != "Your vote is in":
            raise Failed(f"bob's vote: {heading!r}")
        form = await dave.open(path)
        probing = asyncio.create_task(_close_seen(temporal, task_id)) if temporal is not None else None
        before = roles.now() if roles is not None else {}
        posted = time.time()
        voting = asyncio.create_task(dave.send(path, form, [("note", "dave")]))
        ended = await following.task(lambda task: task.get("status") in _people.TERMINAL)
        heading = await voting
        answered = time.time()
        cpu = spent(before, roles.now()) if roles is not None else {}
        close_seen = await probing if probing is not None else None
    finally:
        await following.close()
    if ended.message["params"]["status"] != "completed" or heading != "Your vote is in":
        raise Failed(f"task {task_id}: {json.dumps(ended.message)[:300]}; dave's vote: {heading!r}")
    return {
        "task_id": task_id,
        "posted": posted,
        "seen": ended.at,
        "answered": answered,
        "cpu": cpu,
        "close_seen": close_seen,
    }


def _signal(events: list[_people.Event]) -> float | None:
    """When the task's last vote was signalled."""
    signals = [e for e in events if e.kind == "WORKFLOW_EXECUTION_SIGNALED" and e.name == ANSWER_SIGNAL]
    return signals[-1].at if signals else None


def _claim(record: Mapping[str, Any], events: list[_people.Event], claims: list[tuple[float, str]]) -> str:
    """The id of the last vote's claim: the ``longtools.Once`` started between its POST and its signal."""
    signal = _signal(events)
    posted = float(record["posted"])
    return next((ident for at, ident in claims if signal is not None and posted <= at <= signal), "")


def _phases(
    record: Mapping[str, Any], events: list[_people.Event], claim: list[_people.Event]
) -> dict[str, Any]:
    """``record``'s last vote in phases, from the task's history and its claim's."""
    posted, seen = float(record["posted"]), float(record["seen"])
    signal = _signal(events)
    claimed = first(claim, "WORKFLOW_EXECUTION_STARTED")
    started = first(events, "WORKFLOW_TASK_STARTED", signal) if signal is not None else None
    done = first(events, "WORKFLOW_TASK_COMPLETED", started.at) if started is not None else None
    completed = first(events, "WORKFLOW_EXECUTION_COMPLETED")
    at = {
        "claim": None if claimed is None else claimed.at,
        "signal": signal,
        "task_started": None if started is None else started.at,
        "task_done": None if done is None else done.at,
        "completed": None if completed is None else completed.at,
    }
    shared = (
        _people.overlap((started.at, done.at), _people.busy(claim))
        if started is not None and done is not None and claimed is not None
        else None
    )
    return {
        "page": between(posted, at["claim"]),
        "claim": between(at["claim"], at["signal"]),
        "dispatch": between(at["signal"], at["task_started"]),
        "workflow_task": between(at["task_started"], at["task_done"]),
        "to_end": between(at["task_done"], at["completed"]),
        "stream": between(at["completed"], seen),
        "signal_to_seen": between(at["signal"], seen),
        "signal_to_completed": between(at["signal"], at["completed"]),
        "claim_overlap": shared,
    }


async def decide_load(spec: dict[str, Any]) -> dict[str, Any]:
    """``warmup`` decisions, then ``decisions`` measured ones, one at a time; then the histories."""
    import httpx

    base, tokens = f"http://127.0.0.1:{spec['port']}", spec["tokens"]
    gap_s = float(spec["gap_s"])
    async with (
        httpx.AsyncClient(base_url=base, timeout=30) as host,
        httpx.AsyncClient(base_url=base, timeout=30, follow_redirects=False) as bob_http,
        httpx.AsyncClient(base_url=base, timeout=30, follow_redirects=False) as dave_http,
    ):
        alice, bob, dave = Requester(host, tokens["alice"]), Browser(bob_http), Browser(dave_http)
        await bob.sign_in(tokens["bob"])
        await dave.sign_in(tokens["dave"])
        for _ in range(int(spec["warmup"])):
            await _decide(alice, bob, dave, None)
            await asyncio.sleep(gap_s)
        roots: Mapping[str, list[int]] = spec["roles"]
        roles = Roles({role: tree(pids) for role, pids in roots.items()})
        window = CpuWindow(roots)
        records: list[dict[str, Any]] = []
        for _ in range(int(spec["decisions"])):
            records.append(await _decide(alice, bob, dave, roles))
            await asyncio.sleep(gap_s)
        measured = window.close()
        # After the window (its CPU is not counted): decisions whose close event a bare Temporal
        # client long-polls too, beside alice's stream.
        from temporalio.client import Client

        temporal = await Client.connect(spec["temporal"])
        probed: list[dict[str, Any]] = []
        for _ in range(int(spec["probes"])):
            probed.append(await _decide(alice, bob, dave, None, temporal))
            await asyncio.sleep(gap_s)
    address = spec["temporal"]
    found = await _people.histories(address, [record["task_id"] for record in [*records, *probed]])
    claims = await _people.started_of(address, ONCE)
    claim_of = {r["task_id"]: _claim(r, found[r["task_id"]], claims) for r in [*records, *probed]}
    claimed = await _people.histories(address, [ident for ident in claim_of.values() if ident])
    phases = [_phases(r, found[r["task_id"]], claimed.get(claim_of[r["task_id"]], [])) for r in records]
    probe_phases = [_phases(r, found[r["task_id"]], claimed.get(claim_of[r["task_id"]], [])) for r in probed]
    count = len(records)
    overlaps = [phase["claim_overlap"] for phase in phases if phase["claim_overlap"] is not None]
    last_vote_cpu = {role: sum(r["cpu"][role] for r in records) * 1000 / count for role in ROLES}
    return {
        "ok": True,
        "decisions": count,
        "seen": summary([r["seen"] - r["posted"] for r in records]),
        "answered": summary([r["answered"] - r["posted"] for r in records]),
        "seen_before_answer": sum(r["seen"] <= r["answered"] for r in records),
        "claim_overlapped": sum(value > 0 for value in overlaps),
        "phases": {name: summary([p[name] for p in phases]) for name in phases[0]},
        "cpu_ms_per_decision": {role: s * 1000 / count for role, s in measured["cpu_s"].items()},
        "last_vote_cpu_ms": last_vote_cpu,
        "wall_s": measured["wall_s"],
        "gen_cpu_s": measured["gen_cpu_s"],
        "other_cpu_per_s": measured["other_cpu_s"] / measured["wall_s"],
        "records": [{**r, **p} for r, p in zip(records, phases, strict=True)],
        "probe": _probe(probed, probe_phases),
    }


def _probe(probed: list[dict[str, Any]], phases: list[dict[str, Any]]) -> dict[str, Any]:
    """The stream against a bare Temporal client's long poll of the close event, on the same decisions."""
    completed = [
        None if phase["stream"] is None else record["seen"] - phase["stream"]
        for record, phase in zip(probed, phases, strict=True)
    ]
    return {
        "decisions": len(probed),
        "seen": summary([r["seen"] - r["posted"] for r in probed]),
        "stream": summary([phase["stream"] for phase in phases]),
        "close_event": summary(
            [between(at, r["close_seen"]) for r, at in zip(probed, completed, strict=True)]
        ),
    }


_OPERATIONS = {"decide": decide_load}


# The orchestrator: one stack, the decisions, the figures.


def run(
    python_longtools: Path,
    tmp: Path,
    *,
    decisions: int = DECISIONS,
    warmup: int = WARMUP,
    probes: int = PROBES,
    pin: bool = True,
    code: Path = ROOT,
) -> dict[str, Any]:
    """B9 end to end on a stack of its own; a dict of figures (``ok`` false with a ``problem``)."""
    pin = pin and (os.cpu_count() or 1) >= 2
    work = Path(tempfile.mkdtemp(prefix="b9-", dir=tmp))
    generate = Generator("bench._approving", {1} if pin else None, python=python_longtools)
    record: dict[str, Any] = {
        "scenario": SCENARIO,
        "ok": False,
        "decisions": decisions,
        "warmup": warmup,
        "probes": probes,
        "gap_s": GAP_S,
        "pinned": "API on CPU 0, generator on CPU 1" if pin else "not pinned",
    }
    stack = PeopleStack(python_longtools, work, {0} if pin else None, code=code)
    try:
        stack.start()
        record["idle_wait_s"] = wait_idle(stack.pids, timeout=60)
        say(f"B9: {warmup} decisions of warm-up, then {decisions} measured")
        spec = {
            "op": "decide",
            "port": stack.port,
            "roles": stack.roots,
            "tokens": stack.tokens,
            "temporal": stack.temporal_address,
            "decisions": decisions,
            "warmup": warmup,
            "probes": probes,
            "gap_s": GAP_S,
        }
        outcome = generate(spec, 120 + 10 * (decisions + warmup + probes))
        record.update({key: value for key, value in outcome.items() if key != "ok"})
        record["ok"] = True
        say(f"B9: {_line(record)}")
        return record
    except (Failed, StartFailed, subprocess.SubprocessError) as exc:
        record["problem"] = f"{exc}\n{stack.logs()[-3000:]}"
        return record
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)


def _line(result: Mapping[str, Any]) -> str:
    seen, cpu = result["seen"], result["cpu_ms_per_decision"]
    return (
        f"last vote to completed p50 {seen['p50_ms']:.0f} ms, p99 {seen['p99_ms']:.0f} ms; CPU per decision "
        + ", ".join(f"{role} {cpu[role]:.1f} ms" for role in ROLES)
    )


def _cell(figures: Mapping[str, Any], key: str) -> str:
    return f"{figures[key]:.1f}" if figures.get("n") else "-"


def render(result: dict[str, Any]) -> str:
    lines = [
        f"**B9**: {result['decisions']} decisions of two approvers (`approve`, quorum 2), one at a time "
        f"after {result['warmup']} of warm-up; last vote = the second approver's POST on the answer page, "
        f"completed = alice's `subscriptions/listen` stream says so; {result['pinned']}",
        "",
    ]
    if not result.get("ok"):
        return "\n".join([*lines, f"B9 failed: {str(result.get('problem'))[:1500]}", ""])
    seen, answered = result["seen"], result["answered"]
    lines += [
        "| from the last vote's POST | p50 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|",
        f"| **to `completed` on the stream** | **{seen['p50_ms']:.1f}** | **{seen['p99_ms']:.1f}** "
        f"| {seen['max_ms']:.1f} |",
        f'| to the POST\'s answer ("Your vote is in") | {answered["p50_ms"]:.1f} | {answered["p99_ms"]:.1f} '
        f"| {answered['max_ms']:.1f} |",
        "",
        "| phase | p50 ms | p99 ms | measured |",
        "|---|---:|---:|---:|",
    ]
    phases = result["phases"]
    for name, said in PHASES:
        figures = phases[name]
        lines.append(f"| {said} | {_cell(figures, 'p50_ms')} | {_cell(figures, 'p99_ms')} | {figures['n']} |")
    for name, said in (
        (
            "claim_overlap",
            "of that workflow task, the time the claim's own workflow tasks ran on the worker too",
        ),
        ("signal_to_completed", "the vote's signal until `WorkflowExecutionCompleted`"),
        ("signal_to_seen", "the vote's signal until the stream brings `completed`"),
    ):
        figures = phases[name]
        lines.append(f"| {said} | {_cell(figures, 'p50_ms')} | {_cell(figures, 'p99_ms')} | {figures['n']} |")
    cpu, last = result["cpu_ms_per_decision"], result["last_vote_cpu_ms"]
    lines += [
        "",
        "| CPU ms | API | Temporal | worker | all three |",
        "|---|---:|---:|---:|---:|",
        "| per decision (its start, both pages and votes, its end) | "
        + " | ".join(f"{cpu[role]:.1f}" for role in ROLES)
        + f" | {sum(cpu[role] for role in ROLES):.1f} |",
        "| of which the last vote (its POST until its answer and `completed`) | "
        + " | ".join(f"{last[role]:.1f}" for role in ROLES)
        + f" | {sum(last[role] for role in ROLES):.1f} |",
        "",
        _probe_line(result),
        f"- The claim's workflow tasks ran while the task's last workflow task did in "
        f"{result['claim_overlapped']} of {result['decisions']} decisions.",
        f"- The stream brought `completed` before the POST's answer in {result['seen_before_answer']} of "
        f"{result['decisions']} decisions. Other activity on the machine: {result['other_cpu_per_s']:.2f} "
        f"core; the generator {result['gen_cpu_s'] / result['wall_s']:.2f} core.",
        "",
    ]
    return "\n".join(lines)


def _probe_line(result: Mapping[str, Any]) -> str:
    probe = result.get("probe") or {}
    stream, close = probe.get("stream") or {}, probe.get("close_event") or {}
    if not stream.get("n") or not close.get("n"):
        return "- No decision was probed with a bare Temporal client."
    return (
        f"- {probe['decisions']} more decisions after the window, a bare Temporal client (in the generator) "
        "long-polling each task's close event beside alice's stream: `WorkflowExecutionCompleted` until that "
        f"poll brings it p50 {close['p50_ms']:.1f} ms, p99 {close['p99_ms']:.1f}; until the stream brings "
        f"`completed` p50 {stream['p50_ms']:.1f} ms, p99 {stream['p99_ms']:.1f}."
    )


def main(argv: list[str] | None = None) -> int:
    parser = row_arguments("bench._approving", __doc__, code=True)
    parser.add_argument("--decisions", type=int, help=f"measured decisions (default {DECISIONS}; --quick 10)")
    parser.add_argument("--warmup", type=int, help=f"decisions of warm-up (default {WARMUP}; --quick 2)")
    parser.add_argument(
        "--probes", type=int, help=f"decisions after the window with a close-event probe (default {PROBES})"
    )
    parser.add_argument("--quick", action="store_true", help="10 decisions after 2 of warm-up, 5 probed")
    args = parser.parse_args(argv)
    return row_main(
        args,
        _OPERATIONS,
        lambda tmp: run(
            args.python_longtools,
            tmp,
            decisions=args.decisions or (10 if args.quick else DECISIONS),
            warmup=args.warmup if args.warmup is not None else (2 if args.quick else WARMUP),
            probes=args.probes if args.probes is not None else (5 if args.quick else PROBES),
            pin=not args.no_pin,
            code=args.code,
        ),
        render,
    )


if __name__ == "__main__":
    sys.exit(main())
