"""2025-era sessions and pushed questions as sealed tokens, so no replica stores either. API process.

What a 2025-era session needs is fixed at ``initialize``: the negotiated version, the client's
capabilities and name, and who opened it. Sealed into the ``Mcp-Session-Id`` itself (AES-GCM under
the state key ring, like ``requestState``), it is read by whichever replica a request reaches, and
outlives a restart. The id of a question pushed to such a client names the box its answer goes to
(``tasks.Mailboxes``), sealed the same way. Both are bound to the principal: a token presented
under another principal, tampered with, sealed under a key no longer in the ring or past its
expiry reads as unknown, with one answer for all of them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any, Final

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

__all__ = ["LegacySession", "Seals"]

_SESSION_LABEL: Final = b"longtools 2025-era session ids"
_QUESTION_LABEL: Final = b"longtools pushed question ids"
_QUESTION_PREFIX: Final = "ltq."
MAX_TOKEN_CHARS: Final = 4096
"""Longer tokens are refused unread; a session id must also fit a proxy's header limits."""
_CAPABILITIES: Final = frozenset({"elicitation", "sampling", "roots", "tasks", "extensions"})
"""The client capabilities a session keeps: those of the spec this server and its tools read."""
_MAX_CAPABILITIES_JSON: Final = 1024
OPENED_SESSIONS: Final = 1024
"""How many opened session ids a process keeps, so a session's later requests skip the unsealing."""


@dataclass(frozen=True)
class LegacySession:
    """What ``initialize`` settled, as every later request of the session reads it."""

    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None


@dataclass(frozen=True)
class _Opened:
    """An authentic session id's contents; its principal and expiry are checked on every use.

    Every request of the session shares ``session`` (its dicts are read, never changed).
    """

    session: LegacySession
    principal: str
    expires: int


class Seals:
    """Seals and opens session ids and pushed-question ids with the state key ring.

    Each kind has its own keys, derived from the ring's, so one kind of token can never be
    presented as the other.
    """

    def __init__(self, keys: list[bytes], *, session_ttl_s: float) -> None:
        self._sessions = AESGCMRequestStateCodec([_derive(key, _SESSION_LABEL) for key in keys])
        self._questions = AESGCMRequestStateCodec([_derive(key, _QUESTION_LABEL) for key in keys])
        self._session_ttl_s = session_ttl_s
        # Keyed by the exact token: only a token that unsealed (so was sealed here, under this
        # ring) gets in, and the ring does not change while the process runs.
        self._opened: dict[str, _Opened] = {}

    def session(self, session: LegacySession, principal: str) -> str:
        body = {
            "v": session.version,
            "c": _kept_capabilities(session.capabilities),
            "i": session.client_info,
            "p": self._principal(principal),
            "e": int((time.time() + self._session_ttl_s) * 1000),
        }
        return self._sessions.seal(_dump(body))

    def open_session(self, token: str, principal: str) -> LegacySession | None:
        opened = self._opened.get(token)
        if opened is None:
            opened = _session_of(_open(self._sessions, token))
            if opened is None:
                return None
            if len(self._opened) >= OPENED_SESSIONS:
                del self._opened[next(iter(self._opened))]  # the oldest: dicts keep insertion order
            self._opened[token] = opened
        if not self._bound(opened.principal, opened.expires, principal):
            return None
        return opened.session

    def question(self, box: str, principal: str, ttl_s: float) -> str:
        body = {"b": box, "p": self._principal(principal), "e": int((time.time() + ttl_s) * 1000)}
        return _QUESTION_PREFIX + self._questions.seal(_dump(body))

    def open_question(self, request_id: object, principal: str) -> str | None:
        """The box a pushed question's answer goes to, or None for an id this server did not push."""
        if not isinstance(request_id, str) or not request_id.startswith(_QUESTION_PREFIX):
            return None
        body = _open(self._questions, request_id.removeprefix(_QUESTION_PREFIX))
        if body is None or not self._valid(body, principal):
            return None
        box = body.get("b")
        return box if isinstance(box, str) else None

    @staticmethod
    def _principal(principal: str) -> str:
        # Inside the sealed (encrypted) body, so a plain digest: it only keeps the token short, and
        # it stays the same when the ring rotates.
        return hashlib.sha256(principal.encode()).hexdigest()[:32]

    def _valid(self, body: dict[str, Any], principal: str) -> bool:
        expires = body.get("e")
        return isinstance(expires, int) and self._bound(str(body.get("p")), expires, principal)

    def _bound(self, sealed_principal: str, expires: int, principal: str) -> bool:
        return time.time() * 1000 < expires and hmac.compare_digest(
            sealed_principal, self._principal(principal)
        )


def _kept_capabilities(capabilities: dict[str, Any]) -> dict[str, Any]:
    """What a session id carries of the client's capabilities: the standard ones (what the server
    and its tools act on), never ``experimental`` or unknown keys, and in a bounded size, so that
    the id always fits ``MAX_TOKEN_CHARS`` (and a proxy's header limits): past
    ``_MAX_CAPABILITIES_JSON`` only their shape is kept (nested keys and flags)."""
    kept = {key: value for key, value in capabilities.items() if key in _CAPABILITIES}
    if len(_dump(kept)) <= _MAX_CAPABILITIES_JSON:
        return kept
    shallow = _shallow(kept, 3)
    return shallow if isinstance(shallow, dict) and len(_dump(shallow)) <= _MAX_CAPABILITIES_JSON else {}


def _shallow(value: Any, depth: int) -> Any:
    if isinstance(value, dict):
        if depth == 0:
            return {}
        items = [(str(key)[:64], _shallow(item, depth - 1)) for key, item in list(value.items())[:16]]
        return {key: item for key, item in items if item is not None}
    return value if isinstance(value, bool | int | float) else None


def _session_of(body: dict[str, Any] | None) -> _Opened | None:
    """A session id's contents, or None for one that no principal could ever use."""
    if body is None:
        return None
    version, capabilities, info, expires = body.get("v"), body.get("c"), body.get("i"), body.get("e")
    if not isinstance(version, str) or not isinstance(capabilities, dict) or not isinstance(expires, int):
        return None
    session = LegacySession(version, capabilities, info if isinstance(info, dict) else None)
    return _Opened(session, str(body.get("p")), expires)


def _derive(key: bytes, label: bytes) -> bytes:
    return hmac.new(key, label, hashlib.sha256).digest()


def _dump(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _open(codec: AESGCMRequestStateCodec, token: str) -> dict[str, Any] | None:
    if len(token) > MAX_TOKEN_CHARS:
        return None
    try:
        body = json.loads(codec.unseal(token))
    except (InvalidRequestState, ValueError):
        return None
    return body if isinstance(body, dict) else None
