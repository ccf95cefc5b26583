"""The answer page's OpenID Connect sign-in (``OidcSignIn``) against a real provider over real HTTP.

The provider (tests/oidc_provider.py) runs on loopback; a "browser" (httpx) follows the authorization
URL, fills in the provider's form and reads the redirect back. Every refusal is a ``SignInFailed``
with a fixed ``reason``, logged as ``sign_in_refused``. No Temporal.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import time
from collections.abc import AsyncIterator, Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import httpx
import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from longtools._sealing import Sealer
from longtools._settings import Settings
from longtools.auth._tokens import AuthConfigError, BearerVerifier, principal_id
from longtools.pages._oidc import SEALER_LABEL, OidcSignIn, SignedIn, SignInFailed
from tests.oidc_provider import OidcProvider

STATE_KEY = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
CLIENT_ID = "longtools-pages"
CONFIDENTIAL_ID = "longtools-pages-confidential"
CLIENT_SECRET = "a client secret: with odd characters/+%"
REDIRECT_URI = "https://mcp.example.com/signin/callback"
RESOURCE = "https://mcp.example.com/mcp"


class Clock:
    """Monotonic seconds a test moves on by hand (JWKS refetch pacing)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Form(HTMLParser):
    """The action and fields of the first form of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self.field_ids: set[str] = set()
        self.buttons: list[str] = []
        self._in_button = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form" and self.action is None:
            self.action = values.get("action", "")
        elif tag == "input":
            self.field_ids.add(values.get("id", ""))
            if values.get("type") == "hidden":
                self.fields[values["name"]] = values.get("value", "")
        elif tag == "button":
            self._in_button = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "button":
            self._in_button = False

    def handle_data(self, data: str) -> None:
        if self._in_button:
            self.buttons.append(data.strip())


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    with OidcProvider() as provider:
        provider.register_client(CLIENT_ID, [REDIRECT_URI])
        provider.register_client(CONFIDENTIAL_ID, [REDIRECT_URI], secret=CLIENT_SECRET)
        yield provider


@pytest.fixture
def provider(idp: OidcProvider) -> OidcProvider:
    """The module's provider with well-behaved knobs (a test before may have bent them)."""
    idp.reset()
    return idp


def _settings(issuer: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"state_keys": STATE_KEY, "oidc_issuer": issuer, "oidc_client_id": CLIENT_ID}
    values.update(overrides)
    return Settings(**values)


@pytest_asyncio.fixture
async def oidc(provider: OidcProvider) -> AsyncIterator[OidcSignIn]:
    sign_in = OidcSignIn(_settings(provider.issuer))
    try:
        yield sign_in
    finally:
        await sign_in.aclose()


async def browse(url: str, username: str = "alice", *, cancel: bool = False) -> dict[str, str]:
    """What a browser brings back to the redirect URI: open ``url``, sign in with the form as
    ``username`` (or press Cancel) unless the provider redirects at once, and read the redirect."""
    async with httpx.AsyncClient(timeout=5) as browser:
        response = await browser.get(url)
        if response.status_code == 200:
            form = _Form()
            form.feed(response.text)
            assert form.action is not None and "username" in form.field_ids
            assert "Sign in" in form.buttons
            data = {**form.fields, "username": username}
            if cancel:
                data["cancel"] = "1"
            response = await browser.post(urljoin(url, form.action), data=data)
        assert response.status_code == 302, response.text
        location = response.headers["location"]
    assert location.startswith(REDIRECT_URI + "?")
    return dict(parse_qsl(urlsplit(location).query))


async def callback(
    oidc: OidcSignIn, next_path: str = "/", username: str = "alice"
) -> tuple[dict[str, str], str]:
    """The callback's query and the sign-in cookie of one sign-in begun and done at the provider."""
    url, pending = await oidc.begin(next_path, REDIRECT_URI)
    return await browse(url, username), pending


