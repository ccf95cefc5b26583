"""Bearer authentication as a client meets it over HTTP: audience, expiry leeway, the 401 challenge
and the protected-resource metadata, which come from the configuration, never from a request.

Each server is a real ``longtools api`` whose Temporal address has nobody listening: the edge is
all these tests need, and the API serves it without Temporal.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.conftest import URL_LINE, Served, spawn, wait_for_line
from tests.wire import Legacy, post, result

RESOURCE = "https://mcp.example.test/mcp"
METADATA = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
ISSUER = "https://issuer.example.test"
SECRET = secrets.token_urlsafe(32)
STATIC = secrets.token_urlsafe(24)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _api(tmp: Path, env: dict[str, str]) -> Served:
    args = ["api", "--port", "0", "--temporal-address", f"127.0.0.1:{_closed_port()}"]
    process, log_path = spawn(tmp, args, env)
    return Served(process=process, url=wait_for_line(process, log_path, URL_LINE, 30), log_path=log_path)


@pytest.fixture(scope="module")
def jwt_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"LONGTOOLS_JWT_SECRET": SECRET, "LONGTOOLS_JWT_ISSUER": ISSUER, "LONGTOOLS_RESOURCE_URL": RESOURCE}
    served = _api(tmp_path_factory.mktemp("jwt"), env)
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def static_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = _api(tmp_path_factory.mktemp("static"), {"LONGTOOLS_AUTH_TOKENS": f"{STATIC}=alice"})
    try:
        yield served
    finally:
        served.stop()


def _token(**claims: Any) -> str:
    now = int(time.time())
    base = {"iss": ISSUER, "aud": RESOURCE, "sub": "carol", "iat": now - 120, "exp": now + 300}
    return jwt.encode(
        {name: value for name, value in {**base, **claims}.items() if value is not None}, SECRET
    )


def _list_tools(served: Served, token: str | None, **headers: str) -> httpx.Response:
    sent: dict[str, str | None] = {"authorization": f"Bearer {token}"} if token else {}
    return post(served.url, "tools/list", {}, headers={**sent, **headers})


def _refusals(served: Served) -> list[str]:
    lines = [json.loads(line) for line in served.log_text().splitlines() if '"token_refused"' in line]
    return [str(line["reason"]) for line in lines]


def test_jwt_settings_without_a_resource_url_refuse_to_start_naming_the_fix(tmp_path: Path) -> None:
    """Spec-mandated (RFC 8707; MCP authorization, token audience binding): without an audience to
    check, a token the identity provider issued for any other API would be accepted."""
    env = {"LONGTOOLS_JWT_SECRET": SECRET, "LONGTOOLS_JWT_AUDIENCE": "longtools"}
    process, log_path = spawn(tmp_path, ["api", "--port", "0", "--temporal-address", "127.0.0.1:1"], env)
    try:
        assert process.wait(timeout=60) == 2
    finally:
        if process.poll() is None:
            process.kill()
        if process.stdout is not None:
            process.stdout.close()
    said = log_path.read_text()
    assert "LONGTOOLS_RESOURCE_URL" in said and "Traceback" not in said
    assert SECRET not in said


def test_only_a_token_issued_for_this_resource_is_accepted(jwt_api: Served) -> None:
    assert result(_list_tools(jwt_api, _token()))["tools"]
    for other in (_token(aud="https://other-api.example.test"), _token(aud=None)):
        assert _list_tools(jwt_api, other).status_code == 401
    assert _refusals(jwt_api)[-2:] == ["wrong audience", "missing aud"]


def test_a_token_expired_within_the_leeway_is_accepted_and_one_past_it_is_refused_and_logged(
    jwt_api: Served,
) -> None:
    """Ours (docs/security.md): 30 s of leeway on exp, applied once, by the verifier; the SDK's
    backend used to refuse the first token too, and log nothing."""
    now = int(time.time())
    assert result(_list_tools(jwt_api, _token(exp=now - 10)))["tools"]
    assert _list_tools(jwt_api, _token(exp=now - 60)).status_code == 401
    assert _refusals(jwt_api)[-1] == "expired"


def test_the_challenge_and_the_metadata_name_the_configured_resource_whatever_the_host(
    jwt_api: Served,
) -> None:
    """Spec-mandated (RFC 9728 sections 3 and 5.1): the metadata's resource is this resource's
    identifier; ours: it never comes from the request's Host header."""
    port = jwt_api.base.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        refused = _list_tools(jwt_api, None, host=host)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA}"'
    invalid = _list_tools(jwt_api, "not-a-token-at-all")
    assert invalid.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{METADATA}", error="invalid_token", '
        'error_description="The access token is not valid"'
    )
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        metadata = httpx.get(f"{jwt_api.base}{path}", headers={"host": "attacker.example"})
        assert metadata.status_code == 200
        assert metadata.json() == {
            "resource": RESOURCE,
            "bearer_methods_supported": ["header"],
            "resource_name": "longtools",
            "authorization_servers": [ISSUER],
        }


def test_static_tokens_without_a_resource_url_get_a_plain_bearer_challenge_and_no_metadata(
    static_api: Served,
) -> None:
    """Spec-mandated (RFC 6750 section 3): ``Bearer``, with the error only when a token was sent;
    ours: no resource URL is configured, so none is made up from the Host header."""
    missing = _list_tools(static_api, None)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json() == {"error": "invalid_request", "error_description": "Authentication required"}
    wrong = _list_tools(static_api, STATIC[:-1] + ("A" if STATIC[-1] != "A" else "B"))
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == (
        'Bearer error="invalid_token", error_description="The access token is not valid"'
    )
    assert wrong.json() == {"error": "invalid_token", "error_description": "The access token is not valid"}
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        assert httpx.get(f"{static_api.base}{path}").status_code == 404
    assert result(_list_tools(static_api, STATIC))["tools"]


def test_a_2025_era_session_needs_a_token_and_stays_its_principals(jwt_api: Served) -> None:
    """The 2025 era meets the same authentication; a session id presented under another principal's
    token reads as unknown (404), like a forged one."""
    anonymous = Legacy(jwt_api.url)
    with pytest.raises(AssertionError):
        anonymous.open()
    refused = anonymous.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer ")
    session = Legacy(jwt_api.url, headers={"authorization": f"Bearer {_token()}"})
    session.open()
    assert "tools" in result(session.request("tools/list"))
    session.extra = {"authorization": f"Bearer {_token(sub='dave')}"}
    stolen = session.request("tools/list")
    assert (stolen.status_code, stolen.json()["error"]["message"]) == (404, "Session not found")
