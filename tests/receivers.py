"""Real receivers of notifications on loopback, for the tests: an SMTP server (aiosmtpd) that keeps
every mail, and an HTTP server that keeps every webhook POST (and can be made to fail, hold a
request, or be down)."""

from __future__ import annotations

import base64
import email
import email.policy
import json
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.conftest import free_port
from tests.wire import eventually


@dataclass
class Mail:
    to: list[str]
    subject: str
    body: str
    raw: str


class Mailbox:
    """An SMTP server on loopback that keeps what it is sent."""

    def __init__(self) -> None:
        self.mails: list[Mail] = []
        self._lock = threading.Lock()
        self.port = free_port()
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.content if isinstance(envelope.content, bytes) else str(envelope.content).encode()
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        part = parsed.get_body(preferencelist=("plain",))
        body = part.get_content() if part is not None else ""
        with self._lock:
            self.mails.append(
                Mail(
                    to=[str(to) for to in envelope.rcpt_tos],
                    subject=str(parsed["subject"]),
                    body=str(body),
                    raw=raw.decode(errors="replace"),
                )
            )
        return "250 OK"

    @property
    def url(self) -> str:
        """``LONGTOOLS_NOTIFY_EMAIL`` for this server: plain SMTP, no sign-in (loopback)."""
        return f"mailto://127.0.0.1:{self.port}?from=longtools@example.test&mode=insecure"

    def to(self, address: str) -> list[Mail]:
        with self._lock:
            return [mail for mail in self.mails if address in mail.to]

    def __enter__(self) -> Mailbox:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()


@dataclass
class Hook:
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


@dataclass
class _Behaviour:
    status: int = 204
    hold: threading.Event | None = None
    """While set to an unset event, requests are held (a receiver that hangs) until it is set."""
    holding: list[Hook] = field(default_factory=list)


class WebhookReceiver:
    """An HTTP server on loopback that keeps each webhook POST; ``status`` is what it answers.
    ``down()``/``up()`` close and reopen its port (the same port each time)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.hooks: list[Hook] = []
        self.behaviour = _Behaviour()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                hook = Hook(
                    headers={k.lower(): v for k, v in self.headers.items()}, body=self.rfile.read(length)
                )
                behaviour = receiver.behaviour
                if behaviour.hold is not None and not behaviour.hold.is_set():
                    with receiver._lock:
                        behaviour.holding.append(hook)
                    behaviour.hold.wait(60)
                    return  # hung up on: the sender never hears back
                with receiver._lock:
                    receiver.hooks.append(hook)
                self.send_response(behaviour.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def received(self) -> list[Hook]:
        with self._lock:
            return list(self.hooks)

    def __enter__(self) -> WebhookReceiver:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.behaviour.hold is not None:
            self.behaviour.hold.set()
        self.down()


def webhook_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def wait_for(probe: Callable[[], list[Any]], count: int = 1, within: float = 30) -> list[Any]:
    """``probe()`` until it holds ``count`` items, bounded by ``within`` seconds."""
    return eventually(probe, lambda found: len(found) >= count, within)


def links_in(text: str) -> Iterator[str]:
    for word in text.split():
        if word.startswith("http://") or word.startswith("https://"):
            yield word.rstrip(".,")