async def refused(oidc: OidcSignIn, query: dict[str, str], pending: str | None) -> SignInFailed:
    with pytest.raises(SignInFailed) as caught:
        await oidc.finish(query, pending, REDIRECT_URI)
    return caught.value


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# ----- signing in -----


async def test_a_person_signs_in_with_the_form_as_the_principal_of_their_bearer_tokens(
    provider: OidcProvider, oidc: OidcSignIn
) -> None:
    url, pending = await oidc.begin("/tasks/t-1?view=full", REDIRECT_URI)

    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{provider.issuer}/authorize"
    params = dict(parse_qsl(parts.query))
    assert params["response_type"] == "code"
    assert params["client_id"] == CLIENT_ID
    assert params["redirect_uri"] == REDIRECT_URI
    assert params["scope"] == "openid"
    assert params["code_challenge_method"] == "S256"
    assert len(params["state"]) >= 43 and len(params["nonce"]) >= 43
    # The cookie is sealed: neither the verifier nor the state can be read from it.
    opened = Sealer([base64.urlsafe_b64decode(STATE_KEY)], SEALER_LABEL).open(pending, REDIRECT_URI)
    assert params["state"] not in pending and opened["verifier"] not in pending
    assert opened["verifier"] not in url
    challenge = base64.urlsafe_b64encode(hashlib.sha256(opened["verifier"].encode()).digest()).rstrip(b"=")
    assert params["code_challenge"] == challenge.decode()

    query = await browse(url, "alice")
    assert query["state"] == params["state"]
    with capture_logs() as logs:
        signed = await oidc.finish(query, pending, REDIRECT_URI)

    assert signed == SignedIn(
        principal=f"jwt:{provider.issuer}|alice",
        name="Alice",
        next_path="/tasks/t-1?view=full",
        subject="alice",
        signed_in_at=signed.signed_in_at,
    )
    # When the provider signed her in (its auth_time, in whole seconds): just now.
    assert time.time() - 10 < signed.signed_in_at <= time.time()
    assert not [entry for entry in logs if entry["event"] == "sign_in_refused"]

    # The same person's MCP client, with a token from the same issuer, is the same principal.
    verifier = BearerVerifier(
        Settings(jwt_jwks=provider.jwks_url, jwt_issuer=provider.issuer, resource_url=RESOURCE)
    )
    try:
        access = await verifier.verify_token(provider.mint_access_token("alice", RESOURCE))
    finally:
        await verifier.aclose()
    assert access is not None
    assert principal_id(access) == signed.principal


async def test_the_name_falls_back_to_preferred_username_then_email_then_none(
    provider: OidcProvider, oidc: OidcSignIn
) -> None:
    provider.auto_user = "bob"
    provider.id_token_claims = {"name": " "}
    query, pending = await callback(oidc)
    assert (await oidc.finish(query, pending, REDIRECT_URI)).name == "bob"

    provider.id_token_claims = {"name": None, "preferred_username": None, "email": "bob@example.com"}
    query, pending = await callback(oidc)
    assert (await oidc.finish(query, pending, REDIRECT_URI)).name == "bob@example.com"

    provider.id_token_claims = {"name": None, "preferred_username": None}
    query, pending = await callback(oidc)
    signed = await oidc.finish(query, pending, REDIRECT_URI)
    assert signed.name is None and signed.principal == f"jwt:{provider.issuer}|bob"


