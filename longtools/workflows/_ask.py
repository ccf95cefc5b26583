"""Asking the person mid-task, from inside a workflow: ``await ask(...)``. Workflow code only.

A long tool's workflow publishes what it waits for in its memo, which Temporal stores with the
workflow and which ``DescribeWorkflowExecution`` returns with no worker running; so ``tasks/get``
reads it from any API replica, and a task parked in ``input_required`` holds no worker at all.
Answers arrive as a signal, which Temporal accepts durably even while every worker is down.

Keys are unique for the task's life (the spec's rule): a name asked again gets a ``-2``, ``-3``...
suffix. Answers to keys that are not outstanding are ignored, and partial answers are kept until
the rest arrive. An answer that does not parse is not dropped in silence: its question is asked
again under a new key, so a client that thinks it answered sees a new question, not a task that
stays "working".

Whatever this module issues (memo upserts, markers) becomes part of every tool's history. A change
to *which* commands it issues, or when, must go behind ``workflow.patched``: a task that waits
for a person while longtools is upgraded replays its history on the new code (the recorded
histories in ``tests/histories`` check this).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any, NoReturn, TypeVar, overload

from pydantic import BaseModel, ValidationError
from temporalio import activity, workflow
from temporalio.worker import (
    ContinueAsNewInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

with workflow.unsafe.imports_passed_through():
    from mcp_types import (
        CreateMessageRequest,
        CreateMessageResult,
        ElicitRequest,
        ElicitRequestFormParams,
        ElicitResult,
        ListRootsRequest,
        ListRootsResult,
    )

    from longtools.decisions import (
        DECIDERS_ATTRIBUTE,
        Approved,
        Approvers,
        Deciding,
        Decision,
        DecisionEnd,
        DecisionState,
        Expired,
        Rejected,
        Stamp,
        StepUp,
        decision_of,
        digest_of,
        ledger_time,
        unstamped,
        with_decision,
    )
    from longtools.workflows._inputs import (
        AnsweredBy,
        Elicited,
        FieldError,
        InputRequest,
        InputResponse,
        Reask,
        elicit,
        free_text,
        marking_of,
        parse_answer,
        reasked,
    )
    from longtools.workflows._ledger import Recorder, recorder
    from longtools.workflows._metrics import CARRIED_MEMO, TOOL_MEMO, first_input_requested, task_start_time
    from longtools.workflows._notify import announcer

TASK_MEMO = "longtools.task"
_REASK_PATCH = "longtools.reask-unparsable-answer"
_MAX_MESSAGE = 2000
"""Characters of a ``report()`` message kept: the memo is written whole on every change."""
"""Memo key holding :class:`Published`, the task's state as ``tasks/get`` shows it."""
PROGRESS_DETAIL = "longtools.progress"
"""Key of the heartbeat detail ``report()`` sends from inside an activity: ``{key: Progress}``."""
ANSWER_SIGNAL = "longtools.answer"
"""Signal carrying ``{key: InputResponse as wire JSON}``; sent by ``tasks/update`` and MRTR retries."""
HOST_WORD_SIGNAL = "longtools.host-word"
"""Signal carrying ``{key: action}``: what a host said of a person's question it was shown as a
URL-mode request (``accept``: its person went to the page; ``decline``/``cancel``: they did not).
Never an answer (only the page answers a person's question); the task shows when it was said, so
that clients are not asked the same thing again at once (see ``Published.spoken``)."""

M = TypeVar("M", bound=BaseModel)


class Progress(BaseModel):
    """How far a task is, as ``report()`` last said: a message and, optionally, numbers."""

    message: str | None = None
    progress: float | None = None
    total: float | None = None


class Published(BaseModel):
    """What a running long tool shows the world (the memo under :data:`TASK_MEMO`)."""

    status: str = "working"
    """``working`` or ``input_required``; closed states come from Temporal itself."""
    message: str | None = None
    input_requests: dict[str, dict[str, Any]] = {}
    """Outstanding requests only, as wire JSON."""
    updated_at: str
    """ISO 8601, workflow time of the last change."""
    answered_bytes: int = 0
    """Bytes of answers (as JSON) the task has received so far; the API refuses answers past its bound."""
    progress: float | None = None
    """How much of the work is done, in the tool's own unit (``report(progress=...)``)."""
    total: float | None = None
    """How much work there is in all, when the tool knows (``report(total=...)``)."""
    spoken: dict[str, str] = {}
    """Per outstanding question, when a host last said something of it (:data:`HOST_WORD_SIGNAL`;
    ISO 8601, workflow time). Left out of the memo while empty, as before it existed."""


