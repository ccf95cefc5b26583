"""``longtools audit verify`` and ``longtools audit keys``: a saved ledger checked offline, and the
deployment's ledger public keys to pin it with. Runs in the operator's or an auditor's shell.

``verify`` needs nothing but the file (and the keys to trust): no server, no Temporal, no secret.
``keys`` reads the deployment's key rings as its workers do (``longtools.decisions.ledger_keys``):
``LONGTOOLS_LEDGER_KEYS``, else derived from the payload keys (``LONGTOOLS_PAYLOAD_KEYS``, or the
``keys.json`` of a ``serve`` data dir), and prints only their public halves.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from pathlib import Path
from typing import Any, Final

import typer

from longtools._settings import PAYLOAD_KEYS_VAR
from longtools.cli._launch import fail, settings_of
from longtools.decisions import LedgerKeys, verify_entries
from longtools.temporal import KEY_FILE, KeyFileError, read_key_file

__all__ = ["keys", "verify"]

_PUBLIC_KEY_BYTES: Final = 32


def verify(file: str, trusted: list[str], task: str | None = None, passkeys: list[str] | None = None) -> int:
    """Check the ledger in ``file`` (``-``: stdin); print what holds, or the first entry that does
    not. 0 when it holds, 1 when it does not (2 for a file that cannot be read, a bad ``--key``)."""
    for key in trusted:
        if not _is_public_key(key):
            fail(
                f"--key {key!r} is not a ledger public key: 43 characters of URL-safe base64, "
                "as `longtools audit keys` prints them"
            )
    lines = _lines(file)
    found = verify_entries(lines, trusted=trusted or None, task=task, passkeys=passkeys or None)
    if found.problem is not None:
        typer.echo(f"FAILED: {found.problem}")
        return 1
    typer.echo(
        f"OK: {found.entries} entries, chain and signatures hold; signed by {', '.join(found.keys)}"
        + (" (pinned)" if trusted else "")
    )
    last = _last_entry(lines)
    task = last.get("task")
    if found.ended:
        data = last.get("data")
        exit_state = data.get("exit") if isinstance(data, dict) else None
        typer.echo(f"task {task}: ended {exit_state}; its last entry is its end")
    else:
        typer.echo(
            f"warning: task {task}: its last entry is not its end: it was exported before the task "
            "ended, or entries were cut off its end"
        )
    if not trusted:
        typer.echo(
            "note: signatures were checked against the keys the file itself names, which anyone can "
            "make; pin the deployment's with --key (`longtools audit keys` prints them)"
        )
    if not passkeys and any('"passkey"' in line and '"vote"' in line for line in lines):
        typer.echo(
            "note: passkey approvals were checked against the public keys their entries name; pin "
            "each approver's with --passkey (their /passkeys page shows them)"
        )
    return 0


def keys(data_dir: Path | None) -> int:
    """Print the deployment's ledger public keys, one a line, the signing one first."""
    settings = settings_of(data_dir=data_dir)
    own = settings.ledger_key_ring()
    if own is not None:
        ring, source = LedgerKeys(own), "from LONGTOOLS_LEDGER_KEYS"
    elif (payload := settings.payload_key_ring()) is not None:
        ring, source = LedgerKeys.derived(payload), f"derived from {PAYLOAD_KEYS_VAR}"
    else:
        path = settings.data_dir / KEY_FILE
        try:
            ring, source = LedgerKeys.derived(read_key_file(path).payload), f"derived from {path}"
        except FileNotFoundError:
            fail(
                "no ledger keys: set LONGTOOLS_LEDGER_KEYS, or LONGTOOLS_PAYLOAD_KEYS, as the workers have "
                f"them, or pass --data-dir of the `longtools serve` whose {KEY_FILE} to read (none at {path})"
            )
        except KeyFileError as exc:
            fail(str(exc))
    for public in ring.public:
        typer.echo(public)
    typer.echo(
        f"{len(ring.public)} ledger key(s), {source}: the first signs new entries, each verifies; "
        "pin them with longtools audit verify FILE --key KEY ...",
        err=True,
    )
    return 0


def _is_public_key(text: str) -> bool:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return False
    return len(raw) == _PUBLIC_KEY_BYTES


def _lines(file: str) -> list[str]:
    """The file's lines, split at newlines only (``splitlines`` would split an entry at a U+2028 in
    its text); bytes that are not UTF-8 become U+FFFD, so the entry they are in reads as changed."""
    try:
        raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    return raw.decode(errors="replace").split("\n")


def _last_entry(lines: list[str]) -> dict[str, Any]:
    """The last entry of a ledger that holds (so it parses)."""
    last = next(line for line in reversed(lines) if line.strip())
    entry = json.loads(last)
    return entry if isinstance(entry, dict) else {}
