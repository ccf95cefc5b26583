"""A task's ledger, exported: ``GET /tasks/<id>/ledger``, every signed entry as one JSON line, oldest
first (``application/x-ndjson``). API process.

For the task's owner, and for the approvers its open question waits for (``Tasks.read_as_decider``);
anyone else gets the page a made-up id gets, so the endpoint tells nobody which tasks exist. Signed
in to the pages (their session cookie), or with a bearer token ``/mcp`` takes, so that
``longtools task audit`` and scripts fetch it; a GET that changes nothing, so no CSRF token. What a
ledger holds and how it is checked offline: ``longtools.decisions``, docs/operations.md "Ledgers".
"""

from __future__ import annotations

import json
import re
from typing import Final

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from longtools.auth import BearerVerifier, Caller, caller_of_token
from longtools.pages._frame import Frame, Refused
from longtools.pages._sessions import PageSession
from longtools.tasks import TaskNotFound, Tasks, TaskView

__all__ = ["LEDGER_TYPE", "Ledgers"]

log = structlog.get_logger("longtools.pages")

LEDGER_TYPE: Final = "application/x-ndjson"
_REFUSED_TOKEN: Final = {"error": "invalid_token", "error_description": "The access token is not valid"}


class Ledgers:
    """``GET /tasks/<id>/ledger``. ``verifier`` is None on a server without authentication (whose
    pages are this computer's person's alone: ``Frame``)."""

    def __init__(self, frame: Frame, tasks: Tasks, verifier: BearerVerifier | None) -> None:
        self._frame = frame
        self._tasks = tasks
        self._verifier = verifier

    async def export(self, request: Request) -> Response:
        found = await self._caller(request)
        if isinstance(found, Response):
            return found
        caller, session = found
        view, role = await self._readable(request.path_params["task_id"], caller, session)
        entries = await self._tasks.ledger(view)
        log.info("ledger_exported", task_id=view.task_id, entries=len(entries), role=role)
        # ASCII JSON: an entry's text (a U+2028 in it) never splits its line, whatever reads the lines.
        body = "".join(json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n" for entry in entries)
        name = re.sub(r"[^0-9A-Za-z_-]", "_", view.task_id)
        headers = {"Content-Disposition": f'attachment; filename="{name}.ledger.jsonl"'}
        return Response(body, media_type=LEDGER_TYPE, headers=headers)

    async def _caller(self, request: Request) -> tuple[Caller, PageSession | None] | Response:
        """Who asks: a bearer token's caller (refused as ``/mcp`` refuses it), else the pages'
        session (a person not signed in is sent to sign in, as by every page)."""
        header = request.headers.get("authorization")
        # RFC 6750 section 2.1: the scheme is case-insensitive. Without authentication, the token is
        # ignored as /mcp ignores it: the pages are this computer's person's.
        if self._verifier is not None and header is not None and header[:7].lower() == "bearer ":
            access = await self._verifier.verify_token(header[7:])
            if access is None:  # the reason is logged by the verifier
                challenge = 'Bearer error="invalid_token"'
                return JSONResponse(_REFUSED_TOKEN, status_code=401, headers={"WWW-Authenticate": challenge})
            return caller_of_token(access), None
        session, _ = await self._frame.signed_in(request)
        return session.caller, session

    async def _readable(
        self, task_id: str, caller: Caller, session: PageSession | None
    ) -> tuple[TaskView, str]:
        """The task, if ``caller`` owns it or an open question of it waits for them; else the page a
        made-up id gets (the owner alone is told a task has expired)."""
        try:
            return await self._tasks.get(task_id, caller.principal), "owner"
        except TaskNotFound as exc:
            if "expired" in str(exc):
                raise Refused(self._frame.message(session, 404, "expired_task")) from None
        voter = self._tasks.groups.voter(caller.principal, caller.groups)
        try:
            view, _ = await self._tasks.read_as_decider(task_id, voter)
        except TaskNotFound:
            raise Refused(self._frame.message(session, 404, "unknown_task")) from None
        return view, "approver"
