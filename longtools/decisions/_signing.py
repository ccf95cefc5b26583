"""The worker's half of the ledger: the local activity that signs entries, and the keys. Worker process."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Coroutine, Sequence
from functools import cache
from typing import Any

import structlog
from temporalio import activity

from longtools._settings import Settings
from longtools.decisions._ledger import LedgerKeys
from longtools.decisions._records import LEDGER_ACTIVITY, LedgerBatch, LedgerSigned
from longtools.decisions._rules import tags_of

__all__ = ["Signer", "ledger_keys", "signing_activity", "tag_ring"]

log = structlog.get_logger("longtools.ledger")


def tag_ring(settings: Settings) -> list[bytes]:
    """The keys decider tags are made with (``_rules.tags_of``), and the ledger's are derived from
    when it has none of its own: the payload keys (every process of a deployment has them), else
    the state keys; a process with neither (an embedded test, ``longtools.testing``) makes one."""
    return settings.payload_key_ring() or settings.state_key_ring() or [_process_key()]


@cache
def _process_key() -> bytes:
    """This process's own key, made on first use (never at import): its tags and signatures hold
    for as long as the process does."""
    return secrets.token_bytes(32)


def ledger_keys(settings: Settings) -> LedgerKeys:
    """The deployment's ledger ring: ``LONGTOOLS_LEDGER_KEYS``, else derived from ``tag_ring``."""
    own = settings.ledger_key_ring()
    return LedgerKeys(own) if own is not None else LedgerKeys.derived(tag_ring(settings))


class Signer:
    """Signs a task's ledger entries with the ledger ring's first key, and tags names with the tag
    ring's first key: what the signing activity does, and what a task's workflow does itself
    (``longtools.workflows._ledger``). Both are deterministic (Ed25519, RFC 8032; HMAC), so a
    replayed workflow signs the same bytes again while the keys are the same."""

    def __init__(self, keys: LedgerKeys, ring: Sequence[bytes]) -> None:
        self._keys = keys
        self._ring = ring[:1]

    @classmethod
    def of(cls, settings: Settings) -> Signer:
        """The deployment's signer (``ledger_keys``, ``tag_ring``)."""
        return cls(ledger_keys(settings), tag_ring(settings))

    @classmethod
    def own(cls) -> Signer:
        """This process's own signer (``tag_ring`` without keys): for replays and embedded tests."""
        return cls(LedgerKeys.derived([_process_key()]), [_process_key()])

    def sign(self, batch: LedgerBatch, *, log_entries: bool = True) -> LedgerSigned:
        """``batch`` signed; each signed entry is also logged, one ``ledger`` line each, for a SIEM
        that keeps its own copy (not when a replay signs again what was logged already)."""
        signed = self._keys.sign(batch.entries)
        if log_entries:
            for entry in signed:
                log.info(
                    "ledger",
                    task_id=entry["task"],
                    seq=entry["seq"],
                    kind=entry["kind"],
                    at=entry["at"],
                    data=entry["data"],
                    hash=entry["hash"],
                    prev=entry["prev"],
                )
        return LedgerSigned(entries=signed, tags=[tags_of(self._ring, name)[0] for name in batch.tags])


def signing_activity(signer: Signer) -> Callable[[LedgerBatch], Coroutine[Any, Any, LedgerSigned]]:
    """The local activity that signs a task's entries (``longtools.workflows._ledger.Recorder``): a
    long run of steps signs its batches there as it goes, and a task started by older code all of
    its entries."""

    @activity.defn(name=LEDGER_ACTIVITY)
    async def sign_ledger(batch: LedgerBatch) -> LedgerSigned:
        return signer.sign(batch)

    return sign_ledger
