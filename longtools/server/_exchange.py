"""Where an MRTR exchange stands, carried in the plaintext of its ``requestState``. API process.

Every state longtools mints (a quick tool's, a long tool's pre-phase and its continuation, a
prompt's or a resource's) is wrapped as ``r{rounds}.{exchange}.{expires_ms}:{inner}`` before the
SDK seals it, where ``inner`` is what the handler asked to carry. The SDK's seal authenticates all
of it, so a replayed round carries the same exchange id and round number however often it is sent
(a re-sealed copy differs only in its nonce): those two name the round for run-once claims and for
the task a pre-phase starts. ``expires_ms`` is this state's own end: the SDK seals with one TTL
for every state (the longest any state needs), and a long tool's continuation lives as long as its
task while any other state lives ``LONGTOOLS_STATE_TTL_S``.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass

import structlog
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, InputRequiredResult

from longtools.tools import rounds_exceeded

__all__ = ["STATE_REFUSED", "Exchange", "state_refused"]

log = structlog.get_logger("longtools.exchange")

# The expiry is optional: states minted before it existed carry only the SDK's own (shorter) one.
_ENVELOPE = re.compile(r"r(\d+)\.([0-9a-f]{16})(?:\.(\d+))?:")
STATE_REFUSED = "Invalid or expired requestState"
"""The SDK's one frozen message for every requestState it refuses (and for one that lapsed here)."""


def state_refused() -> MCPError:
    """The SDK's one frozen error for any requestState it refuses; a lapsed one looks the same."""
    return MCPError(
        code=INVALID_PARAMS,
        message=STATE_REFUSED,
        data={"reason": "invalid_request_state"},
    )


@dataclass(frozen=True)
class Exchange:
    """One MRTR exchange: its id (links its rounds in logs and traces) and the rounds so far."""

    id: str
    rounds: int = 0
    """Rounds that answered ``input_required`` before this one (0 on a first round)."""

    @classmethod
    def open(cls, state: str | None) -> tuple[Exchange, str | None]:
        """The exchange a verified plaintext state belongs to, and the handler's own state in it.

        A first round (no state) opens a new exchange.

        Raises:
            MCPError: the frozen requestState error, when the state's own expiry has passed.
        """
        match = _ENVELOPE.match(state or "")
        if match is None or state is None:
            return cls(id=secrets.token_hex(8)), state
        expires_ms = match.group(3)
        if expires_ms is not None and time.time() * 1000 >= int(expires_ms):
            log.info("request_state_lapsed", exchange=match.group(2))
            raise state_refused()
        return cls(id=match.group(2), rounds=int(match.group(1))), state[match.end() :] or None

    def next_round(
        self, result: InputRequiredResult, *, expires_at: float, max_rounds: int, counts: bool = True
    ) -> InputRequiredResult:
        """``result`` with its state wrapped for the next round of this exchange.

        ``counts`` is False for a long tool's "still working" round: the server, not the client,
        chose to end it, and the task's TTL bounds how many there can be.

        Raises:
            MCPError: the exchange would take more than ``max_rounds`` requests.
        """
        rounds = self.rounds + 1 if counts else self.rounds
        if counts and rounds >= max_rounds:
            raise rounds_exceeded(max_rounds)
        state = f"r{rounds}.{self.id}.{int(expires_at * 1000)}:{result.request_state or ''}"
        return result.model_copy(update={"request_state": state})
