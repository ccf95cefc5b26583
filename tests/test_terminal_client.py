"""``longtools call`` and ``longtools task`` as a person uses them: in a real pseudo-terminal.

pexpect drives the CLI against the session's real ``longtools serve`` (and, once, against a
server written with the official SDK's ``MCPServer``), typing answers at the prompts.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pexpect
import pytest

from tests.conftest import OWNER_TOKENS, Served, wait_for_line
from tests.pages import PageClient
from tests.wire import TASKS_EXTENSION, eventually, get_task, post, result, wait_for_task

LONGTOOLS = str(Path(sys.executable).with_name("longtools"))
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
ENV = {**os.environ, "NO_COLOR": "1", "TERM": "xterm", "COLUMNS": "120", "LONGTOOLS_TOKEN": ""}


def _as_at_a_terminal() -> None:
    # Ctrl-C as a person's shell delivers it: a suite started in the background (`cmd &` in a
    # script) ignores SIGINT, the client would inherit that, and Ctrl-C would do nothing.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _spawn(*args: str, env: dict[str, str] | None = None) -> pexpect.spawn[str]:
    return pexpect.spawn(
        LONGTOOLS,
        list(args),
        env={**ENV, **(env or {})},
        encoding="utf-8",
        timeout=40,
        dimensions=(40, 120),
        preexec_fn=_as_at_a_terminal,
    )


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LONGTOOLS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**ENV, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def _tickets(url: str, customer: str, count: int) -> list[str]:
    made = []
    for _ in range(count):
        params = {"name": "create_ticket", "arguments": {"title": "Printer on fire", "customer": customer}}
        made.append(result(post(url, "tools/call", params))["structuredContent"]["ticketId"])
    return made


def _events(url: str, ticket_id: str) -> list[str]:
    got = result(post(url, "tools/call", {"name": "get_ticket", "arguments": {"ticketId": ticket_id}}))
    return [entry["event"] for entry in got["structuredContent"]["history"]]


def _finish(child: pexpect.spawn[str]) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return child.exitstatus


def test_call_shows_a_persons_question_at_once_and_goes_on_without_a_key_once_the_page_has_the_answer(
    server: Served,
) -> None:
    """Ours (review N2): the link is shown and the task followed meanwhile; y, n and Enter, typed
    out of the habit of a y/n prompt, decline nothing; the page's answer is noticed by itself."""
    customer = f"c-{secrets.token_hex(4)}"
    tickets = _tickets(server.url, customer, 2)
    child = _spawn("call", server.url, "bulk_close_tickets", f"customer={customer}")
    child.expect(f"Close 2 tickets for {customer}")
    # A person's question: the terminal shows its link (a URL request) and follows the task.
    child.expect(r"Link: (http://\S+)")
    assert isinstance(child.match, re.Match)
    link = str(child.match.group(1))
    child.expect("Press d to decline going to the page, Ctrl-C to stop following")
    child.expect(r"task input_required · \d+s · waiting for the answer on its page")
    for habit in ("n", "\r", "y"):
        child.send(habit)
    child.expect("The task goes on by itself once the page has the answer: d declines, Ctrl-C stops")
    with PageClient(server.base) as browser:
        browser.answer(link, {"confirm": True})  # the default reason
    child.expect(f"The page has the answer to 'Close 2 tickets for {customer}\\?'; following the task")
    child.expect(r"task working · \d+s")  # the live status line, with the elapsed time
    child.expect("Closed 1 of 2")
    child.expect('"closed"')
    assert _finish(child) == 0
    for ticket_id in tickets:
        assert _events(server.url, ticket_id) == ["created", "closed"]


