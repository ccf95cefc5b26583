"""Long tools on Temporal, as the API sees them: start, read, answer and cancel a task (the
gateway), and the run-once records that make a used ``requestState`` or an idempotency key take
effect once, and the boxes where a pushed question's answer waits for its call. API process.

May import ``service.tools``, ``service.temporal``, ``service._settings`` and ``workflows``; the
wire (``service.server``) builds on this, never the other way round.
"""

from __future__ import annotations

from service.tasks._changes import Changes, Mark
from service.tasks._gateway import (
    TERMINAL,
    AnswerRejected,
    AnswersTooLarge,
    OwnerAttributeMissing,
    TaskNotFound,
    Tasks,
    TaskView,
    TooManyTasks,
    check_answer,
)
from service.tasks._ids import TaskIds, derive_id
from service.tasks._mailbox import Mailboxes, QuestionClosed
from service.tasks._run_once import KeyReused, RunOnce, args_digest, key_reused, state_used

__all__ = [
    "TERMINAL",
    "AnswerRejected",
    "AnswersTooLarge",
    "Changes",
    "KeyReused",
    "Mailboxes",
    "Mark",
    "OwnerAttributeMissing",
    "QuestionClosed",
    "RunOnce",
    "TaskIds",
    "TaskNotFound",
    "TaskView",
    "Tasks",
    "TooManyTasks",
    "args_digest",
    "check_answer",
    "derive_id",
    "key_reused",
    "state_used",
]
