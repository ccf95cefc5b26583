"""The payload codec and the payload key ring setting, in process (the end-to-end story is in
test_at_rest.py). Ours: the format and the handling of unknown keys and plain payloads are
longtools' choices (docs/security.md, "Payloads at rest")."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from longtools import Settings
from longtools.temporal._codec import (
    ENCODING,
    KEY_ID_METADATA,
    EncryptionCodec,
    PayloadUnreadable,
    UnknownPayloadKey,
    key_id,
)

OLD, NEW = b"o" * 32, b"n" * 32


def _payload(value: object) -> Payload:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0]


async def test_a_payload_is_encrypted_with_the_first_key_and_named_by_an_id_that_is_not_the_key() -> None:
    original = _payload({"answer": "the secret word"})
    [sealed] = await EncryptionCodec([NEW, OLD]).encode([original])
    assert sealed.metadata["encoding"] == ENCODING
    assert sealed.metadata[KEY_ID_METADATA] == key_id(NEW).encode()
    assert b"secret" not in sealed.SerializeToString()
    assert NEW not in sealed.SerializeToString() and key_id(NEW) != NEW.hex()[:16]
    assert await EncryptionCodec([OLD, NEW]).decode([sealed]) == [original]


async def test_the_same_payload_encrypts_differently_each_time() -> None:
    codec = EncryptionCodec([NEW])
    first, second = await codec.encode([_payload("x"), _payload("x")])
    assert first.data != second.data


async def test_a_payload_of_a_key_not_in_the_ring_is_a_named_error() -> None:
    [sealed] = await EncryptionCodec([OLD]).encode([_payload("x")])
    with pytest.raises(UnknownPayloadKey) as caught:
        await EncryptionCodec([NEW]).decode([sealed])
    assert key_id(OLD) in str(caught.value) and "LONGTOOLS_PAYLOAD_KEYS" in str(caught.value)


def _truncated(data: bytes) -> bytes:
    return data[:20]


def _flipped(data: bytes) -> bytes:
    return data[:30] + bytes([data[30] ^ 1]) + data[31:]


@pytest.mark.parametrize("alter", [_truncated, _flipped])
async def test_an_altered_or_truncated_payload_is_refused(alter: Callable[[bytes], bytes]) -> None:
    codec = EncryptionCodec([NEW])
    [sealed] = await codec.encode([_payload("a value long enough to have bytes to flip")])
    altered = Payload()
    altered.CopyFrom(sealed)
    altered.data = alter(sealed.data)
    with pytest.raises(PayloadUnreadable):
        await codec.decode([altered])


async def test_a_payload_stored_before_encryption_is_read_as_it_is() -> None:
    """Ours: refusing it would fail every task in flight when encryption was turned on."""
    plain = _payload({"written": "before the upgrade"})
    assert await EncryptionCodec([NEW]).decode([plain]) == [plain]


def test_the_payload_key_ring_keeps_order_and_empty_means_unset() -> None:
    ring = ",".join(base64.urlsafe_b64encode(key).decode() for key in (NEW, OLD))
    assert Settings(payload_keys=ring).payload_key_ring() == [NEW, OLD]
    assert Settings(payload_keys="").payload_key_ring() is None


def test_a_bad_payload_key_is_refused_naming_the_variable_and_the_fix_never_the_key() -> None:
    bad = base64.urlsafe_b64encode(b"short-but-secret").decode()
    with pytest.raises(ValidationError) as caught:
        Settings(payload_keys=bad)
    message = str(caught.value)
    assert "LONGTOOLS_PAYLOAD_KEYS" in message and "longtools keygen" in message
    assert bad not in message
