"""MRTR rounds played out within one 2025-era request, their questions pushed. API process.

Handlers are written once, as rounds: a round either finishes or asks (``InputRequiredResult``).
A 2026-era client carries each round itself. A 2025-era client cannot, so here the rounds run
inside its one request: each question goes to the client as a server request on that request's
stream, and the round is run again with the answers and the state, exactly as the client would
have sent them. A long tool's "still working" round (a state and no question) is run again at
once; the round itself waits for the workflow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import anyio
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitRequest,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from longtools.tools import as_wire
from longtools.workflows import InputRequest

__all__ = [
    "FIRST_MODE_VERSION",
    "RELATED_TASK_META",
    "Interrupted",
    "Rounds",
    "Unanswered",
    "ask",
    "is_legacy",
    "needs_capability",
    "play_rounds",
]

R = TypeVar("R")
Rounds = Callable[[str | None, dict[str, Any] | None], Awaitable[R | InputRequiredResult]]
"""One round: given the state and the answers of the round before (None on the first), its outcome."""

RELATED_TASK_META = "io.modelcontextprotocol/related-task"
"""``_meta`` key tying a 2025-11-25 message to the task it belongs to."""
FIRST_MODE_VERSION = "2025-11-25"
"""Elicitation gained ``mode`` (form or url) in this revision; earlier clients know forms only."""


class Interrupted(Exception):
    """The process began to stop while the call's work goes on elsewhere (a long tool's task)."""


class Unanswered(Exception):
    """The client answered a pushed question with an error, or with something that is no answer."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"The client did not answer the question {key!r}: {detail}")


def is_legacy(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS


async def play_rounds(
    ctx: ServerRequestContext[Any, Any],
    rounds: Rounds[R],
    *,
    stopping: Callable[[], bool],
    holding: Callable[[], AbstractContextManager[None]],
) -> R:
    """Run ``rounds`` until one finishes, pushing each round's questions to the client; each wait
    for answers is counted by ``holding`` (the held-round bounds).

    Raises:
        Unanswered: the client answered a question with an error.
        Interrupted: a round came back "still working" because the process is stopping.
        MCPError: whatever a round raises (-32021 when the client cannot answer what it asks).
    """
    state: str | None = None
    answers: dict[str, Any] | None = None
    while True:
        outcome = await rounds(state, answers)
        if isinstance(outcome, InputRequiredResult):
            asked = outcome
        else:
            replayed = _replayed_ask(outcome)
            if replayed is None:
                return outcome
            asked = replayed
        state = asked.request_state
        questions = asked.input_requests or {}
        if not questions and stopping():
            # A held round answers at once while the process stops; running it again would spin.
            raise Interrupted
        if not questions:
            answers = None
            continue
        with holding():
            answers = await ask(ctx, questions)


def _replayed_ask(outcome: object) -> InputRequiredResult | None:
    """The round's questions when it asks as the wire JSON a run-once record replays (a
    side-effecting tool's continuation round, a keyed call); None when it does not ask."""
    if isinstance(outcome, dict) and outcome.get("resultType") == "input_required":
        return InputRequiredResult.model_validate(outcome)
    return None


def needs_capability(exc: MCPError) -> str | None:
    """What a -32021 says the client lacks, in words; None for any other error."""
    if exc.error.code != MISSING_REQUIRED_CLIENT_CAPABILITY:
        return None
    data = exc.error.data
    required = data.get("requiredCapabilities") if isinstance(data, dict) else None
    names = sorted(required) if isinstance(required, dict) and required else ["a client capability"]
    return ", ".join(names)


async def ask(
    ctx: ServerRequestContext[Any, Any],
    questions: Mapping[str, InputRequest],
    *,
    related_task: str | None = None,
) -> dict[str, Any]:
    """Push ``questions`` to the client at once, related to this request (and to ``related_task``
    when they are a task's); their answers by key, as wire JSON.

    Raises:
        Unanswered: the client answered a question with an error, or with no answer to it.
    """
    answers: dict[str, Any] = {}

    async def one(key: str, question: InputRequest) -> None:
        answers[key] = await _push(ctx, key, question, related_task)

    try:
        async with anyio.create_task_group() as tg:
            for key, question in questions.items():
                tg.start_soon(one, key, question)
    except ExceptionGroup as failed:  # the first question that failed speaks for the round
        raise failed.exceptions[0] from None
    return answers


async def _push(
    ctx: ServerRequestContext[Any, Any], key: str, question: InputRequest, related_task: str | None
) -> dict[str, Any]:
    result_type: type[BaseModel]
    if isinstance(question, ElicitRequest):
        result_type = ElicitResult
        if ctx.protocol_version < FIRST_MODE_VERSION:
            question = question.model_copy(
                update={"params": question.params.model_copy(update={"mode": None})}
            )
    elif isinstance(question, CreateMessageRequest):
        result_type = CreateMessageResult
    else:
        result_type = ListRootsResult
    if related_task is not None:
        wire = as_wire(question)
        wire.setdefault("params", {}).setdefault("_meta", {})[RELATED_TASK_META] = {"taskId": related_task}
        question = type(question).model_validate(wire)
    related = ServerMessageMetadata(related_request_id=ctx.request_id)
    try:
        answer = await ctx.session.send_request(question, result_type, metadata=related)
    except MCPError as exc:
        raise Unanswered(key, f"{exc.error.message} ({exc.error.code})") from None
    except ValidationError:
        raise Unanswered(key, f"its answer is not a {question.method} result") from None
    return as_wire(answer)
