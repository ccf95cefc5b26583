"""Ours (issue 14): ``Changes``, the one way the API waits for a workflow, on a real Temporal.

No worker runs here, but where a workflow must end: the watch long-polls the workflow's history,
which Temporal serves without one. A run-once record (``longtools.Once``) is the workflow: it
takes a signal with no worker.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from longtools import Registry, Settings
from longtools.auth import ANONYMOUS, Caller
from longtools.tasks import Changes, Mailboxes, Mark, Tasks, TaskView
from longtools.tasks._changes import _Watch
from longtools.workflows._once import ONCE_WORKFLOW, OUTCOME_SIGNAL, OnceRecord


async def _started(client: Client, queue: str | None = None) -> tuple[WorkflowHandle[object, object], Mark]:
    handle: WorkflowHandle[object, object] = await client.start_workflow(
        ONCE_WORKFLOW, id=f"changes-{uuid.uuid4()}", task_queue=queue or f"tq-{uuid.uuid4()}"
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


async def test_a_completion_is_read_from_the_close_event_and_nothing_else_is(client: Client) -> None:
    """Issue 17: a reader after a run's completion takes its result from the watch, not from a
    second history fetch; any other ending (here a cancellation) leaves the reader to read."""
    queue = f"tq-{uuid.uuid4()}"
    changes = Changes(lambda: client, client.namespace)
    try:
        async with Worker(client, task_queue=queue, workflows=[OnceRecord]):
            completed, completed_seen = await _started(client, queue)
            await completed.signal(OUTCOME_SIGNAL, {"result": {}})  # the record then completes
            await completed.result()
            cancelled, cancelled_seen = await _started(client, queue)
            await cancelled.cancel()
            with pytest.raises(WorkflowFailureError):
                await cancelled.result()
        async with asyncio.timeout(30):
            assert await changes.after(completed.id, completed_seen, within_s=30) is True
            assert await changes.after(cancelled.id, cancelled_seen, within_s=30) is True
        assert changes.completed(cancelled.id, cancelled_seen) is None
        completion = changes.completed(completed.id, completed_seen)
        assert completion is not None
        described = await completed.describe()
        assert completion.mark == Mark(
            described.run_id, described.raw_description.workflow_execution_info.history_length
        )
        assert completion.at == described.close_time
        assert await client.data_converter.decode(completion.result.payloads) == [None]
        # A reader that has seen the completion already gets nothing more from the watch.
        assert changes.completed(completed.id, completion.mark) is None
    finally:
        await changes.aclose()


@workflow.defn(name="changes.UpsertThenEnd")
class _UpsertThenEnd:
    """Upserts its memo, then ends: in the same workflow task, or (``wait``) after a signal."""

    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self, wait: bool) -> str:
        workflow.upsert_memo({"longtools.exit": "completed"})
        if wait:
            await workflow.wait_condition(lambda: self.go)
        return "done"

    @workflow.signal
    def proceed(self) -> None:
        self.go = True


async def test_an_end_keeps_the_memo_its_own_workflow_task_upserted(client: Client) -> None:
    """A task's exit state is upserted in the workflow task that ends it (the ledger's end): a
    reader of the completion takes it from the watch with the result, and reads the task again
    only when the upsert came earlier (the memo may have changed since)."""
    queue = f"tq-{uuid.uuid4()}"
    changes = Changes(lambda: client, client.namespace)
    try:
        async with Worker(
            client, task_queue=queue, workflows=[_UpsertThenEnd], workflow_runner=UnsandboxedWorkflowRunner()
        ):
            ended: dict[bool, tuple[WorkflowHandle[object, object], Mark]] = {}
            for wait in (False, True):
                handle: WorkflowHandle[object, object] = await client.start_workflow(
                    "changes.UpsertThenEnd", wait, id=f"changes-{uuid.uuid4()}", task_queue=queue
                )
                seen = Mark((await handle.describe()).run_id, 1)
                if wait:
                    async with asyncio.timeout(30):
                        assert await changes.after(handle.id, seen, within_s=30) is True  # the upsert
                    await handle.signal("proceed")
                assert await handle.result() == "done"
                ended[wait] = handle, seen
            for wait, (handle, seen) in ended.items():
                # The end is the history's last event: wait until the watch has read it.
                length = (await handle.describe()).raw_description.workflow_execution_info.history_length
                async with asyncio.timeout(30):
                    assert await changes.after(handle.id, Mark(seen.run_id, length - 1), within_s=30) is True
                assert changes.completed(handle.id, seen) is not None
                upserted = changes.upserted(handle.id, seen, "longtools.exit")
                if wait:
                    assert upserted is None
                else:
                    assert upserted is not None
                    assert await client.data_converter.decode([upserted[1]]) == ["completed"]
    finally:
        await changes.aclose()


async def test_a_notice_between_the_check_and_the_wait_wakes_the_waiter(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REVIEW 9: the waiter read the watch's notice only once its wait had begun, so a notice in
    between (forced here, right after the check says "no change yet") was missed to the deadline."""
    handle, seen = await _started(client)
    changes = Changes(lambda: client, client.namespace)
    try:
        changes.follow(handle.id, seen)
        watch = changes._watches[handle.id]
        async with asyncio.timeout(30):
            await _until(watch, lambda: watch.caught_up)  # first read done: now in a long poll
        real = watch.changed_since

        def check_then_change(mark: Mark) -> bool:
            answer = real(mark)
            if not answer:  # what the watch does on a change, right after the check
                watch.changed_at = seen.events + 1
                watch.notify()
            return answer

        monkeypatch.setattr(watch, "changed_since", check_then_change)
        async with asyncio.timeout(10):  # the wait's own deadline is a minute
            assert await changes.after(handle.id, seen, within_s=60) is True
    finally:
        await changes.aclose()


