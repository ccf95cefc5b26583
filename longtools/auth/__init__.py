"""Who is calling: bearer tokens (static or JWT/JWKS) made into principals, and the resource
metadata that tells a client where to get a token. API process.

May import ``longtools._settings`` and third-party code only: every other part of the API builds
on who is calling, never the other way round.
"""

from __future__ import annotations

from longtools.auth._callers import (
    ANONYMOUS,
    Authorize,
    Caller,
    RequireBearer,
    VerifiedBearer,
    authorized,
    caller_of,
    caller_of_token,
    metadata_routes,
    principal_of,
    principal_of_scope,
)
from longtools.auth._tokens import (
    LEEWAY_S,
    MAX_TOKEN_CHARS,
    STATIC_ISSUER,
    AuthConfigError,
    BearerVerifier,
    JwksUrl,
    principal_hash,
    principal_id,
)

__all__ = [
    "ANONYMOUS",
    "LEEWAY_S",
    "MAX_TOKEN_CHARS",
    "STATIC_ISSUER",
    "AuthConfigError",
    "Authorize",
    "BearerVerifier",
    "Caller",
    "JwksUrl",
    "RequireBearer",
    "VerifiedBearer",
    "authorized",
    "caller_of",
    "caller_of_token",
    "metadata_routes",
    "principal_hash",
    "principal_id",
    "principal_of",
    "principal_of_scope",
]
