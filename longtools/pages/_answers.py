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

**A decision** (``longtools.decisions``: approvers, a quorum) has one link for all its approvers.
It opens for those its rule admits (to anyone else it is the "not known" page of a made-up link);
each votes once (the claim is per person), on the proposal the page showed (its digest goes with
the vote). An approver whose vote is in reads how the decision stands; the person who asked,
whom the rule does not admit, is sent to their task's page, which follows it.

**A recent sign-in** (``ask_form(step_up="recent")``): an approval counts only from a person who
signed in within ``step_up_max_age_s`` (an OIDC sign-in's ``auth_time``, a token's paste). An older
session's approval is not delivered: the person is sent to sign in again (``/signin?recent=1``:
OIDC with ``max_age``, or the token again) and brought back to the question, whose page says why
before they approve; a rejection needs no step-up. The vote carries when they signed in
(``signedInAt``, in its stamp and its ledger entry), which the workflow requires.

**Asked again.** A workflow that asks again because an answer broke a rule its form could not say
(``longtools.workflows.Reask``) gets its new question shown at once, with each reason beside its
field and the person's values filled in again (never a secret's).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from urllib.parse import urlencode

import structlog
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from longtools._settings import Settings
from longtools.auth import Caller
from longtools.decisions import (
    DecisionState,
    Voter,
    approvers_decision,
    decision_of,
    ledger_time,
    names_of,
)
from longtools.pages._forms import FORM_ERROR, Field, content_of, fields_of, form_values, schema_errors
from longtools.pages._frame import Frame, Refused
from longtools.pages._passkeys import PasskeyAsk, PasskeyRefused, Passkeys
from longtools.pages._sessions import PageSession, sign_in_again, signed_in_within
from longtools.pages._views import TaskCard, decision_card, said_duration
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
        settle: Callable[[TaskView, PageSession, Callable[[TaskView], bool], str], Awaitable[TaskView]],
        passkeys: Passkeys,
    ) -> None:
        self._settings = settings
        self._passkeys = passkeys
        self._frame = frame
        self._tasks = tasks
        self._links = links
        self._once = once
        self._card = card
        self._settle = settle
        """Wait a moment for the workflow to take an answer (``Pages._settle``), reading the task as
        its owner: the next page then shows what comes next, not the question again."""

    async def page(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        opened = await self._question(request, session)
        if opened.asked:
            return self._frame.kept(_to_task(opened.view), request, session, fresh)
        if opened.voted:
            return self._frame.kept(self._voted(opened, session, opened.view), request, session, fresh)
        if opened.question is None:
            card = self._card(opened.view, session) if opened.mine else None
            raise Refused(self._frame.message(session, 409, "answered", card=card))
        asked = await self._passkey_ask(request, session, opened)
        return self._frame.kept(
            self._form(opened, opened.question, session, passkey=asked), request, session, fresh
        )

    async def post(self, request: Request) -> Response:
        try:
            session, fresh = await self._frame.signed_in(request)
        except Refused:
            raise Refused(await self._signed_out(request)) from None
        form = await self._frame.form(request, session)
        opened = await self._question(request, session)
        view, key, question = opened.view, opened.key, opened.question
        if opened.asked:  # a vote of the person who asked, whom the rule does not admit: none is sent
            return self._frame.kept(_to_task(view), request, session, fresh)
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
            # Taken or closed since the page was shown (or this person's vote is in): the claim
            # says whether by this very answer (a double click), by another, or by none sent here.
            outcome = await self._claimed(view, key, None, digest, session.caller)
            return await self._told(request, session, fresh, opened, outcome)
        try:
            # Before the claim, and before the answer is read: a refused answer leaves the
            # question unclaimed, and says nothing of whether it would have fitted.
            await self._tasks.check_answerer(view, session.caller)
        except AnswerNotAuthorized:
            return self._frame.kept(self._not_allowed(opened, session), request, session, fresh)
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
                return self._form(opened, question, session, errors=errors, values=shown, status=422)
            response = {"action": "accept", "content": content}
        try:
            checked = check_answer(key, question, response)
        except AnswerRejected:  # the page's own check said it fits: only a newer check could differ
            said = "This answer does not fit the question. Check each field and send it again."
            return self._form(opened, question, session, errors={FORM_ERROR: said}, status=422)
        size = len(json.dumps({key: checked}, separators=(",", ":")))
        if view.answered_bytes + size > self._settings.max_task_answer_bytes:
            said = "This task cannot take any more answers (LONGTOOLS_MAX_TASK_ANSWER_BYTES)."
            return self._form(opened, question, session, errors={FORM_ERROR: said}, status=422)
        digests = form.get("digest")
        seen = digests[-1] if digests else None  # the proposal the page showed (a decision's)
        if opened.decision is not None and seen != opened.decision.digest:
            # Before the claim: a vote on what the page no longer shows is no vote, and the person
            # may still cast theirs on the proposal as it is now.
            said = "The proposal has changed since this page was shown. Read it again before you vote."
            return self._form(opened, question, session, errors={FORM_ERROR: said}, status=409)
        proof = None
        stepping = decision_of(question)  # the requester's own decision too
        if stepping is not None and stepping.step_up == "passkey" and action == "accept":
            try:
                # Before the claim: an approval without its passkey is no vote, and the person may
                # still cast theirs with it.
                proof = await self._passkeys.check(request, session, view.task_id, key, stepping, form)
            except PasskeyRefused as refused:
                asked = await self._passkey_ask(request, session, opened)
                return self._form(
                    opened, question, session, errors={FORM_ERROR: str(refused)}, status=403, passkey=asked
                )
        signed_in_at = None
        if stepping is not None and stepping.step_up == "recent" and action == "accept":
            at = self._recently_signed_in(session)
            if at is None:
                # Before the claim: nothing is delivered, and the person, signed in again, is back
                # at the question (page.js fills in again what they typed) to cast their vote.
                log.info("page_step_up_sign_in", task_id=view.task_id, key=key)
                again = RedirectResponse(sign_in_again(opened.path), status_code=303)
                return self._frame.kept(again, request, session, fresh)
            signed_in_at = ledger_time(datetime.fromtimestamp(at, UTC))
        outcome = await self._claimed(view, key, response, digest, session.caller, seen, proof, signed_in_at)
        if outcome == "sent":
            log.info("page_answered", task_id=view.task_id, key=key, action=response["action"])
        elif outcome == "refused":  # withdrawn since the check above: the claim is spent
            return self._frame.kept(self._not_allowed(opened, session), request, session, fresh)
        return await self._told(request, session, fresh, opened, outcome, question)

    def _not_allowed(self, opened: _Opened, session: PageSession) -> HTMLResponse:
        """The tool's own check refuses the person's answer now: 403, nothing delivered."""
        card = self._card(opened.view, session) if opened.mine else None
        return self._frame.message(session, 403, "not_allowed", card=card)

    async def _told(
        self,
        request: Request,
        session: PageSession,
        fresh: bool,
        opened: _Opened,
        outcome: str,
        question: Mapping[str, Any] | None = None,
    ) -> Response:
        """What the sender of an answer sees, once the task has taken the answer that was taken."""
        view, key = opened.view, opened.key
        if opened.decision is not None and not opened.mine:
            # An approver's vote. Its page is this response, not a page to send them to: they may
            # read the task only while its question waits on them or holds their vote
            # (``Tasks.read_as_decider``), so once theirs was the vote that decided it, no later
            # page could say how it stands. Sending the form again is the same vote (the claim),
            # so a reload shows this page again and counts nothing twice.
            counted = _counted(key, session.principal)
            after = await self._settle(view, session, counted, opened.owner) if outcome == "sent" else view
            if outcome == "unknown":
                return self._frame.message(session, 503, "unknown_outcome")
            return self._frame.kept(self._voted(opened, session, after, outcome), request, session, fresh)
        # A vote leaves its question open until the rule is met: the wait is for the vote's count.
        taken = _counted(key, session.principal) if opened.decision is not None else _taken(key)
        after = await self._settle(view, session, taken, opened.owner)
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
        passkey: Mapping[str, str] | None = None,
        signed_in_at: str | None = None,
    ) -> str:
        """Deliver ``response`` as ``caller`` if it is the question's first answer: ``sent`` (also
        to the same answer sent again); ``lost`` when another answer came first, ``closed`` when the
        task has moved on (or there is no ``response`` to deliver, the question being gone),
        ``refused`` when the tool's check refused ``caller``, ``unknown`` when the same answer's
        delivery did not finish (Temporal failed it). ``digest`` is the answer's, keyed: what the
        claim keeps of it (in its memo) tells nothing of a secret."""
        # One answer per question; a decision's question takes one vote per person instead.
        decision = approvers_decision((view.input_requests or {}).get(key) or {})
        voter = caller.principal if decision is not None else ""
        parts = (view.task_id, key, voter) if voter else (view.task_id, key)
        claim = derive_id(self._tasks.ids.secret, "page answer", *parts)
        left = view.created_at + timedelta(milliseconds=view.ttl_ms) - datetime.now(UTC)

        async def deliver() -> dict[str, Any]:
            if response is None:
                return {"taken": False}
            try:
                delivered = await self._tasks.answer(
                    view,
                    {key: response},
                    caller=caller,
                    via="page",
                    seen=seen,
                    passkey=passkey,
                    signed_in_at=signed_in_at,
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

    async def _question(self, request: Request, session: PageSession) -> _Opened:
        """The task and question of the request's link, as ``session``'s person may see it.

        Raises:
            Refused: the "not known" page (404) for a link that is not this person's, or an
                approvers' link whose rule does not admit them (the person who asked is sent to
                their task's page instead: ``_Opened.asked``); "expired" (410).
        """
        try:
            link = self._links.open(
                request.path_params["token"], session.principal, names_of(session.principal)
            )
        except LinkUnknown:
            raise Refused(self._frame.message(session, 404, "unknown")) from None
        except LinkExpired:
            raise Refused(self._frame.message(session, 410, "expired")) from None
        voter = self._voter(session)
        try:
            if link.approvers:
                # Anyone may hold an approvers' link; only those the question's rule admits see it.
                view, owner = await self._tasks.read_as_decider(link.task_id, voter)
            else:
                view, owner = await self._tasks.to_answer(link.task_id, session.principal), session.principal
        except TaskNotFound as exc:
            kind = "expired" if "expired" in str(exc) else "unknown"
            raise Refused(self._frame.message(session, 410 if kind == "expired" else 404, kind)) from None
        question = (view.input_requests or {}).get(link.key) if view.status == "input_required" else None
        if question is not None and question.get("method") != "elicitation/create":
            question = None  # only its client answers it
        # A question the person who asked decides is their own, answered as any other.
        decision = None if question is None else approvers_decision(question)
        mine = owner == session.principal
        opened = _Opened(
            view=view,
            key=link.key,
            question=question,
            owner=owner,
            mine=mine,
            decision=decision,
            path=request.url.path,
        )
        if decision is None:
            if not link.approvers:
                return opened
            if mine:  # the approvers' link of their own task, once its question is decided
                return replace(opened, question=None, asked=True)
            raise Refused(self._frame.message(session, 404, "unknown"))  # not a link this server made so
        if decision.voted(voter.principal):
            return replace(opened, question=None, voted=True)  # the page shows how the decision stands
        if decision.admits(voter):
            return opened
        if mine:
            # The person who asked, whom the rule does not admit (excluded, or not in it): sent to
            # their task's page rather than shown a page of its own here. That page shows the same
            # decision (the proposal's summary, the rule, each vote as it comes, the link to pass
            # on), follows it live and says how the task ended; a page here would be a second,
            # still copy of it. Anyone else the rule does not admit reads the "not known" page,
            # exactly as a made-up link's.
            return replace(opened, question=None, asked=True)
        raise Refused(self._frame.message(session, 404, "unknown"))

    def _recently_signed_in(self, session: PageSession) -> float | None:
        return signed_in_within(session, self._settings.step_up_max_age_s)

    def _voter(self, session: PageSession) -> Voter:
        return self._tasks.groups.voter(session.principal, session.caller.groups)

    def _voted(
        self, opened: _Opened, session: PageSession, after: TaskView, outcome: str = "sent"
    ) -> HTMLResponse:
        """The page of an approver whose vote is in: how the decision stands now (``after``), or
        that it is decided, and the proposal they voted on. 409 for a vote that was not counted (a
        second, different one: ``lost``; one the question had closed before: ``closed``)."""
        assert opened.decision is not None
        voter = self._voter(session)
        question = (after.input_requests or {}).get(opened.key) if after.status == "input_required" else None
        now = None if question is None else decision_of(question)
        return self._frame.render(
            "answer.html",
            200 if outcome == "sent" else 409,
            session=session,
            card=self._card(after, session),
            mine=opened.mine,
            voted=True,
            outcome=outcome,
            decision=decision_card(opened.decision, opened.key, opened.view, self._links, voter),
            standing=None if now is None else decision_card(now, opened.key, after, self._links, voter),
        )

    def _form(
        self,
        opened: _Opened,
        question: Mapping[str, Any],
        session: PageSession,
        *,
        errors: Mapping[str, str] | None = None,
        values: Mapping[str, list[str]] | None = None,
        status: int = 200,
        passkey: PasskeyAsk | None = None,
    ) -> HTMLResponse:
        view, key = opened.view, opened.key
        params = question.get("params") or {}
        marking = marking_of(question)
        found = decision_of(question)
        decision = (
            None if found is None else decision_card(found, key, view, self._links, self._voter(session))
        )
        recent = None
        if found is not None and found.step_up == "recent":
            within = said_duration(timedelta(seconds=self._settings.step_up_max_age_s))
            fresh = self._recently_signed_in(session) is not None
            recent = RecentAsk(fresh=fresh, within=within, signin=sign_in_again(opened.path))
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
            mine=opened.mine,
            key=key,
            message=message,
            fields=fields,
            errors=errors or {},
            values=values,
            form_error=(errors or {}).get(FORM_ERROR),
            marking=marking,
            decision=decision,
            again=again,
            # Restored by page.js after a sign-in that expired on the way: only on a fresh form.
            draft=status == 200 and not again,
            passkey=passkey,
            recent=recent,
        )

    async def _passkey_ask(
        self, request: Request, session: PageSession, opened: _Opened
    ) -> PasskeyAsk | None:
        """What the page asks the voter's passkey to sign, for an approval that needs one."""
        decision = None if opened.question is None else decision_of(opened.question)
        if decision is None or decision.step_up != "passkey":
            return None
        return await self._passkeys.ask(request, session, opened.view.task_id, opened.key, decision)


