"""B10: from a person's question starting to wait to its email arriving at a local SMTP server.

The tool is ``ask_person`` (``bench/servers/longtools_ask_person.py``): one ``ask_form(...,
by="person")``, a question only the person who asked may answer, on the answer page. A deployment
that notifies people writes the notify settings into each task's memo at its start; the workflow,
once it has published its question (its memo upserted), starts a notice, a child workflow
``longtools.Notify`` it does not wait for, whose ``plan`` activity says who hears of it and whose
``send`` activity mails each of them through Apprise.

On a fresh stack (``bench._people.PeopleStack``, with ``LONGTOOLS_NOTIFY_EMAIL`` naming an SMTP
server on loopback and ``LONGTOOLS_NOTIFY_PEOPLE`` giving alice an address; the API pinned to CPU
0), the generator (``python -m bench._notifying --generate``, longtools' interpreter, pinned to
CPU 1) runs that SMTP server itself (aiosmtpd, in a thread) and, one question at a time, ``GAP_S``
apart: alice's host calls ``ask_person`` as a task; the question waits; the mail comes. A mail
arrives when the server has its whole message (``handle_DATA``; ``time.time()``); the task it is
about is the ``Task <id>`` line of its text.

**When the question starts to wait** is taken from Temporal's history: the task's
``WorkflowPropertiesModified`` event that published the question (the memo the API and the pages
read it from), the last one before the notice's ``StartChildWorkflowExecutionInitiated``. Its
time is Temporal's clock, the mail's this machine's: one clock. The histories of the task and its
notice split the time into phases: the child's start, its first workflow task (up to ``plan``
scheduled), ``plan``, the workflow task that schedules ``send``, and ``send`` up to the mail.

Before the questions, ``probes`` mails go from the generator straight to the same SMTP server, with
the standard library's ``smtplib`` and through Apprise as the ``send`` activity calls it: the
floor of ``send``'s phase.

``python -m bench._notifying [--questions N] [--warmup N] [--probes N] [--quick] [--json PATH]
[--code TREE]`` runs it alone and prints the Markdown section (``--code`` as in ``bench._approving``).
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Final

from bench import _people
from bench._people import ROLES, PeopleStack, Requester, between, first, summary
from bench._procs import (
    ROOT,
    Generator,
    StartFailed,
    free_port,
    row_arguments,
    row_main,
    wait_idle,
)
from bench.load import CpuWindow, Failed

SCENARIO: Final = "B10"
TOOL: Final = "ask_person"
QUESTIONS: Final = 100
WARMUP: Final = 5
PROBES: Final = 20
"""Mails sent straight to the SMTP server from the generator, each way (``_floors``)."""
GAP_S: Final = 0.3
"""Between two questions: the last one's tail (its notice's end) is not in the next."""
ADDRESS: Final = "alice@example.test"
PLAN: Final = "longtools.notify.plan"
SEND: Final = "longtools.notify.send"
_TASK_LINE = re.compile(r"^Task (\S+)\s*$", re.M)
PHASES: Final = (
    ("child", "the question's memo upsert until the notice's child workflow started"),
    ("child_dispatch", "the child started until a worker started its first workflow task"),
    ("child_task", "that workflow task until `plan` scheduled"),
    ("plan_dispatch", "`plan` scheduled until started"),
    ("plan", "`plan` started until completed"),
    ("to_send", "`plan` completed until `send` scheduled (a workflow task)"),
    ("send_dispatch", "`send` scheduled until started"),
    ("send", "`send` started until the mail arrived (Apprise, SMTP)"),
)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # noqa: T201


# The generator: a subprocess pinned to CPU 1 with the SMTP server in a thread; one operation.


class _Mailbox:
    """An SMTP server on loopback (aiosmtpd) that tells, per task, when its mail arrived."""

    def __init__(self, port: int, loop: asyncio.AbstractEventLoop) -> None:
        from aiosmtpd.controller import Controller

        self._loop = loop
        self._arrived: dict[str, asyncio.Future[tuple[float, list[str], str]]] = {}
        self.strays = 0
        self._controller = Controller(self, hostname="127.0.0.1", port=port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        at = time.time()
        raw = envelope.content if isinstance(envelope.content, bytes) else str(envelope.content).encode()
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        part = parsed.get_body(preferencelist=("plain",))
        found = _TASK_LINE.search(str(part.get_content()) if part is not None else "")
        told = (at, [str(to) for to in envelope.rcpt_tos], str(parsed["subject"]))
        self._loop.call_soon_threadsafe(self._arrive, found.group(1) if found else "", told)
        return "250 OK"

    def _arrive(self, task_id: str, told: tuple[float, list[str], str]) -> None:
        waiting = self._arrived.setdefault(task_id, self._loop.create_future())
        if waiting.done():
            self.strays += 1  # a second mail for one task (none is expected: no reminder is due)
            return
        waiting.set_result(told)

    async def mail_of(self, task_id: str) -> tuple[float, list[str], str]:
        """When the mail about ``task_id`` arrived, to whom, and its subject (within ``WAIT_S``)."""
        waiting = self._arrived.setdefault(task_id, self._loop.create_future())
        async with asyncio.timeout(_people.WAIT_S):
            return await asyncio.shield(waiting)

    def __enter__(self) -> _Mailbox:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()


async def _ask(alice: Requester, mailbox: _Mailbox) -> dict[str, Any]:
    called = time.time()
    task_id = await alice.start(TOOL)
    answered = time.time()
    arrived, to, subject = await mailbox.mail_of(task_id)
    if to != [ADDRESS] or "needs your answer" not in subject:
        raise Failed(f"task {task_id}: a mail to {to} about {subject!r}")
    return {"task_id": task_id, "called": called, "answered": answered, "arrived": arrived}


def _phases(
    record: Mapping[str, Any], task: list[_people.Event], notice: list[_people.Event]
) -> dict[str, Any]:
    """``record``'s mail in phases, from the histories of its task and of its notice."""
    arrived = float(record["arrived"])
    initiated = first(task, "START_CHILD_WORKFLOW_EXECUTION_INITIATED")
    limit = initiated.event_id if initiated is not None else 0
    upserts = [e for e in task if e.kind == "WORKFLOW_PROPERTIES_MODIFIED" and e.event_id < limit]
    published = upserts[-1].at if upserts else None
    child = first(notice, "WORKFLOW_EXECUTION_STARTED")
    child_task = first(notice, "WORKFLOW_TASK_STARTED")
    plan = _activity(notice, PLAN)
    send = _activity(notice, SEND)
    return {
        "published_to_mail": between(published, arrived),
        "call_to_mail": between(float(record["called"]), arrived),
        "call_to_published": between(float(record["called"]), published),
        "child": between(published, _at(child)),
        "child_dispatch": between(_at(child), _at(child_task)),
        "child_task": between(_at(child_task), plan[0]),
        "plan_dispatch": between(plan[0], plan[1]),
        "plan": between(plan[1], plan[2]),
        "to_send": between(plan[2], send[0]),
        "send_dispatch": between(send[0], send[1]),
        "send": between(send[1], arrived),
        "mail_to_send_completed": between(arrived, send[2]),
    }


