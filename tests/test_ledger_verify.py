"""A ledger checked offline (``verify_entries``, ``longtools audit verify``) and the ledger key ring,
on ledgers made here with ``chain`` and ``LedgerKeys.sign``: no server. Ours (issue 32). The same
checks on ledgers a real ``serve`` kept are in tests/test_ledger.py.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from longtools.cli import cli
from longtools.decisions import LedgerKeys, verify_entries
from longtools.decisions._ledger import EntryKind, chain

SEED = secrets.token_bytes(32)
OTHER = secrets.token_bytes(32)
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
KINDS: tuple[EntryKind, ...] = ("intent", "question", "vote", "decided", "effect", "end")


def ledger(keys: LedgerKeys, task: str = "t-1", kinds: tuple[EntryKind, ...] = KINDS) -> list[str]:
    """A signed ledger as exported: one JSON entry a line."""
    entries: list[dict[str, Any]] = []
    head = ""
    for seq, kind in enumerate(kinds):
        data: dict[str, Any] = {"exit": "completed"} if kind == "end" else {"n": seq, "text": "a\u2028b"}
        entry = chain(task, seq, f"2026-01-01T00:00:0{seq}Z", kind, data, head)
        head = entry["hash"]
        entries.append(entry)
    return [json.dumps(entry, sort_keys=True) for entry in keys.sign(entries)]


def audit(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["audit", *args])
    return done.exit_code, done.output


def test_a_signed_ledger_holds_and_names_its_key_and_its_end() -> None:
    keys = LedgerKeys([SEED])
    found = verify_entries(ledger(keys))
    assert found.problem is None and found.entries == len(KINDS)
    assert found.keys == (keys.public[0],) and found.ended
    assert verify_entries(ledger(keys), trusted=keys.public).problem is None


def test_a_ledger_cut_after_any_entry_holds_but_reads_as_not_ended() -> None:
    lines = ledger(LedgerKeys([SEED]))
    for cut in range(1, len(lines)):
        found = verify_entries(lines[:cut])
        assert found.problem is None and not found.ended, cut
    assert verify_entries([]).problem == "the ledger has no entries"


def test_a_key_not_trusted_is_refused_at_its_first_entry() -> None:
    lines = ledger(LedgerKeys([OTHER]))
    found = verify_entries(lines, trusted=LedgerKeys([SEED]).public)
    assert found.problem == "entry at line 1 (seq 0): is signed by a key that is not trusted"


def test_another_spelling_of_a_key_or_a_signature_does_not_verify() -> None:
    """The base64 decoder ignores a last character's spare bits and skips characters outside its
    alphabet: an edited ``key`` or ``sig`` must not verify all the same."""
    lines = ledger(LedgerKeys([SEED]))
    for field in ("key", "sig"):
        entry = json.loads(lines[2])
        text = entry[field]
        spare = ALPHABET[ALPHABET.index(text[-1]) ^ 1]  # the lowest bit of the last character is spare
        for edited in (text[:-1] + spare, text[:4] + "!" + text[4:]):
            changed = [*lines[:2], json.dumps({**entry, field: edited}), *lines[3:]]
            assert verify_entries(changed).at_line == 3, (field, edited)


def test_a_line_no_parser_takes_is_named_not_raised() -> None:
    lines = ledger(LedgerKeys([SEED]))
    surrogate = lines[1].replace('"a\\u2028b"', '"\\ud800"')
    assert verify_entries([lines[0], surrogate]).at_line == 2
    assert verify_entries([lines[0], "[" * 100_000]).problem == "entry at line 2: is not JSON"
    assert verify_entries([lines[0], "[1]"]).problem == "entry at line 2: is not a JSON object"
    assert verify_entries([lines[0], "{}"]).problem is not None


def test_an_entry_of_another_tasks_ledger_does_not_follow() -> None:
    keys = LedgerKeys([SEED])
    mine, theirs = ledger(keys, "t-1"), ledger(keys, "t-2")
    assert verify_entries([mine[0], theirs[1]]).at_line == 2


def test_a_whole_ledger_of_another_task_fails_once_the_task_is_pinned(tmp_path: Path) -> None:
    theirs = ledger(LedgerKeys([SEED]), "t-2")
    assert verify_entries(theirs).problem is None  # it holds, as a ledger of t-2
    pinned = verify_entries(theirs, task="t-1")
    assert pinned.at_line == 1 and pinned.problem is not None and "belongs to task t-2" in pinned.problem
    saved = tmp_path / "ledger.jsonl"
    saved.write_text("\n".join(theirs) + "\n")
    assert audit("verify", str(saved), "--task", "t-1") == (
        1,
        "FAILED: entry at line 1 (seq 0): belongs to task t-2, not t-1\n",
    )
    assert audit("verify", str(saved), "--task", "t-2")[0] == 0


def test_the_ring_signs_with_its_first_key_and_derives_a_ring_key_for_key() -> None:
    old, new = LedgerKeys([SEED]), LedgerKeys([OTHER, SEED])
    assert new.public == [LedgerKeys([OTHER]).public[0], old.public[0]]
    assert verify_entries(ledger(new)).keys == (new.public[0],)
    payload = [secrets.token_bytes(32), secrets.token_bytes(32)]
    derived = LedgerKeys.derived(payload)
    assert derived.public == LedgerKeys.derived(payload).public  # the same keys in every process
    assert derived.public[1] == LedgerKeys.derived(payload[1:]).public[0]
    assert derived.public[0] not in LedgerKeys([payload[0]]).public  # derived, not the payload key


def test_audit_verify_prints_ok_the_key_and_the_end_or_the_first_entry_that_fails(tmp_path: Path) -> None:
    keys = LedgerKeys([SEED])
    lines = ledger(keys)
    saved = tmp_path / "ledger.jsonl"
    saved.write_text("\n".join(lines) + "\n")
    code, said = audit("verify", str(saved))
    assert code == 0
    assert said.splitlines() == [
        f"OK: {len(lines)} entries, chain and signatures hold; signed by {keys.public[0]}",
        "task t-1: ended completed; its last entry is its end",
        "note: signatures were checked against the keys the file itself names, which anyone can make; "
        "pin the deployment's with --key (`longtools audit keys` prints them)",
    ]
    code, said = audit("verify", str(saved), "--key", keys.public[0])
    assert code == 0 and said.splitlines()[0].endswith(f"signed by {keys.public[0]} (pinned)")
    assert "note:" not in said

    saved.write_text("\n".join(lines[:3]) + "\n")
    code, said = audit("verify", str(saved), "--key", keys.public[0])
    assert code == 0 and said.splitlines()[1] == (
        "warning: task t-1: its last entry is not its end: it was exported before the task ended, "
        "or entries were cut off its end"
    )

    saved.write_text("\n".join([lines[0], lines[2], lines[1], *lines[3:]]) + "\n")
    code, said = audit("verify", str(saved))
    assert (code, said) == (
        1,
        "FAILED: entry at line 2 (seq 2): does not follow the entry before it: an entry was removed or "
        "moved before it\n",
    )
    code, said = audit("verify", str(saved), "--key", LedgerKeys([OTHER]).public[0])
    assert code == 1 and said == "FAILED: entry at line 1 (seq 0): is signed by a key that is not trusted\n"


def test_audit_verify_names_a_bad_key_or_file_in_one_line(tmp_path: Path) -> None:
    saved = tmp_path / "ledger.jsonl"
    saved.write_text("\n".join(ledger(LedgerKeys([SEED]))))
    code, said = audit("verify", str(saved), "--key", "not-a-key")
    assert code == 2 and "is not a ledger public key" in said and "Traceback" not in said
    code, said = audit("verify", str(tmp_path / "missing.jsonl"))
    assert code == 2 and said.startswith("longtools: cannot read") and len(said.splitlines()) == 1
    saved.write_bytes(b"\xff\xfe not a ledger\n")
    code, said = audit("verify", str(saved))
    assert code == 1 and said == "FAILED: entry at line 1: is not JSON\n"