@dataclass(frozen=True)
class _Opened:
    """An answer link, opened for the person signed in."""

    view: TaskView
    key: str
    question: Mapping[str, Any] | None
    """What the person may answer now; None when there is nothing (answered, the task has moved
    on, their vote is in, or they asked and others decide)."""
    owner: str
    mine: bool
    """The person owns the task (an approver who does not has no page of it)."""
    decision: DecisionState | None
    """The question's decision, when approvers decide it (``Approvers``), as the link opened."""
    voted: bool = False
    """The person's vote on ``decision`` is in."""
    asked: bool = False
    """The person asked, and the decision is not (or no longer) theirs to take: their task's page."""
    path: str = "/"
    """The link's path on this server: where a sign-in brings the person back to."""


@dataclass(frozen=True)
class RecentAsk:
    """What the page says of an approval that needs a recent sign-in (``answer.html``)."""

    fresh: bool
    """The person's sign-in is recent enough now (an approval sent later may not be)."""
    within: str
    """How recent, as the page says it (``5 minutes``)."""
    signin: str
    """Where they sign in again, to come back here."""


def _to_task(view: TaskView) -> RedirectResponse:
    return RedirectResponse(f"/tasks/{view.task_id}", status_code=303)


def _counted(key: str, principal: str) -> Callable[[TaskView], bool]:
    """Whether the task has taken ``principal``'s vote on question ``key``: counted, or the
    question decided (gone, or with its outcome)."""

    def counted(now: TaskView) -> bool:
        question = (now.input_requests or {}).get(key) if now.status == "input_required" else None
        decision = None if question is None else decision_of(question)
        return decision is None or decision.voted(principal) or decision.outcome is not None

    return counted


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
