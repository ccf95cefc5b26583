"""Bearer tokens: static tokens and JWTs signed with real keys, a JWKS file and a JWKS served on loopback.

Refusals are None (never an exception) and the configuration alone decides which algorithms pass.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from pydantic import ValidationError
from structlog.testing import capture_logs

from longtools._settings import Settings
from longtools.auth._tokens import AuthConfigError, BearerVerifier, principal_hash, principal_id

SECRET = "s" * 40
STATIC = "static-token-for-alice-0123456789"
ISSUER = "https://idp.example.com"
RESOURCE = "https://mcp.example.com/mcp"

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_KEY_2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def _jwk(private_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kid: str) -> dict[str, Any]:
    if isinstance(private_key, rsa.RSAPrivateKey):
        jwk = RSAAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        alg = "RS256"
    else:
        jwk = ECAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        alg = "ES256"
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


def _claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {"sub": "alice", "iss": ISSUER, "aud": RESOURCE, "iat": now, "exp": now + 300}
    claims.update(overrides)
    return {name: value for name, value in claims.items() if value is not None}


def _hs256(secret: str = SECRET, **overrides: Any) -> str:
    return jwt.encode(_claims(**overrides), secret, algorithm="HS256")


def _signed(private_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kid: str, **overrides: Any) -> str:
    alg = "RS256" if isinstance(private_key, rsa.RSAPrivateKey) else "ES256"
    return jwt.encode(_claims(**overrides), private_key, algorithm=alg, headers={"kid": kid})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hand_made(header: dict[str, Any], claims: dict[str, Any], sign: bytes | None) -> str:
    """A token PyJWT would refuse to make: ``sign`` is the HMAC-SHA256 key, None for no signature."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = b"" if sign is None else hmac.new(sign, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


class Clock:
    """Monotonic seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0  # any start will do; only differences matter

    def __call__(self) -> float:
        return self.now


@dataclass
class JwksServer:
    """A JWKS endpoint on loopback that counts the fetches it answers."""

    url: str
    keys: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    fetches: int = 0


@pytest.fixture
def jwks_server() -> Iterator[JwksServer]:
    state = JwksServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.fetches += 1
            body = json.dumps({"keys": state.keys}).encode()
            self.send_response(state.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        state.url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def _refusal(verifier: BearerVerifier, token: str) -> str:
    """The logged reason ``token`` is refused (failing if it is accepted)."""
    with capture_logs() as logs:
        assert await verifier.verify_token(token) is None
    refusals = [entry for entry in logs if entry["event"] == "token_refused"]
    assert len(refusals) == 1
    return str(refusals[0]["reason"])


def _write_jwks(path: Path, *jwks: dict[str, Any]) -> None:
    path.write_text(json.dumps({"keys": list(jwks)}))


# --- static tokens ---------------------------------------------------------------------------------


async def test_a_static_token_is_accepted_as_its_principal() -> None:
    verifier = BearerVerifier(Settings(auth_tokens=f"{STATIC}=alice,other-token-0123456789=bob"))
    token = await verifier.verify_token(STATIC)
    assert token is not None
    assert (token.client_id, token.subject, token.scopes) == ("alice", "alice", [])
    assert principal_id(token) == "token:alice"


async def test_a_wrong_static_token_is_refused_and_never_logged() -> None:
    verifier = BearerVerifier(Settings(auth_tokens=f"{STATIC}=alice"))
    wrong = STATIC[:-1] + "X"
    with capture_logs() as logs:
        assert await verifier.verify_token(wrong) is None
    assert [entry["event"] for entry in logs] == ["token_refused"]
    assert wrong not in repr(logs)


async def test_a_static_token_names_the_configured_resource() -> None:
    """Ours: static tokens are minted for this server, so the SDK's resource check lets them through."""
    verifier = BearerVerifier(Settings(auth_tokens=f"{STATIC}=alice", resource_url=RESOURCE))
    token = await verifier.verify_token(STATIC)
    assert token is not None and token.resource == RESOURCE


# --- HS256 -----------------------------------------------------------------------------------------


