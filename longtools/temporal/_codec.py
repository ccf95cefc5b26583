"""Encryption of everything longtools stores in Temporal: a ``PayloadCodec``. API, worker and codec
server processes.

Temporal keeps every payload (workflow arguments, signals, results, memos, activity inputs and
results, failure messages) in its database for the namespace's retention. This codec encrypts each
one with AES-256-GCM before it leaves the process, so the database, its backups and anyone with
read access to the Temporal frontend see only ciphertext.

One encrypted payload::

    metadata  encoding: binary/encrypted
              encryption-key-id: <16 hex characters, an HMAC of the key: names it, does not reveal it>
    data      nonce (12 random bytes) || AES-256-GCM(serialized original Payload) incl. its 16-byte tag

The ring's first key encrypts; any key of the ring decrypts the payloads its id names, which is
what lets keys rotate (see docs/operations.md). The AES key is derived from the configured key
(HKDF-SHA256), so a key that was also used elsewhere by mistake is still not reused as is.

A payload without ``binary/encrypted`` (written before encryption was turned on, or by an operator's
``temporal workflow signal`` without a codec endpoint) is passed through unchanged, with one warning
per process: refusing it would fail every task that was in flight at the upgrade. A payload whose key
id is not in the ring raises `UnknownPayloadKey`, one whose ciphertext does not authenticate raises
`PayloadUnreadable`; each is logged once per key id with what to do, and never reaches a client
(the API answers -32603; a worker's workflow task fails and Temporal retries it until the key is back).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Sequence

import structlog
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

__all__ = [
    "ENCODING",
    "KEY_ID_METADATA",
    "EncryptionCodec",
    "PayloadDecryptError",
    "PayloadUnreadable",
    "UnknownPayloadKey",
    "key_id",
]

log = structlog.get_logger("longtools.codec")

ENCODING = b"binary/encrypted"
"""The ``encoding`` metadata of an encrypted payload (the value Temporal's samples and tools use)."""
KEY_ID_METADATA = "encryption-key-id"
_NONCE_BYTES = 12
_TAG_BYTES = 16
# Binds every ciphertext to this use: a blob sealed by anything else with the same key never opens.
_AAD = b"longtools payload v1"
_KDF_INFO = b"longtools payload encryption v1"
_ID_INFO = b"longtools payload key id v1"
_SHOWN_KEY_ID = 64
"""Most bytes of a payload's key id shown in an error or a log line (a ring's own ids are 16)."""
_REPORTED_IDS = 256
"""Most distinct (kind, key id) failures a process logs: a client can make up any number."""


class PayloadDecryptError(Exception):
    """A stored payload cannot be decrypted with this process's key ring."""


class UnknownPayloadKey(PayloadDecryptError):
    """The payload was encrypted with a key whose id is not in the ring (removed too early, or another
    deployment's key)."""


class PayloadUnreadable(PayloadDecryptError):
    """The payload names a key of the ring but does not decrypt: it was truncated or altered."""


def key_id(key: bytes) -> str:
    """The id stored beside each payload a key encrypts: 16 hex characters of an HMAC of the key.

    It tells the keys of a ring apart (and an operator which key a payload needs); without the key,
    nothing can be learned from it.
    """
    return hmac.new(key, _ID_INFO, hashlib.sha256).hexdigest()[:16]


def _aes_key(key: bytes) -> AESGCM:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_KDF_INFO).derive(key)
    return AESGCM(derived)


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over whole payloads; the ring's first key encrypts, every key decrypts.

    Args:
        keys: the ring, each 32 bytes (``Settings.require_payload_keys()``).
        variable: what the ring is called in messages, so an operator knows where to add a key.
    """

    def __init__(self, keys: Sequence[bytes], *, variable: str = "LONGTOOLS_PAYLOAD_KEYS") -> None:
        if not keys:
            raise ValueError("a payload key ring needs at least one key")
        self._ciphers = {key_id(key): _aes_key(key) for key in keys}
        if len(self._ciphers) != len(keys):
            raise ValueError("the payload key ring lists the same key twice")
        self.encrypting_id = key_id(keys[0])
        self.key_ids = tuple(self._ciphers)
        self._variable = variable
        self._warned_plaintext = False
        self._reported: set[tuple[str, str]] = set()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(payload) for payload in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        """``payload`` encrypted with the ring's first key."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._ciphers[self.encrypting_id].encrypt(nonce, payload.SerializeToString(), _AAD)
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: self.encrypting_id.encode()},
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        """The original of an encrypted ``payload``; any other payload unchanged.

        Raises:
            UnknownPayloadKey: its key id is not in the ring.
            PayloadUnreadable: it does not decrypt with the key its id names.
        """
        if payload.metadata.get("encoding") != ENCODING:
            if not self._warned_plaintext:
                self._warned_plaintext = True
                log.warning(
                    "payload_unencrypted",
                    detail="read a payload Temporal stores unencrypted (written before payload "
                    "encryption was on, or by a tool without the codec); it is used as is. Logged once "
                    "per process.",
                )
            return payload
        raw = payload.metadata.get(KEY_ID_METADATA, b"")
        cipher = self._ciphers.get(raw.decode(errors="replace"))
        # The id is whatever the payload says: bounded before it reaches a message or the log.
        found = raw[:_SHOWN_KEY_ID].decode(errors="replace")
        if cipher is None:
            self._report(
                "payload_key_unknown",
                found,
                f"a payload is encrypted with key id {found!r}, which is not in {self._variable} "
                f"(ids: {', '.join(self.key_ids)}); put the key with that id back into the ring",
            )
            raise UnknownPayloadKey(
                f"payload encrypted with key id {found!r}, which is not in {self._variable}"
            )
        data = payload.data
        if len(data) < _NONCE_BYTES + _TAG_BYTES:
            self._report("payload_unreadable", found, "an encrypted payload is too short: truncated")
            raise PayloadUnreadable(f"payload with key id {found!r} is truncated")
        try:
            plain = cipher.decrypt(data[:_NONCE_BYTES], data[_NONCE_BYTES:], _AAD)
            original = Payload()
            original.ParseFromString(plain)
        except (InvalidTag, DecodeError):
            self._report(
                "payload_unreadable",
                found,
                "an encrypted payload does not decrypt with the key its id names: it was altered",
            )
            raise PayloadUnreadable(f"payload with key id {found!r} does not decrypt") from None
        return original

    def _report(self, event: str, found: str, detail: str) -> None:
        # Once per key id and kind: a task polled every 500 ms must not flood the log, but each
        # missing key is named.
        if (event, found) in self._reported:
            return
        if len(self._reported) >= _REPORTED_IDS:
            return  # named once each already, up to this many: the rest would only flood the log
        self._reported.add((event, found))
        log.error(event, key_id=found, detail=detail)
