"""What longtools stores in Temporal is encrypted, its keys survive restarts, and an operator can
still read it: real ``longtools serve``/``api``/``worker``/``codec-server`` processes, the real
``temporal`` CLI, Temporal's own SQLite files read as bytes.

Ours (issue 12, "Safe by default"); the codec protocol is Temporal's (remote codec server).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import secrets
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from longtools.temporal import temporal_executable
from tests.conftest import PAYLOAD_KEY, Served, spawn, start_server, wait_for_line
from tests.pages import PageClient
from tests.wire import TASKS_EXTENSION, error, get_task, post, result, wait_for_task

TASKS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
NO_TASKS: dict[str, Any] = {"elicitation": {"form": {}}}
OPENS_LINKS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
"""A client without tasks that sends its person to a page: a person's question comes as a URL request."""
CODEC_LINE = re.compile(r"longtools codec server at (http://\S+)")
UI_ORIGIN = "http://localhost:8233"
_LONGTOOLS = str(Path(sys.executable).with_name("longtools"))
_NO_KEYS = {"LONGTOOLS_STATE_KEYS": "", "LONGTOOLS_PAYLOAD_KEYS": ""}


def _new_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def _word(prefix: str) -> str:
    """A string that occurs nowhere unless this test put it there."""
    return f"{prefix}{secrets.token_hex(10)}"


