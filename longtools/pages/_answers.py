"""A question answered on its page, through its sealed link: the form, the answer checked as
``tasks/update`` checks it, taken once, and what the person sees next. API process.

**One answer per question.** Two answers to one link can be sent at once (two tabs, two devices,
a double click). Each first claims the question (``RunOnce``: a ``longtools.Once`` workflow
started under an id derived from the task and the question, which Temporal starts once, whichever
replica asks): only the claim's winner delivers its answer. A second answer that is the same reads
the first's outcome; one that differs is told that another answer came first, and what the task
did. Without the claim, both were signalled: Temporal kept the first signal of the question and
dropped the second in silence, and both senders read "Your answer was sent".

**Who may answer.** The tool's own check (``authorize=``) runs again for the signed-in person, with
the task's arguments, before the claim (``Tasks.check_answerer``): a person whose permission was
withdrawn since the task started is shown "not allowed" (403), nothing is delivered and the
question is not claimed, so their answer once allowed again is still its first. ``Tasks.answer``
checks again inside the claim; a permission withdrawn in between is told the same, and that claim
is then spent.

**Asked again.** A workflow that asks again because an answer broke a rule its form could not say
(``longtools.workflows.Reask``) gets its new question shown at once, with each reason beside its
field and the person's values filled in again (never a secret's).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from urllib.parse import urlencode

import structlog
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from longtools._settings import Settings
from longtools.auth import Caller
from longtools.decisions import decision_of, name_of
from longtools.pages._forms import FORM_ERROR, Field, content_of, fields_of, form_values, schema_errors
from longtools.pages._frame import Frame, Refused
from longtools.pages._sessions import PageSession
from longtools.pages._views import TaskCard
from longtools.tasks import (
    AnswerLinks,
    AnswerNotAuthorized,
    AnswerRejected,
    AnswersTooLarge,
    KeyReused,
    LinkExpired,
    LinkUnknown,
    RunOnce,
    TaskNotFound,
    Tasks,
    TaskView,
    check_answer,
    derive_id,
)
from longtools.workflows import Reask, free_text, marking_of, reask_of

__all__ = ["Answers"]

log = structlog.get_logger("longtools.pages")

_CLAIM_WAIT_S: Final = 5.0
"""How long a second, identical answer waits for the first one's outcome (its delivery is one
signal: milliseconds, unless Temporal is slow)."""
_CLAIM_MIN_S: Final = 60.0
"""Shortest life of a claim (a task about to expire still gets its answer's outcome recorded)."""
_KIND_WORDS: Final = {
    "missing": "Required: fill this in.",
    "string_too_short": "This is too short.",
    "string_too_long": "This is too long.",
    "string_pattern_mismatch": "This does not have the form asked for.",
    "too_short": "Choose more.",
    "too_long": "Choose fewer.",
    "greater_than": "This is too small.",
    "greater_than_equal": "This is too small.",
    "less_than": "This is too large.",
    "less_than_equal": "This is too large.",
    "literal_error": "Choose one of the options given.",
    "enum": "Choose one of the options given.",
}
"""A tool's reason by its kind alone, where the reason itself may quote a secret."""


class Answers:
    """The answer page of one API process (built once by ``Pages``)."""

    def __init__(
        self,
        settings: Settings,
        frame: Frame,
        tasks: Tasks,
        links: AnswerLinks,
        once: RunOnce,
        card: Callable[[TaskView, PageSession], TaskCard],
        settle: Callable[[TaskView, PageSession, Callable[[TaskView], bool]], Awaitable[TaskView]],
    ) -> None:
        self._settings = settings
        self._frame = frame
        self._tasks = tasks
        self._links = links
        self._once = once
        self._card = card
        self._settle = settle
        """Wait a moment for the workflow to take an answer (``Pages._settle``): the next page then
        shows what comes next, not the question again."""

    async def page(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        view, key, question = await self._question(request, session)
        if question is None:
            raise Refused(self._frame.message(session, 409, "answered", card=self._card(view, session)))
        return self._frame.kept(self._form(view, key, question, session), request, session, fresh)

    async def post(self, request: Request) -> Response:
        try:
            session, fresh = await self._frame.signed_in(request)
        except Refused:
            raise Refused(await self._signed_out(request)) from None
        form = await self._frame.form(request, session)
        view, key, question = await self._question(request, session)
        action = (form.get("action") or ["accept"])[-1]
        # What was sent, as the claim compares it: the form as posted, but its CSRF token (another
        # tab's form of the same answer is the same answer); a decline, whatever was typed.
        sent = (
            [("action", ["decline"])]
            if action == "decline"
            else sorted((name, values) for name, values in form.items() if name != "csrf")
        )
        digest = derive_id(self._tasks.ids.secret, "page answer digest", json.dumps(sent, ensure_ascii=False))
        if question is None:
            # Taken or closed since the page was shown: the claim says whether by this very answer
            # (a double click), by another, or by no answer sent here.
            outcome = await self._claimed(view, key, None, digest, session.caller)
            return await self._told(request, session, fresh, view, key, outcome)
        try:
            # Before the claim, and before the answer is read: a refused answer leaves the
            # question unclaimed, and says nothing of whether it would have fitted.
            await self._tasks.check_answerer(view, session.caller)
        except AnswerNotAuthorized:
            return self._frame.kept(self._not_allowed(view, session), request, session, fresh)
        params = question.get("params") or {}
        schema = params.get("requestedSchema") or {"type": "object", "properties": {}}
        sensitive = marking_of(question).sensitive
        if action == "decline":
            response: dict[str, Any] = {"action": "decline"}
        else:
            fields = fields_of(schema, sensitive=sensitive)
            content, errors = content_of(fields, form)
            errors = {**schema_errors(schema, content), **errors}
            if errors:
                shown = {} if sensitive else {name: values for name, values in form.items() if name != "csrf"}
                return self._form(view, key, question, session, errors=errors, values=shown, status=422)
            response = {"action": "accept", "content": content}
        try:
            checked = check_answer(key, question, response)
        except AnswerRejected:  # the page's own check said it fits: only a newer check could differ
            said = "This answer does not fit the question. Check each field and send it again."
            return self._form(view, key, question, session, errors={FORM_ERROR: said}, status=422)
        size = len(json.dumps({key: checked}, separators=(",", ":")))
        if view.answered_bytes + size > self._settings.max_task_answer_bytes:
            said = "This task cannot take any more answers (LONGTOOLS_MAX_TASK_ANSWER_BYTES)."
            return self._form(view, key, question, session, errors={FORM_ERROR: said}, status=422)
        digests = form.get("digest")
        seen = digests[-1] if digests else None  # the proposal the page showed (a decision's)
        outcome = await self._claimed(view, key, response, digest, session.caller, seen)
        if outcome == "sent":
            log.info("page_answered", task_id=view.task_id, key=key, action=response["action"])
        elif outcome == "refused":  # withdrawn since the check above: the claim is spent
            return self._frame.kept(self._not_allowed(view, session), request, session, fresh)
        return await self._told(request, session, fresh, view, key, outcome, question)

    def _not_allowed(self, view: TaskView, session: PageSession) -> HTMLResponse:
        """The tool's own check refuses the person's answer now: 403, nothing delivered."""
        return self._frame.message(session, 403, "not_allowed", card=self._card(view, session))

    async def _told(
        self,
        request: Request,
        session: PageSession,
        fresh: bool,
        view: TaskView,
        key: str,
        outcome: str,
        question: Mapping[str, Any] | None = None,
    ) -> Response:
        """What the sender of an answer sees, once the task has taken the answer that was taken."""
        after = await self._settle(view, session, _taken(key))
        if outcome != "sent":  # what the task did with the answer that came first, if any
            return self._frame.message(
                session,
                409 if outcome != "unknown" else 503,
                "answered" if outcome != "unknown" else "unknown_outcome",
                card=self._card(after, session),
                lost=outcome == "lost",
            )
        again = _asked_again(question, key, after) if question is not None else None
        if again is not None:
            # The answer was taken, and broke a rule of the tool's: its new question, at once.
            path = self._links.path(session.principal, after, again)
            return self._frame.kept(RedirectResponse(path, status_code=303), request, session, fresh)
        done = RedirectResponse(f"/tasks/{view.task_id}?{urlencode({'sent': key})}", status_code=303)
        return self._frame.kept(done, request, session, fresh)

    async def _claimed(
        self,
        view: TaskView,
        key: str,
        response: Mapping[str, Any] | None,
        digest: str,
        caller: Caller,
        seen: str | None = None,
    ) -> str:
        """Deliver ``response`` as ``caller`` if it is the question's first answer: ``sent`` (also
        to the same answer sent again); ``lost`` when another answer came first, ``closed`` when the
        task has moved on (or there is no ``response`` to deliver, the question being gone),
        ``refused`` when the tool's check refused ``caller``, ``unknown`` when the same answer's
        delivery did not finish (Temporal failed it). ``digest`` is the answer's, keyed: what the
        claim keeps of it (in its memo) tells nothing of a secret."""
        # One answer per question; a decision's question takes one vote per person instead.
        decision = decision_of((view.input_requests or {}).get(key) or {})
        voter = caller.principal if decision is not None and decision.rule is not None else ""
        parts = (view.task_id, key, voter) if voter else (view.task_id, key)
        claim = derive_id(self._tasks.ids.secret, "page answer", *parts)
        left = view.created_at + timedelta(milliseconds=view.ttl_ms) - datetime.now(UTC)

        async def deliver() -> dict[str, Any]:
            if response is None:
                return {"taken": False}
            try:
                delivered = await self._tasks.answer(
                    view, {key: response}, caller=caller, via="page", seen=seen
                )
            except AnswerNotAuthorized:  # checked just before the claim: withdrawn since
                return {"taken": False, "refused": True}
            except (AnswerRejected, AnswersTooLarge):
                # Checked just before the claim: only an answer taken since can make it not fit.
                return {"taken": False}
            return {"taken": key in delivered}

        try:
            outcome = await self._once.run(
                claim,
                digest,
                deliver,
                ttl_s=max(_CLAIM_MIN_S, left.total_seconds()),
                wait_s=_CLAIM_WAIT_S,
            )
        except KeyReused:
            log.info("page_answer_lost", task_id=view.task_id, key=key)
            return "lost"
        except MCPError:
            return "unknown"
        if outcome.get("refused"):
            return "refused"
        return "sent" if outcome.get("taken") else "closed"

    async def _signed_out(self, request: Request) -> HTMLResponse:
        """An answer sent by a browser no longer signed in: nothing is sent, and the page says why
        and leads back to the question (``page.js`` fills in again what was typed, but a secret)."""
        _, expired = await self._frame.sessions.current(request)
        return self._frame.message(
            None, 401, "signed_out", next=request.url.path, expired=expired, answering=True
        )

    async def _question(
        self, request: Request, session: PageSession
    ) -> tuple[TaskView, str, Mapping[str, Any] | None]:
        """The task and question of the request's link, as ``session``'s principal may answer it:
        None for a question it no longer asks (answered, or the task has moved on)."""
        try:
            link = self._links.open(request.path_params["token"], session.principal)
        except LinkUnknown:
            raise Refused(self._frame.message(session, 404, "unknown")) from None
        except LinkExpired:
            raise Refused(self._frame.message(session, 410, "expired")) from None
        try:
            if link.approvers:
                # Anyone may hold an approvers' link; only those the question's rule admits see it.
                voter = self._tasks.groups.voter(session.principal, session.caller.groups)
                view, _ = await self._tasks.read_as_decider(link.task_id, voter)
            else:
                view = await self._tasks.to_answer(link.task_id, session.principal)
        except TaskNotFound as exc:
            kind = "expired" if "expired" in str(exc) else "unknown"
            raise Refused(self._frame.message(session, 410 if kind == "expired" else 404, kind)) from None
        question = (view.input_requests or {}).get(link.key) if view.status == "input_required" else None
        if question is not None and question.get("method") != "elicitation/create":
            question = None  # only its client answers it
        decision = None if question is None else decision_of(question)
        if link.approvers and (decision is None or decision.rule is None):
            raise Refused(self._frame.message(session, 404, "unknown"))  # not a link this server made so
        if decision is not None and decision.rule is not None:
            voter = self._tasks.groups.voter(session.principal, session.caller.groups)
            if decision.voted(voter.principal):
                question = None  # their vote is in: the page shows how the decision stands
            elif not decision.admits(voter):
                raise Refused(self._frame.message(session, 404, "unknown"))
        return view, link.key, question

    def _form(
        self,
        view: TaskView,
        key: str,
        question: Mapping[str, Any],
        session: PageSession,
        *,
        errors: Mapping[str, str] | None = None,
        values: Mapping[str, list[str]] | None = None,
        status: int = 200,
    ) -> HTMLResponse:
        params = question.get("params") or {}
        marking = marking_of(question)
        decision = decision_of(question)
        schema = params.get("requestedSchema") or {}
        fields = fields_of(schema, sensitive=marking.sensitive)
        message = str(params.get("message") or "")
        reask = reask_of(question)
        again = False
        if reask is not None:
            message = reask.message or message  # its own message says why in the tool's names
            if errors is None and values is None:  # shown as asked, not after a wrong answer of it
                errors, values = _reasons(reask, fields, schema, sensitive=marking.sensitive)
                again = True
        return self._frame.render(
            "answer.html",
            status,
            session=session,
            card=self._card(view, session),
            key=key,
            message=message,
            fields=fields,
            errors=errors or {},
            values=values,
            form_error=(errors or {}).get(FORM_ERROR),
            marking=marking,
            decision=decision,
            requester=None if decision is None else name_of(decision.proposal.requester),
            again=again,
            # Restored by page.js after a sign-in that expired on the way: only on a fresh form.
            draft=status == 200 and not again,
        )


def _taken(key: str) -> Callable[[TaskView], bool]:
    return lambda now: now.status != "input_required" or key not in (now.input_requests or {})


def _asked_again(question: Mapping[str, Any], key: str, after: TaskView) -> str | None:
    """The key of the question ``after`` asks again in place of ``question`` (answered under
    ``key``), if its workflow did (``longtools.workflows.Reask``)."""
    if after.status != "input_required":
        return None
    first = _first_message(question)
    for other, asked in (after.input_requests or {}).items():
        reask = reask_of(asked)
        if other != key and reask is not None and reask.message == first:
            return other
    return None


def _first_message(question: Mapping[str, Any]) -> str:
    """The message ``question`` was first asked with (before any asking again)."""
    reask = reask_of(question)
    if reask is not None:
        return reask.message
    params = question.get("params") or {}
    return str(params.get("message") or "")


def _reasons(
    reask: Reask, fields: Sequence[Field], schema: Mapping[str, Any], *, sensitive: bool
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Why a question is asked again, beside each field (a reason of no field, or of one the form
    does not have, above them all), and the values it was last answered with, to fill in again.

    A secret's free-text field never shows its reason's words (a tool's message may quote what was
    typed), only its kind's; and its value is never filled in (the workflow does not send it)."""
    names = {field.name for field in fields}
    properties = schema.get("properties") or {}
    errors: dict[str, str] = {}
    general: list[str] = []
    for error in reask.errors:
        name = error.field.split(".", 1)[0]
        prop = properties.get(name)
        secret = sensitive and (not isinstance(prop, Mapping) or free_text(prop))
        said = _KIND_WORDS.get(error.kind, "This is not accepted.") if secret else error.message
        if name in names:
            errors.setdefault(name, _sentence(said))
        else:
            general.append(_sentence(said))
    count = len(errors)
    head = "That answer was not accepted."
    if count:
        head += f" Change what is marked below ({count} field{'s' if count != 1 else ''}) and send it again."
    errors[FORM_ERROR] = " ".join([head, *general])
    values = form_values(fields, {name: value for name, value in reask.values.items() if name in names})
    return errors, values


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return "This is not accepted."
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
