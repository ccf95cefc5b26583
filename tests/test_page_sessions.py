"""What ends a sign-in to the pages, over real HTTP against real processes: the expiry of the JWT it
was made with, its static token taken out of the configuration, a sign-out (for every copy of the
cookie, on every replica). And around it: a refused form keeps its link out of the log, another
server of this computer (whose cookies the browser shares: cookies ignore ports) cannot replace
this one's sign-in, and an issuer whose discovery fails is not asked again at every sign-in.

Ours (findings S-M3, S-L1, S-L4 and the OIDC discovery one of the 55d77a6 review). Two API processes
share one Temporal: ``serve`` (API and worker) and ``api``, another replica.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
import pytest

from longtools._settings import Settings
from longtools.pages._oidc import DISCOVERY_RETRY_S, OidcSignIn, SignInFailed
from longtools.temporal import start_dev_server
from tests.conftest import OWNER_TOKENS, STATE_KEY, Served, bearer, free_port, server_ready, spawn
from tests.pages import Page, PageClient
from tests.wire import TASKS_EXTENSION, eventually, get_task, post, result

JWT_SECRET = secrets.token_urlsafe(32)
CAM_TOKEN = secrets.token_urlsafe(24)
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
LINKS = "longtools.dev/answer-links"
ANSWER = {"confirm": True, "reason": "Duplicate"}


class DownIssuer:
    """An OpenID Connect issuer whose discovery document fails (503), counting how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0
        self._lock = threading.Lock()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with issuer._lock:
                    issuer.asked += 1
                self.send_response(503)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # pytest's output is not the place

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="down-issuer", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> DownIssuer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(10)
        self._server.server_close()


@dataclass
class Pair:
    """Two replicas of one deployment on one Temporal, and what they were started with."""

    a: Served
    """``serve``: an API and the worker."""
    b: Served
    """``api``: another replica; a browser reaches it through ``a``'s host name, as through a proxy."""
    issuer: DownIssuer
    tmp: Path
    temporal_address: str
    env: dict[str, str]

    @property
    def host(self) -> str:
        """The ``Host`` of the deployment as browsers address it (``a``'s)."""
        return urlsplit(self.a.base).netloc


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    tmp = tmp_path_factory.mktemp("page-sessions")
    temporal = asyncio.run(start_dev_server(tmp / "temporal" / "temporal.db"))
    started: list[Served] = []
    try:
        with DownIssuer() as issuer:
            port = free_port()
            env = {
                "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in OWNER_TOKENS.items()),
                "LONGTOOLS_JWT_SECRET": JWT_SECRET,
                "LONGTOOLS_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
                "LONGTOOLS_OIDC_CLIENT_ID": "longtools-pages",
                "LONGTOOLS_OIDC_ISSUER": issuer.url,
                "LONGTOOLS_HELPDESK_WORK_S": "0.3",
            }
            address = ["--temporal-address", temporal.address]
            # Both cold starts side by side (seconds of imports each).
            a = spawn(tmp, ["serve", "--port", str(port), *address], env)
            b = spawn(tmp, ["api", "--port", "0", *address], env)
            for spawned in (a, b):
                try:
                    started.append(server_ready(spawned))
                except BaseException:
                    for process, _ in (a, b):
                        process.kill()
                    raise
            yield Pair(started[0], started[1], issuer, tmp, temporal.address, env)
    finally:
        for served in started:
            served.stop()
        temporal.stop()


def _mint(sub: str, exp: float, audience: str) -> str:
    return jwt.encode({"sub": sub, "aud": audience, "exp": int(exp)}, JWT_SECRET, algorithm="HS256")