def test_d_at_the_terminal_declines_going_to_the_page_and_leaves_the_question_to_it(server: Served) -> None:
    """Ours (review N2): only the key the prompt names declines, and what it declines is going to
    the page (a URL request's decline): the task still waits for the person, whose page answers it."""
    customer = f"c-{secrets.token_hex(4)}"
    [ticket_id] = _tickets(server.url, customer, 1)
    params = {"name": "bulk_close_tickets", "arguments": {"customer": customer}}
    task_id = result(post(server.url, "tools/call", params, caps=TASK_CAPS))["taskId"]
    child = _spawn("task", "watch", server.url, task_id)
    child.expect(r"Link: (http://\S+)")
    assert isinstance(child.match, re.Match)
    link = str(child.match.group(1))
    child.expect("Press d to decline")
    child.send("d")
    question = f"Close 1 ticket for {customer}?"
    child.expect(
        re.escape(f"longtools: task {task_id} waits for a person to answer {question!r} on its page: {link}")
    )
    assert _finish(child) == 3
    shown = _run("task", "get", server.url, task_id)
    assert f"answer it on its page: {link}" in shown.stdout, shown.stdout
    assert _events(server.url, ticket_id) == ["created"]
    with PageClient(server.base) as browser:
        browser.answer(link, {"confirm": True})
    done = wait_for_task(server.url, task_id, lambda task: task["status"] == "completed")
    assert done["result"]["structuredContent"]["outcome"] == "closed"
    assert _events(server.url, ticket_id) == ["created", "closed"]


