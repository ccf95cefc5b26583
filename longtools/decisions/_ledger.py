"""A task's ledger: an append-only, hash-chained record of who decided what, signed entry by entry.

Every entry covers the one before it (``prev`` is that entry's ``hash``), and is signed with an
Ed25519 key of the ledger ring, which names itself in the entry (``key``, the public key). So a
ledger exported as JSON lines can be checked offline, by anyone, with nothing but this module and
the server's public keys: an entry changed, removed or moved breaks the chain at that entry, and a
signature no trusted key made is refused.

The content of an entry is canonical JSON (sorted keys, no spaces, UTF-8; times as ISO 8601 text,
counts as integers), so the same entry always hashes the same in every process.

Pure: no I/O, no clocks. Workflows build entries (``chain``, deterministic, in Temporal's sandbox);
the worker signs them (``LedgerKeys.sign``, in a local activity, whose result the task's history
keeps); the API reads them back from that history; ``longtools audit verify`` checks them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = [
    "ENTRY_FIELDS",
    "EntryKind",
    "LedgerKeys",
    "Verified",
    "canonical",
    "chain",
    "digest_of",
    "ledger_time",
    "verify_entries",
]

EntryKind = Literal[
    "intent", "question", "vote", "answer", "escalated", "decided", "effect", "notified", "end"
]
"""What an entry records: the task's ``intent`` (tool, argument digest, requester); a person's
``question`` (proposal digest, rule, deadline); a ``vote`` on it or an ``answer`` to an unmarked
question (who, how, when, the proposal digest); its escalation; how it was ``decided``; each
``effect`` (an activity, its outcome); who was ``notified`` of a question and whose notification
failed (``longtools.notify``); and the task's ``end`` (its exit state)."""

ENTRY_FIELDS: Final = ("task", "seq", "at", "kind", "data", "prev")
"""The fields an entry's hash covers; ``hash``, ``key`` and ``sig`` are added by signing."""
_SIGNED: Final = b"longtools ledger entry\n"
"""Prefix of what a signature covers (the entry's hash): a ledger signature is never one of another use."""
_DERIVED: Final = b"longtools ledger signing key"


def canonical(value: Any) -> bytes:
    """``value`` as canonical JSON bytes: sorted keys, no spaces, UTF-8, floats in their shortest
    round-trip form (Python's ``repr``; entries themselves hold none: times are ISO 8601 text)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def ledger_time(moment: datetime) -> str:
    """A time as entries and decisions write it: ISO 8601 in UTC, ending ``Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def digest_of(value: Any) -> str:
    """The SHA-256 of ``value``'s canonical JSON, hex: what an entry keeps of arguments or answers."""
    return hashlib.sha256(canonical(value)).hexdigest()


def chain(
    task: str, seq: int, at: str, kind: EntryKind, data: Mapping[str, Any], prev: str
) -> dict[str, Any]:
    """One entry, with its ``hash``: ``prev`` is the previous entry's hash ("" for the first)."""
    entry: dict[str, Any] = {
        "task": task,
        "seq": seq,
        "at": at,
        "kind": kind,
        "data": dict(data),
        "prev": prev,
    }
    entry["hash"] = hashlib.sha256(canonical(entry)).hexdigest()
    return entry


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    # One spelling per value: the decoder skips characters outside the alphabet and ignores the
    # last character's spare bits, so an edited key or signature could otherwise still verify.
    if _b64(raw) != text:
        raise ValueError("not canonical URL-safe base64")
    return raw


def public_key_text(key: Ed25519PublicKey) -> str:
    """A public key as entries name it: URL-safe base64 of its 32 raw bytes."""
    return _b64(key.public_bytes(Encoding.Raw, PublicFormat.Raw))


