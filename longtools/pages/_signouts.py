"""Page sessions ended by a sign-out, recorded where every replica sees them: in Temporal. API process.

A page session is a sealed cookie that no replica stores (``_sessions``), so deleting the cookie at
sign-out ends nothing for a copy of it taken before. A sign-out is therefore recorded as a
``longtools.Once`` workflow started under ``longtools-signout-<session id>``: the durable claim of a
workflow id that ``longtools.tasks._run_once`` makes, here never signalled. It runs (a workflow that
only waits; no worker is held) until a little after the session would have expired anyway, so the
record is there for as long as the session can be presented, whatever the namespace's retention.

Cost: a page request of a signed-in session (token or OIDC) reads the record once: one
``DescribeWorkflowExecution``, answered NOT_FOUND while the session lives. A sign-out is one
``StartWorkflowExecution``. A session known to have ended is remembered by this process (that can
only stay true), so a tab of it that keeps asking costs no more reads here. A session known to be
live is not remembered: a sign-out on another replica must count at the next request.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta
from typing import Final

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from longtools._settings import Settings
from longtools.workflows._once import ONCE_WORKFLOW

__all__ = ["SignOuts"]

_MARGIN_S: Final = 600.0
"""How long a record outlives its session's expiry: replicas' clocks differ a little, and each
replica decides by its own clock when a session has expired."""
_KNOWN_ENDED: Final = 10_000
"""Sessions this process remembers as ended (the oldest are forgotten first, and read again)."""


class SignOuts:
    def __init__(self, settings: Settings, connection: Callable[[], Client]) -> None:
        self._connection = connection
        self._task_queue = settings.task_queue
        self._rpc_timeout = timedelta(seconds=settings.temporal_rpc_timeout_s)
        self._ended: OrderedDict[str, None] = OrderedDict()

    async def ended(self, session_id: str) -> bool:
        """Whether the session was signed out, on any replica.

        Raises:
            RPCError: Temporal did not answer (the pages refuse the request: deny on error)."""
        if session_id in self._ended:
            return True
        handle = self._connection().get_workflow_handle(_record_id(session_id))
        try:
            await handle.describe(rpc_timeout=self._rpc_timeout)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        self._remember(session_id)
        return True

    async def end(self, session_id: str, expires_at: float) -> None:
        """Record that the session ends now; durable on every replica once this returns.

        Raises:
            RPCError: Temporal did not take it (the session is then not signed out)."""
        lasts = max(expires_at - time.time(), 0.0) + _MARGIN_S
        # A record made before and closed since refuses the start: the session has ended all the same.
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await self._connection().start_workflow(
                ONCE_WORKFLOW,
                id=_record_id(session_id),
                task_queue=self._task_queue,
                execution_timeout=timedelta(seconds=lasts),
                # A second sign-out of one session (another tab, another replica) finds the first.
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                rpc_timeout=self._rpc_timeout,
            )
        self._remember(session_id)

    def _remember(self, session_id: str) -> None:
        self._ended[session_id] = None
        while len(self._ended) > _KNOWN_ENDED:
            self._ended.popitem(last=False)


def _record_id(session_id: str) -> str:
    # The session id is random and says nothing of whose session it was; the cookie's seal, not this
    # id, is what keeps a session from being made up, so naming the record by it gives nothing away.
    return f"longtools-signout-{session_id}"
