"""The person's pages driven over plain HTTP, as a browser without JavaScript would: sign in, open
an answer link, send a form. For the tests that need a person to answer, not the page's looks (those
are in tests/test_pages_browser.py, in a real Chromium)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx


class _Forms(HTMLParser):
    """The hidden inputs and field names of a page's forms, and its error texts by field."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden: dict[str, str] = {}
        self.names: list[str] = []
        self.errors: dict[str, str] = {}
        self._error_of: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "input" and found.get("type") == "hidden" and found.get("name"):
            self.hidden[str(found["name"])] = found.get("value") or ""
        elif tag in ("input", "select") and found.get("name"):
            self.names.append(str(found["name"]))
        elif tag == "p" and "error" in (found.get("class") or "").split():
            ident = found.get("id") or ""
            self._error_of = ident.removeprefix("f-").removesuffix("-error") if ident != "form-error" else ""

    def handle_data(self, data: str) -> None:
        if self._error_of is not None:
            self.errors[self._error_of] = self.errors.get(self._error_of, "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "p":
            self._error_of = None


@dataclass
class Page:
    response: httpx.Response

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def text(self) -> str:
        return self.response.text

    @property
    def heading(self) -> str:
        found = re.search(r"<h1>(.*?)</h1>", self.text, re.S)
        return re.sub(r"<[^>]+>", "", found.group(1)).strip() if found else ""

    def forms(self) -> _Forms:
        parsed = _Forms()
        parsed.feed(self.text)
        return parsed


class PageClient:
    """One browser's cookies against one server's pages (``base``: ``http://127.0.0.1:port``)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(base_url=base, follow_redirects=False, timeout=30)

    def __enter__(self) -> PageClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def get(self, path_or_url: str) -> Page:
        """GET a page, following this server's redirects (never another site's)."""
        response = self.http.get(_path(path_or_url))
        while response.is_redirect:
            location = response.headers["location"]
            assert urlsplit(urljoin(self.base, location)).netloc == urlsplit(self.base).netloc, location
            response = self.http.get(_path(location))
        return Page(response)

    def sign_in(self, token: str) -> Page:
        """Sign in with a bearer token on the sign-in form."""
        form = self.get("/signin?next=/tasks")
        hidden = form.forms().hidden
        response = self.http.post("/signin", data={**hidden, "token": token})
        assert response.status_code == 303, response.text
        return self.get(response.headers["location"])

    def answer(self, link: str, fields: dict[str, Any], *, action: str = "accept", csrf: bool = True) -> Page:
        """Open ``link`` and send its form with ``fields`` (a bool ticks a box; a list, several)."""
        opened = self.get(link)
        assert opened.status == 200, opened.text
        return self.send(link, opened, fields, action=action, csrf=csrf)

    def send(
        self, link: str, opened: Page, fields: dict[str, Any], *, action: str = "accept", csrf: bool = True
    ) -> Page:
        data: list[tuple[str, str]] = [
            (name, value) for name, value in opened.forms().hidden.items() if csrf or name != "csrf"
        ]
        for name, value in fields.items():
            if value is True:
                data.append((name, "true"))
            elif isinstance(value, list):
                data += [(name, str(item)) for item in value]
            elif value is not False:
                data.append((name, str(value)))
        data.append(("action", action))
        form = {"content-type": "application/x-www-form-urlencoded"}
        response = self.http.post(_path(link), content=urlencode(data), headers=form)
        if response.is_redirect:
            return self.get(response.headers["location"])
        return Page(response)


@contextmanager
def signed_in_people(base: str, tokens: Mapping[str, str]) -> Iterator[Callable[[str], PageClient]]:
    """``people(name)``: that person signed in to the pages with their token (``tokens[name]``), in
    a browser of their own; every one closed at the end."""
    with ExitStack() as stack:

        def signed_in(who: str) -> PageClient:
            person = stack.enter_context(PageClient(base))
            person.sign_in(tokens[who])
            return person

        yield signed_in


@contextmanager
def person_answering(
    base: str, url_file: Path, fields: dict[str, Any], *, token: str | None = None, within: float = 60
) -> Iterator[list[str]]:
    """A person beside a client driver (tests/clients/*.mjs, its script's ``urlFile``): on a thread
    while the block runs, waits (bounded by ``within``) for the first URL request the driver writes
    to ``url_file``, then answers its page with ``fields`` (signed in with ``token`` when the server
    has tokens). Yields the links answered; on leaving, waits for the person and re-raises what
    went wrong on their side."""
    answered: list[str] = []
    failed: list[BaseException] = []
    gone = threading.Event()  # the block failed: stop waiting

    def person() -> None:
        try:
            deadline = time.monotonic() + within
            while not gone.is_set():
                lines = url_file.read_text().splitlines(keepends=True) if url_file.exists() else []
                if lines and lines[0].endswith("\n"):  # a whole line: the driver wrote it all
                    link = str(json.loads(lines[0])["url"])
                    with PageClient(base) as browser:
                        if token is not None:
                            browser.sign_in(token)
                        answered.append(link)
                        sent = browser.answer(link, fields)
                    assert "Your answer was sent" in sent.text, sent.text
                    return
                assert time.monotonic() < deadline, f"no URL request in {url_file} within {within} s"
                gone.wait(0.05)
        except BaseException as exc:  # handed to the test's thread on leaving
            failed.append(exc)

    thread = threading.Thread(target=person, daemon=True)
    thread.start()
    try:
        yield answered
    except BaseException:
        gone.set()
        thread.join(timeout=within)
        raise
    thread.join(timeout=within)
    if failed:
        raise failed[0]


def _path(path_or_url: str) -> str:
    parts = urlsplit(path_or_url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def main(argv: list[str]) -> int:
    """``python -m tests.pages BASE TASK_ID field=value ...``: the person answers a task's question
    on its page (what tests/test_docs.py runs in place of a person at a browser). Without auth."""
    from tests.wire import get_task

    base, task_id, *pairs = argv
    task = get_task(f"{base}/mcp", task_id)
    [link] = task["_meta"]["longtools.dev/answer-links"].values()
    fields: dict[str, Any] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        fields[name] = True if value == "true" else value
    with PageClient(base) as browser:
        sent = browser.answer(link, fields)
    return 0 if "Your answer was sent" in sent.text else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
