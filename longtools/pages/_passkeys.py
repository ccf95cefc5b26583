"""Passkeys: a person registers theirs on ``/passkeys``, and an approval that asks for one
(``ask_form(step_up="passkey")``) counts only signed with it. API process.

Both ceremonies are WebAuthn, checked by the maintained ``webauthn`` library, never by hand.

- **Registering** takes a sign-in within ``step_up_max_age_s`` (else the person signs in again and
  comes back): a session cookie alone, left open or stolen, must not add a key of its holder's. The
  page carries the creation options, their challenge random and sealed with
  the person's principal and an expiry in the form (``ceremony``), so any replica checks the answer
  and nothing is kept between the two requests. User verification is required. The passkey (its id,
  public key and counter) is kept in the person's profile in the directory of people
  (``longtools.people``): Temporal, encrypted like every payload, shared by every replica, with no
  other database. Why there: it is already where the pages keep a person (their verified email), it
  is bound to their principal, and a vote's check needs it in any replica.
- **Approving**: the challenge is the vote's own (``passkey_challenge``: the proposal's digest, the
  task, the question, the voter), so an assertion approves this proposal there, by them, and
  nothing else. The assertion must come from one of the voter's passkeys, with the person verified,
  and its counter must move on (a copy of an earlier one is refused). It goes with the vote, whole,
  into the ledger (``longtools audit verify`` checks it again).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from urllib.parse import urlencode, urlsplit

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from longtools._sealing import Sealer, Unsealable
from longtools._settings import Settings
from longtools.decisions import DecisionState, passkey_challenge
from longtools.pages._frame import Frame
from longtools.pages._sessions import PageSession, sign_in_again, signed_in_within
from longtools.pages._views import said_duration
from longtools.people import Directory, Passkey
from longtools.tasks import public_base

__all__ = ["PasskeyAsk", "PasskeyRefused", "Passkeys"]

log = structlog.get_logger("longtools.pages")

_LABEL: Final = "longtools passkey ceremonies"
_CEREMONY_S: Final = 300
"""How long a registration's options stay good (WebAuthn's own timeout is a minute)."""
_MAX_NAME: Final = 60
_MAX_PASSKEYS: Final = 20


class PasskeyRefused(Exception):
    """A vote's passkey assertion does not hold; the message says why, in the person's words."""


@dataclass(frozen=True)
class PasskeyAsk:
    """What an approval page needs to ask the voter's passkey (``answer.html``)."""

    challenge: str
    rp_id: str
    allow: list[str]
    """The voter's passkeys' ids (base64url): none, and the page says how to register one."""
    back: str
    """The question's page: where registering a passkey brings the person back to."""


