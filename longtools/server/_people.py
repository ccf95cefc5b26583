"""A person's questions on the wire: which client gets a URL request, a link, or nothing it may answer.
API process.

A tool marks a question as a person's (``elicit(by="person")``: an approval) or as a secret
(``sensitive=True``). Either is answered on its answer page and only there: no client answers it,
whatever it declared, since every client library can fill in a form for its person. What each
client is shown follows from what it declared:

- a client that declared URL-mode elicitation, at a revision that has it (2025-11-25 and later),
  gets the question as a URL-mode request whose URL is the question's answer link (its host opens
  it for the person). What the host says of it is never an answer: ``accept`` says the person went
  to the page, ``decline`` and ``cancel`` that they did not (and a host may say that with no person
  asked at all). After its ``decline`` or ``cancel`` the call ends with the link, for the model and
  the person to go on with; the task waits for the page;
- any other client gets the link only: in words, in the task's ``statusMessage`` and in
  ``_meta[ANSWER_LINKS_META]`` (and as the task in ``structuredContent`` where the tool's output
  schema leaves it free: ``as_call_of``), never a form it could fill in itself.

Unmarked questions are shown as they are. Every task shown carries the links of its person's
questions in ``_meta``, whoever asks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from mcp.server.context import ServerRequestContext
from mcp_types import ClientCapabilities

from longtools._protocol import ANSWER_LINKS_META, DECISIONS_META
from longtools._settings import Settings
from longtools.auth import Caller, principal_of
from longtools.decisions import approvers_decision
from longtools.server._pushed import FIRST_MODE_VERSION, is_legacy
from longtools.tasks import TERMINAL, AnswerLinks, Tasks, TaskView, Via, public_base
from longtools.workflows import marking_of

__all__ = [
    "HOST_WORD_HOLDS",
    "Audience",
    "People",
    "complete_urls",
    "deliver",
    "spoken_lately",
    "with_url_ids",
]

HOST_WORD_HOLDS: Final = timedelta(seconds=60)
"""How long a host's word on a URL request keeps it from being listed again (``tasks/get``): its
person is on the page, or said they would not go; a minute later it is shown again, in case the
page was closed unanswered. Far longer than any poll interval, so no client loops on it."""


def elicitation_id(task_id: str, key: str) -> str:
    """The 2025 era's ``elicitationId`` of a question shown as a URL: the same on every push of it,
    so its ``notifications/elicitation/complete`` names what the client was shown."""
    return hashlib.sha256(f"{task_id}\x00{key}".encode()).hexdigest()[:32]


def with_url_ids(result: dict[str, Any]) -> dict[str, Any]:
    """A 2026-era ``input_required`` result (wire JSON) with an ``elicitationId`` in each URL
    request: ``url_request`` gives one, and the SDK's 2026 result models drop it (it left the
    schema at 2026-07-28), but GitHub Copilot CLI's client fails the whole result without it. Made
    from the URL (the question's link), so each question keeps one."""
    for question in (result.get("inputRequests") or {}).values():
        params = question.get("params") if isinstance(question, dict) else None
        if isinstance(params, dict) and params.get("mode") == "url" and "elicitationId" not in params:
            params["elicitationId"] = hashlib.sha256(str(params.get("url")).encode()).hexdigest()[:32]
    return result


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
            # Before 2025-11-25 an elicitation has no mode: a URL request cannot be said at all.
            url_mode=declared is not None
            and "url" in declared
            and ctx.protocol_version >= FIRST_MODE_VERSION,
            legacy=is_legacy(ctx),
        )