@contextmanager
def serving(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``longtools serve`` with the test tools on ``tmp``'s data dir, stopped whatever happens."""
    served = start_server(tmp, "--no-examples", "--tools", "tests.at_rest_tools", *args, env=env)
    try:
        yield served
    finally:
        served.stop()


@contextmanager
def codec_server(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``longtools codec-server --port 0`` (data dir ``tmp/data``); yields its URL; always stopped."""
    process, log_path = spawn(tmp, ["codec-server", "--port", "0", *args], env)
    url = wait_for_line(process, log_path, CODEC_LINE, 30)
    served = Served(process=process, url=url, log_path=log_path)
    try:
        yield url
    finally:
        assert served.stop() == 0, served.log_text()


def temporal_address(served: Served) -> str:
    """The embedded Temporal's frontend, as ``serve`` logged it."""
    for line in served.log_text().splitlines():
        if '"temporal_started"' in line:
            return str(json.loads(line)["address"])
    raise AssertionError(f"serve never said where Temporal is:\n{served.log_text()}")


def stored_bytes(tmp: Path) -> bytes:
    """Everything Temporal keeps on disk: the SQLite file and its write-ahead log."""
    data = tmp / "data"
    return b"".join(
        (data / name).read_bytes()
        for name in ("temporal.db", "temporal.db-wal", "temporal.db-shm")
        if (data / name).exists()
    )


def start_secret(url: str, text: str, *, refuse: bool = False) -> str:
    """Start ``keep_secret`` as a task; returns its id once it asks its question."""
    arguments = {"text": text, "refuse": refuse}
    started = result(post(url, "tools/call", {"name": "keep_secret", "arguments": arguments}, caps=TASKS))
    assert started.get("resultType") == "task", started
    task_id = str(started["taskId"])
    wait_for_task(url, task_id, lambda task: task["status"] == "input_required")
    return task_id


def answer_secret(url: str, task_id: str, answer: str) -> dict[str, Any]:
    """Answer ``keep_secret``'s question; returns the task once it has ended."""
    (key,) = get_task(url, task_id)["inputRequests"]
    response = {key: {"action": "accept", "content": {"answer": answer}}}
    result(post(url, "tasks/update", {"taskId": task_id, "inputResponses": response}, caps=TASKS))
    return wait_for_task(url, task_id, lambda task: task["status"] in ("completed", "failed", "cancelled"))


def show(address: str, workflow_id: str, *codec: str) -> str:
    """``temporal workflow show --detailed`` as an operator runs it (``codec``: extra flags)."""
    done = subprocess.run(
        [
            str(temporal_executable()),
            "workflow",
            "show",
            "--address",
            address,
            "-w",
            workflow_id,
            "--detailed",
            *codec,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_nothing_a_caller_said_is_stored_in_plain_text_and_everything_reads_back(tmp_path: Path) -> None:
    """Arguments, answers (signals), activity inputs and results, workflow results, failure messages,
    the task memo and a quick tool's run-once record: none is in Temporal's files, all read back."""
    argument, answer, refused = _word("arg"), _word("ans"), _word("nope")
    quick_argument, quick_answer = _word("qarg"), _word("qans")
    with serving(tmp_path) as served:
        url = served.url
        task_id = start_secret(url, argument)
        asked = get_task(url, task_id)
        # Read back through the codec: the question (task memo) holds the argument.
        assert argument in json.dumps(asked["inputRequests"])
        done = answer_secret(url, task_id, answer)
        assert done["status"] == "completed", done
        assert done["result"]["structuredContent"] == {"echo": f"{argument} {answer}".upper()}
        failed_id = start_secret(url, _word("arg"), refuse=True)
        failed = answer_secret(url, failed_id, refused)
        assert failed["result"]["isError"] is True, failed
        assert failed["result"]["content"][0]["text"] == f"Refused: {refused.upper()}"

        call = {"name": "note_secret", "arguments": {"text": quick_argument}}
        first = result(post(url, "tools/call", call, caps=NO_TASKS))
        assert first["resultType"] == "input_required", first
        noted = {"note": {"action": "accept", "content": {"answer": quick_answer}}}
        second = result(
            post(
                url,
                "tools/call",
                {**call, "requestState": first["requestState"], "inputResponses": noted},
                caps=NO_TASKS,
            )
        )
        assert second["resultType"] == "input_required", second
        sure = {"sure": {"action": "accept", "content": {"sure": True}}}
        final = {**call, "requestState": second["requestState"], "inputResponses": sure}
        done_quick = result(post(url, "tools/call", final, caps=NO_TASKS))
        assert done_quick["content"] == [{"type": "text", "text": f"noted {quick_answer}"}]
        # A replay is answered from the run-once record, which therefore decrypts.
        assert result(post(url, "tools/call", final, caps=NO_TASKS))["content"] == done_quick["content"]
        assert "duplicate_answered_from_record" in served.log_text()

        stored = stored_bytes(tmp_path)
        # The search can find what Temporal does store in plain text: the ids and type names.
        assert task_id.encode() in stored and b"tests.keep_secret" in stored
        words = [argument, answer, refused, quick_argument, quick_answer, quick_answer[::-1]]
        words += [word.upper() for word in words]
        assert [word for word in words if word.encode() in stored] == []


def test_payload_keys_rotate_without_losing_a_task_in_flight(tmp_path: Path) -> None:
    """Phase 1 `new,old`: a task started under `old` is read, answered and finished; phase 2 `new`
    alone: new tasks work, and a payload only `old` opens is a -32603 with the key id in the log."""
    old, new = _new_key(), _new_key()
    with serving(tmp_path, env={"LONGTOOLS_PAYLOAD_KEYS": old}) as first:
        in_flight = start_secret(first.url, _word("arg"))
        asked = get_task(first.url, in_flight)["inputRequests"]
    with serving(tmp_path, env={"LONGTOOLS_PAYLOAD_KEYS": f"{new},{old}"}) as served:
        assert get_task(served.url, in_flight)["inputRequests"] == asked
        answer = _word("ans")
        finished = answer_secret(served.url, in_flight, answer)
        assert finished["status"] == "completed", finished
        assert answer.upper() in finished["result"]["structuredContent"]["echo"]
    with serving(tmp_path, env={"LONGTOOLS_PAYLOAD_KEYS": new}) as served:
        fresh = start_secret(served.url, _word("arg"))
        assert answer_secret(served.url, fresh, "fine")["status"] == "completed"
        refused = error(post(served.url, "tasks/get", {"taskId": in_flight}, caps=TASKS), 200)
        assert refused["code"] == -32603
        assert "key" not in json.dumps(refused).lower()  # what is wrong stays in the log
    # The log names the missing key by the id the first server announced for it, never by the key.
    (old_id,) = _events(first, "payload_keys")[0]["decrypting"]
    (unknown,) = _events(served, "payload_key_unknown")
    assert unknown["key_id"] == old_id and "LONGTOOLS_PAYLOAD_KEYS" in unknown["detail"]
    assert old not in served.log_text() and new not in served.log_text()


def _events(served: Served, name: str) -> list[dict[str, Any]]:
    """The JSON log events called ``name``."""
    lines = [json.loads(line) for line in served.log_text().splitlines() if line.startswith("{")]
    return [event for event in lines if event.get("event") == name]


def test_serve_without_keys_keeps_them_so_an_exchange_survives_a_restart(tmp_path: Path) -> None:
    """Spec-backed (MRTR: requestState is all a client holds): without configured rings, `serve`
    makes them once (0600) and reads them again, so the same exchange finishes the same task."""
    env = {**_NO_KEYS, "LONGTOOLS_HELPDESK_WORK_S": "0"}
    key_file = tmp_path / "data" / "keys.json"
    customer = _word("cust")
    with _helpdesk(tmp_path, env) as served:
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        kept = key_file.read_bytes()
        made = result(
            post(
                served.url,
                "tools/call",
                {"name": "create_ticket", "arguments": {"title": "t", "customer": customer}},
            )
        )
        ticket = made["structuredContent"]["ticketId"]
        call = {"name": "bulk_close_tickets", "arguments": {"customer": customer}}
        asked = result(post(served.url, "tools/call", call, caps=OPENS_LINKS))
        assert asked["resultType"] == "input_required", asked
    with _helpdesk(tmp_path, env) as served:
        assert key_file.read_bytes() == kept
        assert '"key_file_read"' in served.log_text()
        # The approval is a person's: the client is sent to its page (a link sealed before the
        # restart, opened after it), and its accept says only that the person went there.
        ((key, request),) = asked["inputRequests"].items()
        assert request["params"]["mode"] == "url", request
        with PageClient(served.base) as person:
            person.answer(request["params"]["url"], {"confirm": True, "reason": "Resolved"})
        went = {key: {"action": "accept"}}
        retry = {**call, "requestState": asked["requestState"], "inputResponses": went}
        finished = result(post(served.url, "tools/call", retry, caps=OPENS_LINKS))
        while finished["resultType"] == "input_required":  # still working: retry with the new state
            again = {**call, "requestState": finished["requestState"]}
            finished = result(post(served.url, "tools/call", again, caps=OPENS_LINKS))
        assert finished["structuredContent"]["closed"] == [ticket]
        assert asyncio.run(_bulk_close_runs(temporal_address(served))) == 1


@contextmanager
def _helpdesk(tmp: Path, env: dict[str, str]) -> Iterator[Served]:
    served = start_server(tmp, env=env)
    try:
        yield served
    finally:
        served.stop()


async def _bulk_close_runs(address: str) -> int:
    """How many bulk_close_tickets workflows Temporal has, once the finished one is visible."""
    client = await Client.connect(address)
    query = 'WorkflowType="bulk_close_tickets"'
    for _ in range(200):  # visibility follows the history by a few ms; bounded, never a fixed sleep
        closed = await client.count_workflows(f'{query} AND ExecutionStatus="Completed"')
        if closed.count >= 1:
            break
        await asyncio.sleep(0.05)
    return (await client.count_workflows(query)).count


def _run(tmp: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "LONGTOOLS_STATE_KEYS": _new_key(), "LONGTOOLS_PAYLOAD_KEYS": PAYLOAD_KEY, **env}
    return subprocess.run(
        [_LONGTOOLS, *args, "--data-dir", str(tmp / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        env=full,
        check=False,
    )


def _one_line_refusal(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for text in expected:
        assert text in done.stderr


@pytest.mark.parametrize(
    ("command", "unset", "expected"),
    [
        (["api", "--no-auth", "--port", "0"], "LONGTOOLS_STATE_KEYS", "replica"),
        (["api", "--no-auth", "--port", "0"], "LONGTOOLS_PAYLOAD_KEYS", "worker"),
        (["worker"], "LONGTOOLS_PAYLOAD_KEYS", "worker"),
    ],
)
def test_api_and_worker_refuse_to_start_without_a_key_ring(
    tmp_path: Path, command: list[str], unset: str, expected: str
) -> None:
    """Ours: a per-process key breaks every other replica and every restart, so there is none."""
    done = _run(tmp_path, *command, "--temporal-address", "127.0.0.1:1", env={unset: ""})
    _one_line_refusal(done, unset, "longtools keygen", expected)


def _write_key_file(tmp: Path, mode: int, body: str | None = None) -> Path:
    path = tmp / "data" / "keys.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": "longtools-keys/1", "state_keys": [_new_key()], "payload_keys": [_new_key()]}
    path.write_text(json.dumps(document) if body is None else body)
    path.chmod(mode)
    return path


def test_serve_refuses_a_key_file_others_can_read(tmp_path: Path) -> None:
    path = _write_key_file(tmp_path, 0o640)
    done = _run(tmp_path, "serve", "--port", "0", env=_NO_KEYS)
    _one_line_refusal(done, str(path), "chmod 600")
    assert json.loads(path.read_text())["payload_keys"][0] not in done.stderr


def test_serve_refuses_a_malformed_key_file_and_says_not_to_lose_it(tmp_path: Path) -> None:
    path = _write_key_file(tmp_path, 0o600, body='{"format": "longtools-keys/1", "state_keys": "x"}')
    done = _run(tmp_path, "serve", "--port", "0", env=_NO_KEYS)
    _one_line_refusal(done, str(path), "backup")
    assert path.read_text().startswith('{"format"')  # left as it was


def test_a_configured_key_ring_wins_over_the_key_file(tmp_path: Path) -> None:
    """Ours: the file fills in only what is not configured; both configured, it is never read."""
    path = _write_key_file(tmp_path, 0o644)  # would be refused if it were read
    with serving(tmp_path) as served:
        assert result(post(served.url, "server/discover"))["supportedVersions"]
    assert "key_file" not in served.log_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_the_codec_server_shows_a_stored_task_to_the_temporal_cli(tmp_path: Path) -> None:
    """Temporal's remote codec protocol, through the real `temporal workflow show --codec-endpoint`."""
    argument, answer = _word("arg"), _word("ans")
    with serving(tmp_path) as served:
        task_id = start_secret(served.url, argument)
        assert answer_secret(served.url, task_id, answer)["status"] == "completed"
        address = temporal_address(served)
        encrypted = show(address, task_id)
        assert argument not in encrypted and "encryption-key-id" in encrypted
        # The memo the client starts the task with (its owner) is encrypted too.
        assert "memo.fields.longtools.owner.data" in encrypted and "anonymous" not in encrypted
        with codec_server(tmp_path, "--allowed-origin", UI_ORIGIN) as url:
            decoded = show(address, task_id, "--codec-endpoint", url)
            assert argument in decoded and answer in decoded and f"{argument} {answer}".upper() in decoded
            assert "memo.fields.longtools.owner: anonymous" in decoded
            _browser_rules(url)


def _browser_rules(url: str) -> None:
    """The Web UI's preflight is answered for the listed origin only; any other origin is refused."""
    preflight = {"origin": UI_ORIGIN, "access-control-request-method": "POST"}
    allowed = httpx.options(f"{url}/decode", headers=preflight)
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == UI_ORIGIN
    assert "x-namespace" in allowed.headers["access-control-allow-headers"]
    other = {**preflight, "origin": "https://evil.example"}
    assert httpx.options(f"{url}/decode", headers=other).status_code == 403
    body: dict[str, list[Any]] = {"payloads": []}
    assert (
        httpx.post(f"{url}/decode", json=body, headers={"origin": "https://evil.example"}).status_code == 403
    )
    # A page cannot post a form to it either (no preflight for text/plain, so it is refused here).
    assert (
        httpx.post(f"{url}/decode", content=b"{}", headers={"content-type": "text/plain"}).status_code == 415
    )
    # DNS rebinding: a foreign name that resolves to loopback.
    assert httpx.post(f"{url}/decode", json=body, headers={"host": "evil.example"}).status_code == 403
    assert httpx.post(f"{url}/decode", json=body, headers={"origin": UI_ORIGIN}).json() == body


def test_the_codec_server_reads_the_serve_key_file_and_can_require_a_token(tmp_path: Path) -> None:
    """With no ring configured it uses `serve`'s keys.json; off loopback it needs a token."""
    argument = _word("arg")
    with serving(tmp_path, env=_NO_KEYS) as served:
        task_id = start_secret(served.url, argument)
        address = temporal_address(served)
        token = secrets.token_urlsafe(24)
        with codec_server(tmp_path, env={**_NO_KEYS, "LONGTOOLS_CODEC_TOKEN": token}) as url:
            assert httpx.post(f"{url}/decode", json={"payloads": []}).status_code == 401
            authorized = show(address, task_id, "--codec-endpoint", url, "--codec-auth", f"Bearer {token}")
            assert argument in authorized
    open_bind = _run(tmp_path, "codec-server", "--host", "0.0.0.0", "--port", "0", env=_NO_KEYS)
    _one_line_refusal(open_bind, "LONGTOOLS_CODEC_TOKEN", "127.0.0.1")


def test_made_up_key_ids_are_bounded_in_what_the_codec_server_keeps_and_logs(tmp_path: Path) -> None:
    """REVIEW 15: every unknown key id a caller sent was kept (3,000 ids, 12 MB, after 3 requests)
    and logged whole (a 4,006-character key_id)."""

    def made_up(batch: int, number: int) -> dict[str, Any]:
        key = f"k{batch}-{number}-".ljust(4000, "x").encode()
        metadata = {"encoding": b"binary/encrypted", "encryption-key-id": key}
        encoded = {name: base64.b64encode(value).decode() for name, value in metadata.items()}
        return {"metadata": encoded, "data": base64.b64encode(bytes(64)).decode()}

    with codec_server(tmp_path) as url:
        for batch in range(3):
            body = {"payloads": [made_up(batch, number) for number in range(1000)]}
            assert httpx.post(f"{url}/decode", json=body, timeout=60).status_code == 200
    [log] = tmp_path.glob("codec-server-*.log")
    unknown = [json.loads(line) for line in log.read_text().splitlines() if '"payload_key_unknown"' in line]
    assert 0 < len(unknown) <= 256
    assert max(len(line["key_id"]) for line in unknown) <= 64
    assert max(len(line["detail"]) for line in unknown) < 500