async def test_a_watch_nobody_wants_stops_and_a_reset_run_gets_its_own(client: Client) -> None:
    """REVIEW 2 and 5: a wait that ends lets its watch go (no long poll left in Temporal) when it
    asks for no linger; a watch of a run that ended is not reused for a newer run of the same id."""
    handle, seen = await _started(client)
    changes = Changes(lambda: client, client.namespace, linger_s=60)
    try:
        assert await changes.after(handle.id, seen, within_s=0.5, linger_s=0) is False
        watch = changes._watches.get(handle.id)
        if watch is not None:
            async with asyncio.timeout(10):
                await _until(watch, lambda: watch.ended)
        await handle.terminate()
        async with asyncio.timeout(30):
            assert await changes.after(handle.id, seen, within_s=30) is True  # it ended: read it
        # The same id started again (as after retention, or a reset's new run): a new watch waits
        # for its changes instead of saying "changed" at once, for ever.
        again = await client.start_workflow(
            ONCE_WORKFLOW,
            id=handle.id,
            task_queue=f"tq-{uuid.uuid4()}",
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        described = await again.describe()
        fresh = Mark(described.run_id, described.raw_description.workflow_execution_info.history_length)
        assert await changes.after(handle.id, fresh, within_s=1.0) is False
        await again.signal(OUTCOME_SIGNAL, {"result": {}})
        async with asyncio.timeout(30):
            assert await changes.after(handle.id, fresh, within_s=30) is True
        await again.terminate()
    finally:
        await changes.aclose()


async def test_what_watches_keep_is_bounded_by_bytes(client: Client) -> None:
    """REVIEW 14: closed watches kept their results whatever their size; past the budget, the
    oldest idle ones are dropped (their readers read Temporal again)."""
    queue = f"tq-{uuid.uuid4()}"
    changes = Changes(lambda: client, client.namespace, max_bytes=3_000)
    try:
        async with Worker(
            client, task_queue=queue, workflows=[Echo], workflow_runner=UnsandboxedWorkflowRunner()
        ):
            marks: list[tuple[str, Mark]] = []
            for _ in range(5):
                handle = await client.start_workflow(
                    Echo.run, "x" * 1_000, id=f"echo-{uuid.uuid4()}", task_queue=queue
                )
                described = await handle.describe()
                seen = Mark(
                    described.run_id, described.raw_description.workflow_execution_info.history_length
                )
                changes.follow(handle.id, seen)
                await handle.result()
                async with asyncio.timeout(30):
                    assert await changes.after(handle.id, seen, within_s=30) is True
                marks.append((handle.id, seen))
        kept = [changes.completed(workflow_id, seen) for workflow_id, seen in marks]
        assert changes._kept <= 3_000
        assert kept[-1] is not None  # the latest is kept
        assert None in kept  # the oldest went
    finally:
        await changes.aclose()


@workflow.defn(name="tests.echo")
class Echo:
    @workflow.run
    async def run(self, text: str) -> str:
        return text


async def _until(watch: _Watch, condition: Callable[[], bool]) -> None:
    """Until ``condition()`` holds, woken by the watch's notices (bounded by the caller)."""
    while True:
        notice = watch.generation
        if condition():
            return
        await notice.wait()


async def test_an_answer_that_meets_a_closed_task_is_not_an_outage(client: Client) -> None:
    """REVIEW 13: an answer signalled to a workflow that had closed since it was read got NOT_FOUND,
    which every path reported as "the task service is unavailable"; now nothing is delivered, and
    the caller reads the task again (it tells the rest)."""
    settings = Settings(
        state_keys=base64.urlsafe_b64encode(bytes(32)).decode(), task_queue=f"tq-{uuid.uuid4()}"
    )
    changes = Changes(lambda: client, client.namespace)
    tasks = Tasks(settings, Registry(), lambda: client, changes)
    try:
        handle, _ = await _started(client)
        question = {
            "method": "elicitation/create",
            "params": {"message": "Go on?", "requestedSchema": {"type": "object", "properties": {}}},
        }
        asked = TaskView(
            task_id=handle.id,
            tool="any",
            status="input_required",
            created_at=datetime.now(UTC),
            updated_at=datetime.now(UTC),
            ttl_ms=60_000,
            input_requests={"go": question},
        )
        await handle.terminate()  # closed after it was read
        answer = {"go": {"action": "accept", "content": {}}}
        assert await tasks.answer(asked, answer, caller=Caller(principal=ANONYMOUS), via="form") == []
    finally:
        await changes.aclose()


async def test_a_callback_waiter_is_called_once_on_a_change_and_never_once_cancelled(client: Client) -> None:
    """Ours (issue 35): ``when_changed``, ``after`` with no coroutine (a listen stream at rest): it
    keeps the watch as a waiter does, is called once the workflow changes, not at all once
    cancelled, and at once when it registers after the change or while the process stops."""
    handle, seen = await _started(client)
    changes = Changes(lambda: client, client.namespace, linger_s=0)
    try:
        called: list[str] = []
        changed = asyncio.Event()

        def on_change() -> None:
            called.append("change")
            changed.set()

        changes.when_changed(handle.id, seen, on_change)
        cancel = changes.when_changed(handle.id, seen, lambda: called.append("cancelled"))
        cancel()
        watch = changes._watches[handle.id]
        assert watch.waiters == 1 and watch._generation is None  # no event: nobody awaits
        async with asyncio.timeout(30):
            await _until(watch, lambda: watch.caught_up)
            assert not called  # caught up, no change: nobody is called
            await handle.signal(OUTCOME_SIGNAL, {"result": {}})
            await changed.wait()
        assert called == ["change"] and watch.waiters == 0
        late = asyncio.Event()
        changes.when_changed(handle.id, seen, late.set)  # the change has come already
        async with asyncio.timeout(5):
            await late.wait()
        changes.stop()
        stopped = asyncio.Event()
        changes.when_changed(handle.id, Mark(seen.run_id, 10_000), stopped.set)
        async with asyncio.timeout(5):
            await stopped.wait()
    finally:
        await changes.aclose()
