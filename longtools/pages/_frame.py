"""What every page shares: its headers, where a request may come from, rendering, the pages that
refuse, who is signed in, and reading a POSTed form against its CSRF token. API process."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final
from urllib.parse import parse_qs, urlencode

import structlog
from jinja2 import Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from temporalio.service import RPCError

from longtools._settings import Settings, is_loopback
from longtools.auth import ANONYMOUS
from longtools.pages._sessions import PageSession, Sessions, csrf_matches
from longtools.temporal import PayloadDecryptError, unreachable

__all__ = ["Frame", "Handler", "Refused", "local"]

log = structlog.get_logger("longtools.pages")

Handler = Callable[[Request], Awaitable[Response]]

_HEADERS: Final = {
    # Nothing but this server's own files, never inside another site's frame (clickjacking), no
    # address of a page (with its link) sent on to anyone, nothing kept by a cache.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
}
_MAX_FORM_BYTES: Final = 65_536
_LOCAL_NAME: Final = "you, on this computer"


class Refused(Exception):
    """A request answered with a page instead of what it asked for (``response``)."""

    def __init__(self, response: Response) -> None:
        self.response = response


class Frame:
    def __init__(self, settings: Settings, sessions: Sessions, allowed_hosts: Sequence[str]) -> None:
        self._settings = settings
        self.sessions = sessions
        self._allowed_hosts = list(allowed_hosts)
        self._templates = Environment(
            loader=PackageLoader("longtools.pages", "templates"), autoescape=True, auto_reload=False
        )

    def page(self, handler: Handler) -> Handler:
        """``handler`` as an endpoint: the origin checked first, a refusal answered with its page, an
        unreachable Temporal with one page, and every answer with the pages' headers."""

        async def endpoint(request: Request) -> Response:
            try:
                self._check_origin(request)
                response = await handler(request)
            except Refused as refused:
                response = refused.response
            except (RPCError, RuntimeError, PayloadDecryptError) as exc:
                if isinstance(exc, RuntimeError) and not unreachable(exc):
                    raise
                log.error("temporal_error", operation="page", detail=type(exc).__name__)
                response = self.message(None, 503, "unavailable")
            response.headers.update(_HEADERS)
            return response

        return endpoint

    def _check_origin(self, request: Request) -> None:
        """Where a request may come from: a ``Host`` of this server (DNS rebinding), and on a server
        without sign-in, this computer only."""
        host = request.headers.get("host", "")
        if not any(
            host == allowed or (allowed.endswith(":*") and host.startswith(allowed[:-1]))
            for allowed in self._allowed_hosts
        ):
            raise Refused(Response("Misdirected request", status_code=421, media_type="text/plain"))
        client = request.client.host if request.client is not None else ""
        if not self._settings.auth_configured and not is_loopback(client):
            raise Refused(self.message(None, 403, "local_only"))

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.fragment(template, **context), status_code=status)

    def fragment(self, template: str, **context: Any) -> str:
        return self._templates.get_template(template).render(
            server_name=self._settings.server_name, **context
        )

    def message(self, session: PageSession | None, status: int, kind: str, **context: Any) -> HTMLResponse:
        """One page for every refusal of its kind: ``unknown`` (a link or task that is not the
        signed-in person's, made up or tampered), ``expired``, ``answered``, ``closed``,
        ``not_allowed`` (403: the tool's own check refuses the person's answer) ..."""
        return self.render("message.html", status, session=session, kind=kind, **context)

    async def signed_in(self, request: Request) -> tuple[PageSession, bool]:
        """The request's session, and whether it is new (to be set on the response, ``kept``); a
        person not signed in is sent to the sign-in page, which brings them back here."""
        session, expired = await self.sessions.current(request)
        if session is not None:
            return session, False
        if not self._settings.auth_configured:  # this computer only (_check_origin): one principal
            return self.sessions.new(ANONYMOUS, _LOCAL_NAME, "local"), True
        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        query = {"next": back, **({"expired": "1"} if expired else {})}
        if request.method != "GET" or request.url.path.endswith("/live"):
            raise Refused(self.message(None, 401, "signed_out", next=back))
        raise Refused(RedirectResponse(f"/signin?{urlencode(query)}", status_code=303))

    def kept(self, response: Response, request: Request, session: PageSession, fresh: bool) -> Response:
        """``response``, with the session's cookie when the session is ``fresh``."""
        if fresh:
            self.sessions.set(response, request, session)
        return response

    async def form(self, request: Request, session: PageSession | None) -> dict[str, list[str]]:
        """A POSTed form, refused unless it carries the CSRF token of ``session`` (or of the
        sign-in form, before there is one)."""
        if (
            request.headers.get("content-type", "").split(";")[0].strip()
            != "application/x-www-form-urlencoded"
        ):
            raise Refused(self.message(session, 415, "bad_form"))
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > _MAX_FORM_BYTES:
                raise Refused(self.message(session, 413, "bad_form"))
        try:
            form = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=500)
        except (UnicodeDecodeError, ValueError):
            raise Refused(self.message(session, 400, "bad_form")) from None
        sent = (form.get("csrf") or [""])[-1]
        fits = (
            csrf_matches(session, sent)
            if session is not None
            else self.sessions.form_token_matches(request, sent)
        )
        if not fits:
            # The route, never the path: an answer link's path is the link (docs/security.md).
            log.warning("page_form_refused", route=_route_of(request), reason="csrf")
            raise Refused(self.message(session, 403, "stale_form"))
        return form


def _route_of(request: Request) -> str:
    """``request``'s path with each of its parameters by name (``/answer/{token}``): which page it
    was, without what the request put in its path."""
    path = request.url.path
    for name, value in request.path_params.items():
        path = path.replace(str(value), f"{{{name}}}")
    return path


def local(path: str | None) -> str:
    """``path`` if it is a path of this server, else ``/tasks``: the pages never send a browser to
    another site on a request's say-so (open redirects)."""
    if (
        not path
        or not path.startswith("/")
        or path.startswith("//")
        or "\\" in path
        or any(ord(char) < 0x20 or ord(char) == 0x7F for char in path)
    ):
        return "/tasks"
    return path