class _Conversation:
    """Per-workflow-run bookkeeping of questions and answers (lives on the workflow instance)."""

    def __init__(self) -> None:
        self.pending: dict[str, InputRequest] = {}
        self.answers: dict[str, InputResponse] = {}
        self.used: set[str] = set()
        self.counts: dict[str, int] = {}
        """Per name, the highest suffix its keys used: enough to keep keys unique in the next run."""
        self.names: dict[str, str] = {}
        """The name each key was asked under (``ask``'s mapping key)."""
        self.moved: dict[str, str] = {}
        """Keys asked again under a new key, because their answer did not parse."""
        self.spoken: dict[str, str] = {}
        """When a host last spoke of each question (``Published.spoken``)."""
        self.deciding: dict[str, Deciding[Any]] = {}
        """Open decisions by their question's key: their answers are votes (``decide``)."""
        self.message: str | None = None
        self.progress: float | None = None
        self.total: float | None = None
        self.answered_bytes = 0
        self.asked = False
        """Whether a question was published yet; rebuilt on replay, where metrics are not recorded."""

    def receive(self, responses: Mapping[str, Any]) -> None:
        # The bytes the answerers sent (LONGTOOLS_MAX_TASK_ANSWER_BYTES), not the API's stamps.
        sent = {key: unstamped(response) for key, response in responses.items()}
        self.answered_bytes += len(json.dumps(sent, separators=(",", ":")))
        reasked = False
        for key, response in responses.items():
            deciding = self.deciding.get(key)
            if deciding is not None:
                if isinstance(response, Mapping):
                    deciding.take(response, recorder().append)
                continue
            request = self.pending.get(key)
            if request is None or key in self.answers:
                continue  # unknown or already answered: ignored, as the spec asks
            try:
                self.answers[key] = parse_answer(request.method, response)
                _record_answer(key, request, response)
            except ValidationError:
                # The API checks shapes first, so only a mismatch between its version and this one
                # gets here. Asked again under a new key: the client sees a question, not a hang.
                if workflow.patched(_REASK_PATCH):
                    name = self.names.get(key, key)
                    self.moved[key] = fresh = self.fresh_key(name)
                    self.names[fresh] = name
                    self.pending[fresh] = self.pending.pop(key)
                    reasked = True
        if reasked:
            self.publish()

    def hear(self, words: Mapping[str, Any]) -> None:
        """A host's word on questions it was shown as URL requests: noted, never taken as an answer."""
        heard = False
        for key in words:
            if key in self.pending and key not in self.answers:
                self.spoken[key] = workflow.now().isoformat()
                heard = True
        if heard:
            self.publish()

    def current(self, key: str) -> str:
        """The key a question asked under ``key`` is outstanding under now."""
        while key in self.moved:
            key = self.moved[key]
        return key

    def publish(self) -> None:
        workflow.upsert_memo(self.published())

    def published(self) -> dict[str, Any]:
        """The memo change that shows the task as it stands (``publish`` makes it; a ledger's
        flush makes it with the entries it signed, one change for both)."""
        outstanding = {
            key: request.model_dump(mode="json", by_alias=True, exclude_none=True)
            for key, request in self.pending.items()
            if key not in self.answers
        }
        state = Published(
            status="input_required" if outstanding else "working",
            message=self.message,
            input_requests=outstanding,
            updated_at=workflow.now().isoformat(),
            answered_bytes=self.answered_bytes,
            progress=self.progress,
            total=self.total,
            spoken={key: at for key, at in self.spoken.items() if key in outstanding},
        )
        if outstanding and not self.asked:
            self.asked = True
            first_input_requested()
        return {TASK_MEMO: state.model_dump(mode="json", exclude=None if state.spoken else {"spoken"})}

    def fresh_key(self, name: str) -> str:
        key, n = name, 1
        while key in self.used:
            n += 1
            key = f"{name}-{n}"
        self.used.add(key)
        self.counts[name] = max(n, self.counts.get(name, 0))
        return key

    def carried(self) -> dict[str, Any]:
        """What the next run needs to go on as the same task (see :class:`CarryConversation`)."""
        return {
            "started_at": task_start_time().isoformat(),
            "keys": self.counts,
            "message": self.message,
            "progress": self.progress,
            "total": self.total,
            "answered_bytes": self.answered_bytes,
        }

    def resume(self, carried: Mapping[str, Any]) -> None:
        """Pick up where the previous run of this task left off (it continued as new)."""
        counts = carried.get("keys")
        for name, highest in (counts if isinstance(counts, dict) else {}).items():
            self.counts[name] = int(highest)
            self.used.update(name if n == 1 else f"{name}-{n}" for n in range(1, int(highest) + 1))
        message = carried.get("message")
        self.message = message if isinstance(message, str) else None
        progress, total = carried.get("progress"), carried.get("total")
        self.progress = float(progress) if isinstance(progress, int | float) else None
        self.total = float(total) if isinstance(total, int | float) else None
        self.answered_bytes = int(carried.get("answered_bytes") or 0)