def _hs_verifier(**settings: Any) -> BearerVerifier:
    return BearerVerifier(Settings(**{"jwt_secret": SECRET, "resource_url": RESOURCE, **settings}))


async def test_a_valid_hs256_token_is_accepted_with_its_claims() -> None:
    verifier = _hs_verifier(jwt_issuer=ISSUER, jwt_audience=RESOURCE)
    raw = _hs256(azp="the-app", scope="tickets:read tickets:write", email="alice@example.com")
    token = await verifier.verify_token(raw)
    assert token is not None
    assert token.token == raw
    assert (token.client_id, token.subject) == ("the-app", "alice")
    assert token.scopes == ["tickets:read", "tickets:write"]
    assert token.resource == RESOURCE
    assert token.claims == {"iss": ISSUER}
    assert token.expires_at == jwt.decode(raw, options={"verify_signature": False})["exp"]


async def test_client_id_falls_back_to_the_client_id_claim_then_sub_and_scp_lists_scopes() -> None:
    verifier = _hs_verifier()
    with_client_id = await verifier.verify_token(_hs256(client_id="cli", scp=["a", "b"]))
    assert with_client_id is not None
    assert (with_client_id.client_id, with_client_id.scopes) == ("cli", ["a", "b"])
    plain = await verifier.verify_token(_hs256())
    assert plain is not None and plain.client_id == "alice"


async def test_an_hs256_token_signed_with_another_secret_is_refused() -> None:
    assert await _hs_verifier().verify_token(_hs256(secret="t" * 40)) is None


@pytest.mark.parametrize(
    ("claims", "accepted"),
    [
        ({"exp": -10}, True),
        ({"exp": -60}, False),
        ({"nbf": 10}, True),
        ({"nbf": 120}, False),
    ],
    ids=["expired-within-leeway", "expired", "nbf-within-leeway", "not-yet-valid"],
)
async def test_time_claims_get_30_seconds_of_leeway(claims: dict[str, int], accepted: bool) -> None:
    now = int(time.time())
    shifted = _claims(**{name: now + delta for name, delta in claims.items()})
    token = await _hs_verifier().verify_token(jwt.encode(shifted, SECRET, algorithm="HS256"))
    assert (token is not None) is accepted


@pytest.mark.parametrize(
    "overrides",
    [{"iss": "https://evil.example.com"}, {"iss": None}],
    ids=["wrong-iss", "missing-iss"],
)
async def test_the_issuer_must_be_the_configured_one(overrides: dict[str, Any]) -> None:
    verifier = _hs_verifier(jwt_issuer=ISSUER)
    assert await verifier.verify_token(_hs256()) is not None
    assert await verifier.verify_token(_hs256(**overrides)) is None


async def test_the_audience_must_contain_the_configured_one() -> None:
    verifier = _hs_verifier(jwt_audience=RESOURCE)
    listed = await verifier.verify_token(_hs256(aud=["https://other.example.com", RESOURCE]))
    assert listed is not None and listed.resource == RESOURCE
    assert await verifier.verify_token(_hs256(aud="https://other.example.com")) is None
    assert await verifier.verify_token(_hs256(aud=None)) is None


async def test_the_audience_defaults_to_resource_url() -> None:
    verifier = _hs_verifier(resource_url=RESOURCE)
    token = await verifier.verify_token(_hs256())
    assert token is not None and token.resource == RESOURCE
    assert await verifier.verify_token(_hs256(aud="https://other.example.com")) is None


@pytest.mark.parametrize(
    "jwt_setting",
    [
        {"jwt_secret": SECRET},
        {"jwt_secret": SECRET, "jwt_audience": RESOURCE},
        {"jwt_jwks": "https://idp.example.com/jwks.json"},
        {"auth_tokens": f"{STATIC}=alice", "jwt_issuer": ISSUER},
    ],
    ids=["secret", "secret-and-audience", "jwks", "static-and-issuer"],
)
def test_any_jwt_setting_without_resource_url_is_a_config_error_that_names_the_fix(
    jwt_setting: dict[str, Any],
) -> None:
    """Spec-mandated (RFC 8707, MCP authorization): a token must have been issued for this resource,
    so there is no JWT setup without an audience to check."""
    with pytest.raises(AuthConfigError, match="LONGTOOLS_RESOURCE_URL") as caught:
        BearerVerifier(Settings(**jwt_setting))
    assert "\n" not in str(caught.value) and SECRET not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    ["http://mcp.example.com/mcp", "mcp.example.com/mcp", "https:///mcp", "https://mcp.example.com/mcp#x"],
    ids=["http-off-loopback", "relative", "no-host", "fragment"],
)
def test_a_resource_url_that_is_not_a_public_https_url_is_refused(url: str) -> None:
    with pytest.raises(ValidationError, match="LONGTOOLS_RESOURCE_URL must be"):
        Settings(resource_url=url)


