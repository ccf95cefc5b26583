"""What both ways of testing a long tool share: the task handle, what it shows, and the errors.

No Temporal and no HTTP here: a ``Task`` is read and answered through three methods that each
mode (``_embedded``, ``_served``) implements; waiting, picking questions and telling a result
from a failure are written once, so the two modes behave alike.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""A task's status, as ``tasks/get`` shows it."""
ENDED: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
Action = Literal["accept", "decline", "cancel"]

_POLL_S = 0.05
"""Between two reads of a task while waiting on it: the task lives in other processes (Temporal,
a server), so there is no event to wait on here."""


class TestingError(Exception):
    """Base of every error ``longtools.testing`` raises."""

    __test__ = False  # not a test class, whatever pytest's default patterns say


class ServeFailed(TestingError):
    """``longtools serve`` did not start, or did not become ready in time; the message ends with its log."""


class RequestFailed(TestingError):
    """The server answered a request with a JSON-RPC error (or an HTTP status without one)."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{method} failed: {code} {message}")
        self.method = method
        self.code = code
        self.error_message = message
        self.data = data


class UnknownTool(TestingError):
    """No long tool of that name is registered."""


class InvalidArguments(TestingError):
    """The arguments do not fit the tool's input model (the message says which field and why)."""


class NotATask(TestingError):
    """``tools/call`` answered at once instead of starting a task; ``result`` is what it answered."""

    def __init__(self, tool: str, result: ToolResult) -> None:
        super().__init__(f"{tool} did not start a task; it answered at once: {result.text or result.raw}")
        self.result = result


class WaitTimedOut(TestingError):
    """A wait on a task ran out of time; ``state`` is what the task showed last."""

    def __init__(self, message: str, state: TaskState) -> None:
        super().__init__(message)
        self.state = state


class NoQuestion(WaitTimedOut):
    """The task asked no (new) question in time."""


class NotFinished(WaitTimedOut):
    """The task did not end in time."""


class TaskEnded(TestingError):
    """The task ended while a question was awaited from it."""

    def __init__(self, message: str, state: TaskState) -> None:
        super().__init__(message)
        self.state = state


class TaskFailed(TestingError):
    """The task ended ``failed``: a ``ProtocolError``, or a bug or an outage in the tool."""

    def __init__(self, task_id: str, code: int, message: str) -> None:
        super().__init__(f"task {task_id} failed: {code} {message}")
        self.task_id = task_id
        self.code = code
        self.error_message = message


class TaskCancelled(TestingError):
    """The task ended ``cancelled`` where its result was awaited."""


class NotAsked(TestingError):
    """An answer to a key the task does not ask now (never asked, or answered already)."""


class AnswerRejected(TestingError):
    """An answer that does not fit its question (its kind, or the form's schema); nothing was sent."""


class NotAuthorized(TestingError):
    """The tool's own check (``authorize=``) refused the caller: a call, or an answer to its task
    (the check runs again on every answer, with the task's arguments); nothing was sent."""


@dataclass(frozen=True)
class Question:
    """One question a task asks, under its key."""

    key: str
    method: str
    """``elicitation/create``, ``sampling/createMessage`` or ``roots/list``."""
    message: str | None
    """A form's message (None for the other kinds)."""
    schema: Mapping[str, Any] | None
    """A form's ``requestedSchema``."""
    request: Mapping[str, Any]
    """The whole input request, as wire JSON."""
    page: str | None = None
    """Where a person answers it, when only they may (``by="person"`` or ``sensitive=True``): a
    served task's client is asked it as a URL request, and ``answer`` answers it on that page, as
    the person would."""

    @classmethod
    def from_wire(cls, key: str, request: Mapping[str, Any]) -> Question:
        params = request.get("params") or {}
        message = params.get("message")
        schema = params.get("requestedSchema")
        url = params.get("url") if params.get("mode") == "url" else None
        return cls(
            key=key,
            method=str(request.get("method", "")),
            message=message if isinstance(message, str) else None,
            schema=schema if isinstance(schema, Mapping) else None,
            request=request,
            page=url if isinstance(url, str) else None,
        )