def _started_conversation() -> _Conversation | None:
    """The conversation of this workflow run, if it has asked or reported anything yet."""
    conversation: _Conversation | None = getattr(workflow.instance(), "_longtools_conversation", None)
    return conversation


def _conversation() -> _Conversation:
    # Kept on the workflow instance, so the tool's class needs no base class or extra handler;
    # installing the signal handler on first use is deterministic (same point on every replay),
    # and Temporal buffers signals that arrive before a handler exists.
    conversation = _started_conversation()
    if conversation is None:
        conversation = _Conversation()
        carried = workflow.memo_value(CARRIED_MEMO, None)
        if isinstance(carried, Mapping):
            conversation.resume(carried)
        workflow.instance()._longtools_conversation = conversation
        workflow.set_signal_handler(ANSWER_SIGNAL, conversation.receive)
        workflow.set_signal_handler(HOST_WORD_SIGNAL, conversation.hear)
    return conversation


class CarryConversation(Interceptor):
    """Worker interceptor: a task whose workflow continues as new goes on as the same task.

    Continue-as-new keeps only the memo the task started with, so the next run would forget what
    the task showed (its progress) and which question keys it used, and could ask a new question
    under a used key. The memo the run has now, with what ``ask`` needs to go on, is handed to the
    next run; tool authors call ``workflow.continue_as_new`` as usual.
    """

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _CarryInbound


class _CarryInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_CarryOutbound(outbound))


class _CarryOutbound(WorkflowOutboundInterceptor):
    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        if workflow.memo_value(TOOL_MEMO, None) is None:  # not a longtools task
            super().continue_as_new(input)
        conversation = _started_conversation()
        memo = dict(workflow.memo())
        if conversation is not None:
            memo[CARRIED_MEMO] = conversation.carried()
        elif CARRIED_MEMO not in memo:
            memo[CARRIED_MEMO] = {"started_at": task_start_time().isoformat()}
        input.memo = {**memo, **(input.memo or {})}
        super().continue_as_new(input)


@overload
async def ask(request: ElicitRequest) -> ElicitResult: ...
@overload
async def ask(request: CreateMessageRequest) -> CreateMessageResult: ...
@overload
async def ask(request: ListRootsRequest) -> ListRootsResult: ...
@overload
async def ask(request: Mapping[str, InputRequest]) -> dict[str, InputResponse]: ...