def _at(event: _people.Event | None) -> float | None:
    return None if event is None else event.at


def _activity(events: list[_people.Event], name: str) -> tuple[float | None, float | None, float | None]:
    """When the (first) activity ``name`` was scheduled, started and completed. A try that fails is
    not in the history (only the last try's start is), so a retried delivery shows as a long start."""
    scheduled = first(events, "ACTIVITY_TASK_SCHEDULED", name=name)
    if scheduled is None:
        return None, None, None
    ran = [event for event in events if event.scheduled == scheduled.event_id]
    started = next((event.at for event in ran if event.kind == "ACTIVITY_TASK_STARTED"), None)
    completed = next((event.at for event in ran if event.kind == "ACTIVITY_TASK_COMPLETED"), None)
    return scheduled.at, started, completed


def _smtplib(port: int, tag: str) -> None:
    """One mail to the mailbox with the standard library's SMTP client alone."""
    import smtplib

    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "longtools@example.test", ADDRESS, "probe"
    message.set_content(f"A probe.\nTask {tag}\n")
    with smtplib.SMTP("127.0.0.1", port) as client:
        client.send_message(message)


def _apprise(port: int, tag: str) -> None:
    """One mail to the mailbox as the ``send`` activity sends it: a new ``Apprise``, the URL, notify."""
    import apprise

    notifier = apprise.Apprise()
    url = f"mailto://127.0.0.1:{port}?from=longtools@example.test&mode=insecure&to={ADDRESS}"
    if not notifier.add(url) or not notifier.notify(
        title="probe", body=f"A probe.\nTask {tag}", body_format=apprise.NotifyFormat.TEXT
    ):
        raise Failed("Apprise did not send the probe")


async def _floors(mailbox: _Mailbox, port: int, count: int) -> dict[str, Any]:
    """From the generator (in a thread, as the activity sends), ``count`` rounds of: one mail with
    ``smtplib`` alone, one through Apprise, each timed from the call to its arrival; and what
    Apprise's SMTP client does before it connects, in any mode, alone: load the CA certificates
    (``ssl.create_default_context()``). In turn, so that the machine's drift hits all three alike;
    after one untimed round (imports)."""
    import ssl

    times: dict[str, list[float | None]] = {"smtplib": [], "apprise": [], "ssl_context": []}
    for n in range(-1, count):
        for name, send in (("smtplib", _smtplib), ("apprise", _apprise)):
            tag = f"probe-{name}-{n}"
            called = time.time()
            await asyncio.to_thread(send, port, tag)
            arrived, _, _ = await mailbox.mail_of(tag)
            if n >= 0:
                times[name].append(arrived - called)
        started = time.perf_counter()
        await asyncio.to_thread(ssl.create_default_context)
        if n >= 0:
            times["ssl_context"].append(time.perf_counter() - started)
    return {name: summary(values) for name, values in times.items()}


