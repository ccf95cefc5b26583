"""Long tools on Temporal, seen from the API: start, read, answer, cancel. API process.

Nothing here is kept in memory between requests. A task *is* a workflow (task id = workflow id):
its status comes from ``DescribeWorkflowExecution`` plus the memo the workflow publishes, its
result from the closed workflow's history, and answers go in as a signal. All three work with
every worker stopped, so ``tasks/get`` and ``tasks/update`` never wait for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache, partial
from typing import Any, Literal

import jsonschema
import structlog
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult
from pydantic import BaseModel, ValidationError
from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.history.v1 import WorkflowExecutionStartedEventAttributes
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import (
    GetWorkflowExecutionHistoryRequest,
    ListWorkflowExecutionsRequest,
    SignalWorkflowExecutionRequest,
)
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.converter import DataConverter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from longtools._protocol import EXIT_META, PROGRESS_META
from longtools._settings import Settings
from longtools.auth import Caller, authorized, principal_hash
from longtools.decisions import (
    ANSWERED_META,
    DECIDERS_ATTRIBUTE,
    EXIT_MEMO,
    EXIT_STATES,
    LEDGER_MEMO,
    DecisionState,
    ExitState,
    Groups,
    Stamp,
    Via,
    Voter,
    approvers_decision,
    decider_names,
    decider_tags,
    decision_of,
    read_ledger,
    tag_ring,
    unstamped,
)
from longtools.notify import NOTIFY_MEMO
from longtools.tasks._changes import Changes, Completion, Mark
from longtools.tasks._ending import Endings
from longtools.tasks._ids import TaskIds
from longtools.tasks._run_once import ARGS_MEMO
from longtools.tools import Registry, Tool, as_wire, to_call_result, tool_error_result
from longtools.workflows import (
    ANSWER_SIGNAL,
    HOST_WORD_SIGNAL,
    PROGRESS_DETAIL,
    TASK_MEMO,
    Progress,
    Published,
)
from longtools.workflows._errors import failure_kinds, task_ending
from longtools.workflows._inputs import marking_of, parse_answer
from longtools.workflows._metrics import CREATED_MEMO, OWNER_MEMO, TITLE_MEMO, TOOL_MEMO

log = structlog.get_logger("longtools.tasks")

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

_TTL_MEMO = "longtools.ttl_ms"
_SUMMARY_MEMO = "longtools.summary"
"""The tool's line about the task (``Tool.summary_of``), recorded at its start: any replica's pages
show it without reading the task's history."""
_STARTED = 1
"""Events a task's view reflects right after its start: the start itself (no change yet)."""
_INTERNAL_ERROR = -32603
OWNER_ATTRIBUTE = SearchAttributeKey.for_keyword("LongtoolsOwner")
"""A task's owner as a keyed hash (search attributes are stored in plaintext, unlike memos), so
Temporal can count a principal's running tasks. Registered in the namespace on first use."""
_NOT_APPROVED: dict[str, str] = {
    "rejected": "Rejected: an approver refused, so nothing was done",
    "expired": "Expired: no decision before the deadline, so nothing was done",
    "escalated": "Expired after it was escalated: no decision before the deadline, so nothing was done",
}
"""The status message of a task whose approval did not happen (its exit state), unless it has one."""
_KINDS = {
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD: "Keyword",
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST: "KeywordList",
}
"""The search attributes' kinds, as ``temporal operator search-attribute create`` names them."""
_START_ATTEMPTS = 3
_KNOWN_TASKS = 10_000
"""Most views kept for ``get`` to answer from (their bytes are bounded too, by ``cache_bytes``)."""
_COUNT_FRESH_S = 1.0
"""How long a principal's count of running tasks is used again, while it is well under the bound:
a visibility query on every start, under load, took most of a start's time (bench B6)."""
_VISIBLE_WITHIN_S = 2.0
"""How long Temporal's visibility may take to show a start, at most (SQL visibility: milliseconds;
Elasticsearch refreshes every second)."""
_ARGUMENTS_KEPT = 1_000
"""Most tasks whose arguments are kept for their tool's ``authorize=`` check on answers."""
_ARGUMENTS_KEPT_BYTES = 4 * 1024 * 1024
"""Most bytes of those arguments kept (as stored: their encoded start payloads)."""
_LIVE_READ_S = 1.0
"""How old a view of a task with a running activity may be before it is read again: the
activity's ``report()`` is a heartbeat, not history, so no watch sees it (the worker sends one a
second at most, see ``build_worker``)."""
_CATCH_UP_S = 0.5
"""At most this long a poll waits for a task's watch to have read it once (``Tasks.get``)."""


class TaskNotFound(Exception):
    """No such task for this caller: unknown, expired, or not a longtools task (all -32602)."""


class AnswerRejected(Exception):
    """An answer does not fit the question it answers; the message says which and why."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        """The key of the question the answer does not fit."""


class PersonMustAnswer(AnswerRejected):
    """A person's question (or a secret) answered by anyone but its answer page: a model, or a
    client library that would fill in the form for its person."""

    def __init__(self, key: str) -> None:
        super().__init__(key, f"The question {key!r} must be answered by a person, only on its answer page")


class AnswerNotAuthorized(Exception):
    """The tool's own check (``authorize=``) refuses the caller who answers, now: nothing was delivered."""


class NotAnApprover(AnswerRejected):
    """A vote from someone the question's rule does not admit (or who was excluded from it)."""

    def __init__(self, key: str) -> None:
        super().__init__(key, f"The question {key!r} is not yours to decide")


class AlreadyVoted(AnswerRejected):
    """A second vote of one person on one question: one vote each."""

    def __init__(self, key: str) -> None:
        super().__init__(key, f"You have already voted on the question {key!r}")


class ProposalChanged(AnswerRejected):
    """A vote cast on a proposal the question no longer asks about (the page was older)."""

    def __init__(self, key: str) -> None:
        super().__init__(
            key, f"The proposal of the question {key!r} has changed: read it again before you vote"
        )


class AnswersTooLarge(Exception):
    """The answers would take the task past ``max_task_answer_bytes``."""


class TooManyTasks(Exception):
    """The caller already has ``max_active_tasks_per_principal`` tasks running."""


class OwnerAttributeMissing(Exception):
    """The namespace lacks the search attribute tasks are counted by, and it cannot be added."""