async def ask(request: InputRequest | Mapping[str, InputRequest]) -> InputResponse | dict[str, InputResponse]:
    """Ask the client and wait (durably, without holding a worker) until every question is answered.

    One request returns its answer; a mapping ``{name: request}`` asks them all at once and returns
    ``{name: answer}``. The API has already checked each answer's shape against the question; it is
    parsed again on arrival because the workflow trusts nothing it did not check itself.
    """
    conversation = _conversation()
    named = dict(request) if isinstance(request, Mapping) else {"input": request}
    keys = {name: conversation.fresh_key(name) for name in named}
    for name, key in keys.items():
        conversation.pending[key] = named[name]
        conversation.names[key] = name

    def answered_now() -> int:
        return sum(conversation.current(key) in conversation.answers for key in keys.values())

    ledger = recorder()
    await ledger.flush(memo=conversation.published())
    # A person's question (one the page answers: it carries its proposal) is told to its person.
    told = announcer()
    people = {
        key: state
        for key in keys.values()
        if told.enabled
        and (state := decision_of(conversation.pending[key].model_dump(mode="json", by_alias=True)))
        is not None
    }
    for key, state in people.items():
        await told.announce("waiting", question=key, state=state)
    since, reminded = workflow.now(), 0
    answered = 0
    while answered < len(keys):

        def more_answered(seen: int = answered) -> bool:
            return answered_now() > seen

        due = told.reminder_due(since, reminded) if people else None
        try:
            await workflow.wait_condition(
                more_answered, timeout=None if due is None else due - workflow.now()
            )
        except TimeoutError:
            reminded += 1
            for key, state in people.items():
                if conversation.current(key) not in conversation.answers:
                    await told.announce(
                        "reminder", question=conversation.current(key), state=state, reminder=reminded
                    )
            continue
        answered = answered_now()
        if answered < len(keys):
            conversation.publish()  # partial answer: show only what is still outstanding
    keys = {name: conversation.current(key) for name, key in keys.items()}
    responses = {name: conversation.answers.pop(key) for name, key in keys.items()}
    for key in keys.values():
        del conversation.pending[key]
    conversation.publish()
    return responses if isinstance(request, Mapping) else responses["input"]


def _record_answer(key: str, request: InputRequest, response: Any) -> None:
    """An answer in the ledger: who gave it and how (the API's stamp), and its digest (none for a
    secret: a digest of a short secret can be guessed back)."""
    wire = dict(response) if isinstance(response, Mapping) else {}
    stamp = Stamp.of(wire)
    secret = marking_of(request.model_dump(mode="json", by_alias=True)).sensitive
    data: dict[str, Any] = {
        "question": key,
        "by": None if stamp is None else stamp.principal,
        "via": None if stamp is None else stamp.via,
        "action": wire.get("action"),
        "proposal": None if stamp is None else stamp.digest,
    }
    if not secret:
        data["answer"] = digest_of({name: value for name, value in wire.items() if name != "_meta"})
    recorder().append("answer", data)


@overload
async def ask_form(
    message: str,
    model: type[M],
    *,
    by: AnsweredBy = "client",
    sensitive: bool = False,
    summary: str | None = None,
) -> Elicited[M]: ...
@overload
async def ask_form(
    message: str,
    model: type[M],
    *,
    by: Approvers,
    timeout: timedelta | None = None,  # noqa: ASYNC109  a durable deadline, not the caller's wait
    summary: str | None = None,
    step_up: StepUp | None = None,
) -> Decision[M]: ...
@overload
async def ask_form(
    message: str,
    model: type[M],
    *,
    by: AnsweredBy | Approvers = "person",
    timeout: timedelta,  # noqa: ASYNC109  a durable deadline, not the caller's wait
    summary: str | None = None,
    step_up: StepUp | None = None,
) -> Decision[M]: ...
@overload
async def ask_form(
    message: str,
    model: type[M],
    *,
    by: AnsweredBy | Approvers = "person",
    timeout: timedelta | None = None,  # noqa: ASYNC109  a durable deadline, not the caller's wait
    summary: str | None = None,
    step_up: StepUp,
) -> Decision[M]: ...