def test_a_resource_url_on_loopback_may_be_http() -> None:
    assert Settings(resource_url="http://127.0.0.1:8000/mcp").resource_url == "http://127.0.0.1:8000/mcp"


async def test_a_token_without_aud_is_refused() -> None:
    assert await _refusal(_hs_verifier(), _hs256(aud=None)) == "missing aud"
    assert await _refusal(_hs_verifier(), _hs256(aud="https://other.example.com")) == "wrong audience"


async def test_the_configured_audience_replaces_resource_url_as_the_one_accepted() -> None:
    verifier = _hs_verifier(jwt_audience="api://longtools")
    token = await verifier.verify_token(_hs256(aud="api://longtools"))
    assert token is not None and token.resource == "api://longtools"
    assert await _refusal(verifier, _hs256()) == "wrong audience"  # aud is the resource_url


@pytest.mark.parametrize("missing", ["sub", "exp"])
async def test_a_token_without_sub_or_exp_is_refused(missing: str) -> None:
    verifier = _hs_verifier()
    assert await verifier.verify_token(_hs256()) is not None
    without = jwt.encode(_claims(**{missing: None}), SECRET, algorithm="HS256")
    assert await _refusal(verifier, without) == f"missing {missing}"


async def test_an_alg_none_token_is_refused() -> None:
    verifier = _hs_verifier()
    for alg in ("none", "None", "NONE"):
        token = _hand_made({"alg": alg, "typ": "JWT"}, _claims(), None)
        assert await _refusal(verifier, token) == "algorithm not allowed"


async def test_a_jwt_cannot_claim_the_static_issuer() -> None:
    """Ours: otherwise a JWT with sub "alice" would be the static principal "alice"."""
    verifier = _hs_verifier()
    assert await _refusal(verifier, _hs256(iss="longtools:static")) == "reserved issuer"


async def test_an_rs256_token_is_refused_when_only_a_secret_is_configured() -> None:
    assert await _refusal(_hs_verifier(), _signed(RSA_KEY, "rsa-1")) == "algorithm not allowed"


async def test_garbage_is_refused_without_an_exception() -> None:
    verifier = BearerVerifier(
        Settings(resource_url=RESOURCE, jwt_secret=SECRET, auth_tokens=f"{STATIC}=alice")
    )
    for raw in ("", "a.b.c", "not a jwt", "x" * 20_000, _hs256(scope=42)):
        assert await verifier.verify_token(raw) is None


# --- RS256 and ES256 from a JWKS file --------------------------------------------------------------


@pytest.mark.parametrize("key", [RSA_KEY, EC_KEY], ids=["RS256", "ES256"])
async def test_a_token_signed_with_a_key_from_the_jwks_file_is_accepted(
    tmp_path: Path, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
) -> None:
    path = tmp_path / "jwks.json"
    _write_jwks(path, _jwk(RSA_KEY, "rsa-1"), _jwk(EC_KEY, "ec-1"))
    verifier = BearerVerifier(
        Settings(resource_url=RESOURCE, jwt_jwks=str(path), jwt_issuer=ISSUER, jwt_audience=RESOURCE)
    )
    kid = "rsa-1" if key is RSA_KEY else "ec-1"
    token = await verifier.verify_token(_signed(key, kid))
    assert token is not None and principal_id(token) == f"jwt:{ISSUER}|alice"
    assert await verifier.verify_token(_signed(RSA_KEY_2, kid)) is None


