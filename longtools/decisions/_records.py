"""What a task's workflow and the rest of longtools agree on about its ledger and decisions: the
activity that signs entries and what it takes and gives, the memo key of a task's exit state, and
the search attribute a waiting decision is found by. Shared by workflows, the worker and the API."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel
from temporalio.common import SearchAttributeKey

__all__ = [
    "DECIDERS_ATTRIBUTE",
    "EXIT_MEMO",
    "LEDGER_ACTIVITY",
    "LEDGER_MEMO",
    "SIGNED_MEMO",
    "LedgerBatch",
    "LedgerSigned",
]

LEDGER_ACTIVITY: Final = "longtools.ledger"
"""The local activity that signs a batch of entries (``longtools.decisions.signing_activity``)."""
LEDGER_MEMO: Final = "longtools.ledger"
"""Memo key the API sets at a task's start: its workflow signs its ledger itself and keeps the
signed entries in its memo (``SIGNED_MEMO``). A task started without it (by older code) signs in
the local activity, as it did, so its history replays."""
SIGNED_MEMO: Final = "longtools.signed"
"""Memo key a task's workflow upserts with each batch it signed itself (a ``LedgerSigned``): the
history's memo changes keep every batch, the memo the last one."""
EXIT_MEMO: Final = "longtools.exit"
"""Memo key of the task's exit state (``ExitState``), set as it ends: shown with no history read."""
DECIDERS_ATTRIBUTE: Final = SearchAttributeKey.for_keyword_list("LongtoolsDeciders")
"""The keyed tags (``tags_of``) of everyone a task's open question waits for: what ``/decisions``
finds a person's questions by. Empty once nothing waits."""


class LedgerBatch(BaseModel):
    """Entries to sign, and names to tag (``p:<principal or name>``, ``g:<group>``)."""

    entries: list[dict[str, Any]]
    tags: list[str] = []


class LedgerSigned(BaseModel):
    """The batch's entries, signed (``LedgerKeys.sign``), and the names' tags in the same order."""

    entries: list[dict[str, Any]]
    tags: list[str] = []