class LedgerKeys:
    """The ledger key ring: the first key signs, every key's public half verifies.

    Each key is 32 bytes, an Ed25519 seed: ``LONGTOOLS_LEDGER_KEYS``, or derived from each key of
    the payload key ring (which every worker has), so a deployment need not keep another secret.
    """

    def __init__(self, seeds: Sequence[bytes]) -> None:
        if not seeds:
            raise ValueError("the ledger needs at least one signing key")
        self._keys = [Ed25519PrivateKey.from_private_bytes(seed) for seed in seeds]
        self.public = [public_key_text(key.public_key()) for key in self._keys]
        """Every key's public half, the signing one first."""

    @classmethod
    def derived(cls, payload_keys: Sequence[bytes]) -> LedgerKeys:
        """A ring derived from the payload key ring, key for key (rotating one rotates the other)."""
        return cls([hmac.new(key, _DERIVED, hashlib.sha256).digest() for key in payload_keys])

    def sign(self, entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``entries`` (from ``chain``) with ``key`` and ``sig``. Each hash is computed again from
        the content here: a signature vouches for what it covers, not for a hash it was handed."""
        key, public = self._keys[0], self.public[0]
        signed = []
        for entry in entries:
            content = {name: entry[name] for name in ENTRY_FIELDS}
            digest = hashlib.sha256(canonical(content)).hexdigest()
            signature = key.sign(_SIGNED + digest.encode())
            signed.append({**content, "hash": digest, "key": public, "sig": _b64(signature)})
        return signed


@dataclass(frozen=True)
class Verified:
    """What ``verify_entries`` found: ``problem`` is None for a ledger that holds."""

    entries: int
    problem: str | None = None
    """The first thing wrong, naming the entry (its line, from 1, and its ``seq``)."""
    at_line: int | None = None
    keys: tuple[str, ...] = ()
    """The public keys that signed it, in the order first used."""
    ended: bool = False
    """Whether its last entry is the task's ``end``: a ledger cut short after its end reads as not ended."""


def verify_entries(
    lines: Iterable[str],
    trusted: Sequence[str] | None = None,
    task: str | None = None,
    passkeys: Sequence[str] | None = None,
) -> Verified:
    """Check a ledger as exported (one JSON entry per line): each entry's hash is that of its
    content, covers the entry before it, is numbered in order, and is signed by its key, one of
    ``trusted`` (public keys as entries name them) when given, and of ``task`` when given (else of
    the task the first entry names: a whole ledger of another task holds too, unless pinned).

    Stops at the first problem, naming the entry: a changed field breaks that entry's hash; a
    removed entry breaks the ``prev``/``seq`` of the next one; two swapped entries break the first
    of them. A vote approved with a passkey holds only if its assertion does: the key it names
    signed this vote's challenge, with its person verified (``_passkeys``), and that key is one of
    ``passkeys`` (people's registered public keys, as their ``/passkeys`` page shows them) when
    given: else a server that rewrote its ledger could name a key of its own making.
    """
    previous, count = "", 0
    keys: list[str] = []
    last_kind: str | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue

        def wrong(what: str, seq: Any = None, number: int = number, count: int = count) -> Verified:
            named = f"entry at line {number}" + ("" if seq is None else f" (seq {seq})")
            return Verified(entries=count, problem=f"{named}: {what}", at_line=number, keys=tuple(keys))

        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested deeper than json parses
            return wrong("is not JSON")
        if not isinstance(entry, dict):
            return wrong("is not a JSON object")
        missing = [name for name in (*ENTRY_FIELDS, "hash", "key", "sig") if name not in entry]
        if missing:
            return wrong(f"lacks {', '.join(missing)}", entry.get("seq"))
        seq = entry["seq"]
        content = {name: entry[name] for name in ENTRY_FIELDS}
        try:
            digest = hashlib.sha256(canonical(content)).hexdigest()
        except (UnicodeEncodeError, RecursionError):  # a lone surrogate ("\\ud800") has no UTF-8
            return wrong("was changed: its content is not text an entry can hold", seq)
        if digest != entry["hash"]:
            return wrong("was changed: its content does not match its hash", seq)
        if entry["prev"] != previous:
            return wrong("does not follow the entry before it: an entry was removed or moved before it", seq)
        if seq != count:
            return wrong(f"is numbered {seq}, where {count} comes: an entry was removed or moved", seq)
        if task is not None and entry["task"] != task:
            return wrong(f"belongs to task {entry['task']}, not {task}", seq)
        task = task or str(entry["task"])
        if trusted is not None and entry["key"] not in trusted:
            return wrong("is signed by a key that is not trusted", seq)
        try:
            public = Ed25519PublicKey.from_public_bytes(_unb64(str(entry["key"])))
            public.verify(_unb64(str(entry["sig"])), _SIGNED + digest.encode())
        except (InvalidSignature, ValueError, binascii.Error):
            return wrong("has a signature its key did not make", seq)
        data = entry.get("data")
        if entry["kind"] == "vote" and isinstance(data, dict) and "passkey" in data:
            # Here, not at the top: the passkey check builds on the decision, which builds on this.
            from longtools.decisions._passkeys import passkey_problem

            problem = passkey_problem(entry, task)
            named = data["passkey"].get("publicKey") if isinstance(data["passkey"], dict) else None
            if problem is None and passkeys is not None and named not in passkeys:
                problem = "its key is not one of the pinned passkeys"
            if problem is not None:
                return wrong(f"is a vote whose passkey approval does not hold: {problem}", seq)
        if entry["key"] not in keys:
            keys.append(entry["key"])
        previous, count, last_kind = digest, count + 1, entry["kind"]
    if not count:
        return Verified(entries=0, problem="the ledger has no entries")
    return Verified(entries=count, keys=tuple(keys), ended=last_kind == "end")
