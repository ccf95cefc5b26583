"""A person's questions, answered on their pages while the terminal follows the task. CLI process.

A task waits for a person when it lists a URL-mode ``elicitation/create`` in ``inputRequests``, or
a link in ``_meta["longtools.dev/answer-links"]`` (a longtools server lists the link there also
while a host's word keeps the request from being asked again). Such a question is answered on the
page its link opens, never at the terminal: the terminal shows the link once, follows the task
meanwhile, and notices the page's answer when the question is no longer open. Only an explicit key
declines to go there (``DECLINE_KEYS``); Ctrl-C stops following, as anywhere.

Keys are read one at a time and unechoed (cbreak mode), only while such a question is open on a
terminal; the terminal's own mode is put back before any prompt and when the command ends.
"""

from __future__ import annotations

import os
import select
from dataclasses import dataclass
from typing import Any, Final

from longtools._protocol import ANSWER_LINKS_META, DECISIONS_META
from longtools.client._follow import Task, on_a_page

DECLINE_KEYS: Final = frozenset("dD")
"""The key that declines to go to a question's page (never ``n`` or Enter: a person used to a
y/n prompt types those by habit)."""


@dataclass(frozen=True)
class PageQuestion:
    """A question a person answers on its page."""

    key: str
    message: str
    """What it asks; empty when only its link is known (``_meta``)."""
    link: str
    asked: bool
    """Listed as a URL request, which the client may answer with a decline (the person will not
    go there); a link in ``_meta`` only has no request to answer."""
    decision: str | None = None
    """For a decision with approvers (``_meta[DECISIONS_META]``): how it stands, in words. Its
    approvers decide it on the page; the person who asked may not, but follows it there."""


def page_questions(task: Task) -> dict[str, PageQuestion]:
    """The task's open questions a person answers on a page, by key."""
    found: dict[str, PageQuestion] = {}
    asked = task.get("inputRequests")
    for key, request in (asked if isinstance(asked, dict) else {}).items():
        if isinstance(request, dict) and on_a_page(request):
            params = request["params"]
            found[key] = PageQuestion(key, str(params.get("message", "")), str(params.get("url", "")), True)
    meta = task.get("_meta")
    links = meta.get(ANSWER_LINKS_META) if isinstance(meta, dict) else None
    for key, link in (links if isinstance(links, dict) else {}).items():
        if key not in found and isinstance(key, str) and isinstance(link, str):
            found[key] = PageQuestion(key, "", link, False)
    decisions = meta.get(DECISIONS_META) if isinstance(meta, dict) else None
    for key, decision in (decisions if isinstance(decisions, dict) else {}).items():
        said = decision.get("said") if isinstance(decision, dict) else None
        if key in found and isinstance(said, str):
            shown = found[key]
            found[key] = PageQuestion(key, shown.message, shown.link, shown.asked, said)
    return found


def without_links(message: str | None, questions: dict[str, PageQuestion]) -> str | None:
    """A status message without the sentences that give the links shown on their own lines."""
    if not message or not questions:
        return message
    links = [question.link for question in questions.values() if question.link]
    sentences = [part for part in message.split(". ") if not any(link in part for link in links)]
    return ". ".join(sentences).strip() or None


class Keys:
    """Single keypresses on a terminal's stdin, unechoed, while on (cbreak mode)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._saved: list[Any] | None = None
        self.ended = False
        """Input ended (the terminal went away): nothing more to read."""

    def on(self) -> None:
        if self._saved is None:
            import termios  # the terminal's modes: only when a person's question waits
            import tty

            self._saved = termios.tcgetattr(self._fd)
            tty.setcbreak(self._fd, termios.TCSANOW)  # Ctrl-C still interrupts (ISIG stays)

    def off(self) -> None:
        if self._saved is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def read(self, seconds: float) -> str:
        """What was typed within ``seconds`` ("" if nothing)."""
        ready, _, _ = select.select([self._fd], [], [], max(seconds, 0))
        if not ready:
            return ""
        typed = os.read(self._fd, 64)
        if not typed:
            self.ended = True
        return typed.decode(errors="replace")
