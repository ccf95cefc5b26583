"""The worker's half of the ledger: the local activity that signs entries, and the keys. Worker process."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Coroutine
from typing import Any

import structlog
from temporalio import activity

from longtools._settings import Settings
from longtools.decisions._ledger import LedgerKeys
from longtools.decisions._recording import LEDGER_ACTIVITY, LedgerBatch, LedgerSigned

__all__ = ["ledger_keys", "signing_activity"]

log = structlog.get_logger("longtools.ledger")


def ledger_keys(settings: Settings) -> LedgerKeys:
    """The deployment's ledger ring: ``LONGTOOLS_LEDGER_KEYS``, else derived from the payload keys
    (every process of a deployment has them), else from the state keys; a worker with neither (an
    embedded test, ``longtools.testing``) signs with a key of its own, made for this process."""
    own = settings.ledger_key_ring()
    if own is not None:
        return LedgerKeys(own)
    ring = settings.payload_key_ring() or settings.state_key_ring() or [secrets.token_bytes(32)]
    return LedgerKeys.derived(ring)


def signing_activity(keys: LedgerKeys) -> Callable[[LedgerBatch], Coroutine[Any, Any, LedgerSigned]]:
    """The activity that signs a task's entries (``_recording.Recorder.flush``). Each signed entry
    is also logged, one ``ledger`` line each, for a SIEM that keeps its own copy."""

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
        return LedgerSigned(entries=signed, tags=[keys.tag(name)[0] for name in batch.tags])

    return sign_ledger
