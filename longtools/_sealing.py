"""Small sealed values for URLs and cookies: AEAD under a key derived from the state key ring.

Each use (answer links, page sessions, sign-in state) derives its own key from every ring key with
its own label, so a value sealed for one use never opens as another (an answer link is never a
session, nor a requestState, whose keys the SDK derives its own way). The first ring key seals;
every key opens, so a rotation does not break links already given out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["Sealer", "Unsealable"]

_NONCE = 12
MAX_SEALED = 4096
"""Characters of a sealed value worth trying to open (a link or cookie is far smaller)."""


class Unsealable(Exception):
    """A value that was not sealed by this server for this use (tampered, made up, other use)."""


class Sealer:
    """Seals JSON objects under one use's keys, bound to ``bound`` (authenticated, not carried)."""

    def __init__(self, ring: Sequence[bytes], label: str) -> None:
        if not ring:
            raise ValueError("sealing needs at least one state key")
        self._keys = [AESGCM(hmac.new(key, label.encode(), hashlib.sha256).digest()) for key in ring]
        self._nonce_key = hmac.new(ring[0], label.encode() + b" nonces", hashlib.sha256).digest()

    def seal(self, value: Mapping[str, Any], bound: str = "", *, deterministic: bool = False) -> str:
        """``deterministic``: the same value seals to the same text (its nonce is a keyed hash of
        it), so a link shown on every poll stays one link; the text tells only that two are equal."""
        plain = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
        if deterministic:
            nonce = hmac.new(self._nonce_key, bound.encode() + b"\x00" + plain, hashlib.sha256).digest()[
                :_NONCE
            ]
        else:
            nonce = os.urandom(_NONCE)
        sealed = nonce + self._keys[0].encrypt(nonce, plain, bound.encode())
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    def open(self, token: str, bound: str = "") -> dict[str, Any]:
        """Raises:
        Unsealable: ``token`` was not sealed by ``seal`` with this label, ring and ``bound``."""
        if len(token) > MAX_SEALED:
            raise Unsealable
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise Unsealable from None
        if len(raw) <= _NONCE:
            raise Unsealable
        for key in self._keys:
            try:
                plain = key.decrypt(raw[:_NONCE], raw[_NONCE:], bound.encode())
            except InvalidTag:
                continue
            value = json.loads(plain)
            if isinstance(value, dict):
                return value
        raise Unsealable
