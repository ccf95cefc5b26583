"""A passkey's approval checked: by the API before a vote is delivered, and offline by an auditor
(``longtools audit verify``) from the ledger's vote entry alone. Not workflow code.

The entry keeps the assertion whole (authenticator data, client data, signature) and the public key
it was checked with (COSE), so anyone holding the ledger can check that this key signed this vote's
challenge (``passkey_challenge``: the proposal's digest, the task, the question, the voter) with
the person verified, without the server, its keys or the authenticator.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature

from longtools.decisions._decision import asserted_challenge, passkey_challenge

__all__ = ["passkey_problem"]

_USER_PRESENT = 0x01
_USER_VERIFIED = 0x04


def passkey_problem(entry: Mapping[str, Any], task_id: str) -> str | None:
    """Why a vote entry's passkey assertion does not hold, if it does not (none: it holds)."""
    # On first use: the WebAuthn library and its CBOR and X.509 parts are not every process's.
    from webauthn.helpers import (
        base64url_to_bytes,
        decode_credential_public_key,
        decoded_public_key_to_cryptography,
        verify_signature,
    )
    from webauthn.helpers.exceptions import WebAuthnException

    data = entry.get("data") or {}
    assertion = data.get("passkey")
    if not isinstance(assertion, Mapping):
        return "no passkey assertion"
    digest, question, voter = data.get("proposal"), data.get("question"), data.get("by")
    if not all(isinstance(value, str) for value in (digest, question, voter)):
        return "the vote names no proposal, question or voter"
    expected = passkey_challenge(task_id, str(question), str(voter), str(digest))
    if asserted_challenge(assertion) != expected:
        return "the passkey signed another proposal, question or voter"
    try:
        authenticator = base64url_to_bytes(str(assertion["authenticatorData"]))
        client = base64url_to_bytes(str(assertion["clientDataJSON"]))
        signature = base64url_to_bytes(str(assertion["signature"]))
        key = decode_credential_public_key(base64url_to_bytes(str(assertion["publicKey"])))
    except (KeyError, ValueError, TypeError, WebAuthnException):
        return "the passkey assertion cannot be read"
    if (
        len(authenticator) < 37
        or not authenticator[32] & _USER_PRESENT
        or not authenticator[32] & _USER_VERIFIED
    ):
        return "the passkey did not verify its person"
    try:
        verify_signature(
            public_key=decoded_public_key_to_cryptography(key),
            signature_alg=key.alg,
            signature=signature,
            data=authenticator + hashlib.sha256(client).digest(),
        )
    except (InvalidSignature, WebAuthnException, ValueError, TypeError):
        return "the passkey's signature does not hold"
    return None