def _call(url: str, headers: dict[str, str], name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return result(post(url, "tools/call", params, caps=TASK_CAPS, headers=headers))


def _asking(url: str, headers: dict[str, str]) -> tuple[str, str]:
    """A new task of the caller of ``headers`` that asks the person to confirm: its id and link."""
    customer = f"c-{secrets.token_hex(4)}"
    for n in range(2):
        _call(url, headers, "create_ticket", {"title": f"t{n}", "customer": customer})
    task_id = str(_call(url, headers, "bulk_close_tickets", {"customer": customer})["taskId"])
    asking = eventually(lambda: get_task(url, task_id, headers), _waits_for_the_person)
    [link] = asking["_meta"][LINKS].values()
    return task_id, str(link)


def _waits_for_the_person(task: dict[str, Any]) -> bool:
    """Whether the task waits for the person's answer on its page (its link is out)."""
    return task["status"] not in ("completed", "failed", "cancelled") and bool(
        task.get("_meta", {}).get(LINKS)
    )


def _who(page: Page) -> str | None:
    """Who the page says is signed in (None on a page with nobody signed in)."""
    found = re.search(r'<strong id="who">(.*?)</strong>', page.text)
    return found.group(1) if found else None


def _cookie_header(browser: PageClient) -> str:
    return "; ".join(f"{cookie.name}={cookie.value}" for cookie in browser.http.cookies.jar)


def _copy(browser: PageClient) -> PageClient:
    """Another client holding the same cookies: a copy of the cookie taken (stolen, synced) elsewhere."""
    copy = PageClient(browser.base)
    for cookie in browser.http.cookies.jar:
        copy.http.cookies.jar.set_cookie(cookie)
    return copy


def test_a_sign_in_with_a_jwt_ends_when_the_jwt_would_be_refused(pair: Pair) -> None:
    resource = pair.env["LONGTOOLS_RESOURCE_URL"]
    mcp = {"authorization": f"Bearer {_mint('jess', time.time() + 300, resource)}"}
    task_id, link = _asking(pair.a.url, mcp)
    # Accepted within the verifier's 30 s of leeway on exp, with 10 s of it left.
    short = _mint("jess", time.time() - 20, resource)
    with PageClient(pair.a.base) as browser:
        browser.sign_in(short)
        opened = browser.get(link)
        assert opened.status == 200 and _who(opened) == "jess"
        again = eventually(lambda: browser.get(link), lambda page: page.heading != opened.heading, 30)
        assert urlsplit(str(again.response.url)).path == "/signin"
        assert "Your sign-in has expired" in again.text
        late = browser.send(link, opened, ANSWER)
        assert late.status == 401  # not signed in: nothing is sent
    assert _waits_for_the_person(get_task(pair.a.url, task_id, mcp))


def test_signing_out_ends_the_session_for_every_copy_of_its_cookie_on_every_replica(pair: Pair) -> None:
    task_id, link = _asking(pair.a.url, bearer("ann"))
    with PageClient(pair.a.base) as browser:
        browser.sign_in(OWNER_TOKENS["ann"])
        with _copy(browser) as copy:
            opened = copy.get(link)
            assert opened.status == 200 and _who(opened) == "ann"
            # The other replica takes the same cookie (addressed as the deployment, through its Host).
            on_b = {"host": pair.host, "cookie": _cookie_header(copy)}
            assert httpx.get(f"{pair.b.base}/tasks", headers=on_b).status_code == 200

            out = browser.http.post("/signout", data=browser.get("/tasks").forms().hidden)
            assert out.status_code == 200 and "Signed out" in out.text

            assert copy.http.get("/tasks").status_code == 303
            reopened = copy.get(link)
            assert urlsplit(str(reopened.response.url)).path == "/signin" and _who(reopened) is None
            late = copy.send(link, opened, ANSWER)
            assert late.status == 401  # not signed in: nothing is sent
            elsewhere = httpx.get(f"{pair.b.base}/tasks", headers=on_b)
            assert (elsewhere.status_code, elsewhere.headers["location"]) == (303, "/signin?next=%2Ftasks")
    assert _waits_for_the_person(get_task(pair.a.url, task_id, bearer("ann")))


def test_a_static_token_taken_out_of_the_configuration_ends_the_sessions_made_with_it(pair: Pair) -> None:
    """cam's token is replaced by a new one: the sessions made with the old one end, those of a token
    still configured (ann's) do not, and cam signs in again with the new one."""
    port = free_port()
    tokens = {"ann": OWNER_TOKENS["ann"], "cam": CAM_TOKEN}

    def replica(tokens: dict[str, str]) -> Served:
        env = {**pair.env, "LONGTOOLS_AUTH_TOKENS": ",".join(f"{t}={name}" for name, t in tokens.items())}
        args = ["api", "--port", str(port), "--temporal-address", pair.temporal_address]
        return server_ready(spawn(pair.tmp, args, env))

    with PageClient(f"http://127.0.0.1:{port}") as cam, PageClient(f"http://127.0.0.1:{port}") as ann:
        before = replica(tokens)
        try:
            task_id, link = _asking(before.url, {"authorization": f"Bearer {CAM_TOKEN}"})
            cam.sign_in(CAM_TOKEN)
            ann.sign_in(OWNER_TOKENS["ann"])
            opened = cam.get(link)
            assert opened.status == 200 and _who(opened) == "cam"
        finally:
            before.stop()

        new_token = secrets.token_urlsafe(24)
        after = replica({**tokens, "cam": new_token})
        try:
            assert _who(ann.get("/tasks")) == "ann"
            reopened = cam.get(link)
            assert urlsplit(str(reopened.response.url)).path == "/signin" and _who(reopened) is None
            assert "Your sign-in has expired" in reopened.text
            late = cam.send(link, opened, ANSWER)
            assert late.status == 401  # not signed in: nothing is sent
            cam.sign_in(new_token)
            assert cam.get(link).status == 200
            new_mcp = {"authorization": f"Bearer {new_token}"}
            assert _waits_for_the_person(get_task(after.url, task_id, new_mcp))
        finally:
            after.stop()


def test_a_refused_form_leaves_its_answer_link_out_of_the_log(pair: Pair) -> None:
    _, link = _asking(pair.a.url, bearer("ann"))
    sealed = link.rsplit("/", 1)[1]
    with PageClient(pair.a.base) as browser:
        browser.sign_in(OWNER_TOKENS["ann"])
        opened = browser.get(link)
        refused = browser.send(link, opened, ANSWER, csrf=False)
        assert (refused.status, refused.heading) == (403, "This form could not be sent")
    logged = eventually(pair.a.log_text, lambda text: "page_form_refused" in text)
    assert sealed not in logged
    refusal = next(line for line in logged.splitlines() if "page_form_refused" in line)
    assert "/answer/{token}" in refusal  # which page it was, by its route


def test_signing_in_to_another_server_of_this_computer_leaves_this_ones_sign_in_as_it_was(
    pair: Pair,
) -> None:
    """A browser keeps one cookie jar per host name, whatever the port: ``b`` here is any other
    server of this computer that sets a cookie of the same name, even one sealed with the same keys."""
    with PageClient(pair.a.base) as browser:
        browser.sign_in(OWNER_TOKENS["ann"])
        on_a = {cookie.name for cookie in browser.http.cookies.jar}
        form = Page(browser.http.get(f"{pair.b.base}/signin?next=/tasks"))
        assert form.status == 200 and _who(form) is None  # a's sign-in is not b's
        signed = browser.http.post(
            f"{pair.b.base}/signin", data={**form.forms().hidden, "token": OWNER_TOKENS["ben"]}
        )
        assert signed.status_code == 303
        assert _who(Page(browser.http.get(f"{pair.b.base}/tasks"))) == "ben"
        assert _who(browser.get("/tasks")) == "ann"
        # Tossed on purpose: b's session under every name a's cookies have opens nothing on a.
        [b_session] = [
            str(cookie.value)
            for cookie in browser.http.cookies.jar
            if cookie.name.startswith("longtools-session") and cookie.name not in on_a
        ]
        for name in on_a:
            browser.http.cookies.set(name, b_session, domain="127.0.0.1", path="/")
        assert browser.http.get("/tasks").status_code == 303


def test_an_issuer_whose_discovery_fails_is_asked_once_for_many_sign_ins(pair: Pair) -> None:
    asked = pair.issuer.asked
    for _ in range(4):
        failed = httpx.get(f"{pair.a.base}/signin/oidc?next=/tasks")
        assert failed.status_code == 400 and "cannot be reached right now" in failed.text
    assert pair.issuer.asked - asked == 1


async def test_a_failed_discovery_is_asked_again_once_its_retry_time_has_passed() -> None:
    """The same sign-in in process, with a clock of its own: sign-ins at once wait for the one
    discovery in flight, and the issuer is asked again only ``DISCOVERY_RETRY_S`` after it failed."""
    now = [1000.0]
    with DownIssuer() as issuer:
        settings = Settings(state_keys=STATE_KEY, oidc_issuer=issuer.url, oidc_client_id="longtools-pages")
        oidc = OidcSignIn(settings, clock=lambda: now[0])

        async def refused() -> str:
            with pytest.raises(SignInFailed) as caught:
                await oidc.begin("/tasks", "http://127.0.0.1:1/signin/callback")
            return caught.value.reason

        try:
            reasons = await asyncio.gather(*(refused() for _ in range(5)))
            assert (reasons, issuer.asked) == (["discovery http error"] * 5, 1)
            now[0] += DISCOVERY_RETRY_S - 1
            assert (await refused(), issuer.asked) == ("discovery http error", 1)
            now[0] += 1
            assert (await refused(), issuer.asked) == ("discovery http error", 2)
        finally:
            await oidc.aclose()
