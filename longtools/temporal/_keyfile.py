"""The key rings ``longtools serve`` keeps in its data dir when none are configured. API process.

A key made per process would break every in-flight MRTR exchange on a restart, change what each
idempotency key maps to, and make every payload stored in Temporal unreadable. So ``serve`` makes
each ring once and keeps it beside ``temporal.db``, in ``<data-dir>/keys.json``::

    {"format": "longtools-keys/1", "state_keys": ["<base64>"], "payload_keys": ["<base64>"], ...}

Each list is a ring as in ``LONGTOOLS_STATE_KEYS`` / ``LONGTOOLS_PAYLOAD_KEYS`` (first seals or
encrypts, all open), so a key can be rotated by editing the file. The file is made atomically (a
private temporary file, then a hard link that fails if the name exists), mode 0600, and refused
when group or others may read or write it. Losing it loses every stored task: it is backed up with
``temporal.db`` (docs/operations.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from longtools._settings import decode_key_ring, encode_key

__all__ = ["FORMAT", "KEY_FILE", "KeyFileError", "KeyRings", "load_or_create", "read_key_file"]

KEY_FILE = "keys.json"
"""The file's name inside the data dir."""
FORMAT = "longtools-keys/1"
_NOTE = (
    "Key rings of `longtools serve`: state_keys seal requestState, payload_keys encrypt what is stored in "
    "temporal.db. Back this file up with temporal.db; without it the stored tasks cannot be read. "
    "Keep it private (mode 0600). The first key of each list is used for new data, every key for reading."
)


class KeyFileError(Exception):
    """The key file cannot be used (one line for a person, naming the file and the fix; never a key)."""


@dataclass(frozen=True)
class KeyRings:
    """The two rings of a key file, each non-empty, first key first."""

    state: list[bytes]
    payload: list[bytes]


def load_or_create(path: Path) -> tuple[KeyRings, bool]:
    """The rings kept at ``path``, made (with one fresh key each) if the file does not exist yet.

    Returns the rings and whether this call made the file.

    Raises:
        KeyFileError: the file is readable by others, malformed, or cannot be read or written.
    """
    try:
        return read_key_file(path), False
    except FileNotFoundError:
        pass
    rings = KeyRings(state=[secrets.token_bytes(32)], payload=[secrets.token_bytes(32)])
    if _create(path, rings):
        return rings, True
    # Another process made it between our read and our link: theirs is the one to use.
    return read_key_file(path), False


def read_key_file(path: Path) -> KeyRings:
    """The rings kept at ``path``.

    Raises:
        FileNotFoundError: there is no such file.
        KeyFileError: it is readable or writable by group or others, malformed, or unreadable.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise KeyFileError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(f"the key file {path} is not a regular file")
        if info.st_mode & 0o077:
            raise KeyFileError(
                f"the key file {path} is open to group or others (mode {stat.S_IMODE(info.st_mode):04o}); "
                f"it holds the keys to every stored task: run `chmod 600 {path}` and check who read it"
            )
        raw = file.read()
    return _parse(path, raw)


def _parse(path: Path, raw: bytes) -> KeyRings:
    fix = (
        "restore it from your backup (without it the tasks in temporal.db cannot be read), or, only if "
        "nothing stored there is needed, remove it together with temporal.db"
    )
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise KeyFileError(f"the key file {path} is not JSON; {fix}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise KeyFileError(f"the key file {path} is not a {FORMAT} file; {fix}")
    rings: dict[str, list[bytes]] = {}
    for field in ("state_keys", "payload_keys"):
        entries = document.get(field)
        if not isinstance(entries, list) or not all(isinstance(entry, str) for entry in entries):
            raise KeyFileError(f"the key file {path} has no list of keys in {field!r}; {fix}")
        try:
            rings[field] = decode_key_ring(",".join(entries), f"{path} {field}")
        except ValueError as exc:
            raise KeyFileError(f"{exc}; {fix}") from None
    return KeyRings(state=rings["state_keys"], payload=rings["payload_keys"])


def _create(path: Path, rings: KeyRings) -> bool:
    """Write ``rings`` to a new file at ``path``; False if a file is already there (left as it is).

    Written whole to a private temporary file first, then linked into place: a crash leaves either no
    key file or a complete one, never half of one that the next start would refuse.
    """
    document = {
        "format": FORMAT,
        "note": _NOTE,
        "state_keys": [encode_key(key) for key in rings.state],
        "payload_keys": [encode_key(key) for key in rings.payload],
    }
    body = (json.dumps(document, indent=2) + "\n").encode()
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(body)
                file.flush()
                os.fsync(file.fileno())
            os.link(temporary, path)
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        _sync_directory(path.parent)
    except OSError as exc:
        raise KeyFileError(f"cannot write the key file {path}: {exc.strerror or exc}") from None
    return True


def _sync_directory(directory: Path) -> None:
    # The new name is durable only once its directory is: otherwise a power cut could lose the key
    # file while temporal.db already holds payloads encrypted with it.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