async def ask_load(spec: dict[str, Any]) -> dict[str, Any]:
    """``warmup`` questions, then ``questions`` measured ones, one at a time; then the histories.
    First, before the stack does anything, ``probes`` mails of each floor (``_floors``)."""
    import httpx

    gap_s = float(spec["gap_s"])
    with _Mailbox(int(spec["smtp_port"]), asyncio.get_running_loop()) as mailbox:
        floors = await _floors(mailbox, int(spec["smtp_port"]), int(spec["probes"]))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{spec['port']}", timeout=30) as host:
            alice = Requester(host, spec["tokens"]["alice"])
            for _ in range(int(spec["warmup"])):
                await _ask(alice, mailbox)
                await asyncio.sleep(gap_s)
            window = CpuWindow(spec["roles"])
            records: list[dict[str, Any]] = []
            for _ in range(int(spec["questions"])):
                records.append(await _ask(alice, mailbox))
                await asyncio.sleep(gap_s)
            measured = window.close()
        strays = mailbox.strays
    address = spec["temporal"]
    ids = [record["task_id"] for record in records]
    tasks = await _people.histories(address, ids)
    notices = {task_id: "" for task_id in ids}
    for task_id in ids:
        initiated = first(tasks[task_id], "START_CHILD_WORKFLOW_EXECUTION_INITIATED")
        notices[task_id] = initiated.name if initiated is not None else ""
    told = await _people.histories(address, [notice for notice in notices.values() if notice])
    phases = [_phases(r, tasks[r["task_id"]], told.get(notices[r["task_id"]], [])) for r in records]
    count = len(records)
    return {
        "ok": True,
        "questions": count,
        "strays": strays,
        "tools_call": summary([r["answered"] - r["called"] for r in records]),
        "floors": floors,
        "phases": {name: summary([p[name] for p in phases]) for name in phases[0]},
        "cpu_ms_per_question": {role: s * 1000 / count for role, s in measured["cpu_s"].items()},
        "wall_s": measured["wall_s"],
        "gen_cpu_s": measured["gen_cpu_s"],
        "other_cpu_per_s": measured["other_cpu_s"] / measured["wall_s"],
        "records": [{**r, **p} for r, p in zip(records, phases, strict=True)],
    }


_OPERATIONS = {"ask": ask_load}


# The orchestrator: one stack, the questions, the figures.


def run(
    python_longtools: Path,
    tmp: Path,
    *,
    questions: int = QUESTIONS,
    warmup: int = WARMUP,
    probes: int = PROBES,
    pin: bool = True,
    code: Path = ROOT,
) -> dict[str, Any]:
    """B10 end to end on a stack of its own; a dict of figures (``ok`` false with a ``problem``)."""
    pin = pin and (os.cpu_count() or 1) >= 2
    work = Path(tempfile.mkdtemp(prefix="b10-", dir=tmp))
    generate = Generator("bench._notifying", {1} if pin else None, python=python_longtools)
    smtp_port = free_port()
    record: dict[str, Any] = {
        "scenario": SCENARIO,
        "ok": False,
        "questions": questions,
        "warmup": warmup,
        "probes": probes,
        "gap_s": GAP_S,
        "pinned": "API on CPU 0, generator and SMTP server on CPU 1" if pin else "not pinned",
    }
    notify = {
        "LONGTOOLS_NOTIFY_EMAIL": f"mailto://127.0.0.1:{smtp_port}?from=longtools@example.test&mode=insecure",
        "LONGTOOLS_NOTIFY_PEOPLE": f"alice={ADDRESS}",
    }
    stack = PeopleStack(python_longtools, work, {0} if pin else None, notify, code)
    try:
        stack.start()
        record["idle_wait_s"] = wait_idle(stack.pids, timeout=60)
        say(f"B10: {warmup} questions of warm-up, then {questions} measured")
        spec = {
            "op": "ask",
            "port": stack.port,
            "roles": stack.roots,
            "tokens": stack.tokens,
            "temporal": stack.temporal_address,
            "smtp_port": smtp_port,
            "questions": questions,
            "warmup": warmup,
            "probes": probes,
            "gap_s": GAP_S,
        }
        outcome = generate(spec, 120 + 10 * (questions + warmup))
        record.update({key: value for key, value in outcome.items() if key != "ok"})
        record["ok"] = True
        say(f"B10: {_line(record)}")
        return record
    except (Failed, StartFailed, subprocess.SubprocessError) as exc:
        record["problem"] = f"{exc}\n{stack.logs()[-3000:]}"
        return record
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)


