"""The ledger read back from Temporal, and the questions a person may decide found. API process.

A task's ledger is the batches its workflow signed (``longtools.workflows._ledger``), which its
history keeps as memo changes (``SIGNED_MEMO``) and, for those its signing activity signed, as
local-activity markers: read from the first run of the task through each continue-as-new, in
order, with no worker running.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any, Final

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import MarkerRecordedEventAttributes
from temporalio.client import Client

from longtools.decisions._records import LEDGER_ACTIVITY, SIGNED_MEMO, LedgerSigned
from longtools.decisions._rules import Voter, names_of, tags_of

__all__ = ["decider_names", "decider_tags", "read_ledger"]

_MARKER: Final = "core_local_activity"
"""The marker Temporal's SDK core records a local activity's result in: details ``data`` (what ran,
as JSON) and ``result`` (the result's payloads, through the data converter and its codec)."""


async def read_ledger(
    client: Client, task_id: str, run_id: str, *, rpc_timeout: timedelta
) -> list[dict[str, Any]]:
    """Every signed entry of the task whose first run is ``run_id``, in order."""
    entries: dict[int, dict[str, Any]] = {}
    run: str | None = run_id
    while run:
        handle = client.get_workflow_handle(task_id, run_id=run)
        run = None
        async for event in handle.fetch_history_events(rpc_timeout=rpc_timeout):
            signed = None
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
                upserted = event.workflow_properties_modified_event_attributes.upserted_memo.fields
                if SIGNED_MEMO in upserted:
                    [signed] = await client.data_converter.decode([upserted[SIGNED_MEMO]], [LedgerSigned])
            elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
                signed = await _signed_in_activity(client, event.marker_recorded_event_attributes)
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                run = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            for entry in signed.entries if signed is not None else ():
                entries.setdefault(int(entry["seq"]), entry)
    return [entries[seq] for seq in sorted(entries)]


async def _signed_in_activity(client: Client, marker: MarkerRecordedEventAttributes) -> LedgerSigned | None:
    """The batch a local-activity marker holds, if it is the signing activity's."""
    data = marker.details.get("data")
    if marker.marker_name != _MARKER or data is None or not data.payloads:
        return None
    try:
        ran = json.loads(data.payloads[0].data)
    except ValueError:
        return None
    if not isinstance(ran, dict) or ran.get("activity_type") != LEDGER_ACTIVITY:
        return None
    [signed] = await client.data_converter.decode(marker.details["result"].payloads, [LedgerSigned])
    return signed if isinstance(signed, LedgerSigned) else None


def decider_names(voter: Voter) -> list[str]:
    """What a task that waits on ``voter`` is tagged by: their names and groups (the workflow tags
    it so in ``longtools.workflows._ask``)."""
    return sorted(
        {*(f"p:{name}" for name in names_of(voter.principal)), *(f"g:{group}" for group in voter.groups)}
    )


def decider_tags(ring: Sequence[bytes], names: Iterable[str]) -> list[str]:
    """The tags of ``names`` under every key of the ring (a task tagged before a rotation is found)."""
    return sorted({tag for name in names for tag in tags_of(ring, name)})