async def ask_form(
    message: str,
    model: type[M],
    *,
    by: AnsweredBy | Approvers = "client",
    sensitive: bool = False,
    timeout: timedelta | None = None,  # noqa: ASYNC109  the question's deadline (a durable timer)
    summary: str | None = None,
    step_up: StepUp | None = None,
) -> Elicited[M] | Decision[M]:
    """Ask for a form built from ``model`` and return the answer validated against it.

    ``by="person"``: a person must answer (an approval a model may not give); ``sensitive=True``:
    a secret, answered only on the answer page (see :func:`longtools.elicit`). A person's question
    shows the proposal (what will happen: the tool, its arguments, who asked, and ``summary``).

    ``by=Approvers(...)``, a ``timeout`` or a ``step_up``: a decision (``longtools.decisions``), which
    returns ``Approved``, ``Rejected`` or ``Expired``, each of which the workflow must handle.
    ``step_up="passkey"``: an approval counts only signed with a passkey the approver registered,
    over this proposal; ``"recent"``: only from an approver who signed in lately (``step_up_max_age_s``).
    """
    if isinstance(by, Approvers) or timeout is not None or step_up is not None:
        if by == "client" or sensitive:
            raise ValueError(
                "ask_form(timeout=..., step_up=...) is for a person's decision: by='person' or "
                "by=Approvers(...)"
            )
        rule = None if by == "person" else by
        return await _decide(message, model, rule, timeout, summary, step_up)
    first = elicit(message, model, by=by, sensitive=sensitive)
    if by == "person" or sensitive:
        first = with_decision(first, DecisionState(proposal=recorder().proposal(summary)))
    asking = first
    while True:
        answer = await ask(asking)
        if answer.action != "accept":
            return Elicited(action=answer.action, content=None)
        try:
            return Elicited(action="accept", content=model.model_validate(answer.content or {}))
        except ValidationError as exc:
            # The API checked the answer against the form's JSON schema; a model rule the schema
            # cannot express failed. Ask again (under a new key) rather than fail the whole task,
            # saying why: the person who answered reads the reason, which is about their answer.
            # A reason may quote the answer, so a secret's message names fields and kinds only;
            # the reasons themselves go where only the answer page reads them (REASK_META).
            schema = (
                first.params.requested_schema if isinstance(first.params, ElicitRequestFormParams) else {}
            )
            reask = _reask(exc, message, answer.content or {}, schema, sensitive=sensitive)
            said = "; ".join(
                f"{error.field}: {error.kind if sensitive else error.message}"
                if error.field
                else (error.kind if sensitive else error.message)
                for error in reask.errors
            )[:500]
            asking = reasked(first, reask, f"That answer was not valid: {said}. {message}")


async def _decide(
    message: str,
    model: type[M],
    rule: Approvers | None,
    within: timedelta | None,
    summary: str | None,
    step_up: StepUp | None,
) -> Decision[M]:
    """Ask a person's question as a decision and wait, durably, until it is met, refused or past its
    deadline. Its votes arrive as answers (``_Conversation.receive``); its state is in the question."""
    conversation = _conversation()
    ledger = recorder()
    now = workflow.now()
    deadline = None if within is None else now + within
    escalate_at = None if rule is None or rule.escalate is None else now + rule.escalate.after
    state = DecisionState(
        proposal=ledger.proposal(summary),
        rule=rule,
        deadline=None if deadline is None else ledger_time(deadline),
        step_up=step_up,
    )
    key = conversation.fresh_key("approval")
    deciding = Deciding(key, state, model)
    base = elicit(message, model, by="person")
    conversation.deciding[key] = deciding
    conversation.names[key] = "approval"
    conversation.pending[key] = with_decision(base, state)
    asked = {
        "question": key,
        "proposal": state.digest,
        "rule": None if rule is None else rule.wire(),
        "deadline": state.deadline,
    }
    ledger.append("question", asked if step_up is None else {**asked, "stepUp": step_up})
    conversation.publish()
    await _tag_deciders(ledger, state)
    told = announcer()
    await told.announce("waiting", question=key, state=state)
    reminded, widened = 0, list[str]()
    remind_at = told.reminder_due(now, reminded)
    while deciding.state.outcome is None:
        due = [at for at in (deadline, escalate_at, remind_at) if at is not None]
        left = (min(due) - workflow.now()) if due else None
        try:
            if left is None or left > timedelta(0):
                await workflow.wait_condition(lambda: deciding.changed, timeout=left)
        except TimeoutError:
            pass
        if deciding.changed:
            deciding.changed = False
        elif escalate_at is not None and workflow.now() >= escalate_at:
            escalate_at = None
            deciding.state = replace(deciding.state, escalated_at=ledger_time(workflow.now()))
            widened = [] if rule is None or rule.escalate is None else list(rule.escalate.groups)
            ledger.append("escalated", {"question": key, "groups": widened})
            await told.announce("escalated", question=key, state=deciding.state, widened=widened)
        elif (
            remind_at is not None
            and workflow.now() >= remind_at
            and (deadline is None or workflow.now() < deadline)
        ):
            reminded += 1
            remind_at = told.reminder_due(now, reminded)
            await told.announce(
                "reminder", question=key, state=deciding.state, reminder=reminded, widened=widened
            )
            continue
        elif deadline is not None and workflow.now() >= deadline:
            ended: DecisionEnd = "escalated" if deciding.state.escalated_at else "expired"
            deciding.state = replace(deciding.state, outcome=ended)
        conversation.pending[key] = with_decision(base, deciding.state)
        await ledger.flush(memo=conversation.published())
    del conversation.deciding[key], conversation.pending[key]
    conversation.publish()
    final = deciding.state
    ledger.append("decided", {"question": key, "outcome": final.outcome, "proposal": final.digest})
    ledger.outcome = None if final.outcome == "approved" else final.outcome
    if ledger.enabled:
        workflow.upsert_search_attributes([DECIDERS_ATTRIBUTE.value_unset()])
    await ledger.flush()
    if final.outcome == "approved" and deciding.content is not None:
        return Approved(content=deciding.content, votes=final.votes, digest=final.digest)
    if final.outcome == "rejected":
        return Rejected(by=final.by or "", digest=final.digest)
    return Expired(escalated=final.outcome == "escalated", votes=final.votes)