def _line(result: Mapping[str, Any]) -> str:
    waited, cpu = result["phases"]["published_to_mail"], result["cpu_ms_per_question"]
    return (
        f"question waiting to mail p50 {waited['p50_ms']:.0f} ms, p99 {waited['p99_ms']:.0f} ms; CPU per "
        "question " + ", ".join(f"{role} {cpu[role]:.1f} ms" for role in ROLES)
    )


def _row(said: str, figures: Mapping[str, Any], bold: bool = False) -> str:
    if not figures.get("n"):
        return f"| {said} | - | - | - | 0 |"
    p50, p99 = f"{figures['p50_ms']:.1f}", f"{figures['p99_ms']:.1f}"
    if bold:
        said, p50, p99 = f"**{said}**", f"**{p50}**", f"**{p99}**"
    return f"| {said} | {p50} | {p99} | {figures['max_ms']:.1f} | {figures['n']} |"


def render(result: dict[str, Any]) -> str:
    lines = [
        f'**B10**: {result["questions"]} person\'s questions (`ask_person`, `by="person"`), one at a time '
        f"after {result['warmup']} of warm-up, each mailed to the person who asked through an SMTP server "
        f"on loopback (aiosmtpd); {result['pinned']}",
        "",
    ]
    if not result.get("ok"):
        return "\n".join([*lines, f"B10 failed: {str(result.get('problem'))[:1500]}", ""])
    phases = result["phases"]
    lines += [
        "| from | p50 ms | p99 ms | max ms | measured |",
        "|---|---:|---:|---:|---:|",
        _row(
            "the question waiting (its memo upsert in the history) to the mail",
            phases["published_to_mail"],
            True,
        ),
        _row("`tools/call` sent to the mail", phases["call_to_mail"]),
        _row("`tools/call` sent to the question waiting", phases["call_to_published"]),
        _row("`tools/call` sent to its answer (`CreateTaskResult`)", result["tools_call"]),
        "",
        "| phase of the question waiting to the mail | p50 ms | p99 ms | max ms | measured |",
        "|---|---:|---:|---:|---:|",
        *(_row(said, phases[name]) for name, said in PHASES),
        _row("(after) the mail until `send` completed in the history", phases["mail_to_send_completed"]),
        "",
        "| the floor of `send`'s phase, from the generator | p50 ms | p99 ms | max ms | measured |",
        "|---|---:|---:|---:|---:|",
        _row("`smtplib`: connect, EHLO, MAIL, RCPT, DATA", result["floors"]["smtplib"]),
        _row("Apprise as `send` calls it (a new `Apprise`, the URL, `notify`)", result["floors"]["apprise"]),
        _row(
            "`ssl.create_default_context()` alone (the CA store), which Apprise calls in any mode",
            result["floors"]["ssl_context"],
        ),
    ]
    cpu = result["cpu_ms_per_question"]
    lines += [
        "",
        "| CPU ms | API | Temporal | worker | all three |",
        "|---|---:|---:|---:|---:|",
        "| per question (its task's start, its notice, its mail) | "
        + " | ".join(f"{cpu[role]:.1f}" for role in ROLES)
        + f" | {sum(cpu[role] for role in ROLES):.1f} |",
        "",
        f"- Other activity on the machine: {result['other_cpu_per_s']:.2f} core; the generator (with the "
        f"SMTP server) {result['gen_cpu_s'] / result['wall_s']:.2f} core; mails beyond one per question: "
        f"{result['strays']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = row_arguments("bench._notifying", __doc__, code=True)
    parser.add_argument("--questions", type=int, help=f"measured questions (default {QUESTIONS}; --quick 10)")
    parser.add_argument("--warmup", type=int, help=f"questions of warm-up (default {WARMUP}; --quick 2)")
    parser.add_argument(
        "--probes", type=int, help=f"mails of each floor sent straight to the server (default {PROBES})"
    )
    parser.add_argument("--quick", action="store_true", help="10 questions after 2 of warm-up, 5 probes")
    args = parser.parse_args(argv)
    return row_main(
        args,
        _OPERATIONS,
        lambda tmp: run(
            args.python_longtools,
            tmp,
            questions=args.questions or (10 if args.quick else QUESTIONS),
            warmup=args.warmup if args.warmup is not None else (2 if args.quick else WARMUP),
            probes=args.probes if args.probes is not None else (5 if args.quick else PROBES),
            pin=not args.no_pin,
            code=args.code,
        ),
        render,
    )


if __name__ == "__main__":
    sys.exit(main())
