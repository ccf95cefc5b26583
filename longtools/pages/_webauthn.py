"""The WebAuthn ceremonies of the passkey pages (``_passkeys``), through the maintained ``webauthn``
library, never by hand. API process.

Imported on first use, not with the pages: the library and its X.509, ASN.1 and CBOR parts take
0.15 s to import, which no start of the server needs. Ids, keys and challenges cross this module
as base64url text, as the profile and the ledger keep them.
"""

from __future__ import annotations

from dataclasses import dataclass

from webauthn import (
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url, parse_authentication_credential_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticationCredential,
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

__all__ = [
    "Assertion",
    "CeremonyFailed",
    "Registered",
    "asserted",
    "creation_options",
    "read_assertion",
    "registered",
]


class CeremonyFailed(Exception):
    """The library refused the browser's answer; the message is the reason's kind (for the log)."""


@dataclass(frozen=True)
class Registered:
    id: str
    public_key: str
    """COSE, base64url."""
    sign_count: int


@dataclass(frozen=True)
class Assertion:
    """A browser's assertion, read but not yet checked."""

    credential: AuthenticationCredential

    @property
    def id(self) -> str:
        return bytes_to_base64url(self.credential.raw_id)

    def proof(self) -> dict[str, str]:
        """What a vote's stamp and the ledger keep of it (``Stamp.passkey``, less the key)."""
        response = self.credential.response
        return {
            "authenticatorData": bytes_to_base64url(response.authenticator_data),
            "clientDataJSON": bytes_to_base64url(response.client_data_json),
            "signature": bytes_to_base64url(response.signature),
        }


def creation_options(
    *, rp_id: str, rp_name: str, user_id: bytes, user_name: str, challenge: bytes, exclude: list[str]
) -> str:
    """The options a browser makes a passkey with (JSON), user verification required."""
    options = generate_registration_options(
        rp_id=rp_id,
        rp_name=rp_name,
        user_id=user_id,
        user_name=user_name,
        user_display_name=user_name,
        challenge=challenge,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(key)) for key in exclude],
    )
    return options_to_json(options)


def registered(credential: str, *, challenge: str, rp_id: str, origin: str) -> Registered:
    """The passkey a browser made over ``challenge``, checked.

    Raises:
        CeremonyFailed: it does not hold (another challenge, origin or RP id; no user verification).
    """
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=base64url_to_bytes(challenge),
            expected_rp_id=rp_id,
            expected_origin=origin,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise CeremonyFailed(type(exc).__name__) from None
    return Registered(
        id=bytes_to_base64url(verified.credential_id),
        public_key=bytes_to_base64url(verified.credential_public_key),
        sign_count=verified.sign_count,
    )


def read_assertion(raw: str) -> Assertion:
    """Raises:
    CeremonyFailed: not an assertion's JSON."""
    try:
        return Assertion(parse_authentication_credential_json(raw))
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise CeremonyFailed(type(exc).__name__) from None


def asserted(
    assertion: Assertion, *, challenge: bytes, rp_id: str, origin: str, public_key: str, sign_count: int
) -> int:
    """Check ``assertion`` against a registered passkey's key and counter; its new counter.

    Raises:
        CeremonyFailed: another challenge, origin or RP id, no user verification, a signature the
            key did not make, or a counter that did not move on (a copy of one used before).
    """
    try:
        verified = verify_authentication_response(
            credential=assertion.credential,
            expected_challenge=challenge,
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=base64url_to_bytes(public_key),
            credential_current_sign_count=sign_count,
            require_user_verification=True,
        )
    except WebAuthnException as exc:
        raise CeremonyFailed(type(exc).__name__) from None
    return verified.new_sign_count