@dataclass(frozen=True)
class ToolResult:
    """A tool's result (``CallToolResult``)."""

    is_error: bool
    text: str
    """The text blocks of ``content``, joined by newlines."""
    structured: Mapping[str, Any] | None
    """``structuredContent``: the tool's output model as JSON, for a tool with ``output=``."""
    content: list[Mapping[str, Any]]
    raw: Mapping[str, Any]
    """The whole result, as wire JSON."""

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> ToolResult:
        content = [block for block in raw.get("content") or [] if isinstance(block, Mapping)]
        texts = [str(block.get("text", "")) for block in content if block.get("type") == "text"]
        structured = raw.get("structuredContent")
        return cls(
            is_error=bool(raw.get("isError", False)),
            text="\n".join(texts),
            structured=structured if isinstance(structured, Mapping) else None,
            content=content,
            raw=raw,
        )


@dataclass(frozen=True)
class TaskState:
    """A task as it stands: what ``tasks/get`` shows."""

    task_id: str
    status: Status
    message: str | None = None
    """The last ``report()`` message (``statusMessage``)."""
    progress: float | None = None
    total: float | None = None
    questions: Mapping[str, Question] = field(default_factory=dict)
    """Outstanding questions by key (only while ``input_required``)."""
    result: ToolResult | None = None
    """Once ``completed``."""
    error: Mapping[str, Any] | None = None
    """Once ``failed``: the JSON-RPC error (``code``, ``message``)."""

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def describe(self) -> str:
        """The state in words, for error messages."""
        words: list[str] = [self.status]
        if self.message:
            words.append(f"message {self.message!r}")
        if self.progress is not None:
            words.append(
                f"progress {self.progress:g}" + ("" if self.total is None else f" of {self.total:g}")
            )
        if self.questions:
            words.append("asking " + ", ".join(f"{key!r}" for key in self.questions))
        if self.result is not None:
            words.append(f"result {'(isError) ' if self.result.is_error else ''}{self.result.text[:200]!r}")
        if self.error is not None:
            words.append(f"error {self.error.get('code')} {self.error.get('message')!r}")
        return ", ".join(words)


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class Task(abc.ABC):
    """A running long tool: read its state, wait for its questions, answer them, get its result.

    Every wait is bounded (``within`` seconds) and ends with a named error that says what the task
    was doing: ``NoQuestion``, ``NotFinished``, ``TaskEnded``. The same methods work on a task of
    ``longtools.testing.embedded`` and of ``longtools.testing.serve``.
    """

    def __init__(self, task_id: str, tool: str) -> None:
        self.task_id = task_id
        self.tool = tool
        self._answered: set[str] = set()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.task_id} ({self.tool})>"

    # What each mode implements --------------------------------------------------------------

    @abc.abstractmethod
    async def state(self) -> TaskState:
        """The task as it stands now (one read)."""

    @abc.abstractmethod
    async def _send(self, key: str, question: Question, answer: Mapping[str, Any]) -> None:
        """Deliver one answer (wire JSON) to an outstanding question; raise AnswerRejected if it
        does not fit, NotAuthorized if the tool's check refuses the one who answers."""

    @abc.abstractmethod
    async def cancel(self) -> None:
        """Ask the task to stop (cooperative: it may still complete). Returns at once."""

    # Shared ------------------------------------------------------------------------------------

    async def wait_for(
        self, done: Callable[[TaskState], bool], *, within: float = 30, what: str = "the condition"
    ) -> TaskState:
        """Read the task until ``done(state)``.

        Raises:
            WaitTimedOut: not within ``within`` seconds.
            TaskEnded: the task ended first (it will not change any more).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            state = await self.state()
            if done(state):
                return state
            if state.ended:
                raise TaskEnded(
                    f"task {self.task_id} ({self.tool}) ended before {what}: {state.describe()}", state
                )
            if loop.time() >= deadline:
                raise WaitTimedOut(self._waited(what, within, state), state)
            await asyncio.sleep(_POLL_S)

    async def questions(self, *, within: float = 30) -> dict[str, Question]:
        """Every question the task asks now that this handle has not answered, once there is one."""
        state = await self._asking(within)
        return {key: question for key, question in state.questions.items() if key not in self._answered}

    async def question(self, key: str | None = None, *, within: float = 30) -> Question:
        """The next question: the one under ``key``, or the first one not answered yet.

        Raises:
            NoQuestion: none came within ``within`` seconds.
            TaskEnded: the task ended instead.
        """
        state = await self._asking(within, key)
        fresh = [q for k, q in state.questions.items() if k not in self._answered and key in (None, k)]
        return fresh[0]

    async def _asking(self, within: float, key: str | None = None) -> TaskState:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        wanted = "no question" if key is None else f"no question {key!r}"
        while True:
            state = await self.state()
            if any(k not in self._answered and key in (None, k) for k in state.questions):
                return state
            if state.ended:
                raise TaskEnded(
                    f"task {self.task_id} ({self.tool}) ended asking {wanted}: {state.describe()}", state
                )
            if loop.time() >= deadline:
                raise NoQuestion(
                    self._waited(f"a question{'' if key is None else f' {key!r}'}", within, state), state
                )
            await asyncio.sleep(_POLL_S)

    async def answer(
        self,
        key: str,
        content: Mapping[str, Any] | None = None,
        *,
        action: Action = "accept",
        within: float = 30,
    ) -> None:
        """Answer the form question ``key``: ``content`` (the form's fields) with ``accept``, or
        ``action="decline"`` / ``"cancel"``. Returns once the task has taken the answer.

        Raises:
            NotAsked: the task does not ask ``key`` now.
            AnswerRejected: the answer does not fit the question; nothing was sent.
            NotAuthorized: the tool's ``authorize=`` check refuses the one who answers; nothing
                was sent.
        """
        answer: dict[str, Any] = {"action": action}
        if action == "accept":
            answer["content"] = dict(content or {})
        elif content is not None:
            raise ValueError(f"an answer that does {action} carries no content")
        await self.respond(key, answer, within=within)

    async def decline(self, key: str, *, within: float = 30) -> None:
        """Decline the form question ``key``."""
        await self.answer(key, action="decline", within=within)

    async def respond(self, key: str, answer: Mapping[str, Any], *, within: float = 30) -> None:
        """Answer the question ``key`` with a raw wire answer (an ``ElicitResult``, a
        ``CreateMessageResult`` or a ``ListRootsResult`` as JSON). Returns once the task has taken it."""
        state = await self.state()
        question = state.questions.get(key)
        if question is None or key in self._answered:
            asked = ", ".join(repr(k) for k in state.questions if k not in self._answered) or "nothing"
            raise NotAsked(
                f"task {self.task_id} ({self.tool}) does not ask {key!r}; it asks {asked} ({state.status})"
            )
        await self._send(key, question, answer)
        self._answered.add(key)
        await self.wait_for(
            lambda now: key not in now.questions, within=within, what=f"the answer to {key!r} to be taken"
        )

    async def result(self, *, within: float = 60) -> ToolResult:
        """The tool's result once the task has completed (``is_error`` for a ``ToolError``).

        Raises:
            NotFinished: it did not end within ``within`` seconds (the message says where it stands).
            TaskFailed: it ended ``failed``.
            TaskCancelled: it ended ``cancelled``.
        """
        try:
            state = await self.wait_for(lambda now: now.ended, within=within, what="the end")
        except WaitTimedOut as exc:
            raise NotFinished(str(exc), exc.state) from None
        if state.status == "cancelled":
            raise TaskCancelled(f"task {self.task_id} ({self.tool}) was cancelled")
        if state.status == "failed":
            error = state.error or {}
            raise TaskFailed(self.task_id, int(error.get("code", -32603)), str(error.get("message", "")))
        assert state.result is not None
        return state.result

    async def ended(self, *, within: float = 60) -> TaskState:
        """The task's last state, once it has ended however it ended (``NotFinished`` otherwise)."""
        try:
            return await self.wait_for(lambda now: now.ended, within=within, what="the end")
        except WaitTimedOut as exc:
            raise NotFinished(str(exc), exc.state) from None

    def _waited(self, what: str, within: float, state: TaskState) -> str:
        return f"task {self.task_id} ({self.tool}): waited {within:g}s for {what}; it is {state.describe()}"
