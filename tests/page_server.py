"""A ``longtools serve`` for the person's pages with ann's and ben's tokens and the page tools
(``tests/page_tools.py``), and what the page tests do over MCP beside a person: start a task, read
it, find its question's link. Also a page's request for news held open on a raw socket, which a
test can leave as a browser does (close it) or read once the server answers."""

from __future__ import annotations

import json
import select
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.conftest import OWNER_TOKENS, Served, bearer, start_server
from tests.pages import PageClient
from tests.wire import TASKS_EXTENSION, eventually, post, result

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
LINKS = "longtools.dev/answer-links"


def start_pages_server(tmp: Path, **env: str) -> Served:
    """``serve`` with the person tools and the page tools, and ``env`` on top of ann's and ben's
    static tokens."""
    tokens = ",".join(f"{token}={name}" for name, token in OWNER_TOKENS.items())
    return start_server(
        tmp,
        "--tools",
        "tests.person_tools",
        "--tools",
        "tests.page_tools",
        env={"LONGTOOLS_AUTH_TOKENS": tokens, **env},
        timeout=60,
    )


def call(url: str, name: str, arguments: dict[str, Any], who: str = "ann") -> dict[str, Any]:
    """``who`` calls ``name`` as a client with tasks: the task it started."""
    params = {"name": name, "arguments": arguments}
    return result(post(url, "tools/call", params, caps=TASK_CAPS, headers=bearer(who)))


def task(url: str, task_id: str, who: str = "ann") -> dict[str, Any]:
    return result(post(url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=bearer(who)))


def link_of(url: str, task_id: str, who: str = "ann") -> str:
    """The link of the one question ``task_id`` waits for, once it asks."""
    asking = eventually(lambda: task(url, task_id, who), lambda now: LINKS in now.get("_meta", {}), within=30)
    [link] = asking["_meta"][LINKS].values()
    return str(link)


def ended(url: str, task_id: str, who: str = "ann") -> dict[str, Any]:
    return eventually(
        lambda: task(url, task_id, who),
        lambda now: now["status"] in ("completed", "failed", "cancelled"),
        within=30,
    )


def signed_in(served: Served, who: str) -> PageClient:
    client = PageClient(served.base)
    client.sign_in(OWNER_TOKENS[who])
    return client


class HeldGet:
    """One GET of a page held open on a socket of its own, as a browser's ``fetch`` is."""

    def __init__(self, base: str, path: str, browser: PageClient) -> None:
        parts = urlsplit(base)
        cookies = "; ".join(f"{cookie.name}={cookie.value}" for cookie in browser.http.cookies.jar)
        self.sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=30)
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept: application/json\r\n"
            f"Cookie: {cookies}\r\nConnection: close\r\n\r\n"
        )
        self.sock.sendall(request.encode())

    def leave(self) -> None:
        """The browser goes away: the connection closes with the request unanswered."""
        self.sock.close()

    def answer(self) -> tuple[int, dict[str, Any]]:
        """The status and JSON body of the response (the server closes the connection after it)."""
        raw = b""
        while chunk := self.sock.recv(65536):
            raw += chunk
        self.sock.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if b"transfer-encoding: chunked" in head.lower():
            body = _unchunked(body)
        return status, json.loads(body) if body else {}


def first_answered(gets: Sequence[HeldGet], within: float = 20) -> HeldGet:
    """The first of ``gets`` the server answers (bounded by ``within`` seconds)."""
    readable, _, _ = select.select([held.sock for held in gets], [], [], within)
    assert readable, f"none of {len(gets)} requests was answered within {within} s"
    return next(held for held in gets if held.sock is readable[0])


def _unchunked(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, body = out + body[:size], body[size + 2 :]
    return out
