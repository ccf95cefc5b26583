"""A person's questions on the wire: which client gets a form, a link, or nothing it may answer.
API process.

A tool marks a question as a person's (``elicit(by="person")``: an approval) or as a secret
(``sensitive=True``). What each client is shown of such a question follows from what it declared:

- a client that declared URL-mode elicitation gets the question as a URL-mode request whose URL is
  the question's answer link (its host opens it for the person); its ``accept`` says only that the
  person agreed to go there, and the answer comes from the page;
- a client that shows forms (form elicitation) gets a person's question as the form, since its
  host puts it before the person; never a secret;
- any other client (a chat host following by the task tools, a form-only client and a secret) gets
  the link only, in words and in ``_meta[ANSWER_LINKS_META]``: nothing it could answer itself.

Unmarked questions are shown as they are. Every task shown carries the links of its person's
questions in ``_meta``, whoever asks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp_types import ClientCapabilities

from longtools._protocol import ANSWER_LINKS_META
from longtools._settings import Settings
from longtools.auth import principal_of
from longtools.server._pushed import is_legacy
from longtools.tasks import TERMINAL, Answerer, AnswerLinks, Tasks, TaskView, public_base
from longtools.workflows import marking_of

__all__ = ["Audience", "People", "complete_urls", "deliver"]


def elicitation_id(task_id: str, key: str) -> str:
    """The 2025 era's ``elicitationId`` of a question shown as a URL: the same on every push of it,
    so its ``notifications/elicitation/complete`` names what the client was shown."""
    return hashlib.sha256(f"{task_id}\x00{key}".encode()).hexdigest()[:32]


class People:
    """Makes the :class:`Audience` of each request (built once per server)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.links = AnswerLinks(settings)

    def audience(self, ctx: ServerRequestContext[Any, Any]) -> Audience:
        """How the client of this request is shown questions (keeps nothing of ``ctx`` itself: a
        listen stream uses it after its request is gone)."""
        caps = ctx.session.client_capabilities or ClientCapabilities()
        declared = caps.elicitation.model_dump(exclude_none=True) if caps.elicitation is not None else None
        request = ctx.request
        base_url = getattr(request, "base_url", None)
        return Audience(
            links=self.links,
            principal=principal_of(ctx),
            base=public_base(self._settings, str(base_url) if base_url is not None else ""),
            url_mode=declared is not None and "url" in declared,
            # `elicitation: {}` means form only (client/elicitation.mdx).
            forms=declared is not None and (not declared or "form" in declared),
            legacy=is_legacy(ctx),
        )


