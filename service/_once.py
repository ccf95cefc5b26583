"""Requests that take effect once: a replayed final round, a repeated idempotency key. API process.

A claim is a ``longtools.Once`` workflow started under an id derived from the request (see
``workflows/_once.py``). Temporal accepts one start per id, so of any number of concurrent or
later duplicates, on any replica, exactly one runs the work; it records the outcome as a signal,
and the others answer with that record, read from the workflow's history (no worker needed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import structlog
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from service._settings import Settings
from service._temporal import poll
from workflows._once import ONCE_WORKFLOW, OUTCOME_SIGNAL

log = structlog.get_logger("longtools.once")

_ARGS_MEMO = "longtools.args"


class KeyReused(Exception):
    """The key was first used for a request with other arguments."""


def key_reused() -> MCPError:
    return MCPError(
        code=INVALID_PARAMS, message="This idempotency key was used for other arguments; use a new key"
    )


def args_digest(arguments: Any) -> str:
    """A digest of a call's arguments, to tell a repeated key from a reused one."""
    canonical = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def derive_id(secret: bytes, *parts: str) -> str:
    """An id nobody can guess or steer without ``secret``: HMAC over the parts, 32 hex characters."""
    message = "\x00".join(parts).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()[:32]


class Once:
    def __init__(self, settings: Settings, client: Callable[[], Client], *, eager: bool = False) -> None:
        self._settings = settings
        self.client = client
        self.eager = eager  # a worker shares the client in this process (see Tasks.eager)

    async def run(
        self,
        claim_id: str,
        args_digest: str,
        work: Callable[[], Awaitable[dict[str, Any]]],
        *,
        ttl_s: float,
        wait_s: float,
    ) -> dict[str, Any]:
        """``work()``'s wire outcome, run at most once for ``claim_id`` within ``ttl_s``.

        A duplicate gets the first outcome (an ``MCPError`` the first run raised is raised again),
        waiting up to ``wait_s`` while the first run is still going.

        Raises:
            KeyReused: the claim was made for other arguments.
            MCPError: the first run's error again, or -32602 when its outcome is not known yet.
        """
        workflow_id = f"longtools-once-{claim_id}"
        client = self.client()
        try:
            handle: WorkflowHandle[Any, Any] = await client.start_workflow(
                ONCE_WORKFLOW,
                id=workflow_id,
                task_queue=self._settings.task_queue,
                execution_timeout=timedelta(seconds=ttl_s),
                memo={_ARGS_MEMO: args_digest},
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                # A claim whose holder died before recording lapses with its timeout; a recorded one
                # stays (completed) until Temporal's retention removes it.
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                request_eager_start=self.eager,
            )
        except WorkflowAlreadyStartedError:
            return await self._recorded(client, client.get_workflow_handle(workflow_id), args_digest, wait_s)
        try:
            outcome = {"result": await work()}
        except MCPError as exc:
            outcome = {"error": exc.error.model_dump(mode="json", by_alias=True, exclude_none=True)}
        await handle.signal(OUTCOME_SIGNAL, outcome)
        return _replay(outcome)

    async def _recorded(
        self, client: Client, handle: WorkflowHandle[Any, Any], args_digest: str, wait_s: float
    ) -> dict[str, Any]:
        memo = await (await handle.describe()).memo()
        if memo.get(_ARGS_MEMO) != args_digest:
            raise KeyReused
        outcome = await poll(
            lambda: _signalled_outcome(client, handle), lambda found: found is not None, wait_s
        )
        if outcome is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message="An identical request is still in progress or did not finish; "
                "its outcome is not known. Retry later, or start a new call.",
            )
        log.info("duplicate_answered_from_record", claim=handle.id)
        return _replay(outcome)


async def _signalled_outcome(client: Client, handle: WorkflowHandle[Any, Any]) -> dict[str, Any] | None:
    async for event in handle.fetch_history_events():
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            continue
        attributes = event.workflow_execution_signaled_event_attributes
        if attributes.signal_name != OUTCOME_SIGNAL:
            continue
        [value] = await client.data_converter.decode(attributes.input.payloads, [dict])
        return value if isinstance(value, dict) else None
    return None


def _replay(outcome: dict[str, Any]) -> dict[str, Any]:
    error = outcome.get("error")
    if isinstance(error, dict):
        raise MCPError(code=int(error["code"]), message=str(error["message"]), data=error.get("data"))
    result = outcome.get("result")
    return result if isinstance(result, dict) else {}
