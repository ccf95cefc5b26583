"""The terminal client's commands as a script or a person meets them (issue 25): what they load,
task ids that look like options, a question met without a terminal, what ``task cancel`` and
``task answer`` report, ``longtools tools``, and the progress bar.

Each drives the real ``longtools`` CLI against the session's real ``longtools serve``.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from longtools.client import Terminal
from tests.conftest import Served, start_server
from tests.pages import PageClient
from tests.test_terminal_client import ENV, LONGTOOLS, TASK_CAPS, _events, _finish, _run, _spawn, _tickets
from tests.wire import get_task, post, result, wait_for_task

HEAVY = ("mcp", "mcp_types", "pydantic", "httpx", "httpx2", "anyio", "rich", "jsonschema", "temporalio")
"""What a plain ``task get`` or ``call`` of a quick tool must not load: each costs 0.05-0.9 s."""


def _start(url: str, tool: str, arguments: dict[str, Any]) -> str:
    task = result(post(url, "tools/call", {"name": tool, "arguments": arguments}, caps=TASK_CAPS))
    return str(task["taskId"])


def _asking(url: str) -> str:
    """A task waiting for its one question (confirm_delete: "Delete NAME?", a boolean confirm)."""
    task_id = _start(url, "confirm_delete", {"filename": f"f-{secrets.token_hex(3)}.txt"})
    wait_for_task(url, task_id, lambda task: task["status"] == "input_required")
    return task_id


def _loaded(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", LONGTOOLS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", done.stderr, re.MULTILINE)
    return {name.partition(".")[0] for name in found}


def test_task_get_and_a_quick_call_load_neither_the_sdk_nor_pydantic_nor_rich(server: Served) -> None:
    # The timing is in bench/README.md ("The terminal client's start-up"); what makes it is
    # which modules a command loads.
    task_id = _start(server.url, "slow_compute", {"seconds": 0})
    wait_for_task(server.url, task_id, lambda task: task["status"] == "completed")
    for args in (("task", "get", server.url, task_id), ("call", server.url, "echo", "text=hi")):
        heavy = _loaded(*args) & set(HEAVY)
        assert not heavy, (args, heavy)


def test_every_task_command_takes_an_id_after_dashes_and_one_that_starts_with_a_dash(server: Served) -> None:
    task_id = _asking(server.url)
    got = _run("task", "get", server.url, "--", task_id)
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith(f"task {task_id}: input_required")
    answered = _run("task", "answer", server.url, "--", task_id, "confirm=no")
    assert answered.returncode == 0, answered.stderr
    assert "answered" in answered.stdout
    wait_for_task(server.url, task_id, lambda task: task["status"] == "completed")

    watched_id = _asking(server.url)
    watched = _run("task", "watch", server.url, "--answer", "confirm=yes", "--", watched_id)
    assert watched.returncode == 0, watched.stderr
    assert "Deleted f-" in watched.stdout

    running = _start(server.url, "slow_compute", {"seconds": 60})
    cancelled = _run("task", "cancel", server.url, "--", running)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"task {running}: cancelled\n"

    for command in (["get"], ["watch"], ["answer"], ["cancel"]):
        for args in (["-abc"], ["--", "-abc"]):
            extra = ["confirm=yes"] if command == ["answer"] else []
            done = _run("task", *command, server.url, *args, *extra)
            assert done.returncode == 1, (command, args, done.stdout, done.stderr)
            assert done.stderr == (
                "longtools: task -abc not found: unknown, expired, or started by someone else\n"
            ), (command, args)


def test_a_call_without_a_terminal_leaves_a_waiting_task_with_the_commands_to_answer_or_cancel_it(
    server: Served,
) -> None:
    done = _run("call", server.url, "confirm_delete", "filename=left.txt")
    assert done.returncode == 3, done.stderr
    task_id = done.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{16,}", task_id), done.stdout
    url = shlex.quote(server.url)
    assert done.stderr.splitlines()[-1] == (
        f"longtools: task {task_id} waits for an answer to 'Delete left.txt?'; answer it with: "
        f"longtools task answer {url} -- {task_id} confirm=...   or cancel it with: "
        f"longtools task cancel {url} -- {task_id}"
    )
    assert get_task(server.url, task_id)["status"] == "input_required"
    answered = _run("task", "answer", server.url, "--", task_id, "confirm=yes")
    assert answered.returncode == 0, answered.stderr
    finished = wait_for_task(server.url, task_id, lambda task: task["status"] == "completed")
    assert finished["result"]["content"][0]["text"] == "Deleted left.txt"

    watch = _run("task", "watch", server.url, _asking(server.url))
    assert watch.returncode == 3, watch.stderr
    assert "waits for an answer to 'Delete f-" in watch.stderr

    cancel = _run("call", server.url, "confirm_delete", "filename=gone.txt", "--cancel-on-question")
    assert cancel.returncode == 1
    line = re.fullmatch(
        r"longtools: task (\S+) asks 'Delete gone.txt\?' \(--cancel-on-question\): task \1: cancelled",
        cancel.stderr.splitlines()[-1],
    )
    assert line, cancel.stderr
    assert get_task(server.url, line.group(1))["status"] == "cancelled"


def test_task_answer_takes_json_after_the_dashes_and_names_each_misuse(server: Served) -> None:
    """Review N16: after ``--`` every word reaches task answer, so ``--json`` there is read as
    the option it is, and a word that is neither an answer nor that option is named."""
    task_id = _asking(server.url)
    misuses = [
        (["--json"], "--json needs a value: the inputResponses object, as JSON"),
        (["--json", "{}", "--json={}"], "--json is given twice; give the inputResponses object once"),
        (["confirm=yes", "--json", "{}"], "give the answer as FIELD=VALUE pairs or as --json, not both"),
        (
            ["--token", "t"],
            "'--token' is not an answer (FIELD=VALUE) and not an option task answer takes after the "
            "task id; put options before the task id",
        ),
    ]
    for words, says in misuses:
        done = _run("task", "answer", server.url, "--", task_id, *words)
        assert (done.returncode, done.stderr) == (1, f"longtools: {says}\n"), words
    assert get_task(server.url, task_id)["status"] == "input_required"
    answer = json.dumps({"input": {"action": "accept", "content": {"confirm": True}}})
    for words in (["--json", answer], [f"--json={answer}"]):
        done = _run("task", "answer", server.url, "--", task_id, *words)
        assert done.returncode == 0, (words, done.stderr)
        assert done.stdout.startswith(f"answered input; task {task_id} is "), done.stdout
        finished = wait_for_task(server.url, task_id, lambda task: task["status"] == "completed")
        assert finished["result"]["content"][0]["text"].startswith("Deleted f-")
        task_id = _asking(server.url)
    post(server.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS)


@pytest.mark.parametrize("command", ["call", "call --no-task", "watch"])
def test_a_script_shows_a_persons_question_at_once_and_follows_the_task_until_the_page_has_the_answer(
    server: Served, command: str
) -> None:
    """Review N2, without a terminal: the link is said on stderr at once, and call (a task or MRTR
    rounds) and task watch alike go on when the page has the answer (no key, no exit 3)."""
    customer = f"c-{secrets.token_hex(4)}"
    [ticket_id] = _tickets(server.url, customer, 1)
    if command.startswith("call"):
        args = ["call", server.url, "bulk_close_tickets", f"customer={customer}", *command.split()[1:]]
    else:
        params = {"name": "bulk_close_tickets", "arguments": {"customer": customer}}
        args = [
            "task",
            "watch",
            server.url,
            result(post(server.url, "tools/call", params, caps=TASK_CAPS))["taskId"],
        ]
    script = subprocess.Popen(  # pipes: no terminal
        [LONGTOOLS, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert script.stderr is not None
        shown = f"Close 1 ticket for {customer}?: a person answers it on its page: "
        said = [script.stderr.readline()]
        while said[-1] and not said[-1].startswith(shown):  # said at once: the lines before are few
            assert len(said) < 5, said
            said.append(script.stderr.readline())
        link = said[-1].removeprefix(shown).strip()
        with PageClient(server.base) as browser:
            browser.answer(link, {"confirm": True})
        out, err = script.communicate(timeout=60)
    finally:
        script.kill()
        script.communicate()
    assert script.returncode == 0, err
    assert json.loads(out)["outcome"] == "closed"
    if command != "call --no-task":  # a held round's answer is the call's result itself
        assert f"The page has the answer to 'Close 1 ticket for {customer}?'; following the task." in err
    assert _events(server.url, ticket_id) == ["created", "closed"]


def test_a_script_call_that_cancels_on_a_question_cancels_one_that_waits_for_a_person(server: Served) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    [ticket_id] = _tickets(server.url, customer, 1)
    done = _run("call", server.url, "bulk_close_tickets", f"customer={customer}", "--cancel-on-question")
    assert done.returncode == 1, done.stderr
    line = re.fullmatch(
        rf"longtools: task (\S+) asks 'Close 1 ticket for {customer}\?' "
        r"\(--cancel-on-question\): task \1: cancelled",
        done.stderr.splitlines()[-1],
    )
    assert line, done.stderr
    assert get_task(server.url, line.group(1))["status"] == "cancelled"
    assert _events(server.url, ticket_id) == ["created"]


def test_task_cancel_says_what_became_of_the_task(server: Served) -> None:
    finished = _start(server.url, "slow_compute", {"seconds": 0})
    wait_for_task(server.url, finished, lambda task: task["status"] == "completed")
    late = _run("task", "cancel", server.url, finished)
    assert late.returncode == 0, late.stderr
    assert late.stdout == f"task {finished}: already completed; nothing cancelled\n"
    assert get_task(server.url, finished)["status"] == "completed"

    running = _start(server.url, "slow_compute", {"seconds": 60})
    cancelled = _run("task", "cancel", server.url, running)
    assert cancelled.stdout == f"task {running}: cancelled\n"
    assert get_task(server.url, running)["status"] == "cancelled"


def test_task_answer_refuses_a_key_or_a_field_the_task_does_not_ask(server: Served) -> None:
    task_id = _asking(server.url)
    [key] = get_task(server.url, task_id)["inputRequests"]
    wrong_key = _run(
        "task", "answer", server.url, task_id, "--json", '{"bogus": {"action": "accept", "content": {}}}'
    )
    assert wrong_key.returncode == 1
    assert wrong_key.stderr == f"longtools: task {task_id} does not ask bogus; it asks: {key}\n"
    wrong_field = _run("task", "answer", server.url, task_id, "confirm=yes", "colour=red")
    assert wrong_field.returncode == 1
    assert wrong_field.stderr == f"longtools: task {task_id} asks no field colour; it asks: confirm\n"
    assert get_task(server.url, task_id)["status"] == "input_required"
    post(server.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS)


def test_tools_lists_each_tool_with_its_description_and_that_a_call_may_run_as_a_task(
    server: Served,
) -> None:
    """Review N9: at 2026-07-28 a tool declares no task support; a server that advertises the Tasks
    extension in server/discover may answer any call with a task (SEP-2663: it decides per call)."""
    done = _run("tools", server.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"TOOL +TASK +DESCRIPTION", lines[0])
    assert any(re.fullmatch(r"echo +may +Return the text unchanged\.", line) for line in lines), lines
    assert any(line.startswith("slow_compute ") and "Sleeps (durably)" in line for line in lines)
    raw = _run("tools", server.url, "--raw")
    assert {"echo", "slow_compute"} <= {tool["name"] for tool in json.loads(raw.stdout)}


def test_progress_is_a_bar_on_a_terminal_and_a_line_per_change_otherwise(server: Served) -> None:
    child = _spawn("call", server.url, "test_tool_with_progress", "--no-task")
    child.expect("━")  # rich's bar
    child.expect(r"100%")
    child.expect("100/100")
    assert _finish(child) == 0
    logged = _run("call", server.url, "test_tool_with_progress", "--no-task")
    assert logged.returncode == 0, logged.stderr
    assert logged.stderr.splitlines() == [
        "working 0/100: Completed step 0 of 100",
        "working 50/100: Completed step 50 of 100",
        "working 100/100: Completed step 100 of 100",
    ]


def test_progress_never_runs_backwards_and_a_task_reports_it_in_its_meta(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The server's task _meta progress is being built in parallel: this is its contract.
    call = Terminal(live=False)
    for done in (10, 50, 30, 100):
        call.progress(done, 100, f"step {done}")
    task = Terminal(live=False)
    task.on_task({"status": "working", "statusMessage": "copying"})
    for done in (3, 2):
        meta = {"longtools.dev/progress": {"progress": done, "total": 4}}
        task.on_task({"status": "working", "statusMessage": f"file {done}", "_meta": meta})
    unknown_total = {"longtools.dev/progress": {"progress": 7, "total": None}}
    task.on_task({"status": "working", "statusMessage": "copying", "_meta": unknown_total})
    assert capsys.readouterr().err.splitlines() == [
        "working 10/100: step 10",
        "working 50/100: step 50",
        "working 50/100: step 30",
        "working 100/100: step 100",
        "task working: copying",
        "task working 3/4: file 3",
        "task working 3/4: file 2",
        "task working: 7 · copying",
    ]


class _ForwardProxy:
    """The smallest forward proxy: each connection is piped to one upstream port, its request
    lines kept. It reaches the server only if the client sends its requests to it."""

    def __init__(self, upstream: int) -> None:
        self.lines: list[bytes] = []
        self._upstream = upstream
        self._connections: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(("127.0.0.1", self._upstream))
            self._connections += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if requests:
                    self.lines += [line for line in chunk.split(b"\r\n") if line.startswith(b"POST ")]
                target.sendall(chunk)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        # On Linux a close alone leaves the accepting thread blocked; a shutdown wakes it.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for connection in self._connections:
            connection.close()


def test_a_call_to_a_remote_server_goes_through_the_proxy_the_environment_names(tmp_path: Path) -> None:
    """HTTP_PROXY as curl reads it; loopback and NO_PROXY hosts go direct (issue 25: the client on
    http.client had dropped what httpx did)."""
    served = start_server(tmp_path, "--no-examples", env={"LONGTOOLS_ALLOWED_HOSTS": "mcp.example:*"})
    proxy = _ForwardProxy(int(served.url.split(":")[2].split("/")[0]))
    remote = served.url.replace("127.0.0.1", "mcp.example")
    try:
        via = _run("call", remote, "echo", "text=hi", env={"HTTP_PROXY": f"http://127.0.0.1:{proxy.port}"})
        assert via.returncode == 0, via.stderr
        assert json.loads(via.stdout) == {"text": "hi"}
        assert proxy.lines and all(line.startswith(f"POST {remote} ".encode()) for line in proxy.lines)
        seen = len(proxy.lines)
        direct = _run(
            "call", served.url, "echo", "text=hi", env={"HTTP_PROXY": f"http://127.0.0.1:{proxy.port}"}
        )
        bypassed = _run(
            "call",
            remote,
            "echo",
            "text=hi",
            env={"HTTP_PROXY": f"http://127.0.0.1:{proxy.port}", "NO_PROXY": "mcp.example"},
        )
        assert direct.returncode == 0 and len(proxy.lines) == seen  # loopback: never the proxy
        assert bypassed.returncode != 0 and "cannot connect" in bypassed.stderr  # no DNS name
        assert len(proxy.lines) == seen
    finally:
        proxy.close()
        served.stop()