class Passkeys:
    def __init__(self, frame: Frame, settings: Settings, people: Directory) -> None:
        self._frame = frame
        self._settings = settings
        self._people = people
        self._sealer = Sealer(settings.require_state_keys(), _LABEL)

    @property
    def routes(self) -> list[BaseRoute]:
        page = self._frame.page
        return [
            Route("/passkeys", page(self.page), methods=["GET"]),
            Route("/passkeys", page(self.register), methods=["POST"]),
            Route("/passkeys/remove", page(self.remove), methods=["POST"]),
        ]

    def _party(self, request: Request) -> tuple[str, str]:
        """The relying party id and the origin the person's browser is at."""
        origin = public_base(self._settings, str(request.base_url))
        return self._settings.passkey_rp_id or (urlsplit(origin).hostname or ""), origin

    async def _mine(self, principal: str) -> list[Passkey]:
        profile = await self._people.profile(principal)
        return [] if profile is None else list(profile.passkeys)

    async def page(self, request: Request, *, said: str | None = None, status: int = 200) -> Response:
        session, fresh = await self._frame.signed_in(request)
        mine = await self._mine(session.principal)
        # Adding a passkey takes a recent sign-in: a session cookie alone (one left open, or stolen)
        # must not be enough to add a key of one's own and approve with it.
        recent = signed_in_within(session, self._settings.step_up_max_age_s) is not None
        rp_id, _ = self._party(request)
        challenge = secrets.token_bytes(32)
        from longtools.pages import _webauthn  # on first use: 0.15 s of imports no start needs

        options = _webauthn.creation_options(
            rp_id=rp_id,
            rp_name=self._settings.server_name,
            user_id=_user_handle(session.principal),
            user_name=session.name,
            challenge=challenge,
            exclude=[key.id for key in mine],
        )
        ceremony = self._sealer.seal(
            {"c": _base64url(challenge), "e": int(time.time()) + _CEREMONY_S}, session.principal
        )
        next_path = request.query_params.get("next", "")
        response = self._frame.render(
            "passkeys.html",
            status,
            session=session,
            passkeys=mine,
            options=options,
            ceremony=ceremony,
            next=next_path if _local(next_path) else "",
            said=said,
            full=len(mine) >= _MAX_PASSKEYS,
            recent=recent,
            signin=sign_in_again(_page_of(next_path)),
            within=said_duration(timedelta(seconds=self._settings.step_up_max_age_s)),
        )
        return self._frame.kept(response, request, session, fresh)

    async def register(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        form = await self._frame.form(request, session)
        name = (form.get("name") or [""])[-1].strip()[:_MAX_NAME] or "Passkey"
        next_path = (form.get("next") or [""])[-1]
        if signed_in_within(session, self._settings.step_up_max_age_s) is None:
            log.info("passkey_refused", kind="registration", reason="sign_in_not_recent")
            again = RedirectResponse(sign_in_again(_page_of(next_path)), status_code=303)
            return self._frame.kept(again, request, session, fresh)
        try:
            sealed = self._sealer.open((form.get("ceremony") or [""])[-1], session.principal)
        except Unsealable:
            sealed = {}
        challenge, expires = sealed.get("c"), sealed.get("e")
        if not isinstance(challenge, str) or not isinstance(expires, int) or time.time() > expires:
            return await self.page(request, said="That took too long: register it again.", status=400)
        rp_id, origin = self._party(request)
        mine = await self._mine(session.principal)
        if len(mine) >= _MAX_PASSKEYS:
            return await self.page(request, said="You have as many passkeys as a person may.", status=409)
        from longtools.pages import _webauthn  # on first use: 0.15 s of imports no start needs

        credential = (form.get("credential") or ["{}"])[-1]
        try:
            made = _webauthn.registered(credential, challenge=challenge, rp_id=rp_id, origin=origin)
        except _webauthn.CeremonyFailed as exc:
            log.info("passkey_refused", kind="registration", reason=str(exc))
            return await self.page(request, said="The passkey could not be registered.", status=400)
        if any(key.id == made.id for key in mine):
            return await self.page(request, said="That passkey is registered already.", status=409)
        added = Passkey(
            id=made.id,
            public_key=made.public_key,
            sign_count=made.sign_count,
            name=name,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            transports=_transports(credential),
        )
        await self._people.save_passkeys(session.principal, [*mine, added])
        log.info("passkey_registered", credential=made.id[:12])
        target = next_path if _local(next_path) else "/passkeys?registered=1"
        return self._frame.kept(RedirectResponse(target, status_code=303), request, session, fresh)

    async def remove(self, request: Request) -> Response:
        session, fresh = await self._frame.signed_in(request)
        form = await self._frame.form(request, session)
        gone = (form.get("id") or [""])[-1]
        mine = await self._mine(session.principal)
        if any(key.id == gone for key in mine):
            await self._people.save_passkeys(session.principal, [key for key in mine if key.id != gone])
            log.info("passkey_removed", credential=gone[:12])
        return self._frame.kept(RedirectResponse("/passkeys", status_code=303), request, session, fresh)

    async def ask(
        self, request: Request, session: PageSession, task_id: str, key: str, decision: DecisionState
    ) -> PasskeyAsk:
        """What the approval page of ``decision`` asks the voter's authenticator to sign."""
        challenge = passkey_challenge(task_id, key, session.principal, decision.digest)
        rp_id, _ = self._party(request)
        mine = await self._mine(session.principal)
        return PasskeyAsk(
            challenge=_base64url(challenge),
            rp_id=rp_id,
            allow=[passkey.id for passkey in mine],
            back=request.url.path,
        )

    async def check(
        self,
        request: Request,
        session: PageSession,
        task_id: str,
        key: str,
        decision: DecisionState,
        form: Mapping[str, list[str]],
    ) -> dict[str, str]:
        """The assertion the approval came with, checked, as its stamp and the ledger keep it.

        Raises:
            PasskeyRefused: none came, or it is not one of the voter's passkeys, not over this vote,
                without the person verified, or a copy of one already used.
        """
        raw = (form.get("passkey") or [""])[-1]
        if not raw:
            raise PasskeyRefused("This approval needs your passkey, and none came with it.")
        from longtools.pages import _webauthn  # on first use: 0.15 s of imports no start needs

        try:
            assertion = _webauthn.read_assertion(raw)
        except _webauthn.CeremonyFailed:
            raise PasskeyRefused("The passkey's answer could not be read.") from None
        mine = await self._mine(session.principal)
        passkey = next((candidate for candidate in mine if candidate.id == assertion.id), None)
        if passkey is None:
            log.info("passkey_refused", kind="vote", task_id=task_id, reason="not_theirs")
            raise PasskeyRefused("That is not one of your passkeys.")
        rp_id, origin = self._party(request)
        try:
            counter = _webauthn.asserted(
                assertion,
                challenge=passkey_challenge(task_id, key, session.principal, decision.digest),
                rp_id=rp_id,
                origin=origin,
                public_key=passkey.public_key,
                sign_count=passkey.sign_count,
            )
        except _webauthn.CeremonyFailed as exc:
            log.info("passkey_refused", kind="vote", task_id=task_id, reason=str(exc))
            raise PasskeyRefused("Your passkey did not sign this approval.") from None
        if counter != passkey.sign_count:
            moved = passkey.model_copy(update={"sign_count": counter})
            await self._people.save_passkeys(
                session.principal, [moved if key.id == passkey.id else key for key in mine]
            )
        return {"credential": passkey.id, "publicKey": passkey.public_key, **assertion.proof()}


def _base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _user_handle(principal: str) -> bytes:
    """The WebAuthn user handle of a principal: a keyless hash (it names no one on the device)."""
    return hashlib.sha256(b"longtools user\x00" + principal.encode()).digest()[:32]


def _transports(credential: str) -> list[str]:
    try:
        found = json.loads(credential).get("response", {}).get("transports") or []
    except (ValueError, AttributeError):
        return []
    return [str(item) for item in found if isinstance(item, str)][:8]


def _page_of(next_path: str) -> str:
    """This page, leading on to ``next_path`` (a question) once a passkey is added."""
    return "/passkeys" + (f"?{urlencode({'next': next_path})}" if _local(next_path) else "")


def _local(path: str) -> bool:
    return path.startswith("/") and not path.startswith("//") and "\\" not in path
