"""A task's ledger as an auditor gets it (issue 32), against a real ``serve`` with the four people of
tests/test_decisions.py: exported by ``longtools task audit`` and ``GET /tasks/<id>/ledger``,
checked offline by ``longtools audit verify`` pinned to what ``longtools audit keys`` prints; every
entry a decision makes; any edit found at its line; a key rotation; a secret kept out; one SIEM log
line per entry; and who may export it. Ours. The offline check alone: tests/test_ledger_verify.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from longtools.cli import cli
from longtools.decisions import LedgerKeys, digest_of
from tests.conftest import Served, free_port, start_server
from tests.pages import PageClient
from tests.test_decisions import PEOPLE, TASK_CAPS, _asking, _ended, _start, _task, _tickets, as_
from tests.wire import eventually, post, result

LONGTOOLS = str(Path(sys.executable).with_name("longtools"))
LEADS = {
    "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items()),
    "LONGTOOLS_GROUPS": "leads=alice,bob,dave;ops=carol",
    "LONGTOOLS_HELPDESK_APPROVAL_S": "600",
}
CONTENT = ("task", "seq", "at", "kind", "data", "prev")
FIELDS = (*CONTENT, "hash", "key", "sig")
LINKS = "longtools.dev/answer-links"
NOTE = f"note-{secrets.token_hex(8)}"
"""A sensitive argument of the rejected task (``decide``'s ``secret_note``): in no ledger."""


def longtools(
    *args: str, token: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real ``longtools`` command, as a script runs it."""
    return subprocess.run(
        [LONGTOOLS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LONGTOOLS_TOKEN": token or "", **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def audit_verify(*args: str) -> tuple[int, str]:
    """``longtools audit verify`` in this process: the same command, without a process start for
    each of the hundred edits below."""
    done = CliRunner().invoke(cli, ["audit", "verify", *args])
    return done.exit_code, done.output


def entries(ledger: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ledger.splitlines()]


def public(seed: str) -> str:
    """The public key ``LONGTOOLS_LEDGER_KEYS`` entry ``seed`` signs with."""
    return LedgerKeys([base64.urlsafe_b64decode(seed + "=" * (-len(seed) % 4))]).public[0]


def fetch(served: Served, task_id: str, who: str | None = None, **headers: str) -> httpx.Response:
    sent = {**(as_(who) if who else {}), **headers}
    return httpx.get(f"{served.base}/tasks/{task_id}/ledger", headers=sent, follow_redirects=False)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # No payload or state keys given: serve keeps its own in <data>/keys.json, as on a laptop, and
    # `audit keys --data-dir` reads them there.
    env = {**LEADS, "LONGTOOLS_PAYLOAD_KEYS": "", "LONGTOOLS_STATE_KEYS": ""}
    server = start_server(tmp_path_factory.mktemp("ledger"), "--tools", "tests.decision_tools", env=env)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def finished(served: Served) -> dict[str, str]:
    """Three tasks that have ended, by exit state: a customer's two tickets deleted once bob and
    dave approved; a decision bob refused; one nobody decided in time."""
    with ExitStack() as stack:

        def person(who: str) -> PageClient:
            browser = stack.enter_context(PageClient(served.base))
            browser.sign_in(PEOPLE[who])
            return browser

        bob, dave = person("bob"), person("dave")
        customer = f"c-{secrets.token_hex(4)}"
        _tickets(served, customer, 2)
        deleted = _start(served, "alice", "delete_customer", {"customer": customer})
        link, _ = _asking(served, "alice", deleted, "0 of 2 approvals")
        bob.answer(link, {"note": "fine"})
        _asking(served, "alice", deleted, "1 of 2 approvals: bob")
        dave.answer(link, {})
        rejected = _start(served, "alice", "decide", {"secret_note": NOTE})
        link, _ = _asking(served, "alice", rejected)
        bob.answer(link, {}, action="decline")
        expired = _start(served, "alice", "decide", {"timeout_s": 1})
        for task_id in (deleted, rejected, expired):
            _ended(served, "alice", task_id)
    return {"completed": deleted, "rejected": rejected, "expired": expired, "customer": customer}


@pytest.fixture(scope="module")
def ledgers(served: Served, finished: dict[str, str]) -> dict[str, str]:
    """Each finished task's ledger, as its owner's ``longtools task audit`` printed it."""
    found = {}
    for state in ("completed", "rejected", "expired"):
        done = longtools("task", "audit", served.url, "--", finished[state], token=PEOPLE["alice"])
        assert done.returncode == 0 and done.stderr == "", done.stderr
        found[state] = done.stdout
    return found


def test_the_cli_and_the_endpoint_export_the_same_ledger_which_verifies_pinned_to_audit_keys(
    served: Served, finished: dict[str, str], ledgers: dict[str, str], tmp_path: Path
) -> None:
    keys = longtools(
        "audit",
        "keys",
        "--data-dir",
        str(served.log_path.parent / "data"),
        env={"LONGTOOLS_PAYLOAD_KEYS": ""},
    )
    assert keys.returncode == 0, keys.stderr
    [key] = keys.stdout.splitlines()
    assert "derived from" in keys.stderr and "keys.json" in keys.stderr
    with PageClient(served.base) as alice:
        alice.sign_in(PEOPLE["alice"])
        for state, ledger in ledgers.items():
            task_id = finished[state]
            by_bearer = fetch(served, task_id, "alice")
            by_page = alice.http.get(f"/tasks/{task_id}/ledger")
            for response in (by_bearer, by_page):
                assert response.status_code == 200
                assert response.headers["content-type"] == "application/x-ndjson"
                assert response.text == ledger
            saved = tmp_path / f"{state}.jsonl"
            saved.write_text(ledger)
            count = len(ledger.splitlines())
            checked = longtools("audit", "verify", str(saved))
            assert checked.returncode == 0, checked.stdout
            said = checked.stdout.splitlines()
            assert said[0] == f"OK: {count} entries, chain and signatures hold; signed by {key}"
            assert said[1] == f"task {task_id}: ended {state}; its last entry is its end"
            assert said[2].startswith("note: signatures were checked against the keys the file itself names")
            pinned = longtools("audit", "verify", str(saved), "--key", key)
            assert pinned.returncode == 0 and pinned.stdout.splitlines()[0].endswith(f"{key} (pinned)")
            assert "note:" not in pinned.stdout


def test_a_deletion_records_its_intent_question_each_vote_the_decision_each_deletion_and_its_end(
    finished: dict[str, str], ledgers: dict[str, str]
) -> None:
    kept = entries(ledgers["completed"])
    assert [entry["kind"] for entry in kept] == [
        "intent", "effect", "effect", "question", "vote", "vote", "decided", "effect", "effect", "end",
    ]  # fmt: skip
    assert [entry["seq"] for entry in kept] == list(range(len(kept)))
    assert {entry["task"] for entry in kept} == {finished["completed"]}
    intent, _, _, question, *votes, decided, first, second, end = kept
    assert intent["data"] == {
        "tool": "delete_customer",
        "arguments": digest_of({"customer": finished["customer"]}),
        "requester": "token:alice",
    }
    proposal = question["data"]["proposal"]
    assert question["data"]["rule"] == {
        "principals": [],
        "groups": ["leads"],
        "quorum": 2,
        "excludeRequester": True,
    }
    assert [vote["data"] for vote in votes] == [
        {
            "question": question["data"]["question"],
            "by": f"token:{who}",
            "via": "page",
            "decision": "approve",
            "proposal": proposal,
            "counted": True,
        }
        for who in ("bob", "dave")
    ]
    assert decided["data"] == {"question": "approval", "outcome": "approved", "proposal": proposal}
    # Each deletion says which ticket it deleted (the result's for_ledger()), and on which attempt.
    for deletion in (first, second):
        ticket = deletion["data"]["result"]["ticket"]
        assert deletion["data"] == {
            "activity": "helpdesk.delete_ticket",
            "outcome": "completed",
            "attempt": 1,
            "result": {"ticket": ticket, "result": "deleted"},
        }
    assert len({deletion["data"]["result"]["ticket"] for deletion in (first, second)}) == 2
    assert end["data"] == {"exit": "completed"}


def test_a_refusal_and_a_deadline_are_recorded_with_their_exit_states(
    finished: dict[str, str], ledgers: dict[str, str]
) -> None:
    rejected = entries(ledgers["rejected"])
    assert [entry["kind"] for entry in rejected] == ["intent", "question", "vote", "decided", "end"]
    proposal = rejected[1]["data"]["proposal"]
    vote = rejected[2]["data"]
    assert (vote["by"], vote["via"], vote["decision"], vote["proposal"]) == (
        "token:bob",
        "page",
        "reject",
        proposal,
    )
    assert rejected[3]["data"]["outcome"] == "rejected" and rejected[4]["data"] == {"exit": "rejected"}
    expired = entries(ledgers["expired"])
    assert [entry["kind"] for entry in expired] == ["intent", "question", "decided", "end"]
    assert expired[2]["data"]["outcome"] == "expired" and expired[3]["data"] == {"exit": "expired"}
    assert expired[1]["data"]["deadline"] is not None


def test_any_edit_a_removed_entry_or_two_swapped_fail_at_the_entry_they_touch(
    ledgers: dict[str, str], tmp_path: Path
) -> None:
    lines = ledgers["completed"].splitlines()
    saved = tmp_path / "edited.jsonl"

    def failed_at(edited: list[str]) -> int | None:
        saved.write_text("\n".join(edited) + "\n")
        code, said = audit_verify(str(saved))
        if code == 0:
            return None
        assert code == 1 and said.startswith("FAILED: entry at line "), said
        return int(said.removeprefix("FAILED: entry at line ").split(" ", 1)[0])

    for number, line in enumerate(lines, start=1):
        for field in FIELDS:
            entry = json.loads(line)
            entry[field] = _edited(entry[field])
            edited = [*lines[: number - 1], json.dumps(entry), *lines[number:]]
            assert failed_at(edited) == number, (number, field)
    for number in range(1, len(lines)):
        assert failed_at(lines[: number - 1] + lines[number:]) == number, f"entry {number} removed"
        swapped = [*lines[: number - 1], lines[number], lines[number - 1], *lines[number + 1 :]]
        assert failed_at(swapped) == number, f"entries {number} and {number + 1} swapped"
    # The last entry removed: what is left holds, but no longer ends.
    saved.write_text("\n".join(lines[:-1]) + "\n")
    code, said = audit_verify(str(saved))
    assert code == 0 and said.splitlines()[1].startswith("warning: task ")
    # And as a script meets it: a vote given to someone else.
    vote = json.loads(lines[4])
    vote["data"]["by"] = "token:carol"
    saved.write_text("\n".join([*lines[:4], json.dumps(vote), *lines[5:]]) + "\n")
    done = longtools("audit", "verify", str(saved))
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "FAILED: entry at line 5 (seq 4): was changed: its content does not match its hash\n",
        "",
    )


def _edited(value: Any) -> Any:
    """``value`` changed a little, as a forger would: one character, one number, one more field."""
    if isinstance(value, bool) or not isinstance(value, (str, int, dict)):
        raise AssertionError(f"no edit for {value!r}")
    if isinstance(value, int):
        return value + 1
    if isinstance(value, dict):
        return {**value, "by": "token:carol"} if "by" not in value else {**value, "by": "token:mallory"}
    if not value:
        return "0" * 64  # the first entry's prev
    middle = len(value) // 2
    return value[:middle] + ("B" if value[middle] != "B" else "C") + value[middle + 1 :]


def test_a_rotated_ring_verifies_the_old_entries_and_signs_new_ones_with_the_new_key(tmp_path: Path) -> None:
    old = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    new = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    before = start_server(
        tmp_path, "--tools", "tests.decision_tools", env={**LEADS, "LONGTOOLS_LEDGER_KEYS": old}
    )
    try:
        with PageClient(before.base) as bob:
            bob.sign_in(PEOPLE["bob"])
            done_id = _start(before, "alice", "decide", {})
            link, _ = _asking(before, "alice", done_id)
            bob.answer(link, {})
            _ended(before, "alice", done_id)
            waiting_id = _start(before, "alice", "decide", {})
            _asking(before, "alice", waiting_id)
            # Its intent and question signed (and kept in its history) before the server stops.
            eventually(lambda: fetch(before, waiting_id, "alice").text, lambda text: text.count("\n") == 2)
        signed_before = fetch(before, done_id, "alice").text
    finally:
        assert before.stop() == 0
    after = start_server(
        tmp_path, "--tools", "tests.decision_tools", env={**LEADS, "LONGTOOLS_LEDGER_KEYS": f"{new},{old}"}
    )
    try:
        with PageClient(after.base) as bob:
            bob.sign_in(PEOPLE["bob"])
            link, _ = _asking(after, "alice", waiting_id)
            bob.answer(link, {})
            _ended(after, "alice", waiting_id)
        assert fetch(after, done_id, "alice").text == signed_before
        across = fetch(after, waiting_id, "alice").text
    finally:
        after.stop()

    listed = longtools("audit", "keys", env={"LONGTOOLS_LEDGER_KEYS": f"{new},{old}"})
    assert listed.returncode == 0 and listed.stdout.splitlines() == [public(new), public(old)]
    assert "from LONGTOOLS_LEDGER_KEYS" in listed.stderr
    pins = [arg for key in listed.stdout.splitlines() for arg in ("--key", key)]
    (tmp_path / "before.jsonl").write_text(signed_before)
    (tmp_path / "across.jsonl").write_text(across)
    assert {entry["key"] for entry in entries(signed_before)} == {public(old)}
    assert audit_verify(str(tmp_path / "before.jsonl"), *pins)[0] == 0
    # Signed as the task went: its intent and question before the restart, the vote and the rest after.
    assert [(entry["kind"], entry["key"]) for entry in entries(across)] == [
        ("intent", public(old)),
        ("question", public(old)),
        ("vote", public(new)),
        ("decided", public(new)),
        ("end", public(new)),
    ]
    code, said = audit_verify(str(tmp_path / "across.jsonl"), *pins)
    assert code == 0, said
    both = f"{public(old)}, {public(new)}"
    assert said.splitlines()[0] == f"OK: 5 entries, chain and signatures hold; signed by {both} (pinned)"
    code, said = audit_verify(str(tmp_path / "across.jsonl"), "--key", public(new))
    assert (code, said) == (1, "FAILED: entry at line 1 (seq 0): is signed by a key that is not trusted\n")


def test_a_secret_answered_on_its_page_is_in_no_ledger_nor_ledger_log_line(
    served: Served, ledgers: dict[str, str]
) -> None:
    secret = f"pw-{secrets.token_hex(12)}"
    mailbox = {"name": "connect_mailbox", "arguments": {"address": "support@example.com"}}
    task_id = result(post(served.url, "tools/call", mailbox, caps=TASK_CAPS, headers=as_("alice")))["taskId"]
    asking = eventually(lambda: _task(served, "alice", task_id), lambda task: LINKS in task.get("_meta", {}))
    [link] = asking["_meta"][LINKS].values()
    with PageClient(served.base) as alice:
        alice.sign_in(PEOPLE["alice"])
        assert alice.answer(link, {"password": secret}).status == 200
    assert _ended(served, "alice", task_id)["status"] == "completed"
    exported = longtools("task", "audit", served.url, task_id, token=PEOPLE["alice"])
    assert exported.returncode == 0
    [answer] = [entry for entry in entries(exported.stdout) if entry["kind"] == "answer"]
    said = answer["data"]
    assert (said["by"], said["via"], said["action"]) == ("token:alice", "page", "accept")
    assert "answer" not in said  # no digest of a secret: a short one could be guessed back
    logged = "\n".join(line for line in served.log_text().splitlines() if '"event": "ledger"' in line)
    assert task_id in logged
    guessable = hashlib.sha256(secret.encode()).hexdigest()[:8]
    for text in (exported.stdout, logged, *ledgers.values()):
        assert secret not in text and guessable not in text
        assert NOTE not in text  # the rejected task's sensitive argument


def test_the_log_has_one_ledger_line_per_entry_with_its_task_seq_and_hash(
    served: Served, ledgers: dict[str, str]
) -> None:
    logged = [json.loads(line) for line in served.log_text().splitlines() if '"event": "ledger"' in line]
    counts = Counter((line["task_id"], line["seq"]) for line in logged)
    by_entry = {(line["task_id"], line["seq"]): line for line in logged}
    for ledger in ledgers.values():
        for entry in entries(ledger):
            place = (entry["task"], entry["seq"])
            assert counts[place] == 1, place
            line = by_entry[place]
            assert (line["hash"], line["prev"], line["kind"], line["at"]) == (
                entry["hash"], entry["prev"], entry["kind"], entry["at"],
            )  # fmt: skip
            assert line["data"] == entry["data"]


def test_the_owner_and_an_approver_may_export_a_ledger_and_anyone_else_gets_the_page_of_a_made_up_id(
    served: Served,
) -> None:
    task_id = _start(served, "alice", "decide", {})  # bob decides
    link, _ = _asking(served, "alice", task_id)
    made_up = secrets.token_hex(20)
    with ExitStack() as stack:
        browsers = {who: stack.enter_context(PageClient(served.base)) for who in PEOPLE}
        for who, browser in browsers.items():
            browser.sign_in(PEOPLE[who])

        def page(who: str, of: str) -> httpx.Response:
            return browsers[who].http.get(f"/tasks/{of}/ledger")

        for who in ("alice", "bob"):
            for response in (fetch(served, task_id, who), page(who, task_id)):
                assert response.status_code == 200, who
                assert entries(response.text)[0]["kind"] == "intent"
                assert response.headers["x-content-type-options"] == "nosniff"
                assert response.headers["cache-control"] == "no-store"
                assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        for who in ("carol", "dave"):  # signed in, but neither its owner nor asked
            for foreign, unknown in (
                (page(who, task_id), page(who, made_up)),
                (fetch(served, task_id, who), fetch(served, made_up, who)),
            ):
                assert foreign.status_code == unknown.status_code == 404, who
                assert foreign.text == unknown.text and "No such task" in foreign.text
        # Not signed in: sent to sign in, as every page; a token /mcp refuses: 401.
        away = fetch(served, task_id)
        assert away.status_code == 303
        assert away.headers["location"] == f"/signin?next=%2Ftasks%2F{task_id}%2Fledger"
        refused = fetch(served, task_id, authorization="Bearer not-a-token")
        assert refused.status_code == 401 and refused.json()["error"] == "invalid_token"

        # The CLI: the approver too; one line for each way it fails.
        assert longtools("task", "audit", served.url, task_id, token=PEOPLE["bob"]).returncode == 0
        failures = {
            "carol": longtools("task", "audit", served.url, task_id, token=PEOPLE["carol"]),
            "nobody": longtools("task", "audit", served.url, task_id),
            "a bad token": longtools("task", "audit", served.url, task_id, token="not-a-token"),
            "no server": longtools("task", "audit", f"http://127.0.0.1:{free_port()}/mcp", task_id),
        }
        said = {why: (done.returncode, done.stdout, done.stderr) for why, done in failures.items()}
        assert said == {
            "carol": (
                1,
                "",
                f"longtools: task {task_id} not found: unknown, expired, or neither yours nor waiting for "
                "your decision\n",
            ),
            "nobody": (1, "", "longtools: the server needs a token; pass --token or set LONGTOOLS_TOKEN\n"),
            "a bad token": (
                1,
                "",
                "longtools: the server refused the token (HTTP 401); check --token or LONGTOOLS_TOKEN\n",
            ),
            "no server": (1, "", said["no server"][2]),
        }
        assert said["no server"][2].endswith(": is the server running?\n")

        # Once decided, the question no longer waits for bob: the ledger is its owner's alone.
        browsers["bob"].answer(link, {})
        _ended(served, "alice", task_id)
        assert page("bob", task_id).status_code == 404
        assert fetch(served, task_id, "alice").status_code == 200
