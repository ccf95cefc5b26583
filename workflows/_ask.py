"""Asking the person mid-task, from inside a workflow: ``await ask(...)``. Workflow code only.

A long tool's workflow publishes what it waits for in its memo, which Temporal stores with the
workflow and which ``DescribeWorkflowExecution`` returns with no worker running; so ``tasks/get``
reads it from any API replica, and a task parked in ``input_required`` holds no worker at all.
Answers arrive as a signal, which Temporal accepts durably even while every worker is down.

Keys are unique for the task's life (the spec's rule): a name asked again gets a ``-2``, ``-3``...
suffix. Answers to keys that are not outstanding are ignored, and partial answers are kept until
the rest arrive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ValidationError
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mcp_types import (
        CreateMessageRequest,
        CreateMessageResult,
        ElicitRequest,
        ElicitResult,
        ListRootsRequest,
        ListRootsResult,
    )

    from workflows._inputs import Elicited, InputRequest, InputResponse, elicit
    from workflows._metrics import first_input_requested

TASK_MEMO = "longtools.task"
"""Memo key holding :class:`Published`, the task's state as ``tasks/get`` shows it."""
ANSWER_SIGNAL = "longtools.answer"
"""Signal carrying ``{key: InputResponse as wire JSON}``; sent by ``tasks/update`` and MRTR retries."""

M = TypeVar("M", bound=BaseModel)


class Published(BaseModel):
    """What a running long tool shows the world (the memo under :data:`TASK_MEMO`)."""

    status: str = "working"
    """``working`` or ``input_required``; closed states come from Temporal itself."""
    message: str | None = None
    input_requests: dict[str, dict[str, Any]] = {}
    """Outstanding requests only, as wire JSON."""
    updated_at: str
    """ISO 8601, workflow time of the last change."""


class _Conversation:
    """Per-workflow-run bookkeeping of questions and answers (lives on the workflow instance)."""

    def __init__(self) -> None:
        self.pending: dict[str, InputRequest] = {}
        self.answers: dict[str, InputResponse] = {}
        self.used: set[str] = set()
        self.message: str | None = None
        self.asked = False
        """Whether a question was published yet; rebuilt on replay, where metrics are not recorded."""

    def receive(self, responses: Mapping[str, Any]) -> None:
        for key, response in responses.items():
            request = self.pending.get(key)
            if request is None or key in self.answers:
                continue  # unknown or already answered: ignored, as the spec asks
            try:
                self.answers[key] = _parse(request, response)
            except ValidationError:
                continue  # the API checks shapes first; a malformed answer leaves the key outstanding

    def publish(self) -> None:
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
        )
        workflow.upsert_memo({TASK_MEMO: state.model_dump(mode="json")})
        if outstanding and not self.asked:
            self.asked = True
            first_input_requested()

    def fresh_key(self, name: str) -> str:
        key, n = name, 1
        while key in self.used:
            n += 1
            key = f"{name}-{n}"
        self.used.add(key)
        return key


def _conversation() -> _Conversation:
    # Kept on the workflow instance, so the tool's class needs no base class or extra handler;
    # installing the signal handler on first use is deterministic (same point on every replay),
    # and Temporal buffers signals that arrive before a handler exists.
    instance = workflow.instance()
    conversation: _Conversation | None = getattr(instance, "_longtools_conversation", None)
    if conversation is None:
        conversation = _Conversation()
        instance._longtools_conversation = conversation
        workflow.set_signal_handler(ANSWER_SIGNAL, conversation.receive)
    return conversation


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
    conversation.publish()
    answered = 0
    while answered < len(keys):

        def more_answered(seen: int = answered) -> bool:
            return sum(key in conversation.answers for key in keys.values()) > seen

        await workflow.wait_condition(more_answered)
        answered = sum(key in conversation.answers for key in keys.values())
        if answered < len(keys):
            conversation.publish()  # partial answer: show only what is still outstanding
    responses = {name: conversation.answers.pop(key) for name, key in keys.items()}
    for key in keys.values():
        del conversation.pending[key]
    conversation.publish()
    return responses if isinstance(request, Mapping) else responses["input"]


async def ask_form(message: str, model: type[M]) -> Elicited[M]:
    """Ask for a form built from ``model`` and return the answer validated against it."""
    while True:
        answer = await ask(elicit(message, model))
        if answer.action != "accept":
            return Elicited(action=answer.action, content=None)
        try:
            return Elicited(action="accept", content=model.model_validate(answer.content or {}))
        except ValidationError:
            # The API checked the answer against the form's JSON schema; a model rule the schema
            # cannot express failed. Ask again (under a new key) rather than fail the whole task.
            message = f"That answer was not valid. {message}"


def report(message: str | None) -> None:
    """Set the task's ``statusMessage`` (progress for people polling ``tasks/get``)."""
    conversation = _conversation()
    conversation.message = message
    conversation.publish()


def _parse(request: InputRequest, response: Any) -> InputResponse:
    if isinstance(request, ElicitRequest):
        return ElicitResult.model_validate(response)
    if isinstance(request, CreateMessageRequest):
        return CreateMessageResult.model_validate(response)
    return ListRootsResult.model_validate(response)
