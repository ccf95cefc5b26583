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

__all__ = ["ledger_keys", "signing_activity", "tag_ring"]

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


def signing_activity(
    keys: LedgerKeys, ring: Sequence[bytes]
) -> Callable[[LedgerBatch], Coroutine[Any, Any, LedgerSigned]]:
    """The activity that signs a task's entries with ``keys`` and tags the names it is given with
    ``ring``'s first key (``longtools.workflows._ledger.Recorder.flush``). Each signed entry is
    also logged, one ``ledger`` line each, for a SIEM that keeps its own copy."""

    @activity.defn(name=LEDGER_ACTIVITY)
    async def sign_ledger(batch: LedgerBatch) -> LedgerSigned:
        signed = keys.sign(batch.entries)
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
        return LedgerSigned(entries=signed, tags=[tags_of(ring[:1], name)[0] for name in batch.tags])

    return sign_ledger