@dataclass(frozen=True)
class Audience:
    links: AnswerLinks
    principal: str
    base: str
    url_mode: bool
    """The client declared URL-mode elicitation."""
    forms: bool
    """The client declared form elicitation: its host shows a form to its person."""
    legacy: bool

    @property
    def answers_as(self) -> Answerer:
        """Who this client's answers count as (``Tasks.answer``)."""
        return "form" if self.forms else "model"

    def link(self, view: TaskView, key: str) -> str:
        return self.base + self.links.path(self.principal, view, key)

    def person_links(self, view: TaskView) -> dict[str, str]:
        """The answer links of the task's open person's questions, by key."""
        return {
            key: self.link(view, key)
            for key, question in (view.input_requests or {}).items()
            if marking_of(question).marked
        }

    def as_url(self, question: Mapping[str, Any]) -> bool:
        """Whether this client is shown ``question`` as a URL-mode request."""
        return (
            self.url_mode and marking_of(question).marked and question.get("method") == "elicitation/create"
        )

    def page_only(self, question: Mapping[str, Any]) -> bool:
        """Whether this client can be shown ``question`` only as a link (nothing it could answer)."""
        marking = marking_of(question)
        if not marking.marked or self.as_url(question):
            return False
        return marking.sensitive or not self.forms

    def questions(self, view: TaskView, *, as_urls: bool = False) -> dict[str, dict[str, Any]]:
        """The task's open questions as this client may answer them: a person's as a URL request
        or a form (by what the client declared), and none it may not answer. ``as_urls``: a
        person's question it may not answer as a URL request all the same, where it is only shown,
        never asked (a task tool's result)."""
        shown: dict[str, dict[str, Any]] = {}
        for key, question in (view.input_requests or {}).items():
            if self.as_url(question) or (as_urls and self.page_only(question)):
                shown[key] = self.url_request(view, key, question)
            elif not self.page_only(question):
                shown[key] = dict(question)
        return shown

    def url_request(self, view: TaskView, key: str, question: Mapping[str, Any]) -> dict[str, Any]:
        params = question.get("params") or {}
        url_params: dict[str, Any] = {
            "mode": "url",
            "message": str(params.get("message", "")),
            "url": self.link(view, key),
        }
        if self.legacy:  # required at 2025-11-25, removed at 2026-07-28
            url_params["elicitationId"] = elicitation_id(view.task_id, key)
        return {"method": "elicitation/create", "params": url_params}

    def status_message(self, view: TaskView) -> str | None:
        """The task's status message for this client: with the link of each open question it
        cannot be shown, so that whoever reads the status can pass it on to the person."""
        waiting = [
            self.link(view, key)
            for key, question in (view.input_requests or {}).items()
            if view.status == "input_required" and self.page_only(question)
        ]
        if not waiting:
            return view.status_message
        said = f"A person must answer on its page: {' '.join(waiting)}"
        return f"{view.status_message}. {said}" if view.status_message else said

    def wire(self, view: TaskView, poll_interval_ms: int, *, as_urls: bool = False) -> dict[str, Any]:
        """``view`` as ``tasks/get`` shows it to this client (``TaskView.wire``, its questions as
        :meth:`questions` shows them, the answer links in ``_meta``, and in the status message the
        links of those it is not shown)."""
        body = view.wire(poll_interval_ms)
        links = self.person_links(view)
        if not links:
            return body
        if "inputRequests" in body:
            body["inputRequests"] = self.questions(view, as_urls=as_urls)
        if not as_urls:
            message = self.status_message(view)
            if message:
                body["statusMessage"] = message
        body["_meta"] = {**body.get("_meta", {}), ANSWER_LINKS_META: links}
        return body

    def sorted_answers(
        self, view: TaskView, responses: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
        """This client's answers, sorted: those to deliver as its own (``answers_as``), those to
        deliver as the person's own (a decline or cancel of a URL request: the person's choice, in
        the host's own prompt), and the keys of URL requests it accepted (the person went to the
        page: the page gives the answer, nothing to deliver). A URL request answered with a form's
        fields by a client that shows forms is its own answer, as if it had been asked the form
        (``longtools task answer --json`` may send one), and is checked as one."""
        own: dict[str, Any] = {}
        persons: dict[str, Any] = {}
        consented: set[str] = set()
        asked = view.input_requests or {}
        for key, response in responses.items():
            question = asked.get(key)
            action = response.get("action") if isinstance(response, Mapping) else None
            if question is None or not self.as_url(question):
                own[key] = response
            elif action in ("decline", "cancel"):
                persons[key] = {"action": action}
            elif self.forms and isinstance(response, Mapping) and response.get("content"):
                own[key] = response  # the form's fields, not a consent (which has no content)
            else:
                consented.add(key)
        return own, persons, consented


async def complete_urls(ctx: ServerRequestContext[Any, Any], view: TaskView, urls: set[str]) -> set[str]:
    """Send ``notifications/elicitation/complete`` (2025 era) for each of the URL requests ``urls``
    the page has answered by ``view`` (no longer open, or the task has ended), on this request's
    stream; the keys still to complete."""
    still = urls & set(view.input_requests or {}) if view.status not in TERMINAL else set()
    for key in sorted(urls - still):
        await ctx.session.send_elicit_complete(
            elicitation_id(view.task_id, key), related_request_id=ctx.request_id
        )
    return still


async def deliver(
    tasks: Tasks, audience: Audience, view: TaskView, responses: Mapping[str, Any], *, skip_invalid: bool
) -> tuple[set[str], set[str]]:
    """Deliver a client's answers as :meth:`Audience.sorted_answers` sorts them: the keys
    delivered, and the keys of URL requests the client accepted (answered on the page instead).

    Raises:
        AnswerRejected: as ``Tasks.answer`` (a ``PersonMustAnswer`` for a question this client may
            not answer), unless ``skip_invalid``.
        AnswersTooLarge: as ``Tasks.answer``.
    """
    own, persons, consented = audience.sorted_answers(view, responses)
    delivered: set[str] = set()
    batches: list[tuple[dict[str, Any], Answerer]] = [(own, audience.answers_as), (persons, "page")]
    for answers, by in batches:
        if answers:
            delivered |= set(await tasks.answer(view, answers, by=by, skip_invalid=skip_invalid))
    return delivered, consented
