"""The ledger as a task's workflow keeps it: entries appended as things happen, signed in batches.
Workflow code (Temporal's sandbox): deterministic, no I/O, no keys.

Each longtools task's workflow chains its entries (``_ledger.chain``) as they happen: its intent at
the start, each question, vote, answer and escalation, each activity's outcome (an effect) and its
end. Whenever it is about to wait, and at its end, it signs the entries not yet signed with the
worker's ``Signer`` (which holds the ledger keys; it is called from workflow code, outside the
sandbox) and upserts them into its memo (:data:`SIGNED_MEMO`), at its end with its exit state.
Temporal keeps each memo change in the task's history, and the API reads the ledger from there,
with no worker running (``longtools.decisions.read_ledger``). Signing is deterministic, so a
replay signs the same bytes again; Temporal does not compare a memo's content on replay, so a
replay after the keys rotated still holds. A long run of steps with no wait signs its batches in a
local activity (:data:`LEDGER_ACTIVITY`) as it goes, so that no memo change grows large.

How a task signs is fixed when it starts (a task is replayed as it ran):

- with :data:`LEDGER_MEMO` in its memo (the API sets it): as above;
- without it, started by older code: every batch in the local activity (an activity round and a
  workflow task more per wait), behind ``workflow.patched``, and no ledger at all for a task that
  started before there were ledgers. A task of this API run by an older worker has that patch's
  marker in its history: a replay asks for it, and goes on as that worker began.

The entries' format, their signing and their check are ``longtools.decisions``'; this is where a
workflow writes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final, NoReturn

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.worker import (
    ContinueAsNewInput,
    ExecuteWorkflowInput,
    Interceptor,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from longtools.decisions import (
    EXIT_MEMO,
    LEDGER_ACTIVITY,
    LEDGER_MEMO,
    SIGNED_MEMO,
    EntryKind,
    ExitState,
    LedgerBatch,
    LedgerSigned,
    Proposal,
    Signer,
    chain,
    digest_of,
    ledger_time,
    redacted,
)
from longtools.workflows._errors import run_ending
from longtools.workflows._metrics import CREATED_MEMO, OWNER_MEMO, TITLE_MEMO, TOOL_MEMO

__all__ = ["RecordLedger", "Recorder", "recorder", "requester"]

_PATCH: Final = "longtools.ledger"
_CARRIED: Final = "longtools.ledger-carried"
_SIGN_TIMEOUT: Final = timedelta(seconds=10)
_SIGN_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
)
_BATCH: Final = 64
"""Entries signed together at most: a long run of steps with no wait between (5,000 activities)
signs as it goes, in results Temporal takes (one batch of everything outgrew a payload's limit)."""


class Recorder:
    """One workflow run's ledger: the chain's head and the entries not yet signed.

    ``signer``: the worker's, when the task signs in its workflow (``LEDGER_MEMO``); None when every
    batch goes to the signing activity (a task started by older code)."""

    def __init__(self, enabled: bool, signer: Signer | None = None) -> None:
        self.enabled = enabled
        self.signer = signer
        self.seq = 0
        self.head = ""
        self.pending: list[dict[str, Any]] = []
        self.signing: list[list[dict[str, Any]]] = []
        """Batches handed to the signing activity that it has not returned yet."""
        self.background: list[asyncio.Task[list[str]]] = []
        self.arguments: dict[str, Any] = {}
        """The task's arguments as the call gave them, sensitive fields redacted (for proposals)."""
        self.outcome: ExitState | None = None
        """How the last decision ended, if it did not end in approval: the task's exit state then."""

    def append(self, kind: EntryKind, data: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        at = ledger_time(workflow.now())
        entry = chain(workflow.info().workflow_id, self.seq, at, kind, data, self.head)
        self.seq, self.head = self.seq + 1, entry["hash"]
        self.pending.append(entry)
        if len(self.pending) >= _BATCH:
            self.background.append(asyncio.create_task(self._in_activity()))

    async def flush(self, tags: list[str] | None = None, memo: Mapping[str, Any] | None = None) -> list[str]:
        """Sign what is pending (and tag ``tags``); returns the tags. ``memo``: what to upsert with
        the signed entries (the exit state), upserted before them when the activity signs.
        Nothing to sign: no activity, and only ``memo`` upserted."""
        nothing = not self.enabled or not (self.pending or tags)
        if memo and (nothing or self.signer is None):
            workflow.upsert_memo(dict(memo))  # alone, or before the activity signs
        if nothing:
            return []
        if self.signer is None:
            return await self._in_activity(tags)
        entries, self.pending = self.pending, []
        batch = LedgerBatch(entries=entries, tags=tags or [])
        with workflow.unsafe.sandbox_unrestricted():
            signed = self.signer.sign(batch, log_entries=not workflow.unsafe.is_replaying())
        workflow.upsert_memo({**(memo or {}), SIGNED_MEMO: signed.model_dump(mode="json")})
        return list(signed.tags)

    async def _in_activity(self, tags: list[str] | None = None) -> list[str]:
        entries, self.pending = self.pending, []  # entries appended meanwhile go into the next batch
        self.signing.append(entries)
        signed = await workflow.execute_local_activity(
            LEDGER_ACTIVITY,
            LedgerBatch(entries=entries, tags=tags or []),
            result_type=LedgerSigned,
            start_to_close_timeout=_SIGN_TIMEOUT,
            retry_policy=_SIGN_RETRY,
        )
        self.signing.remove(entries)
        return list(signed.tags)

    async def settle(self, memo: Mapping[str, Any] | None = None) -> None:
        """Sign everything pending, with ``memo``, and wait for the batches being signed (before
        the run ends)."""
        await self.flush(memo=memo)
        while self.background:
            await self.background.pop()

    def proposal(self, summary: str | None) -> Proposal:
        """What the task will do, as its question shows it (``longtools.decisions.Proposal``)."""
        tool = str(workflow.memo_value(TOOL_MEMO, ""))
        return Proposal(
            tool=tool,
            title=str(workflow.memo_value(TITLE_MEMO, tool)),
            arguments=self.arguments,
            requester=requester(),
            started_at=_started(),
            summary=summary,
        )

    def carried(self) -> dict[str, Any]:
        # A batch still being signed is signed again by the next run: the reader keeps one per seq.
        pending = [entry for batch in self.signing for entry in batch] + self.pending
        return {"seq": self.seq, "head": self.head, "pending": pending, "arguments": self.arguments}

    def resume(self, carried: Mapping[str, Any]) -> None:
        self.seq = int(carried.get("seq") or 0)
        self.head = str(carried.get("head") or "")
        self.pending = list(carried.get("pending") or [])
        arguments = carried.get("arguments")
        self.arguments = dict(arguments) if isinstance(arguments, Mapping) else {}


def _started() -> str:
    started = workflow.memo_value(CREATED_MEMO, None)
    return started if isinstance(started, str) else workflow.info().workflow_start_time.isoformat()


def requester() -> str:
    """The principal who started this task."""
    return str(workflow.memo_value(OWNER_MEMO, ""))


def recorder() -> Recorder:
    """This run's ledger (a disabled one outside a longtools task, or on a task from older code)."""
    found: Recorder | None = getattr(workflow.instance(), "_longtools_ledger", None)
    if found is None:
        found = Recorder(enabled=False)
        workflow.instance()._longtools_ledger = found
    return found


class RecordLedger(Interceptor):
    """Worker interceptor: every longtools task keeps its ledger (intent, effects, end), signed by
    ``signer`` (this process's own, ``Signer.own``, when none is given: a replay)."""

    def __init__(self, signer: Signer | None = None) -> None:
        chosen = signer or Signer.own()

        class _Signing(_Inbound):
            signer = chosen

        self._inbound = _Signing

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return self._inbound


class _Inbound(WorkflowInboundInterceptor):
    signer: Signer

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_Outbound(outbound))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        ledger = _recorder(self.signer)
        if ledger is None:
            return await super().execute_workflow(input)
        workflow.instance()._longtools_ledger = ledger
        carried = workflow.memo_value(_CARRIED, None)
        if isinstance(carried, Mapping):
            ledger.resume(carried)  # a run after continue-as-new: the same ledger goes on
        else:
            args = input.args[0] if input.args else None
            ledger.arguments = redacted(args) if isinstance(args, BaseModel) else {}
            ledger.append(
                "intent",
                {
                    "tool": str(workflow.memo_value(TOOL_MEMO, "")),
                    "arguments": digest_of(ledger.arguments if isinstance(args, BaseModel) else args),
                    "requester": requester(),
                },
            )
        try:
            result = await super().execute_workflow(input)
        except (Exception, asyncio.CancelledError) as exc:
            ended = run_ending(exc)
            if ended is not None:
                await _end(ledger, ended)
            raise
        await _end(ledger, "completed")
        return result


def _recorder(signer: Signer) -> Recorder | None:
    """This task's ledger as it started (see the module's docstring); None: it keeps none."""
    if workflow.memo_value(TOOL_MEMO, None) is None:
        return None  # not a longtools task
    if workflow.memo_value(LEDGER_MEMO, None) is not None:
        # Begun by an older worker, it has the patch's marker and signs in the activity; a replay
        # can ask, as asking for a patch while replaying records nothing.
        if workflow.unsafe.is_replaying() and workflow.patched(_PATCH):
            return Recorder(enabled=True)
        return Recorder(enabled=True, signer=signer)
    return Recorder(enabled=True) if workflow.patched(_PATCH) else None


async def _end(ledger: Recorder, ended: str) -> None:
    """Record the task's exit state: a decision that did not approve says how it ended, unless the
    task was cancelled or failed after it; then sign what is left."""
    state: ExitState = "cancelled" if ended == "cancelled" else "failed" if ended == "failed" else "completed"
    if state == "completed" and ledger.outcome is not None:
        state = ledger.outcome
    ledger.append("end", {"exit": state})
    await ledger.settle(memo={EXIT_MEMO: state})


def _described(result: Any) -> dict[str, Any]:
    """What an activity's result says of itself for the ledger: its ``attempt`` (an int field,
    from ``activity.info().attempt``) and what its ``for_ledger()`` gives (plain values a reader
    may see, e.g. which ticket it deleted): never the result itself, which may hold anything."""
    described: dict[str, Any] = {}
    attempt = getattr(result, "attempt", None)
    if isinstance(attempt, int):
        described["attempt"] = attempt
    for_ledger = getattr(result, "for_ledger", None)
    if callable(for_ledger):
        said = for_ledger()
        if isinstance(said, Mapping):
            described["result"] = {
                str(name): value for name, value in said.items() if isinstance(value, str | int | bool)
            }
    return described


class _Outbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        handle = super().start_activity(input)
        ledger = recorder()
        if ledger.enabled:
            activity = input.activity

            def ended(done: asyncio.Future[Any]) -> None:
                data: dict[str, Any] = {"activity": activity}
                if done.cancelled():
                    data["outcome"] = "cancelled"
                elif done.exception() is not None:
                    error = done.exception()
                    cause = getattr(error, "cause", None)
                    data["outcome"] = "cancelled" if isinstance(cause, asyncio.CancelledError) else "failed"
                    data["error"] = type(cause or error).__name__
                else:
                    data["outcome"] = "completed"
                    data.update(_described(done.result()))
                ledger.append("effect", data)

            handle.add_done_callback(ended)
        return handle

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        ledger = recorder()
        if ledger.enabled:
            input.memo = {**(input.memo or {}), _CARRIED: ledger.carried()}
        super().continue_as_new(input)
