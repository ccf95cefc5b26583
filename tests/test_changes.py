"""Ours (issue 14): ``Changes``, the one way the API waits for a workflow, on a real Temporal.

No worker runs here: the watch long-polls the workflow's history, which Temporal serves without
one. A run-once record (``longtools.Once``) is the workflow: it takes a signal with no worker.
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.client import Client, WorkflowHandle

from service import Settings
from service.tasks import Changes, Mailboxes, Mark
from workflows._once import ONCE_WORKFLOW, OUTCOME_SIGNAL


async def _started(client: Client) -> tuple[WorkflowHandle[object, object], Mark]:
    handle: WorkflowHandle[object, object] = await client.start_workflow(
        ONCE_WORKFLOW, id=f"changes-{uuid.uuid4()}", task_queue=f"tq-{uuid.uuid4()}"
    )
    description = await handle.describe()
    length = description.raw_description.workflow_execution_info.history_length
    return handle, Mark(description.run_id, length)


async def test_a_change_between_the_read_and_the_wait_is_not_missed(client: Client) -> None:
    handle, seen = await _started(client)
    await handle.signal(OUTCOME_SIGNAL, {"result": {}})  # lands after the read, before the wait
    changes = Changes(lambda: client, client.namespace)
    try:
        assert await changes.after(handle.id, seen, within_s=60) is True
    finally:
        await changes.aclose()


async def test_a_change_while_waiting_wakes_every_waiter_of_the_workflow(client: Client) -> None:
    handle, seen = await _started(client)
    changes = Changes(lambda: client, client.namespace)
    try:
        waiters = [asyncio.create_task(changes.after(handle.id, seen, within_s=60)) for _ in range(5)]
        await asyncio.sleep(0)  # the waiters are registered
        await handle.signal(OUTCOME_SIGNAL, {"result": {}})
        assert await asyncio.gather(*waiters) == [True] * 5
        assert changes.unchanged(handle.id, seen) is False
    finally:
        await changes.aclose()


async def test_no_change_is_a_wait_that_runs_out_and_says_so(client: Client) -> None:
    handle, seen = await _started(client)
    changes = Changes(lambda: client, client.namespace)
    try:
        assert await changes.after(handle.id, seen, within_s=1.0) is False
        assert changes.unchanged(handle.id, seen) is True  # read to its end, nothing new
    finally:
        await changes.aclose()


async def test_a_stopping_process_ends_every_wait_at_once(client: Client) -> None:
    handle, seen = await _started(client)
    changes = Changes(lambda: client, client.namespace)
    try:
        changes.stop()
        assert await changes.after(handle.id, seen, within_s=60) is False
    finally:
        await changes.aclose()


async def test_a_workflow_that_does_not_exist_ends_the_wait_for_a_read(client: Client) -> None:
    changes = Changes(lambda: client, client.namespace)
    try:
        assert await changes.after("no-such-workflow", Mark(str(uuid.uuid4()), 1), within_s=60) is True
    finally:
        await changes.aclose()


async def test_an_answer_posted_on_another_replica_reaches_the_box_it_waits_in(client: Client) -> None:
    """Issue 15: ``Mailboxes`` of two API processes (here two instances on one Temporal, no worker):
    an answer posted where nobody waits is recorded in Temporal, before or while the holder waits."""
    settings = Settings(task_queue=f"tq-{uuid.uuid4()}")
    holder_changes = Changes(lambda: client, client.namespace)
    holder = Mailboxes(settings, lambda: client, holder_changes)
    other = Mailboxes(settings, lambda: client, Changes(lambda: client, client.namespace))
    try:
        early = uuid.uuid4().hex
        await other.post(early, {"result": {"action": "accept"}}, ttl_s=60)
        assert await holder.take(early, ttl_s=60) == {"result": {"action": "accept"}}

        late = uuid.uuid4().hex
        waiting = asyncio.create_task(holder.take(late, ttl_s=60))
        await asyncio.sleep(1.0)  # past the holder's wait in memory: it looks in Temporal by now
        await other.post(late, {"result": {"action": "decline"}}, ttl_s=60)
        async with asyncio.timeout(30):
            assert await waiting == {"result": {"action": "decline"}}

        here = uuid.uuid4().hex
        waiting = asyncio.create_task(holder.take(here, ttl_s=60))
        await asyncio.sleep(0)
        await holder.post(here, {"result": {"action": "cancel"}}, ttl_s=60)  # in memory, no record
        assert await waiting == {"result": {"action": "cancel"}}
        assert [
            execution async for execution in client.list_workflows(f"WorkflowId = 'longtools-answer-{here}'")
        ] == []
    finally:
        await holder_changes.aclose()