async def test_the_id_tokens_subject_and_scopes_are_what_a_tools_check_sees_of_the_person(
    provider: OidcProvider, oidc: OidcSignIn
) -> None:
    """Ours: the page's answers are checked by a tool's ``authorize=`` with the session's caller,
    whose subject and scopes come from the ID token (``scope`` or ``scp``, when it has one)."""
    provider.auto_user = "bob"
    provider.id_token_claims = {"scope": "notes:write notes:read"}
    query, pending = await callback(oidc)
    signed = await oidc.finish(query, pending, REDIRECT_URI)
    assert (signed.subject, signed.scopes) == ("bob", frozenset({"notes:write", "notes:read"}))

    provider.id_token_claims = {"scp": ["notes:read"]}
    query, pending = await callback(oidc)
    assert (await oidc.finish(query, pending, REDIRECT_URI)).scopes == frozenset({"notes:read"})

    provider.id_token_claims = {"scope": 7}  # not a scope: no scopes, and still a sign-in
    query, pending = await callback(oidc)
    assert (await oidc.finish(query, pending, REDIRECT_URI)).scopes == frozenset()


@pytest.mark.parametrize(
    "next_path",
    [
        "https://evil.example",
        "//evil.example",
        "/\\evil",
        "javascript:x",
        "/\t/evil.example",
        "/tasks\r\nSet-Cookie: x=1",
        "evil",
        "",
        "/" + "a" * 2000,
    ],
    ids=[
        "absolute",
        "scheme-relative",
        "backslash",
        "javascript",
        "tab",
        "crlf",
        "relative",
        "empty",
        "too-long",
    ],
)
async def test_a_next_path_that_would_leave_this_server_comes_back_as_the_root(
    provider: OidcProvider, oidc: OidcSignIn, next_path: str
) -> None:
    provider.auto_user = "alice"
    query, pending = await callback(oidc, next_path)
    assert (await oidc.finish(query, pending, REDIRECT_URI)).next_path == "/"


async def test_a_confidential_client_authenticates_with_its_secret(provider: OidcProvider) -> None:
    provider.auto_user = "carol"
    settings = _settings(provider.issuer, oidc_client_id=CONFIDENTIAL_ID, oidc_client_secret=CLIENT_SECRET)
    oidc = OidcSignIn(settings)
    try:
        query, pending = await callback(oidc)
        signed = await oidc.finish(query, pending, REDIRECT_URI)
    finally:
        await oidc.aclose()
    assert signed.principal == f"jwt:{provider.issuer}|carol"


async def test_a_wrong_client_secret_is_refused_by_the_token_endpoint(provider: OidcProvider) -> None:
    provider.auto_user = "carol"
    settings = _settings(provider.issuer, oidc_client_id=CONFIDENTIAL_ID, oidc_client_secret="not the secret")
    oidc = OidcSignIn(settings)
    try:
        query, pending = await callback(oidc)
        with capture_logs() as logs:
            failed = await refused(oidc, query, pending)
    finally:
        await oidc.aclose()
    assert failed.reason == "token request refused"
    assert {"event": "sign_in_refused", "reason": "token request refused", "error": "invalid_client"} in [
        {name: entry.get(name) for name in ("event", "reason", "error")} for entry in logs
    ]


async def test_the_scopes_asked_for_always_include_openid(provider: OidcProvider) -> None:
    oidc = OidcSignIn(_settings(provider.issuer, oidc_scopes="profile email"))
    try:
        url, _ = await oidc.begin("/", REDIRECT_URI)
    finally:
        await oidc.aclose()
    assert dict(parse_qsl(urlsplit(url).query))["scope"] == "openid profile email"


async def test_an_id_token_expired_within_the_leeway_is_accepted(
    provider: OidcProvider, oidc: OidcSignIn
) -> None:
    provider.auto_user = "alice"
    provider.id_token_ttl_s = -10
    query, pending = await callback(oidc)
    assert (await oidc.finish(query, pending, REDIRECT_URI)).principal == f"jwt:{provider.issuer}|alice"


async def test_several_audiences_need_azp_naming_this_client(
    provider: OidcProvider, oidc: OidcSignIn
) -> None:
    provider.auto_user = "alice"
    provider.id_token_audience = [CLIENT_ID, "another-api"]
    query, pending = await callback(oidc)
    assert (await refused(oidc, query, pending)).reason == "wrong azp"

    provider.id_token_claims = {"azp": CLIENT_ID}
    query, pending = await callback(oidc)
    assert (await oidc.finish(query, pending, REDIRECT_URI)).principal == f"jwt:{provider.issuer}|alice"


