"""Names on the MCP wire that the server and the terminal client share. Every process.

Only constants live here, so the terminal client can import them without the server side.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ANSWER_LINKS_META", "DECISIONS_META", "EXIT_META", "PROGRESS_META", "TASKS_EXTENSION"]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The Tasks extension's identifier (SEP-2663), as ``capabilities.extensions`` carries it."""

PROGRESS_META: Final = "longtools.dev/progress"
"""``_meta`` key of a task's progress numbers (``tasks/get``, ``notifications/tasks``):
``{"progress": 3, "total": 10}``, ``total`` null when the tool does not know it."""

ANSWER_LINKS_META: Final = "longtools.dev/answer-links"
"""``_meta`` key of a task's answer links (``tasks/get``, ``notifications/tasks``, the task tools):
``{question key: URL}`` for each of its open questions a person must answer, on that page."""

DECISIONS_META: Final = "longtools.dev/decisions"
"""``_meta`` key of a task's open decisions (``tasks/get``, ``notifications/tasks``): ``{question key:
{"rule", "needed", "votes": [{"name", "at"}], "digest", "fingerprint", "deadline", "said", "link"}}``,
where ``link`` is the approvers' page (see ``longtools.decisions``)."""

EXIT_META: Final = "longtools.dev/exit"
"""``_meta`` key of an ended task's exit state: completed, rejected, expired, cancelled, escalated or
failed (``longtools.decisions.ExitState``)."""
