"""Task ids that say whose they are, and the owner tags Temporal counts tasks by. API process.

A task id is a 96-bit base (random, or derived from an idempotency key or an exchange) and a tag,
a keyed hash of the base and the principal who owns the task: 40 hex characters. An id whose tag
does not fit the caller is not the caller's, which any replica can tell without reading Temporal,
so another principal's ids, or made-up ones, cost a read of nothing (``subscriptions/listen`` of
100 foreign ids, ``tasks/get`` of random ones). Hex, so an id never starts with ``-`` (which a
command line would read as an option).

Every secret here is derived from each key of the state key ring, and a tag or an owner tag of any
key in the ring is recognised: when the ring rotates (a new first key), the tasks of earlier keys
stay readable, listed and counted until the old key leaves the ring. New ids, owner tags and
idempotency ids are made with the first key.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

__all__ = ["TaskIds", "derive_id"]

_BASE_HEX: Final = 24
_TAG_HEX: Final = 16
_TAGGED = re.compile(rf"[0-9a-f]{{{_BASE_HEX + _TAG_HEX}}}")
_ID_LABEL: Final = b"longtools idempotency ids"
_TAG_LABEL: Final = b"longtools task id tags"


def derive_id(secret: bytes, *parts: str) -> str:
    """An id nobody can guess or steer without ``secret``: HMAC over the parts, 32 hex characters."""
    message = "\x00".join(parts).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()[:32]


class TaskIds:
    """Ids and owner tags under one state key ring (the first key makes, every key is recognised)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("a task id needs at least one state key")
        self.secrets: Final = [hmac.new(key, _ID_LABEL, hashlib.sha256).digest() for key in keys]
        """Per ring key, first key first: what idempotency ids, claims and owner tags derive from."""
        self._tag_keys = [hmac.new(key, _TAG_LABEL, hashlib.sha256).digest() for key in keys]
        self.owner_tags = lru_cache(maxsize=4096)(self._owner_tags)
        """A principal's owner tags, one per ring key, the first key's first (computed once per
        principal: an HMAC per key)."""

    @property
    def secret(self) -> bytes:
        """The first key's: what new derived ids are made from."""
        return self.secrets[0]

    def new(self, principal: str) -> str:
        """A fresh, unguessable task id for ``principal``."""
        return self._tagged(secrets.token_hex(_BASE_HEX // 2), principal)

    def derived(self, principal: str, *parts: str) -> str:
        """The task id ``parts`` (an idempotency key, an exchange) always name for ``principal``
        under the first key."""
        return self._tagged(derive_id(self.secret, *parts)[:_BASE_HEX], principal)

    def tagged(self, task_id: str) -> bool:
        """Whether ``task_id`` has the tagged form (every task started since ids carry a tag)."""
        return _TAGGED.fullmatch(task_id) is not None

    def may_belong(self, task_id: str, principal: str) -> bool:
        """False when ``task_id`` is surely not ``principal``'s (its tag does not fit under any key
        of the ring); True when only Temporal can tell: a tagged id that fits, or an id from before
        ids carried a tag."""
        if not self.tagged(task_id):
            return True
        base, tag = task_id[:_BASE_HEX], task_id[_BASE_HEX:]
        return any(hmac.compare_digest(tag, self._tag(key, base, principal)) for key in self._tag_keys)

    def _tagged(self, base: str, principal: str) -> str:
        return base + self._tag(self._tag_keys[0], base, principal)

    @staticmethod
    def _tag(key: bytes, base: str, principal: str) -> str:
        message = f"{base}\x00{principal}".encode()
        return hmac.new(key, message, hashlib.sha256).hexdigest()[:_TAG_HEX]

    def _owner_tags(self, principal: str) -> tuple[str, ...]:
        return tuple(derive_id(secret, "owner", principal) for secret in self.secrets)