# ----- refusals: the ID token -----


@pytest.mark.parametrize(
    ("knob", "value", "reason"),
    [
        ("id_token_audience", "another-client", "wrong audience"),
        ("id_token_issuer", "https://other-idp.example.com", "wrong issuer"),
        ("id_token_ttl_s", -120, "expired"),
        ("id_token_nonce", "not-this-sign-ins-nonce", "nonce mismatch"),
        ("id_token_alg", "none", "algorithm not allowed"),
        ("id_token_alg", "HS256", "algorithm not allowed"),
        ("id_token_claims", {"iat": None}, "missing iat"),
        ("id_token_claims", {"nonce": None}, "missing nonce"),
        ("id_token_claims", {"azp": "another-client"}, "wrong azp"),
        ("id_token_claims", {"iat": 4_000_000_000}, "not yet valid"),
    ],
    ids=[
        "audience",
        "issuer",
        "expired",
        "nonce",
        "alg-none",
        "alg-hs256-with-public-key",
        "no-iat",
        "no-nonce",
        "azp",
        "iat-in-future",
    ],
)
async def test_an_id_token_that_does_not_verify_is_refused(
    provider: OidcProvider, oidc: OidcSignIn, knob: str, value: object, reason: str
) -> None:
    provider.auto_user = "alice"
    setattr(provider, knob, value)
    query, pending = await callback(oidc)
    with capture_logs() as logs:
        failed = await refused(oidc, query, pending)
    assert failed.reason == reason
    assert "could not be verified" in str(failed)
    refusals = [entry for entry in logs if entry["event"] == "sign_in_refused"]
    assert [entry["reason"] for entry in refusals] == [reason]
    # Nothing of a token, the code or the state reaches the log.
    logged = repr(logs)
    assert "eyJ" not in logged and query["code"] not in logged and query["state"] not in logged


async def test_a_key_the_provider_rotated_to_is_fetched_at_most_once_a_minute(provider: OidcProvider) -> None:
    provider.auto_user = "alice"
    clock = Clock()
    oidc = OidcSignIn(_settings(provider.issuer), clock=clock)
    try:
        for _ in range(2):
            query, pending = await callback(oidc)
            await oidc.finish(query, pending, REDIRECT_URI)
        assert (provider.discovery_fetches, provider.jwks_fetches) == (1, 1)

        provider.rotate_key()
        clock.now += 30
        query, pending = await callback(oidc)
        assert (await refused(oidc, query, pending)).reason == "unknown key"
        assert provider.jwks_fetches == 1

        clock.now += 31
        query, pending = await callback(oidc)
        assert (await oidc.finish(query, pending, REDIRECT_URI)).principal == f"jwt:{provider.issuer}|alice"
        assert provider.jwks_fetches == 2
    finally:
        await oidc.aclose()


# ----- refusals: the callback and the sign-in cookie -----


async def test_a_wrong_or_missing_state_is_refused(provider: OidcProvider, oidc: OidcSignIn) -> None:
    provider.auto_user = "alice"
    query, pending = await callback(oidc)
    assert (
        await refused(oidc, {**query, "state": query["state"][:-1] + "x"}, pending)
    ).reason == "state mismatch"
    without_state = {name: value for name, value in query.items() if name != "state"}
    assert (await refused(oidc, without_state, pending)).reason == "missing state"
    # Another sign-in's callback (its own state and code) does not complete this one.
    other_query, _ = await callback(oidc)
    assert (await refused(oidc, other_query, pending)).reason == "state mismatch"


async def test_a_callback_without_a_code_is_refused(provider: OidcProvider, oidc: OidcSignIn) -> None:
    provider.auto_user = "alice"
    query, pending = await callback(oidc)
    assert (await refused(oidc, {"state": query["state"]}, pending)).reason == "missing code"