async def _tag_deciders(ledger: Recorder, state: DecisionState) -> None:
    """Make the task findable by everyone its question waits for (``/decisions``)."""
    if not ledger.enabled:
        return
    rule = state.rule
    names = {f"p:{state.proposal.requester}"}
    if rule is not None:
        names |= {f"p:{name}" for name in rule.principals} | {f"g:{group}" for group in rule.groups}
        if rule.escalate is not None:
            names |= {f"g:{group}" for group in rule.escalate.groups}
    tags = await ledger.flush(sorted(names))
    workflow.upsert_search_attributes([DECIDERS_ATTRIBUTE.value_set(tags)])


def _reask(
    exc: ValidationError,
    message: str,
    content: Mapping[str, Any],
    schema: Mapping[str, Any],
    *,
    sensitive: bool,
) -> Reask:
    """Why an answer did not validate, per field (``when``: "must be after today"), and the values
    of it a person may see again: all of them, but a secret's free text."""
    errors = tuple(
        FieldError(
            field=".".join(str(part) for part in error["loc"]),
            kind=str(error["type"]),
            message=str(error["msg"]).removeprefix("Value error, "),
        )
        for error in exc.errors(include_url=False, include_input=False)[:5]
    )
    properties = schema.get("properties") or {}
    values = {
        name: value
        for name, value in content.items()
        if not sensitive or (isinstance(properties.get(name), Mapping) and not free_text(properties[name]))
    }
    return Reask(message=message, errors=errors, values=values)


def report(message: str | None = None, *, progress: float | None = None, total: float | None = None) -> None:
    """Show how far the task is: its ``statusMessage`` and, with numbers, a progress bar.

    ``progress`` is how much is done and ``total`` how much there is; clients show them as
    progress notifications, ``_meta`` of the task and the message's "(3/10)". Each call replaces
    what the last one said. From workflow code the numbers count steps done (k of n: step k+1
    runs); from a running activity they say how far the running step is, so the task shows one
    progress, k + j/m of n (``tasks/_gateway.task_progress``; docs/writing-tools.md, "Progress").

    From workflow code it updates the task's memo (one command; keep it to changes a person
    cares about, since each is history). From inside an activity it is a heartbeat: nothing is
    written to history, the API reads it from the activity's heartbeat details, and the activity
    notices a cancellation by it like by any heartbeat. (An activity that keeps a checkpoint of its
    own in its heartbeat details replaces this with its next ``activity.heartbeat(checkpoint)``.)

    Raises:
        ValueError: ``progress`` or ``total`` is negative, or ``progress`` is past ``total``.
    """
    if min(progress or 0, total or 0) < 0:
        raise ValueError(f"report(progress={progress}, total={total}): neither may be negative")
    if progress is not None and total is not None and progress > total:
        raise ValueError(f"report(progress={progress}, total={total}): progress is past the total")
    shown = Progress(
        message=message if message is None else message[:_MAX_MESSAGE], progress=progress, total=total
    )
    if activity.in_activity():
        activity.heartbeat({PROGRESS_DETAIL: shown.model_dump(mode="json")})
        return
    conversation = _conversation()
    conversation.message, conversation.progress, conversation.total = (
        shown.message,
        shown.progress,
        shown.total,
    )
    conversation.publish()