@dataclass(frozen=True)
class TaskView:
    """One task as ``tasks/get`` shows it (the extension's ``DetailedTask``)."""

    task_id: str
    tool: str
    status: TaskStatus
    created_at: datetime
    updated_at: datetime
    ttl_ms: int
    message: str | None = None
    input_requests: Mapping[str, Mapping[str, Any]] | None = None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    args_digest: str | None = None
    """For a task started with an idempotency key: the digest of its arguments (never on the wire)."""
    answered_bytes: int = 0
    """Bytes of answers the task has received (never on the wire)."""
    mark: Mark | None = None
    """How far into the workflow's history this view was read (never on the wire)."""
    progress: float | None = None
    total: float | None = None
    live: bool = False
    """An activity of it is running, whose ``report()`` (a heartbeat) changes no history: no watch
    sees it, so the view is read again once it is ``_LIVE_READ_S`` old."""
    read_at: float = 0.0
    """``time.monotonic()`` when it was read from Temporal (never on the wire)."""
    spoken: Mapping[str, str] | None = None
    """Per open question, when a host last spoke of it (``Published.spoken``; never on the wire)."""
    summary: str | None = None
    """The tool's line about this task, for the person's pages (``Tool.summary_of``; never on the wire)."""
    exit_state: ExitState | None = None
    """How the task's approval ended (``longtools.decisions.ExitState``), once it has ended."""

    @property
    def status_message(self) -> str | None:
        """The message, with the numbers for clients that show only ``statusMessage``."""
        if self.progress is None:
            return self.message
        numbers = f"{self.progress:g}" + ("" if self.total is None else f"/{self.total:g}")
        return f"{self.message} ({numbers})" if self.message else numbers

    def wire(self, poll_interval_ms: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": _iso(self.created_at),
            "lastUpdatedAt": _iso(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": poll_interval_ms,
        }
        if self.status_message:
            body["statusMessage"] = self.status_message
        if self.progress is not None:
            body["_meta"] = {PROGRESS_META: {"progress": self.progress, "total": self.total}}
        if self.exit_state is not None and self.status in TERMINAL:
            body["_meta"] = {**body.get("_meta", {}), EXIT_META: self.exit_state}
            if self.exit_state in _NOT_APPROVED and "statusMessage" not in body:
                body["statusMessage"] = _NOT_APPROVED[self.exit_state]
        if self.status == "input_required":
            body["inputRequests"] = dict(self.input_requests or {})
        if self.result is not None:
            body["result"] = dict(self.result)
        if self.error is not None:
            body["error"] = dict(self.error)
        return body


class Tasks:
    """Every task operation, over the API's Temporal connection (shared by all requests)."""

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        connection: Callable[[], Client],
        changes: Changes,
        *,
        eager: bool = False,
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._connection = connection
        self._changes = changes
        self.endings = Endings(settings, connection)
        """What makes a task end when it must: a cancel carried out, an MRTR exchange its client left."""
        self.eager = eager
        """Whether a worker shares the connection in this process, so starts may ask for eager execution."""
        self._rpc_timeout = timedelta(seconds=settings.temporal_rpc_timeout_s)
        self._owner_attribute_ready = False
        self._owner_attribute_lock = asyncio.Lock()
        self._known: OrderedDict[str, tuple[str, TaskView, int]] = OrderedDict()
        """The last view read of recently read tasks, with their owner and size, most recent last:
        at most ``_KNOWN_TASKS`` of them, and ``cache_bytes / 2`` bytes in all."""
        self._known_bytes = 0
        self._max_known_bytes = settings.cache_bytes // 2
        self.ids = TaskIds(settings.require_state_keys())
        self.groups = Groups(settings)
        """Who is in which group, for approver rules (``longtools.decisions``)."""
        self._tag_ring = tag_ring(settings)
        # Computed once per principal (an HMAC per request was 2% of a plain tools/call's CPU).
        self.hash_principal: Callable[[str], str] = lru_cache(maxsize=4096)(
            partial(principal_hash, key=self.ids.secret)
        )
        """How logs name a principal: a keyed hash (``principal_hash``), the same in every log event."""
        self._arguments: OrderedDict[str, tuple[BaseModel, int]] = OrderedDict()
        """The arguments of recently answered tasks whose tool has an ``authorize=`` check, with
        their size, most recent last: a task's arguments never change, so each is read once
        (``_arguments_of``), at most ``_ARGUMENTS_KEPT`` of them and ``_ARGUMENTS_KEPT_BYTES`` in all."""
        self._arguments_bytes = 0
        self._counted: dict[str, tuple[float, float, int]] = {}
        """Per principal: when its running tasks were counted (monotonic), the cutoff of that count
        (Unix time: tasks started before it), and the count."""
        self._starting: Counter[str] = Counter()
        """Per principal: this process's starts in flight."""
        self._starts: dict[str, list[float]] = {}
        """Per principal: when this process's recent starts were done (Unix time)."""
        self._polled: OrderedDict[str, float] = OrderedDict()
        """Per task recently shown to a poller: when the next poll is due, by the interval that
        answer suggested (the event loop's clock), most recent last."""

    @property
    def stopping(self) -> bool:
        """Whether this process is stopping: a held round then answers at once."""
        return self._changes.stopping

    async def until_stopping(self) -> None:
        """Return once this process begins to stop."""
        await self._changes.until_stopping()

    async def start(
        self,
        tool: Tool,
        args: BaseModel,
        principal: str,
        *,
        task_id: str | None = None,
        args_digest: str | None = None,
        base: str = "",
    ) -> tuple[TaskView, bool]:
        """Start ``tool``'s workflow; returns once Temporal has it durably (so ``tasks/get`` finds it).
        ``base``: where the caller reached this server (``public_base``), for the links the task's
        notifications carry.

        With a ``task_id`` (derived, ``ids.derived``, from an idempotency key or an exchange) an
        existing task of that id is returned instead of a second one, also to concurrent
        duplicates. The flag says whether the task was created by this call.

        A start whose answer is lost (Temporal slow or unreachable) is tried again under the same
        id, so a start Temporal did accept is found, never left running unknown to anyone.

        Raises:
            TaskNotFound: the existing task under ``task_id`` has expired or is not the caller's.
            TooManyTasks: the principal has ``max_active_tasks_per_principal`` tasks running.
            OwnerAttributeMissing: tasks cannot be counted in this namespace (an operator's fix).
        """
        await self._ensure_owner_attribute()
        try:
            await self._reserve(principal)
        except TooManyTasks:
            if task_id is not None:  # asking again for a task that exists is not a new task
                with contextlib.suppress(TaskNotFound):
                    return await self.get(task_id, principal), False
            raise
        created = False
        try:
            view, created = await self._started(tool, args, principal, task_id, args_digest, base)
        finally:
            self._starting[principal] -= 1
            if not self._starting[principal]:
                del self._starting[principal]
            if created:
                # Once it has started: its StartTime is no later than now, so the count is never
                # short of it (at worst it is counted twice for a moment).
                self._starts.setdefault(principal, []).append(time.time())
        return view, created

    async def _started(
        self,
        tool: Tool,
        args: BaseModel,
        principal: str,
        task_id: str | None,
        args_digest: str | None,
        base: str,
    ) -> tuple[TaskView, bool]:
        ttl_ms = int(self._settings.task_ttl_s * 1000)
        now = datetime.now(UTC)
        memo: dict[str, Any] = {
            TOOL_MEMO: tool.name,
            OWNER_MEMO: principal,
            _TTL_MEMO: ttl_ms,
            CREATED_MEMO: _iso(now),
            TITLE_MEMO: tool.title or tool.name,
            LEDGER_MEMO: 1,  # its workflow signs its own ledger (longtools.workflows._ledger)
        }
        if args_digest is not None:
            memo[ARGS_MEMO] = args_digest
        summary = tool.summary_of(args)
        if summary is not None:
            memo[_SUMMARY_MEMO] = summary
        if self._settings.notifying:
            # The task tells its people (longtools.notify), its links made under where the caller
            # reached this server, its reminders as the deployment has them now.
            memo[NOTIFY_MEMO] = {"base": base, "remind": self._settings.notify_remind_s}
        derived, task_id = task_id is not None, task_id or self.ids.new(principal)
        owner_tag = self.ids.owner_tags(principal)[0]
        for attempt in range(_START_ATTEMPTS):
            try:
                handle = await self._connection().start_workflow(
                    tool.workflow_name,
                    args,
                    id=task_id,
                    task_queue=self._settings.task_queue,
                    memo=memo,
                    search_attributes=TypedSearchAttributes(
                        [SearchAttributePair(OWNER_ATTRIBUTE, owner_tag)]
                    ),
                    # The task's TTL is its workflow's lifetime: an abandoned question does not wait forever.
                    execution_timeout=timedelta(milliseconds=ttl_ms),
                    # One start per id, ever (within Temporal's retention): only a derived id, or a
                    # start tried again, can meet an existing workflow, and that is the task asked for.
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                    request_eager_start=self.eager,
                    rpc_timeout=self._rpc_timeout,
                )
                break
            except WorkflowAlreadyStartedError:
                if not (derived or attempt):
                    raise
                # Ours if an earlier attempt of this call made it (its answer was lost).
                return await self.get(task_id, principal), bool(attempt)
            except RPCError as exc:
                if attempt + 1 == _START_ATTEMPTS or not _maybe_lost(exc):
                    raise
                log.warning("task_start_retried", task_id=task_id, status=exc.status.name)
        log.info("task_started", task_id=handle.id, tool=tool.name, run_id=handle.result_run_id)
        view = TaskView(
            task_id=handle.id,
            tool=tool.name,
            status="working",
            created_at=now,
            updated_at=now,
            ttl_ms=ttl_ms,
            args_digest=args_digest,
            mark=None if handle.result_run_id is None else Mark(handle.result_run_id, _STARTED),
            summary=summary,
        )
        self._know(handle.id, principal, view)
        return view, True

    def follow(self, view: TaskView, poll_interval_ms: int) -> None:
        """Watch the task from now on, for the polls to come, which ``poll_interval_ms`` was
        suggested to: once its watch has read it, a poll of a task that has not changed is answered
        without a call to Temporal (``get``), and one that comes too soon waits (``paced``)."""
        if view.mark is not None and view.status not in TERMINAL:
            # Until a little after the first poll is due: a client that never polls (it listens,
            # or it left) must not keep a long poll open in Temporal for the default linger.
            self._changes.follow(view.task_id, view.mark, for_s=2 * poll_interval_ms / 1000 + 1)
            self._shown(view.task_id, poll_interval_ms)

    async def paced(
        self,
        view: TaskView,
        principal: str,
        poll_interval_ms: Callable[[TaskView], int],
        *,
        may_wait: bool = True,
    ) -> tuple[TaskView, int]:
        """A poll's answer: ``view``, or when the task is working and the poll came before the
        interval the last answer suggested (and ``may_wait``), the task once it changes or that
        interval is over, whichever is first. Returns the view and the interval to suggest now.

        A client that polls sooner than it was asked to costs a held request instead of an answer
        per poll, and sees a change the moment it happens (bench B3, B6).
        """
        due = self._polled.get(view.task_id)
        left = 0.0 if due is None else due - asyncio.get_running_loop().time()
        if may_wait and view.status == "working" and view.mark is not None and left > 0:
            before = view

            def changed(now: TaskView) -> bool:
                return (now.status, now.message) != (before.status, before.message)

            view = await self.wait(view.task_id, principal, changed, left, since=view)
        interval = poll_interval_ms(view)
        self._shown(view.task_id, interval)
        return view, interval

    def _shown(self, task_id: str, poll_interval_ms: int) -> None:
        self._polled[task_id] = asyncio.get_running_loop().time() + poll_interval_ms / 1000
        self._polled.move_to_end(task_id)
        if len(self._polled) > _KNOWN_TASKS:
            self._polled.popitem(last=False)

    async def _reserve(self, principal: str) -> None:
        """Take a place for one more of ``principal``'s running tasks (in ``_starting``), or refuse.

        Running tasks are those Temporal's visibility counts that started before a moment
        ``_VISIBLE_WITHIN_S`` ago, plus the starts this process has made since or is making, which
        it knows itself: visibility shows a start only some milliseconds after it (8 to 45 ms
        measured on the dev server), so counting on it alone let a burst of concurrent starts all
        read the same count and pass the bound together. What a burst can still pass the bound by
        is the starts other API replicas made in those last seconds.

        Raises:
            TooManyTasks: there is no place.
        """
        if await self._running(principal) >= self._settings.max_active_tasks_per_principal:
            raise TooManyTasks
        self._starting[principal] += 1  # no await since the count: nobody else took this place

    def _mine(self, principal: str, cutoff: float) -> int:
        """This process's starts of ``principal``'s tasks that visibility may not count before
        ``cutoff``: those in flight, and those done since."""
        done = self._starts.get(principal)
        if done:
            # Nothing older than the oldest cutoff a count may still be used with matters now.
            oldest = time.time() - _VISIBLE_WITHIN_S - _COUNT_FRESH_S - 1
            done[:] = [mark for mark in done if mark >= oldest]
        return self._starting[principal] + sum(1 for mark in done or () if mark >= cutoff)

    async def _running(self, principal: str) -> int:
        """``principal``'s running tasks: those visibility counts among the tasks started before a
        cutoff, counted now, or a second ago while that count is far enough under the bound that a
        second's difference cannot cross it; plus this process's own since the cutoff (``_mine``,
        taken after the last await, so the caller may take a place before anyone else looks)."""
        now = time.monotonic()
        recent = self._counted.get(principal)
        if recent is not None and now - recent[0] < _COUNT_FRESH_S:
            _, cutoff, counted = recent
            running = counted + self._mine(principal, cutoff)
            if running < self._settings.max_active_tasks_per_principal * 0.9:
                return running
        cutoff = time.time() - _VISIBLE_WITHIN_S
        before = datetime.fromtimestamp(cutoff, UTC).isoformat().replace("+00:00", "Z")
        query = f'{self._owned_by(principal)} AND ExecutionStatus="Running" AND StartTime < "{before}"'
        counted = (await self._connection().count_workflows(query, rpc_timeout=self._rpc_timeout)).count
        if len(self._counted) >= 10_000:  # bounded: one entry per principal starting tasks now
            self._counted.clear()
            self._starts = {key: value for key, value in self._starts.items() if value}
        self._counted[principal] = (now, cutoff, counted)
        return counted + self._mine(principal, cutoff)

    def _owned_by(self, principal: str) -> str:
        """The visibility query of ``principal``'s tasks: tagged with any key of the ring."""
        tags = ", ".join(f'"{tag}"' for tag in self.ids.owner_tags(principal))
        return f"{OWNER_ATTRIBUTE.name} IN ({tags})"

    async def _ensure_owner_attribute(self) -> None:
        """Register the owner search attribute in the namespace, once per process (idempotent)."""
        if self._owner_attribute_ready:
            return
        async with self._owner_attribute_lock:
            if self._owner_attribute_ready:
                return
            client = self._connection()
            namespace = self._settings.temporal_namespace
            listed = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=namespace), timeout=self._rpc_timeout
            )
            wanted = {
                OWNER_ATTRIBUTE.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
                DECIDERS_ATTRIBUTE.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
            }
            missing = {name: kind for name, kind in wanted.items() if name not in listed.custom_attributes}
            if missing:
                try:
                    await client.operator_service.add_search_attributes(
                        AddSearchAttributesRequest(namespace=namespace, search_attributes=missing),
                        timeout=self._rpc_timeout,
                    )
                except RPCError as exc:
                    if exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
                        raise
                    log.error(
                        "owner_attribute_missing",
                        status=exc.status.name,
                        fix="; ".join(
                            f"temporal operator search-attribute create --namespace {namespace} "
                            f"--name {name} --type {_KINDS[kind]}"
                            for name, kind in missing.items()
                        ),
                    )
                    raise OwnerAttributeMissing from None
                log.info("owner_attribute_added", namespace=namespace, names=sorted(missing))
            self._owner_attribute_ready = True

    async def completed_within(self, tool: Tool, task_id: str, within_s: float) -> CallToolResult | None:
        """The task's result if it completes within ``within_s`` seconds; None otherwise.

        One long poll of the workflow's close event: a task that ends otherwise (failed,
        cancelled) or later is left for ``tasks/get`` to tell.
        """
        handle = self._connection().get_workflow_handle(task_id, result_type=tool.output_model)
        try:
            value = await asyncio.wait_for(handle.result(), within_s)  # through continue-as-new too
        except (TimeoutError, WorkflowFailureError):
            return None
        try:
            result = to_call_result(tool, value)
        except ValidationError:
            return None  # tasks/get reports it (and logs why)
        return result if isinstance(result, CallToolResult) else None

    async def get(self, task_id: str, principal: str) -> TaskView:
        """The task as it stands now; raises TaskNotFound for anything the caller may not see.

        Read from Temporal, unless this process already knows it: a task that has ended does not
        change, and a working one not while its watch has seen no change. A task that waits for
        input is always read again: another replica may have just delivered its answers.
        """
        known = self._known.get(task_id)
        if known is not None:
            owner, view, _ = known
            if owner != principal:
                raise TaskNotFound("Task not found")
            if view.status == "working":
                # A task just started here is being read by its watch (a poll right after the
                # start): wait for that read rather than make Temporal serve a second one.
                await self._changes.caught_up(task_id, _CATCH_UP_S)
            current = view.status in TERMINAL or (
                view.status == "working"
                and (not view.live or time.monotonic() - view.read_at < _LIVE_READ_S)
                and view.mark is not None
                and self._changes.unchanged(task_id, view.mark)
            )
            if current:
                self._known.move_to_end(task_id)
                _check_expiry(view)
                return view
            completed = None if view.mark is None else self._changes.completed(task_id, view.mark)
            if completed is not None:  # the watch has its result: nothing to fetch again
                return await self._completed(view, principal, completed)
        view = await self.read(task_id, principal)
        if view.status == "working" and view.mark is not None:
            self._changes.follow(task_id, view.mark)  # so the next poll is answered from here
        return view

    async def to_answer(self, task_id: str, principal: str) -> TaskView:
        """The task as an answer to it must see it: ``get``, or read from Temporal when that says
        it is working. This process's watch learns of a question a moment after Temporal has it,
        and a client that saw the question on another replica must not have its answer ignored
        meanwhile (a task that asks, or has ended, is current already)."""
        view = await self.get(task_id, principal)
        return await self.read(task_id, principal) if view.status == "working" else view

    async def read(self, task_id: str, principal: str) -> TaskView:
        """The task as Temporal has it now (see ``get``)."""
        if not self.ids.may_belong(task_id, principal):
            raise TaskNotFound("Task not found")  # its tag says so: no read needed
        return (await self._read(task_id, principal))[0]

    async def read_as_decider(self, task_id: str, voter: Voter) -> tuple[TaskView, str]:
        """The task, and who owns it, for someone who is not its owner but whom a question of it
        waits for (an approver): read only while one of its questions' rules admits ``voter``, or
        ``voter`` is its owner. Anyone else is told the task is not found, as for a made-up id.

        Raises:
            TaskNotFound: as ``read``; and when no open question of it admits ``voter``.
        """
        view, owner = await self._read(task_id, None)
        if owner == voter.principal:
            return view, owner
        for question in (view.input_requests or {}).values():
            decision = approvers_decision(question)
            if decision is not None and (decision.admits(voter) or decision.voted(voter.principal)):
                return view, owner
        raise TaskNotFound("Task not found")

    async def _read(self, task_id: str, principal: str | None) -> tuple[TaskView, str]:
        """The task and its owner; ``principal`` None reads it whoever owns it (``read_as_decider``)."""
        handle = self._connection().get_workflow_handle(task_id)
        try:
            desc = await handle.describe(rpc_timeout=self._rpc_timeout)
        except RPCError as exc:
            if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                raise TaskNotFound("Task not found") from None
            raise
        memo = await desc.memo()
        tool = self._registry.tools.get(str(memo.get(TOOL_MEMO)))
        owner = str(memo.get(OWNER_MEMO))
        if tool is None or (principal is not None and owner != principal):
            raise TaskNotFound("Task not found")
        ttl_ms = int(memo.get(_TTL_MEMO, 0))
        created = _created(desc, ttl_ms, memo.get(CREATED_MEMO))
        if desc.status == WorkflowExecutionStatus.TIMED_OUT:
            raise TaskNotFound("Task has expired")
        view = TaskView(
            task_id=task_id,
            tool=tool.name,
            status="working",
            created_at=created,
            updated_at=created,
            ttl_ms=ttl_ms,
            args_digest=memo.get(ARGS_MEMO),
            mark=Mark(desc.run_id, desc.raw_description.workflow_execution_info.history_length),
            summary=str(memo[_SUMMARY_MEMO]) if memo.get(_SUMMARY_MEMO) is not None else None,
            exit_state=memo.get(EXIT_MEMO) if memo.get(EXIT_MEMO) in EXIT_STATES else None,
        )
        _check_expiry(view)
        if desc.status in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
            view = _running(view, memo.get(TASK_MEMO))
            view = await self._with_activity_progress(view, desc)
        else:
            view = await self._closed(replace(view, updated_at=desc.close_time or created), tool, desc)
            if view.status == "cancelled":
                # What the tool said last (its clean-up: a rollback, say), which the memo keeps
                # past the end; a task that ended otherwise says so with its result or error.
                view = replace(view, message=_running(view, memo.get(TASK_MEMO)).message)
        if principal is not None:
            self._know(task_id, principal, view)
        return view, owner

    async def _with_activity_progress(self, view: TaskView, desc: WorkflowExecutionDescription) -> TaskView:
        """``view`` with what a running activity last ``report()``-ed in its heartbeat, as one
        progress of the task (``task_progress``), never behind what this process last showed of
        the same step: between a step's activity ending and the workflow's next ``report``, and
        when a second activity of the step starts, the step reads as far as it had come."""
        latest = None
        if desc.raw_description.pending_activities:
            view = replace(view, live=True, read_at=time.monotonic())
            latest = await activity_progress(desc, self._connection().data_converter)
        said = Progress(message=view.message, progress=view.progress, total=view.total)
        shown, at = task_progress(said, view.updated_at, latest)
        progress = shown.progress
        known = self._known.get(view.task_id)
        earlier = known[1].progress if known is not None and known[1].total == shown.total else None
        if (
            progress is not None
            and earlier is not None
            and view.progress is not None
            and view.progress <= earlier <= view.progress + 1  # within the step the workflow is at
            and earlier > progress
        ):
            progress = earlier
        if latest is None and progress == view.progress:
            return view
        return replace(view, message=shown.message, progress=progress, total=shown.total, updated_at=at)

    def _know(self, task_id: str, principal: str, view: TaskView) -> None:
        size = _size(view)
        earlier = self._known.pop(task_id, None)
        if earlier is not None:
            self._known_bytes -= earlier[2]
        if size > self._max_known_bytes:
            return  # a result this large is read again from Temporal when asked for
        self._known[task_id] = (principal, view, size)
        self._known_bytes += size
        while len(self._known) > _KNOWN_TASKS or self._known_bytes > self._max_known_bytes:
            self._known_bytes -= self._known.popitem(last=False)[1][2]

    async def _closed(self, view: TaskView, tool: Tool, desc: WorkflowExecutionDescription) -> TaskView:
        if desc.status == WorkflowExecutionStatus.CANCELED:
            return replace(view, status="cancelled")
        if desc.status == WorkflowExecutionStatus.TERMINATED:
            if desc.raw_description.workflow_extended_info.cancel_requested:
                # Cancelled, and terminated when it did not stop within the cancel's grace (its
                # code kept failing, so it never ran to see the cancel: Endings), or by an operator.
                return replace(view, status="cancelled")
            # By an operator, or by Temporal itself when the task's history outgrew its limits.
            error = {"code": _INTERNAL_ERROR, "message": "The task was terminated before it finished"}
            return replace(view, status="failed", error=error)
        handle = self._connection().get_workflow_handle(
            view.task_id, run_id=desc.run_id, result_type=tool.output_model
        )
        try:
            value = await handle.result(follow_runs=False, rpc_timeout=self._rpc_timeout)
        except WorkflowFailureError as exc:
            return _failed(view, tool, exc)
        return replace(view, status="completed", result=as_wire(_valid_result(view, tool, value)))

    async def answer(
        self,
        view: TaskView,
        responses: Mapping[str, Any],
        *,
        caller: Caller,
        via: Via,
        skip_invalid: bool = False,
        seen: str | None = None,
        passkey: Mapping[str, str] | None = None,
        signed_in_at: str | None = None,
    ) -> list[str]:
        """Check answers against the outstanding questions and deliver the fitting ones durably.
        ``passkey``, ``signed_in_at``: the step-up the page checked for a vote (``StepUp``), which
        goes with it in its stamp for the workflow to check and the ledger to keep.

        ``caller`` is who answers: the tool's own ``authorize=`` check runs again for them, with the
        task's arguments, before anything is delivered (``check_answerer``): a permission withdrawn
        since the task started stops its answers. ``via`` is the way the answer came in:

        - ``"page"``: the answer page, the only way that answers a person's question or a secret
          (``elicit(by=..., sensitive=...)``);
        - ``"form"``: a host's form, answering for its person: ``tasks/update`` (in either era's
          tasks) or the ``inputResponses`` of an MRTR round of a long tool's call;
        - ``"model"``: the ``task_answer`` tool, a model answering;
        - ``"pushed"``: an answer to a question the server pushed (2025 era: on a held
          ``tools/call``, or on ``tasks/result``).

        Any way but ``"page"`` is refused a marked question (``PersonMustAnswer``), whatever the
        client declared: a model, or a library that would fill in its person's form. An answer to a
        decision (``longtools.decisions``) is a vote: ``caller`` must be admitted by its rule
        (``NotAnApprover``), may vote once (``AlreadyVoted``), and ``seen``, the digest of the
        proposal the person was shown, must be the one it asks about now (``ProposalChanged``).

        Each answer goes to the workflow stamped with who gave it and how (``Stamp``, over anything
        the client sent under its key), for the task's ledger.

        Answers to keys that are not outstanding are ignored (the spec's rule for unknown and
        already answered keys); with none outstanding, nothing is checked. Returns the keys
        delivered: none when the task has ended since ``view`` was read (a race, not an outage: the
        caller reads the task again).

        Raises:
            AnswerNotAuthorized: the tool's check refuses ``caller`` (or fails); nothing is sent.
            AnswerRejected: an answer does not fit its question, or ``via`` may not answer it
                (``PersonMustAnswer``), unless ``skip_invalid``, which leaves that question
                outstanding; nothing is sent.
            AnswersTooLarge: the task has taken ``max_task_answer_bytes`` of answers; nothing is sent.
        """
        asked = view.input_requests or {}
        if not asked.keys() & responses.keys():
            return []
        # Who answers before what: a caller refused learns nothing of whether their answers fit.
        await self.check_answerer(view, caller)
        accepted: dict[str, Any] = {}
        once: dict[str, str] = {}
        voter = self.groups.voter(caller.principal, caller.groups)
        for key, response in responses.items():
            request = asked.get(key)
            if request is None:
                continue
            try:
                if via != "page" and marking_of(request).marked:
                    raise PersonMustAnswer(key)
                decision = decision_of(request)
                if decision is not None:
                    _check_vote(key, decision, voter, seen)
                checked = check_answer(key, request, response)
                stamp = Stamp(
                    principal=caller.principal,
                    via=via,
                    groups=voter.groups,
                    digest=None if decision is None else decision.digest,
                    passkey=passkey if decision is not None else None,
                    signed_in_at=signed_in_at if decision is not None else None,
                )
                sent_meta = checked.get("_meta")
                meta = dict(sent_meta) if isinstance(sent_meta, Mapping) else {}
                accepted[key] = {**checked, "_meta": {**meta, ANSWERED_META: stamp.wire()}}
                if decision is not None and decision.rule is not None:
                    # A decision takes one vote of each person, not one answer per question.
                    once[key] = f"{caller.principal}\x00{decision.digest}"
            except AnswerRejected:
                if not skip_invalid:
                    raise
        if not accepted:
            return []
        # Every answer is written to the task's history, whose size Temporal bounds: past this
        # budget the task would fail for good, so the answer is refused instead (answers sent at
        # the same moment to different questions may pass it together).
        # What the callers sent, as the workflow counts it: the stamp is the server's, not theirs.
        size = len(
            json.dumps({key: unstamped(answer) for key, answer in accepted.items()}, separators=(",", ":"))
        )
        if view.answered_bytes + size > self._settings.max_task_answer_bytes:
            raise AnswersTooLarge
        taken = await asyncio.gather(
            *(self._deliver(view.task_id, key, answer, once.get(key, "")) for key, answer in accepted.items())
        )
        delivered = sorted(key for key, took in zip(accepted, taken, strict=True) if took)
        if delivered:
            log.info("task_answered", task_id=view.task_id, keys=delivered)
        else:
            log.info("task_answer_too_late", task_id=view.task_id)  # it ended meanwhile
        return delivered

    async def check_answerer(self, view: TaskView, caller: Caller) -> None:
        """Run the task's tool's ``authorize=`` check, if it has one, for ``caller`` with the task's
        arguments, as a call's round runs it (``longtools.auth.authorized``: deny on error, each
        refusal logged ``tool_not_authorized``). ``answer`` runs it first; a way that must know
        before it answers (the page, before it claims the question) runs it too.

        Raises:
            AnswerNotAuthorized: the check refuses ``caller``, or fails.
        """
        tool = self._registry.tools.get(view.tool)
        if tool is None or tool.authorize is None:
            return
        args = await self._arguments_of(view.task_id, tool)
        # Arguments that no longer fit the tool's model (logged) cannot be checked: refused, as
        # by a check that fails.
        check = tool.authorize if args is not None else _cannot_check
        if not await authorized(
            check, caller, args, tool=tool.name, hash_principal=self.hash_principal, task_id=view.task_id
        ):
            raise AnswerNotAuthorized

    async def _arguments_of(self, task_id: str, tool: Tool) -> BaseModel | None:
        """The arguments ``task_id`` was started with, as ``tool``'s input model: its workflow's
        start input, read from Temporal once and kept (they never change); None when they do not fit
        the model (its code changed since the task started: logged ``authorize_failed``).

        After a continue-as-new, the first run's input, which the call's own round was checked
        with; the current run's when Temporal no longer keeps the first (past its retention).
        """
        kept = self._arguments.get(task_id)
        if kept is not None:
            self._arguments.move_to_end(task_id)
            return kept[0]
        started = await self._start_of(task_id, "")
        if started.continued_execution_run_id and started.first_execution_run_id:
            with contextlib.suppress(TaskNotFound):
                started = await self._start_of(task_id, started.first_execution_run_id)
        payloads = started.input.payloads
        [value] = await self._connection().data_converter.decode(payloads) if payloads else [None]
        try:
            args = tool.input_model.model_validate(value)
        except ValidationError:
            log.exception("authorize_failed", tool=tool.name, task_id=task_id)
            return None
        size = sum(payload.ByteSize() for payload in payloads)
        if size <= _ARGUMENTS_KEPT_BYTES:
            self._arguments[task_id] = (args, size)
            self._arguments_bytes += size
            while len(self._arguments) > _ARGUMENTS_KEPT or self._arguments_bytes > _ARGUMENTS_KEPT_BYTES:
                self._arguments_bytes -= self._arguments.popitem(last=False)[1][1]
        return args

    async def _start_of(self, task_id: str, run_id: str) -> WorkflowExecutionStartedEventAttributes:
        """The first event of a run of ``task_id`` (the current one without ``run_id``): its start.

        Raises:
            TaskNotFound: Temporal has no such run (any more).
        """
        client = self._connection()
        try:
            page = await client.workflow_service.get_workflow_execution_history(
                GetWorkflowExecutionHistoryRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(workflow_id=task_id, run_id=run_id),
                    maximum_page_size=1,
                ),
                retry=True,
                timeout=self._rpc_timeout,
            )
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            raise TaskNotFound("Task not found") from None
        events = page.history.events
        if not events or not events[0].HasField("workflow_execution_started_event_attributes"):
            raise TaskNotFound("Task not found")
        return events[0].workflow_execution_started_event_attributes

    async def hear(self, view: TaskView, words: Mapping[str, str]) -> None:
        """Note a host's word on person's questions it was shown as URL requests (``{key: action}``,
        ``HOST_WORD_SIGNAL``): never an answer; the task then shows when it was said, so that it is
        not asked again at once. A task that has ended meanwhile has nothing to note."""
        client = self._connection()
        try:
            await client.get_workflow_handle(view.task_id).signal(
                HOST_WORD_SIGNAL, dict(words), rpc_timeout=self._rpc_timeout
            )
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        log.info("task_host_spoke", task_id=view.task_id, keys=sorted(words))

    async def _deliver(self, task_id: str, key: str, answer: Any, once: str = "") -> bool:
        """Signal one answer, once per question (and ``once``: a voter, for a decision's votes):
        Temporal drops a signal whose request id it has seen in this run, so answers to one question
        sent again or in parallel (replays, retries, two replicas) cost the task's history one
        signal, not one each. False when the task has closed (or is gone) meanwhile."""
        client = self._connection()
        unique = f"{task_id}\x00{key}" + (f"\x00{once}" if once else "")
        request = SignalWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=task_id),
            signal_name=ANSWER_SIGNAL,
            input=Payloads(payloads=await client.data_converter.encode([{key: answer}])),
            identity=client.identity,
            request_id=hashlib.sha256(unique.encode()).hexdigest()[:32],
        )
        try:
            await client.workflow_service.signal_workflow_execution(
                request, retry=True, timeout=self._rpc_timeout
            )
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return True

    async def deciding(self, voter: Voter, page_size: int = 100) -> list[str]:
        """The ids of running tasks whose open question waits on ``voter``, by name or group, or was
        asked of them as its requester, newest first (found by their keyed tags: Temporal's
        visibility lags a moment, and a tag only narrows: read each task before showing it)."""
        try:
            await self._ensure_owner_attribute()
        except OwnerAttributeMissing:
            return []
        tags = ", ".join(f'"{tag}"' for tag in decider_tags(self._tag_ring, decider_names(voter)))
        client = self._connection()
        page = await client.workflow_service.list_workflow_executions(
            ListWorkflowExecutionsRequest(
                namespace=client.namespace,
                page_size=page_size,
                query=f'{DECIDERS_ATTRIBUTE.name} IN ({tags}) AND ExecutionStatus="Running"',
            ),
            retry=True,
            timeout=self._rpc_timeout,
        )
        return [info.execution.workflow_id for info in page.executions]

    async def ledger(self, view: TaskView) -> list[dict[str, Any]]:
        """The task's ledger, every entry signed, oldest first (``longtools.decisions``): read from
        its history, from its first run on, with no worker needed. The caller has read ``view``."""
        client = self._connection()
        desc = await client.get_workflow_handle(view.task_id).describe(rpc_timeout=self._rpc_timeout)
        first = desc.raw_description.workflow_execution_info.first_run_id or desc.run_id
        return await read_ledger(client, view.task_id, first, rpc_timeout=self._rpc_timeout)

    async def owned(self, principal: str, page_size: int, token: bytes) -> tuple[list[str], bytes]:
        """One page of the ids of ``principal``'s tasks, newest first, and the token of the next
        page (empty after the last). Temporal's visibility lags a start by a moment, and its owner
        tag is a hash: read each task (``get``) before showing it."""
        try:
            # A query naming an attribute the namespace lacks fails: before the first start (a
            # fresh `serve`), a listing must register it too.
            await self._ensure_owner_attribute()
        except OwnerAttributeMissing:
            return [], b""  # no task can have started without it
        client = self._connection()
        page = await client.workflow_service.list_workflow_executions(
            ListWorkflowExecutionsRequest(
                namespace=client.namespace,
                page_size=page_size,
                next_page_token=token,
                query=self._owned_by(principal),
            ),
            retry=True,
            timeout=self._rpc_timeout,
        )
        return [info.execution.workflow_id for info in page.executions], page.next_page_token

    async def cancel(self, view: TaskView) -> None:
        """Ask the workflow to stop, and make sure it does: one still running ``cancel_grace_s``
        later is terminated (``Endings``), and reads ``cancelled`` then. A task already closed stays
        as it is.

        The ending is started first: once it is, the task ends even if this process dies now (the
        ending asks the task to cancel too). The request made here is what ends a task at once,
        with no worker needed for the request to be durable.
        """
        if view.status in TERMINAL:
            return
        await self.endings.after_cancel(view.task_id)
        try:
            await self._connection().get_workflow_handle(view.task_id).cancel(rpc_timeout=self._rpc_timeout)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:  # closed in the meantime: nothing to cancel
                raise
        log.info("task_cancel_requested", task_id=view.task_id)

    async def cancel_and_wait(self, view: TaskView, principal: str, within_s: float) -> TaskView:
        """Cancel the task and wait up to ``within_s`` for it to end; the task then (a task with no
        worker running ends when one starts: the cancellation is durable already)."""
        if view.status in TERMINAL:
            return view
        await self.cancel(view)
        return await self.wait(
            view.task_id, principal, lambda now: now.status in TERMINAL, within_s, since=view
        )

    async def wait(
        self,
        task_id: str,
        principal: str,
        done: Callable[[TaskView], bool],
        within_s: float,
        seen: Callable[[TaskView], Awaitable[None]] | None = None,
        *,
        since: TaskView | None = None,
    ) -> TaskView:
        """Read the task until ``done(view)``, reading again on each change (``Changes``), until
        ``within_s`` seconds pass or the process stops; returns the last view either way.

        ``seen`` is called with every view read. ``since`` is a view the caller has just read: the
        wait starts from it instead of reading the task first. Works with no worker running.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        view = since if since is not None and since.mark is not None else await self.read(task_id, principal)
        while True:
            if seen is not None:
                await seen(view)
            if done(view) or view.mark is None:
                return view
            left = deadline - loop.time()
            # The deadline is checked here too: a watch may say "changed" more than once for one
            # change (a run it does not know yet), and each answer costs a read.
            if left <= 0:
                return view
            if not await self._changes.after(
                task_id, view.mark, min(left, _LIVE_READ_S) if view.live else left
            ):
                if not view.live or loop.time() >= deadline:
                    return view
                view = await self.read(task_id, principal)  # an activity's progress moves on
                continue
            view = await self.changed(view, principal)

    def when_changed(self, view: TaskView, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once the task may have changed after ``view`` (``changed`` then gives
        it; a live view's progress, once it is ``_LIVE_READ_S`` old) or the process stops, unless
        the function returned is called first: ``wait`` with no coroutine, as a listen stream at
        rest waits (``Changes.when_changed``). It must not block."""
        assert view.mark is not None
        if not view.live:
            return self._changes.when_changed(view.task_id, view.mark, callback)

        def stop() -> None:
            cancel()
            timer.cancel()

        def first() -> None:
            stop()
            callback()

        cancel = self._changes.when_changed(view.task_id, view.mark, first)
        timer = asyncio.get_running_loop().call_later(_LIVE_READ_S, first)
        return stop

    async def changed(self, view: TaskView, principal: str) -> TaskView:
        """The task after a change (``wait``, ``when_changed``): from what the change published,
        when that was all it did (no call to Temporal), else read again."""
        assert view.mark is not None
        if view.status in TERMINAL or view.live:  # a live view's activity progress is not history
            return await self.read(view.task_id, principal)
        completed = self._changes.completed(view.task_id, view.mark)
        if completed is not None:
            return await self._completed(view, principal, completed)
        upserted = self._changes.upserted(view.task_id, view.mark, TASK_MEMO)
        if upserted is None:
            return await self.read(view.task_id, principal)
        mark, payload = upserted
        [published] = await self._connection().data_converter.decode([payload])
        before = replace(
            view,
            status="working",
            message=None,
            input_requests=None,
            spoken=None,
            progress=None,
            total=None,
            live=False,
            mark=mark,
        )
        changed = _running(before, published)
        _check_expiry(changed)
        self._know(view.task_id, principal, changed)
        return changed

    async def _completed(self, view: TaskView, principal: str, completed: Completion) -> TaskView:
        """The task after its close event, whose result the watch has: no history to fetch again."""
        tool = self._registry.tools[view.tool]
        hints = None if tool.output_model is None else [tool.output_model]
        [value] = await self._connection().data_converter.decode(completed.result.payloads, hints)
        result = as_wire(_valid_result(view, tool, value))
        at, mark = completed.at, completed.mark
        exit_state = None
        if view.mark is not None:
            # Its exit state, upserted as it ended: in the same change as its end, unless the
            # signing of its ledger took a workflow task of its own; then the task is read again.
            upserted = self._changes.upserted(view.task_id, view.mark, EXIT_MEMO)
            if upserted is None:
                return await self.read(view.task_id, principal)
            [exit_state] = await self._connection().data_converter.decode([upserted[1]])
        ended = replace(view, status="completed", result=result, updated_at=at, mark=mark)
        if exit_state in EXIT_STATES:
            ended = replace(ended, exit_state=exit_state)
        ended = replace(ended, message=None, progress=None, total=None, live=False)
        self._know(view.task_id, principal, ended)
        return ended