async def test_a_callback_naming_another_issuer_is_refused(provider: OidcProvider, oidc: OidcSignIn) -> None:
    provider.auto_user = "alice"
    query, pending = await callback(oidc)
    failed = await refused(oidc, {**query, "iss": "https://other-idp.example.com"}, pending)
    assert failed.reason == "callback issuer mismatch"


async def test_a_code_is_used_once(provider: OidcProvider, oidc: OidcSignIn) -> None:
    provider.auto_user = "alice"
    query, pending = await callback(oidc)
    await oidc.finish(query, pending, REDIRECT_URI)
    with capture_logs() as logs:
        failed = await refused(oidc, query, pending)
    assert failed.reason == "token request refused"
    assert [entry.get("error") for entry in logs if entry["event"] == "sign_in_refused"] == ["invalid_grant"]


async def test_the_person_cancelling_at_the_provider_is_refused(
    provider: OidcProvider, oidc: OidcSignIn
) -> None:
    url, pending = await oidc.begin("/tasks/t-1", REDIRECT_URI)
    query = await browse(url, cancel=True)
    assert query["error"] == "access_denied" and "code" not in query
    with capture_logs() as logs:
        failed = await refused(oidc, query, pending)
    assert failed.reason == "authorization error"
    assert "cancelled" in str(failed)
    assert [(entry["reason"], entry["error"]) for entry in logs] == [("authorization error", "access_denied")]


async def test_an_error_code_nobody_defined_is_logged_as_other(
    provider: OidcProvider, oidc: OidcSignIn
) -> None:
    provider.auto_user = "alice"
    query, pending = await callback(oidc)
    with capture_logs() as logs:
        failed = await refused(oidc, {"error": "<script>", "state": query["state"]}, pending)
    assert failed.reason == "authorization error"
    assert [entry["error"] for entry in logs] == ["other"]


async def test_a_missing_tampered_or_foreign_sign_in_cookie_is_refused(
    provider: OidcProvider, oidc: OidcSignIn
) -> None:
    provider.auto_user = "alice"
    query, pending = await callback(oidc)
    middle = len(pending) // 2
    tampered = pending[:middle] + ("A" if pending[middle] != "A" else "B") + pending[middle + 1 :]
    ring = [base64.urlsafe_b64decode(STATE_KEY)]
    opened = Sealer(ring, SEALER_LABEL).open(pending, REDIRECT_URI)
    other_use = Sealer(ring, "longtools page session").seal(opened, REDIRECT_URI)
    other_key = Sealer([secrets.token_bytes(32)], SEALER_LABEL).seal(opened, REDIRECT_URI)

    assert (await refused(oidc, query, None)).reason == "no pending sign-in"
    for cookie in (tampered, other_use, other_key, "", "not-sealed-at-all"):
        assert (await refused(oidc, query, cookie)).reason == "pending unsealable"
    # Bound to the redirect URI it was begun with.
    with pytest.raises(SignInFailed) as caught:
        await oidc.finish(query, pending, "https://elsewhere.example.com/signin/callback")
    assert caught.value.reason == "pending unsealable"
    # None of these used the code: the real cookie still completes the sign-in.
    assert (await oidc.finish(query, pending, REDIRECT_URI)).principal == f"jwt:{provider.issuer}|alice"


async def test_a_sign_in_cookie_past_its_time_is_refused(provider: OidcProvider) -> None:
    provider.auto_user = "alice"
    oidc = OidcSignIn(_settings(provider.issuer), pending_ttl_s=0)
    try:
        query, pending = await callback(oidc)
        failed = await refused(oidc, query, pending)
    finally:
        await oidc.aclose()
    assert failed.reason == "pending expired"
    assert "sign in again" in str(failed)


# ----- refusals: the issuer -----