async def test_a_key_is_only_used_for_its_own_algorithm(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    _write_jwks(path, _jwk(RSA_KEY, "rsa-1"))
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=str(path)))
    assert await verifier.verify_token(_signed(EC_KEY, "rsa-1")) is None


async def test_an_hs256_token_keyed_with_the_public_key_is_refused_when_only_jwks_is_configured(
    tmp_path: Path,
) -> None:
    """The classic algorithm-confusion attack: the public key PEM used as an HMAC secret."""
    path = tmp_path / "jwks.json"
    _write_jwks(path, _jwk(RSA_KEY, "rsa-1"))
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=str(path)))
    pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for header in ({"alg": "HS256", "kid": "rsa-1"}, {"alg": "HS256"}):
        assert await _refusal(verifier, _hand_made(header, _claims(), pem)) == "algorithm not allowed"
    assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is not None


async def test_the_jwks_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    _write_jwks(path, _jwk(RSA_KEY, "rsa-1"))
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=str(path)))
    assert await verifier.verify_token(_signed(RSA_KEY_2, "rsa-2")) is None
    _write_jwks(path, _jwk(RSA_KEY_2, "rsa-2"))
    later = path.stat().st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(later, later))
    assert await verifier.verify_token(_signed(RSA_KEY_2, "rsa-2")) is not None
    assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is None


async def test_a_broken_rewrite_of_the_jwks_file_keeps_the_old_keys(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    _write_jwks(path, _jwk(RSA_KEY, "rsa-1"))
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=str(path)))
    path.write_text('{"keys": [')
    with capture_logs() as logs:
        assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is not None
    assert [entry["event"] for entry in logs] == ["jwks_reload_failed"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "not JSON"),
        ('{"kid": "x"}', "keys"),
        (json.dumps({"keys": [{"kty": "oct", "k": _b64(b"k" * 32), "kid": "h"}]}), "no RS256/ES256"),
        (json.dumps({"keys": [_jwk(RSA_KEY, "enc") | {"use": "enc"}]}), "no RS256/ES256"),
    ],
    ids=["missing", "not-json", "no-keys", "only-symmetric", "only-encryption"],
)
def test_an_unusable_jwks_file_is_a_config_error(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "jwks.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(AuthConfigError, match=message) as caught:
        BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=str(path)))
    assert "\n" not in str(caught.value)


def test_a_short_secret_is_a_config_error_that_names_the_fix() -> None:
    with pytest.raises(AuthConfigError, match="keygen") as caught:
        BearerVerifier(Settings(jwt_secret="short-secret"))
    assert "short-secret" not in str(caught.value)


def test_settings_with_nothing_to_verify_with_are_a_config_error() -> None:
    with pytest.raises(AuthConfigError, match="LONGTOOLS_JWT_JWKS"):
        BearerVerifier(Settings(jwt_issuer=ISSUER))


# --- RS256 and ES256 from a JWKS URL ---------------------------------------------------------------


@pytest.mark.parametrize("key", [RSA_KEY, EC_KEY], ids=["RS256", "ES256"])
async def test_a_token_signed_with_a_key_from_the_jwks_url_is_accepted(
    jwks_server: JwksServer, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
) -> None:
    jwks_server.keys = [_jwk(RSA_KEY, "rsa-1"), _jwk(EC_KEY, "ec-1")]
    verifier = BearerVerifier(
        Settings(resource_url=RESOURCE, jwt_jwks=jwks_server.url, jwt_issuer=ISSUER), clock=Clock()
    )
    try:
        kid = "rsa-1" if key is RSA_KEY else "ec-1"
        for _ in range(3):
            assert await verifier.verify_token(_signed(key, kid)) is not None
        assert jwks_server.fetches == 1
    finally:
        await verifier.aclose()


async def test_an_unknown_kid_refetches_once_and_a_newly_published_key_is_accepted(
    jwks_server: JwksServer,
) -> None:
    jwks_server.keys = [_jwk(RSA_KEY, "rsa-1")]
    clock = Clock()
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=jwks_server.url), clock=clock)
    try:
        assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is not None
        jwks_server.keys.append(_jwk(RSA_KEY_2, "rsa-2"))
        clock.now += 61
        assert await verifier.verify_token(_signed(RSA_KEY_2, "rsa-2")) is not None
        assert jwks_server.fetches == 2
    finally:
        await verifier.aclose()


