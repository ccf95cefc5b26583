"""A task as a person sees it on the pages: which one it is (the tool's line about it), where it
stands in words, how it ended (declined, or failed and why), its progress, the questions it waits
for (each with its answer link) and its result. API process."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from longtools.tasks import TERMINAL, AnswerLinks, TaskView
from longtools.tools import Registry
from longtools.workflows import marking_of, reask_of

__all__ = ["QuestionCard", "TaskCard", "card_of", "signature"]

_MAX_SHOWN = 20_000
"""Characters of a result shown on the page (the rest is cut: the page is for a person to read)."""
_MAX_LINE = 300
"""Characters of a card's one-line outcome (a failure's message) shown in the list of tasks."""

_STATUS_WORDS = {
    "working": "Working",
    "input_required": "Waiting for an answer",
    "completed": "Done",
    "failed": "Failed",
    "cancelled": "Cancelled",
}


@dataclass(frozen=True)
class QuestionCard:
    key: str
    message: str
    """The question as its tool asked it (for one asked again, as first asked: ``again``)."""
    path: str | None
    """The answer link (a path of this server); None for what only the client can answer
    (sampling, roots)."""
    person: bool
    sensitive: bool
    again: bool = False
    """Asked again: its last answer broke a rule of the tool's (``longtools.workflows.Reask``)."""


@dataclass(frozen=True)
class TaskCard:
    task_id: str
    tool: str
    title: str
    summary: str | None
    """The tool's line about this task (its arguments, by default): what tells eight tasks of one
    tool apart."""
    status: str
    state: str
    """How it stands or ended, for its badge: a status, or ``declined`` (completed, its person said no)."""
    status_words: str
    outcome: str | None
    """How it ended, on one line: why it failed, or the tool's ``outcome`` word."""
    message: str | None
    progress: float | None
    total: float | None
    questions: tuple[QuestionCard, ...]
    result_text: str | None
    result_json: str | None
    result_is_error: bool
    error_text: str | None
    created_at: str
    updated_at: str
    version: str
    """Changes whenever anything shown changes (``signature``)."""
    last_status: str | None = None
    """What the tool last said before it ended, when its end says nothing (a cancel: its rollback)."""

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def percent(self) -> float | None:
        if self.progress is None or not self.total:
            return None
        return max(0.0, min(100.0, 100 * self.progress / self.total))

    @property
    def progress_words(self) -> str | None:
        if self.progress is None:
            return None
        if self.total:
            return f"{self.progress:g} of {self.total:g}"
        return f"{self.progress:g} done"


def signature(view: TaskView) -> str:
    """What a page shows of ``view``, as a short digest: two views that read the same give the
    same one, so a page waits for a change rather than redrawing the same thing."""
    shown = [
        view.status,
        view.message,
        view.progress,
        view.total,
        sorted(view.input_requests or {}),
        view.result is not None,
        view.error is not None,
    ]
    return hashlib.sha256(json.dumps(shown, default=str).encode()).hexdigest()[:16]


def card_of(view: TaskView, registry: Registry, links: AnswerLinks, principal: str) -> TaskCard:
    tool = registry.tools.get(view.tool)
    title = (tool.title if tool is not None else None) or view.tool
    questions = []
    for key, question in (view.input_requests or {}).items() if view.status == "input_required" else ():
        params = question.get("params") if isinstance(question.get("params"), Mapping) else {}
        assert isinstance(params, Mapping)
        form = question.get("method") == "elicitation/create" and params.get("mode", "form") == "form"
        marking = marking_of(question)
        message = str(params.get("message") or _ASKS.get(str(question.get("method")), "A question"))
        reask = reask_of(question)
        questions.append(
            QuestionCard(
                key=key,
                # Its own message starts with why it is asked again, in the tool's field names;
                # the page says that beside each field, by its label.
                message=reask.message if reask is not None and reask.message else message,
                path=links.path(principal, view, key) if form else None,
                person=marking.person,
                sensitive=marking.sensitive,
                again=reask is not None,
            )
        )
    result = view.result or {}
    text, structured = _result_text(result), result.get("structuredContent")
    if text is not None and structured is not None and _same_json(text, structured):
        text = None  # the text is the data again (a tool's model result): shown once, readably
    error = (view.error or {}).get("message") if view.error else None
    state, words, outcome = _ending(view)
    return TaskCard(
        task_id=view.task_id,
        tool=view.tool,
        title=title,
        summary=view.summary,
        status=view.status,
        state=state,
        status_words=words,
        outcome=outcome,
        # A cancelled task keeps what its tool said last (its clean-up: a rollback, say), shown as
        # such; a task that works shows what it says now.
        message=None if view.status in TERMINAL else view.message,
        last_status=view.message if view.status in TERMINAL else None,
        progress=view.progress,
        total=view.total,
        questions=tuple(questions),
        result_text=text,
        result_json=None
        if structured is None
        else _cut(json.dumps(structured, indent=2, ensure_ascii=False)),
        result_is_error=result.get("isError") is True,
        error_text=str(error) if error is not None else None,
        created_at=view.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        updated_at=view.updated_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        version=signature(view),
    )


_ASKS = {
    "sampling/createMessage": "It asks the client's model for a completion (only the client answers this)",
    "roots/list": "It asks the client for its roots (only the client answers this)",
}


_DECLINED = frozenset({"declined", "decline"})
"""A result's ``outcome`` (or ``action``) that says its person said no: the examples' convention
(``BulkCloseOutput.outcome``, ``Elicited.action``)."""


def _ending(view: TaskView) -> tuple[str, str, str | None]:
    """Where the task stands, as its badge's kind and words, and how it ended on one line.

    A tool error (a completed task whose result ``isError``) is a failure to the person, with its
    message; a result whose ``outcome`` is ``declined`` is "Declined", not "Done"; any other
    ``outcome`` word of a result is said under the badge.
    """
    words = _STATUS_WORDS.get(view.status, view.status)
    if view.status == "failed":
        message = (view.error or {}).get("message")
        return "failed", words, _line(str(message)) if message else None
    if view.status != "completed":
        return view.status, words, None
    result = view.result or {}
    if result.get("isError") is True:
        return "failed", "Failed", _line(_result_text(result) or "")
    structured = result.get("structuredContent")
    said = structured if isinstance(structured, Mapping) else {}
    outcome, action = said.get("outcome"), said.get("action")
    if outcome in _DECLINED or (outcome is None and action in _DECLINED):
        return "declined", "Declined", None
    if isinstance(outcome, str) and outcome:
        return "completed", words, "Outcome: " + outcome.replace("_", " ")
    return "completed", words, None


def _line(text: str) -> str | None:
    """``text`` on one line of at most ``_MAX_LINE`` characters (None when it is empty)."""
    line = " ".join(text.split())
    return (line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + "…") or None


def _result_text(result: Mapping[str, Any]) -> str | None:
    texts = [
        str(block.get("text", ""))
        for block in result.get("content") or ()
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    return _cut("\n".join(texts)) if texts else None


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "\n…"