def test_ctrl_c_while_a_task_waits_for_its_page_stops_following_and_gives_the_terminal_back(
    server: Served,
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    _tickets(server.url, customer, 1)
    child = _spawn("call", server.url, "bulk_close_tickets", f"customer={customer}")
    child.expect("Press d to decline")
    child.expect(r"task input_required · \d+s")
    child.sendintr()
    child.expect(r"Cancel task (\S+) on the server\? \[y/N\] ")
    assert isinstance(child.match, re.Match)
    task_id = child.match.group(1)
    child.send("no")
    child.expect("no")  # echoed: the terminal's own mode is back for the prompt
    child.send("\r")
    child.expect(f"task {task_id} keeps running")
    assert _finish(child) == 130
    assert get_task(server.url, task_id)["_meta"]["longtools.dev/answer-links"]
    post(server.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS)


def test_call_answers_a_close_reason_by_picking_from_the_enum_list(server: Served) -> None:
    [ticket_id] = _tickets(server.url, f"c-{secrets.token_hex(4)}", 1)
    child = _spawn("call", server.url, "close_ticket", f"ticketId={ticket_id}")
    child.expect(f"Why is ticket {ticket_id} being closed")
    child.sendline("")
    child.expect(r"1\W+Resolved")
    child.expect(r"2\W+Duplicate")
    child.expect(r"3\W+Cancelled")
    child.sendline("2")
    child.expect('"closeReason": "Duplicate"')
    assert _finish(child) == 0
    assert _events(server.url, ticket_id) == ["created", "closed"]


def test_task_watch_picks_up_a_task_started_elsewhere_and_answers_it(server: Served) -> None:
    filename = f"f-{secrets.token_hex(4)}.txt"
    params = {"name": "confirm_delete", "arguments": {"filename": filename}}
    task_id = result(post(server.url, "tools/call", params, caps=TASK_CAPS))["taskId"]
    child = _spawn("task", "watch", server.url, task_id)
    child.expect(f"Delete {filename}")
    child.sendline("")
    child.expect(r"\[[yY]/[nN]\]")
    child.sendline("yes")
    child.expect(f"Deleted {filename}")
    assert _finish(child) == 0


def test_task_answer_and_get_work_without_prompts(server: Served) -> None:
    """A form's question is answered with fields or --json; a person's is answered only on its
    page, which task get shows and task answer names."""
    filename = f"f-{secrets.token_hex(4)}.txt"
    params = {"name": "confirm_delete", "arguments": {"filename": filename}}
    task_id = result(post(server.url, "tools/call", params, caps=TASK_CAPS))["taskId"]
    wait_for_task(server.url, task_id, lambda task: task["status"] == "input_required")
    shown = _run("task", "get", server.url, task_id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"task {task_id}: input_required\n  asks [")
    assert f"Delete {filename}?" in shown.stdout
    refused = _run(
        "task",
        "answer",
        server.url,
        task_id,
        "--json",
        '{"input": {"action": "accept", "content": {"confirm": "maybe"}}}',
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "longtools: the server refused the answer: inputResponses['input'] does not fit"
    )
    answered = _run("task", "answer", server.url, task_id, "confirm=yes")
    assert answered.returncode == 0, answered.stderr
    assert f"answered input; task {task_id} is" in answered.stdout
    done = wait_for_task(server.url, task_id, lambda task: task["status"] == "completed")
    assert done["result"]["content"][0]["text"] == f"Deleted {filename}"
    raw = _run("task", "get", server.url, task_id, "--raw")
    assert json.loads(raw.stdout)["status"] == "completed"

    customer = f"c-{secrets.token_hex(4)}"
    [ticket_id] = _tickets(server.url, customer, 1)
    params = {"name": "bulk_close_tickets", "arguments": {"customer": customer}}
    person = result(post(server.url, "tools/call", params, caps=TASK_CAPS))["taskId"]
    asking = wait_for_task(
        server.url, person, lambda task: "longtools.dev/answer-links" in task.get("_meta", {})
    )
    [link] = asking["_meta"]["longtools.dev/answer-links"].values()
    shown = _run("task", "get", server.url, person)
    assert shown.stdout == (  # the link once, where it is answered (not in the status as well)
        f"task {person}: input_required\n"
        f"  asks [input]: Close 1 ticket for {customer}?\n"
        f"    answer it on its page: {link}\n"
    )
    on_page = _run("task", "answer", server.url, person, "confirm=yes", "reason=Duplicate")
    assert on_page.returncode == 1
    assert on_page.stderr == f"longtools: task {person} waits for a person to answer on its page: {link}\n"
    form = '{"input": {"action": "accept", "content": {"confirm": true, "reason": "Duplicate"}}}'
    as_form = _run("task", "answer", server.url, person, "--json", form)
    assert as_form.returncode == 0, as_form.stderr  # sent as is, and said for what it is:
    assert as_form.stdout.startswith(
        f"said accept to input (a person answers it on its page: {link}); task {person} is "
    ), as_form.stdout  # no client answers a person's question, whatever it sends
    assert _events(server.url, ticket_id) == ["created"]
    post(server.url, "tasks/cancel", {"taskId": person}, caps=TASK_CAPS)


def test_task_cancel_cancels_a_running_task(server: Served) -> None:
    params = {"name": "slow_compute", "arguments": {"seconds": 60}}
    task_id = result(post(server.url, "tools/call", params, caps=TASK_CAPS))["taskId"]
    cancelled = _run("task", "cancel", server.url, task_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"task {task_id}:" in cancelled.stdout
    wait_for_task(server.url, task_id, lambda task: task["status"] == "cancelled")


@pytest.mark.parametrize("cancel", [True, False])
def test_ctrl_c_during_a_task_offers_to_cancel_it_or_leave_it_running(server: Served, cancel: bool) -> None:
    child = _spawn("call", server.url, "slow_compute", "seconds=60")
    child.expect(r"task working · \d+s")
    child.sendintr()
    child.expect(r"Cancel task (\S+) on the server\? \[y/N\]")
    assert isinstance(child.match, re.Match)
    task_id = child.match.group(1)
    child.sendline("y" if cancel else "")
    if cancel:
        child.expect(f"task {task_id}: cancelled")
        assert _finish(child) == 130
        wait_for_task(server.url, task_id, lambda task: task["status"] == "cancelled")
    else:
        child.expect(
            f"keeps running; follow it with: longtools task watch {re.escape(server.url)} -- {task_id}"
        )
        assert _finish(child) == 130
        assert get_task(server.url, task_id)["status"] == "working"
        post(server.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS)


def test_the_ctrl_c_prompt_starts_a_line_of_its_own(server: Served) -> None:
    """Review N16: in a terminal that cannot redraw a line (TERM=dumb: a line per change, no
    spinner to paint over it), the "^C" the terminal echoes stays; the prompt starts below it."""
    child = _spawn("call", server.url, "slow_compute", "seconds=60", env={"TERM": "dumb"})
    child.expect("task working")
    child.sendintr()
    child.expect(r"Cancel task (\S+) on the server\? \[y/N\] ")
    assert isinstance(child.match, re.Match)
    assert str(child.before).endswith("^C\r\n"), repr(str(child.before)[-100:])
    child.sendline("y")
    child.expect(f"task {child.match.group(1)}: cancelled")
    assert _finish(child) == 130


def test_answers_given_on_the_command_line_need_no_terminal(server: Served) -> None:
    [ticket_id] = _tickets(server.url, f"c-{secrets.token_hex(4)}", 1)
    done = _run(
        "call", server.url, "close_ticket", f"ticketId={ticket_id}", "--answer", "reason=resolved", "--raw"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["structuredContent"]["closeReason"] == "Resolved"
    again = _run("call", server.url, "close_ticket", f"ticketId={ticket_id}")
    assert again.returncode == 1
    # A tool's error is said like every other error of the CLI's.
    assert (
        again.stderr
        == f"longtools: tool error: Ticket {ticket_id} is already closed (Resolved); nothing was changed.\n"
    )
    [other] = _tickets(server.url, f"c-{secrets.token_hex(4)}", 1)
    unfit = _run("call", server.url, "close_ticket", f"ticketId={other}", "--answer", "reason=Because")
    assert unfit.returncode == 1
    assert unfit.stderr.startswith("longtools: --answer does not fit")
    assert "'Because' is not one of Resolved, Duplicate, Cancelled" in unfit.stderr
    unanswered = _run("call", server.url, "close_ticket", f"ticketId={other}")
    question = f"Why is ticket {other} being closed?"
    assert unanswered.stderr == f"longtools: the tool asks {question!r}; answer it with --answer reason=...\n"
    assert _events(server.url, other) == ["created"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("call", "http://127.0.0.1:1/mcp", "echo", "text=hi"),
            "cannot connect to http://127.0.0.1:1/mcp: is the server running?",
        ),
        (("call", "{base}/nope", "echo", "text=hi"), "no MCP endpoint at {base}/nope (HTTP 404)"),
        (("call", "{url}", "no_such_tool"), "the server has no tool 'no_such_tool'"),
        (("call", "{url}", "echo", "text"), "argument 'text' is not key=value"),
        (("call", "{url}", "slow_compute", "seconds=soon"), "argument seconds='soon' is not a valid number"),
        (
            ("task", "get", "{url}", "no-such-task"),
            "task no-such-task not found: unknown, expired, or started by someone else",
        ),
    ],
)
def test_a_failure_is_one_line_that_says_what_to_do(server: Served, args: tuple[str, ...], says: str) -> None:
    filled = [arg.format(url=server.url, base=server.base) for arg in args]
    done = _run(*filled)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().startswith("longtools: ")
    assert says.format(url=server.url, base=server.base) in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_missing_or_refused_token_is_named(owners: Served) -> None:
    # The session's server with static tokens: a server of its own would cost a cold start.
    missing = _run("call", owners.url, "echo", "text=hi")
    assert "the server needs a token (HTTP 401); pass --token or set LONGTOOLS_TOKEN" in missing.stderr
    wrong = _run("call", owners.url, "echo", "text=hi", "--token", "not-the-token")
    assert "the server refused the token (HTTP 401)" in wrong.stderr
    ok = _run("call", owners.url, "echo", "text=hi", env={"LONGTOOLS_TOKEN": OWNER_TOKENS["ann"]})
    assert ok.returncode == 0, ok.stderr
    assert '"text": "hi"' in ok.stdout


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def sdk_server() -> Iterator[str]:
    script = Path(__file__).with_name("sdk_server.py")
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        url = wait_for_line(process, script, re.compile(r"sdk server at (\S+)"), 30)
        # It prints its URL before uvicorn listens: the CLI, quick to start, could come first.
        address = urlsplit(url)
        assert address.hostname is not None and address.port is not None
        eventually(lambda: _accepts(address.hostname or "", address.port or 0), within=30)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_the_cli_works_against_a_server_built_with_the_official_sdk(sdk_server: str) -> None:
    child = _spawn("call", sdk_server, "release", "version=1.2")
    child.expect("Release 1.2")
    child.sendline("")
    child.expect(r"\[[yY]/[nN]\]")
    child.sendline("y")
    child.expect("released 1.2")
    assert _finish(child) == 0
    scripted = _run("call", sdk_server, "release", "version=2.0", "--answer", "confirm=no")
    assert scripted.returncode == 0, scripted.stderr
    assert "release of 2.0 called off" in scripted.stdout


def test_tools_says_no_call_runs_as_a_task_on_a_server_without_the_tasks_extension(sdk_server: str) -> None:
    done = _run("tools", sdk_server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["release  no    Release a version after a confirmation."]