async def test_a_flood_of_bogus_kids_refetches_at_most_once_a_minute(jwks_server: JwksServer) -> None:
    jwks_server.keys = [_jwk(RSA_KEY, "rsa-1")]
    clock = Clock()
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=jwks_server.url), clock=clock)
    try:
        assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is not None
        clock.now += 61
        bogus = [_signed(RSA_KEY, f"bogus-{n}") for n in range(20)]
        results = await asyncio.gather(*(verifier.verify_token(token) for token in bogus[:10]))
        for token in bogus[10:]:
            clock.now += 5  # 50 s for the rest: still within the minute
            results.append(await verifier.verify_token(token))
        assert results == [None] * 20
        assert jwks_server.fetches == 2
    finally:
        await verifier.aclose()


async def test_a_key_withdrawn_from_the_jwks_url_stops_working_within_the_hour(
    jwks_server: JwksServer,
) -> None:
    """Ours: the cache has a maximum age, so a rotated-out key does not stay trusted forever."""
    jwks_server.keys = [_jwk(RSA_KEY, "rsa-1")]
    clock = Clock()
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=jwks_server.url), clock=clock)
    try:
        assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is not None
        jwks_server.keys = [_jwk(RSA_KEY_2, "rsa-2")]
        clock.now += 600
        assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is not None
        clock.now += 3600
        assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is None
    finally:
        await verifier.aclose()


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/jwks.json"


async def test_a_jwks_url_that_is_down_refuses_without_an_exception() -> None:
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=_closed_port_url()), clock=Clock())
    try:
        with capture_logs() as logs:
            assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is None
        assert [entry["event"] for entry in logs] == ["jwks_fetch_failed", "token_refused"]
    finally:
        await verifier.aclose()


async def test_a_failed_refetch_refuses_the_new_kid_and_keeps_the_old_keys(jwks_server: JwksServer) -> None:
    jwks_server.keys = [_jwk(RSA_KEY, "rsa-1")]
    clock = Clock()
    verifier = BearerVerifier(Settings(resource_url=RESOURCE, jwt_jwks=jwks_server.url), clock=clock)
    try:
        assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is not None
        jwks_server.keys.append(_jwk(RSA_KEY_2, "rsa-2"))
        jwks_server.status = 503
        clock.now += 61
        assert await verifier.verify_token(_signed(RSA_KEY_2, "rsa-2")) is None
        assert jwks_server.fetches == 2
        assert await verifier.verify_token(_signed(RSA_KEY, "rsa-1")) is not None
    finally:
        await verifier.aclose()


async def test_an_injected_http_client_is_used_and_left_open(jwks_server: JwksServer) -> None:
    jwks_server.keys = [_jwk(EC_KEY, "ec-1")]
    async with httpx.AsyncClient() as http:
        verifier = BearerVerifier(
            Settings(resource_url=RESOURCE, jwt_jwks=jwks_server.url), http=http, clock=Clock()
        )
        assert await verifier.verify_token(_signed(EC_KEY, "ec-1")) is not None
        await verifier.aclose()
        assert not http.is_closed


# --- principals ------------------------------------------------------------------------------------


async def test_static_alice_and_jwt_alice_are_different_principals() -> None:
    verifier = BearerVerifier(
        Settings(auth_tokens=f"{STATIC}=alice", jwt_secret=SECRET, resource_url=RESOURCE)
    )
    static = await verifier.verify_token(STATIC)
    with_iss = await verifier.verify_token(_hs256(sub="alice"))
    without_iss = await verifier.verify_token(_hs256(sub="alice", iss=None))
    assert static is not None and with_iss is not None and without_iss is not None
    assert principal_id(static) == "token:alice"
    assert principal_id(with_iss) == f"jwt:{ISSUER}|alice"
    assert principal_id(without_iss) == "jwt:|alice"


def test_principal_hash_is_16_hex_chars_and_stable() -> None:
    digest = principal_hash("token:alice")
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert digest == principal_hash("token:alice") != principal_hash("jwt:|alice")
