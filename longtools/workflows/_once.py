"""The record of a request that must take effect once (worker process; a deterministic workflow).

The API claims a request (a used ``requestState``, or a ``tools/call`` idempotency key) by starting
this workflow under an id derived from it: Temporal refuses a second start under one id, so
exactly one replica wins the claim, on any process and after any restart. The winner does the
work and signals its outcome here; a duplicate reads that signal from the history (which needs no
worker) and answers with it. The workflow itself only waits, so the record lives until the
claim's time-to-live runs out.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

ONCE_WORKFLOW = "longtools.Once"
OUTCOME_SIGNAL = "longtools.outcome"


@workflow.defn(name=ONCE_WORKFLOW)
class OnceRecord:
    def __init__(self) -> None:
        self._recorded = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self._recorded)

    @workflow.signal(name=OUTCOME_SIGNAL)
    def outcome(self, value: dict[str, Any]) -> None:
        # The outcome itself stays in the signal event, where the API reads it; holding it here too
        # would only copy it into the workflow's memory.
        del value
        self._recorded = True
