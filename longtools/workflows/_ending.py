"""The end of a task that must end: cancelled, then terminated if it does not stop. Worker process.

The API starts ``longtools.End`` for a task it was asked to cancel (``tasks/cancel``,
``task_cancel``, 2025's ``tasks/cancel``), and, delayed, for a task whose MRTR exchange the client may
have left (re-armed by each round it comes back for; see ``longtools/tasks/_ending.py``). When it
runs it asks the task to cancel, gives it ``grace_s`` to stop, and then terminates it if it is still
running: a task whose workflow code keeps failing (a bug: a ``KeyError`` in ``run``) never runs to
see a cancel, and Temporal would retry its workflow task until its TTL.

A task terminated after a cancel request reads as ``cancelled`` (the API reads the request from
the task's description). Terminating a task that has ended already does nothing, so an ending
that comes late (an exchange that finished, a task that stopped in time) is harmless.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

END_WORKFLOW = "longtools.End"
TERMINATE_ACTIVITY = "longtools.terminate_cancelled"
"""The activity that terminates the task (``longtools/activities/_ending.py``): workflow code
may cancel another workflow but not terminate it."""
_TERMINATE_TIMEOUT = timedelta(seconds=30)
_TERMINATE_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30))


class Ending(BaseModel):
    task_id: str
    grace_s: float
    """Seconds the task has to stop once asked, before it is terminated."""
    released: bool = False
    """An MRTR exchange's ending given up for good (its task waits for a person): does nothing."""


@workflow.defn(name=END_WORKFLOW)
class EndTask:
    @workflow.run
    async def run(self, ending: Ending) -> bool:
        """Whether the task had to be terminated."""
        if ending.released:
            return False
        try:
            # Asked again when the API already asked (a cancel): Temporal keeps the one request.
            await workflow.get_external_workflow_handle(ending.task_id).cancel()
        except ApplicationError:
            return False  # no such workflow (any more): nothing to end
        await workflow.sleep(ending.grace_s)
        terminated: bool = await workflow.execute_activity(
            TERMINATE_ACTIVITY,
            ending.task_id,
            start_to_close_timeout=_TERMINATE_TIMEOUT,
            retry_policy=_TERMINATE_RETRY,
            result_type=bool,
        )
        return terminated
