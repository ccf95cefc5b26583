"""Long tools on Temporal, as the API sees them: start, read, answer and cancel a task (the
gateway), and the run-once records that make a used ``requestState`` or an idempotency key take
effect once, and the boxes where a pushed question's answer waits for its call. API process.

May import ``longtools.auth``, ``longtools.tools``, ``longtools.temporal``, ``longtools._settings``
and ``longtools.workflows``; the wire (``longtools.server``) builds on this, never the other way round.
"""

from __future__ import annotations

from longtools._links import (
    ANSWER_PATH,
    AnswerLink,
    AnswerLinks,
    LinkExpired,
    LinkUnknown,
    public_base,
)
from longtools.decisions import Via
from longtools.tasks._changes import Changes, Mark
from longtools.tasks._gateway import (
    TERMINAL,
    AlreadyVoted,
    AnswerNotAuthorized,
    AnswerRejected,
    AnswersTooLarge,
    NotAnApprover,
    OwnerAttributeMissing,
    PersonMustAnswer,
    ProposalChanged,
    TaskNotFound,
    Tasks,
    TaskView,
    TooManyTasks,
    activity_progress,
    check_answer,
    task_progress,
)
from longtools.tasks._ids import TaskIds, derive_id
from longtools.tasks._mailbox import Mailboxes, QuestionClosed
from longtools.tasks._run_once import KeyReused, RunOnce, args_digest, key_reused, state_used

__all__ = [
    "ANSWER_PATH",
    "TERMINAL",
    "AlreadyVoted",
    "AnswerLink",
    "AnswerLinks",
    "AnswerNotAuthorized",
    "AnswerRejected",
    "AnswersTooLarge",
    "Changes",
    "KeyReused",
    "LinkExpired",
    "LinkUnknown",
    "Mailboxes",
    "Mark",
    "NotAnApprover",
    "OwnerAttributeMissing",
    "PersonMustAnswer",
    "ProposalChanged",
    "QuestionClosed",
    "RunOnce",
    "TaskIds",
    "TaskNotFound",
    "TaskView",
    "Tasks",
    "TooManyTasks",
    "Via",
    "activity_progress",
    "args_digest",
    "check_answer",
    "derive_id",
    "key_reused",
    "public_base",
    "state_used",
    "task_progress",
]