@dataclass(frozen=True)
class Audience:
    links: AnswerLinks
    principal: str
    base: str
    url_mode: bool
    """The client declared URL-mode elicitation, at a revision that has it."""
    legacy: bool

    def link(self, view: TaskView, key: str) -> str:
        """The answer link of ``view``'s question ``key``: the requester's own, or for a decision
        with approvers, the approvers' link (it opens for each person the rule admits)."""
        if approvers_decision((view.input_requests or {}).get(key) or {}) is not None:
            return self.base + self.links.approvers_path(view, key)
        return self.base + self.links.path(self.principal, view, key)

    def decisions(self, view: TaskView) -> dict[str, dict[str, Any]]:
        """The task's open decisions with approvers, as ``_meta[DECISIONS_META]`` shows them."""
        shown: dict[str, dict[str, Any]] = {}
        for key, question in (view.input_requests or {}).items():
            decision = approvers_decision(question)
            if decision is None:
                continue
            body = decision.wire()
            shown[key] = {
                "rule": body["rule"],
                "needed": decision.needed,
                "votes": [{"name": vote.name, "at": vote.at} for vote in decision.votes],
                "digest": decision.digest,
                "fingerprint": decision.proposal.fingerprint,
                "deadline": decision.deadline,
                "said": decision.said(),
                "link": self.link(view, key),
            }
        return shown

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
        return marking_of(question).marked and not self.as_url(question)

    def questions(self, view: TaskView, *, as_urls: bool = False) -> dict[str, dict[str, Any]]:
        """The task's open questions as this client is shown them: a person's as a URL request
        (unless a host spoke of it within ``HOST_WORD_HOLDS``), and none of those it may only be
        given the link of. ``as_urls``: a person's question as a URL request to any client, where it
        is only shown, never asked (a task tool's result)."""
        shown: dict[str, dict[str, Any]] = {}
        for key, question in (view.input_requests or {}).items():
            if not marking_of(question).marked:
                shown[key] = dict(question)
            elif as_urls or (self.as_url(question) and not spoken_lately(view, key)):
                shown[key] = self.url_request(view, key, question)
        return shown

    def url_request(self, view: TaskView, key: str, question: Mapping[str, Any]) -> dict[str, Any]:
        params = question.get("params") or {}
        # elicitationId: required at 2025-11-25, removed at 2026-07-28, where it is an extra field a
        # client ignores; but GitHub Copilot CLI 1.0.102 (rmcp 3.5.1 inside) requires it in both
        # eras, and fails the whole result without it.
        url_params: dict[str, Any] = {
            "mode": "url",
            "message": str(params.get("message", "")),
            "url": self.link(view, key),
            "elicitationId": elicitation_id(view.task_id, key),
        }
        return {"method": "elicitation/create", "params": url_params}

    def status_message(self, view: TaskView) -> str | None:
        """The task's status message, with the link of each open person's question: whoever reads
        the status (a model, a host's task list, a person) can go there or pass it on."""
        links = self.person_links(view) if view.status == "input_required" else {}
        if not links:
            return view.status_message
        decided = self.decisions(view)
        parts = [
            f"{shown['said']}; approvers answer on its page: {shown['link']}" for shown in decided.values()
        ]
        others = [link for key, link in links.items() if key not in decided]
        if others:
            parts.append(f"A person must answer on its page: {' '.join(others)}")
        said = ". ".join(parts)
        return f"{view.status_message}. {said}" if view.status_message else said

    def wire(self, view: TaskView, poll_interval_ms: int, *, as_urls: bool = False) -> dict[str, Any]:
        """``view`` as ``tasks/get`` shows it to this client (``TaskView.wire``, its questions as
        :meth:`questions` shows them, the answer links in ``_meta`` and in the status message). A
        task that asks this client nothing it can act on reads ``working``: it waits for a person
        on a page, which the status message says where."""
        body = view.wire(poll_interval_ms)
        links = self.person_links(view)
        if not links:
            return body
        if "inputRequests" in body:
            shown = self.questions(view, as_urls=as_urls)
            if shown:
                body["inputRequests"] = shown
            else:
                body["status"] = "working"
                del body["inputRequests"]
        if not as_urls:
            message = self.status_message(view)
            if message:
                body["statusMessage"] = message
        body["_meta"] = {**body.get("_meta", {}), ANSWER_LINKS_META: links}
        decided = self.decisions(view)
        if decided:
            body["_meta"][DECISIONS_META] = decided
        return body

    def host_words(
        self, view: TaskView, responses: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """This client's answers, parted: those it may give (checked and delivered as its own), and
        what its host said of the URL requests it was shown, ``{key: action}``: never an answer,
        whatever it carries (a library may send a form's fields back with its ``accept``)."""
        own: dict[str, Any] = {}
        words: dict[str, str] = {}
        asked = view.input_requests or {}
        for key, response in responses.items():
            question = asked.get(key)
            action = response.get("action") if isinstance(response, Mapping) else None
            if question is not None and self.as_url(question) and action in ("accept", "decline", "cancel"):
                words[key] = str(action)
            else:
                own[key] = response
        return own, words


def spoken_lately(view: TaskView, key: str) -> bool:
    """Whether a host spoke of ``view``'s question ``key`` within ``HOST_WORD_HOLDS``."""
    at = (view.spoken or {}).get(key)
    if at is None:
        return False
    try:
        said = datetime.fromisoformat(at)
    except ValueError:
        return False
    return datetime.now(UTC) - said < HOST_WORD_HOLDS


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
    tasks: Tasks,
    audience: Audience,
    view: TaskView,
    responses: Mapping[str, Any],
    *,
    caller: Caller,
    via: Via,
    skip_invalid: bool,
) -> tuple[set[str], dict[str, str]]:
    """Deliver the answers a client may give (:meth:`Audience.host_words`) as ``caller``, which
    came in ``via`` (``Tasks.answer``): the keys delivered, and what its host said of the URL
    requests it was shown (``{key: action}``, nothing delivered).

    Its paths: ``tasks/update`` (``"form"``), an MRTR round of a long tool's call (``"form"``), and
    in the 2025 era the answers to questions pushed on a held ``tools/call`` or on
    ``tasks/result`` (``"pushed"``).

    Raises:
        AnswerNotAuthorized: as ``Tasks.answer``: the tool's check refuses ``caller`` now.
        AnswerRejected: as ``Tasks.answer`` (a ``PersonMustAnswer`` for a person's question, which
            only its page answers), unless ``skip_invalid``.
        AnswersTooLarge: as ``Tasks.answer``.
    """
    own, words = audience.host_words(view, responses)
    delivered = (
        await tasks.answer(view, own, caller=caller, via=via, skip_invalid=skip_invalid) if own else []
    )
    return set(delivered), words