async def _cannot_check(caller: Caller, args: Any) -> bool:
    return False


def _check_vote(key: str, decision: DecisionState, voter: Voter, seen: str | None) -> None:
    """Raise why ``voter`` may not vote on ``decision`` now (see ``Tasks.answer``)."""
    if decision.voted(voter.principal):
        raise AlreadyVoted(key)
    if not decision.admits(voter):
        raise NotAnApprover(key)
    if seen is not None and seen != decision.digest:
        raise ProposalChanged(key)


def check_answer(key: str, request: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """``response`` as wire JSON if it answers ``request`` (its kind, and a form's schema)."""
    method = request.get("method")
    try:
        answer = parse_answer(method, response)
        schema = request.get("params", {}).get("requestedSchema")
        if isinstance(answer, ElicitResult) and answer.action == "accept" and schema is not None:
            jsonschema.validate(answer.content or {}, schema)
        return as_wire(answer)
    except ValidationError as exc:
        detail = "; ".join(err["msg"] for err in exc.errors()[:3])
        raise AnswerRejected(key, f"inputResponses[{key!r}] is not an answer to {method}: {detail}") from None
    except jsonschema.ValidationError as exc:
        field = ".".join(str(part) for part in exc.absolute_path)
        where = f" (field {field!r})" if field else ""
        raise AnswerRejected(
            key, f"inputResponses[{key!r}] does not fit the requested form{where}: {exc.message}"
        ) from None


def _valid_result(view: TaskView, tool: Tool, value: Any) -> CallToolResult | InputRequiredResult:
    """The tool's result as a call's, or a tool error when it does not fit the tool's output."""
    try:
        return to_call_result(tool, value)
    except ValidationError:
        log.exception("task_result_invalid", task_id=view.task_id, tool=tool.name)
        return tool_error_result(f"Error executing tool {tool.name}")


def _size(view: TaskView) -> int:
    """About how many bytes ``view`` holds: what it carries as JSON, and a little for the rest."""
    carried = view.result or view.error or view.input_requests
    return 512 + (len(json.dumps(carried, separators=(",", ":"), default=str)) if carried else 0)


def _check_expiry(view: TaskView) -> None:
    if datetime.now(UTC) > view.created_at + timedelta(milliseconds=view.ttl_ms):
        raise TaskNotFound("Task has expired")


async def activity_progress(
    desc: WorkflowExecutionDescription, converter: DataConverter
) -> tuple[datetime, Progress] | None:
    """What a running activity of the workflow last ``report()``-ed (a heartbeat), and when: the
    newest of its pending activities' that carries one."""
    latest: tuple[datetime, Progress] | None = None
    for pending in desc.raw_description.pending_activities:
        if not pending.heartbeat_details.payloads or not pending.HasField("last_heartbeat_time"):
            continue
        at = pending.last_heartbeat_time.ToDatetime(UTC)
        if latest is not None and at <= latest[0]:
            continue
        details = await converter.decode(pending.heartbeat_details.payloads)
        record = details[0] if details and isinstance(details[0], Mapping) else {}
        if PROGRESS_DETAIL in record:
            with contextlib.suppress(ValidationError):
                latest = (at, Progress.model_validate(record[PROGRESS_DETAIL]))
    return latest


def task_progress(
    said: Progress, said_at: datetime, reported: tuple[datetime, Progress] | None
) -> tuple[Progress, datetime]:
    """A task's one progress, and when it last changed: what its workflow said (``said``, at
    ``said_at``) with what a running activity last reported in its heartbeat (``reported``, from
    ``activity_progress``).

    The workflow's numbers count steps done: ``report(progress=k, total=n)`` says k of n steps are
    done and step k+1 runs. A running activity's ``report(progress=j, total=m)`` says how far that
    step is, so the task is at ``k + j/m`` of n (the step's share floored to hundredths, so it
    never reads done before the workflow says so). When the workflow gave no numbers, those of
    the activity stand as they are, if it spoke last. The message is whichever was said last.
    """
    if reported is None:
        return said, said_at
    at, activity = reported
    newer = at >= said_at
    message = (activity.message or said.message) if newer else said.message
    progress, total = said.progress, said.total
    if said.progress is not None:
        if activity.progress is not None and activity.total:
            share = min(activity.progress / activity.total, 1.0)
            progress = said.progress + int(share * 100 + 1e-9) / 100
            if total is not None:
                progress = min(progress, max(total, said.progress))
    elif newer:
        progress, total = activity.progress, activity.total
    return Progress(message=message, progress=progress, total=total), max(at, said_at)


def _running(view: TaskView, published: Any) -> TaskView:
    if not isinstance(published, Mapping):
        return view  # started, the workflow has not published anything yet
    state = Published.model_validate(published)
    view = replace(
        view,
        message=state.message,
        updated_at=datetime.fromisoformat(state.updated_at),
        answered_bytes=state.answered_bytes,
        progress=state.progress,
        total=state.total,
    )
    if state.status == "input_required" and state.input_requests:
        return replace(
            view, status="input_required", input_requests=state.input_requests, spoken=state.spoken
        )
    return view


def _failed(view: TaskView, tool: Tool, exc: WorkflowFailureError) -> TaskView:
    status, ours = task_ending(exc.cause)
    if status == "cancelled":
        return replace(view, status="cancelled")
    if ours is not None and status == "completed":
        return replace(view, status="completed", result=as_wire(tool_error_result(ours.message)))
    if ours is not None:
        code = ours.details[0] if ours.details and isinstance(ours.details[0], int) else _INTERNAL_ERROR
        return replace(view, status="failed", error={"code": code, "message": ours.message})
    # Anything else is a bug or an outage in the tool. The log names the failure's kind only: its
    # message may quote the tool's arguments or results.
    log.warning("task_failed", task_id=view.task_id, tool=tool.name, cause=failure_kinds(exc.cause))
    return replace(
        view, status="failed", error={"code": _INTERNAL_ERROR, "message": f"Error executing tool {tool.name}"}
    )


def _created(desc: WorkflowExecutionDescription, ttl_ms: int, recorded: Any) -> datetime:
    """When the task was created: as the API recorded it at the start (the memo is carried into
    every run), or for a task started before that record, its execution's end less its TTL.

    After the workflow continued as new, ``start_time`` is the latest run's start; the
    execution's expiration stays where the first start put it (start + ``execution_timeout``).
    """
    if isinstance(recorded, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(recorded)
    expiration = desc.raw_description.workflow_extended_info.execution_expiration_time
    if expiration.seconds or expiration.nanos:
        return expiration.ToDatetime(tzinfo=UTC) - timedelta(milliseconds=ttl_ms)
    return desc.start_time


def _maybe_lost(exc: RPCError) -> bool:
    """Whether a call that failed with ``exc`` may still have taken effect in Temporal."""
    return exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE, RPCStatusCode.CANCELLED)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