async def test_a_discovery_document_for_another_issuer_is_refused(provider: OidcProvider) -> None:
    # The same provider reached by another name: its document names http://127.0.0.1:<port>.
    port = urlsplit(provider.issuer).port
    oidc = OidcSignIn(_settings(f"http://localhost:{port}"))
    try:
        with capture_logs() as logs, pytest.raises(SignInFailed) as caught:
            await oidc.begin("/", REDIRECT_URI)
    finally:
        await oidc.aclose()
    assert caught.value.reason == "discovery issuer mismatch"
    assert [entry["reason"] for entry in logs] == ["discovery issuer mismatch"]


async def test_an_unreachable_issuer_is_refused() -> None:
    oidc = OidcSignIn(_settings(f"http://127.0.0.1:{closed_port()}"))
    try:
        with pytest.raises(SignInFailed) as caught:
            await oidc.begin("/", REDIRECT_URI)
        assert caught.value.reason == "discovery unreachable"
        assert "cannot be reached" in str(caught.value)
        # A callback for it fails the same way, after its own checks passed.
        sealed = Sealer([base64.urlsafe_b64decode(STATE_KEY)], SEALER_LABEL).seal(
            {"state": "s", "nonce": "n", "verifier": "v" * 43, "next": "/", "exp": 4_000_000_000},
            REDIRECT_URI,
        )
        failed = await refused(oidc, {"state": "s", "code": "c"}, sealed)
        assert failed.reason == "discovery unreachable"
    finally:
        await oidc.aclose()


async def test_an_issuer_answering_with_an_error_is_refused(provider: OidcProvider) -> None:
    # A path under the provider that has no discovery document: 404.
    oidc = OidcSignIn(_settings(f"{provider.issuer}/tenants/none"))
    try:
        with pytest.raises(SignInFailed) as caught:
            await oidc.begin("/", REDIRECT_URI)
    finally:
        await oidc.aclose()
    assert caught.value.reason == "discovery http error"


# ----- configuration and clients -----


def test_without_a_client_id_or_a_usable_issuer_there_is_no_sign_in() -> None:
    with pytest.raises(AuthConfigError, match="OIDC_CLIENT_ID"):
        OidcSignIn(Settings(state_keys=STATE_KEY, oidc_issuer="https://idp.example.com"))
    with pytest.raises(AuthConfigError, match="issuer"):
        OidcSignIn(Settings(state_keys=STATE_KEY, oidc_client_id=CLIENT_ID))
    # jwt_issuer is the default issuer, and is held to the same rule.
    with pytest.raises(AuthConfigError, match="https://"):
        OidcSignIn(
            Settings(state_keys=STATE_KEY, oidc_client_id=CLIENT_ID, jwt_issuer="http://idp.example.com")
        )
    with pytest.raises(AuthConfigError, match="https://"):
        OidcSignIn(Settings(state_keys=STATE_KEY, oidc_client_id=CLIENT_ID, jwt_issuer="longtools:static"))


async def test_the_issuer_defaults_to_the_jwt_issuer(provider: OidcProvider) -> None:
    provider.auto_user = "alice"
    oidc = OidcSignIn(Settings(state_keys=STATE_KEY, oidc_client_id=CLIENT_ID, jwt_issuer=provider.issuer))
    try:
        query, pending = await callback(oidc)
        signed = await oidc.finish(query, pending, REDIRECT_URI)
    finally:
        await oidc.aclose()
    assert signed.principal == f"jwt:{provider.issuer}|alice"


async def test_an_injected_http_client_is_used_and_left_open(provider: OidcProvider) -> None:
    provider.auto_user = "alice"
    async with httpx.AsyncClient() as http:
        oidc = OidcSignIn(_settings(provider.issuer), http=http)
        query, pending = await callback(oidc)
        await oidc.finish(query, pending, REDIRECT_URI)
        await oidc.aclose()
        assert not http.is_closed
