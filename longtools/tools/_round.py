"""One round of an MRTR exchange, as a quick tool, prompt or resource sees it. API process.

A handler is re-run on every round. It reads what the client answered (``round.elicited(...)`` and
friends, each validated again, because every round is a trust boundary) and either finishes or
returns ``round.ask(...)``. Nothing here keeps state between rounds: what a handler needs to carry
goes into ``request_state``, which the SDK seals (AEAD, bound to principal, method, target,
arguments digest, audience and expiry) before it leaves and verifies before the handler runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitationCapability,
    ElicitRequest,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
    LoggingLevel,
    RootsCapability,
    SamplingCapability,
)
from pydantic import BaseModel, ValidationError

from longtools.auth import Caller, caller_of
from longtools.workflows._inputs import Elicited, InputRequest

M = TypeVar("M", bound=BaseModel)


def kind_supported(request: InputRequest, caps: ClientCapabilities) -> bool:
    """Whether a client that declared ``caps`` can answer ``request`` (its kind, and a form's mode)."""
    if isinstance(request, ElicitRequest):
        if caps.elicitation is None:
            return False
        mode = getattr(request.params, "mode", "form")
        declared = caps.elicitation.model_dump(exclude_none=True)
        # `elicitation: {}` means form only (client/elicitation.mdx).
        if mode == "url":
            return "url" in declared
        return not declared or "form" in declared
    if isinstance(request, CreateMessageRequest):
        return caps.sampling is not None
    return caps.roots is not None


def missing_capability(*needed: InputRequest) -> MCPError:
    """-32021 with ``data.requiredCapabilities`` naming what the ``needed`` requests take."""
    required: dict[str, Any] = {}
    for request in needed:
        required |= _capability_for(request).model_dump(mode="json", exclude_none=True)
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message="Missing required client capability",
        data={"requiredCapabilities": required},
    )


def rounds_exceeded(limit: int) -> MCPError:
    return MCPError(
        code=INVALID_PARAMS,
        message=f"This call took more than {limit} rounds of questions; call the tool again",
    )


def _capability_for(request: InputRequest) -> ClientCapabilities:
    if isinstance(request, ElicitRequest):
        return ClientCapabilities(elicitation=ElicitationCapability())
    if isinstance(request, CreateMessageRequest):
        return ClientCapabilities(sampling=SamplingCapability())
    return ClientCapabilities(roots=RootsCapability())


class Round:
    """What a handler knows in this round: the client's capabilities, answers and the state it echoed."""

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        *,
        input_responses: Mapping[str, Any] | None,
        request_state: str | None,
    ) -> None:
        self._ctx = ctx
        self.client_capabilities: ClientCapabilities = ctx.session.client_capabilities or ClientCapabilities()
        self.input_responses: Mapping[str, Any] = input_responses or {}
        self.request_state = request_state
        """The plaintext state this server minted in the previous round (already verified), or None."""

    @property
    def caller(self) -> Caller:
        """Who sent this round (``anonymous`` without authentication); a tool may act on it."""
        return caller_of(self._ctx)

    @property
    def progress_token(self) -> str | int | None:
        """The request's progressToken, when it asked for progress notifications."""
        meta = self._ctx.meta
        return meta.get("progress_token") if meta is not None else None

    def supports(self, request: InputRequest) -> bool:
        """Whether this request's client declared the capability ``request`` needs."""
        return kind_supported(request, self.client_capabilities)

    def elicited(self, key: str, model: type[M]) -> Elicited[M] | None:
        """The answer under ``key``, validated against ``model``; None if missing or malformed."""
        response = self.input_responses.get(key)
        if not isinstance(response, ElicitResult):
            return None
        if response.action != "accept":
            return Elicited(action=response.action, content=None)
        try:
            return Elicited(action="accept", content=model.model_validate(response.content or {}))
        except ValidationError:
            return None

    def sampled(self, key: str) -> CreateMessageResult | None:
        """The sampling result under ``key``, or None."""
        response = self.input_responses.get(key)
        return response if isinstance(response, CreateMessageResult) else None

    def roots(self, key: str) -> ListRootsResult | None:
        """The roots listing under ``key``, or None."""
        response = self.input_responses.get(key)
        return response if isinstance(response, ListRootsResult) else None

    def ask(self, requests: Mapping[str, InputRequest], state: str | None = None) -> InputRequiredResult:
        """An ``InputRequiredResult`` carrying only the requests this client can answer.

        With no requests it is a state-only result: the client retries at once ("not yet").

        Raises:
            MCPError: -32021 with ``data.requiredCapabilities`` when requests were given but the
                client can answer none of them (the spec forbids sending an undeclared kind, and a
                result with nothing to answer would only make the client retry in a loop).
        """
        kept = {key: request for key, request in requests.items() if self.supports(request)}
        if requests and not kept:
            raise missing_capability(*requests.values())
        if not kept and state is None:
            raise ValueError("ask() needs at least one input request or a state")
        return InputRequiredResult(input_requests=kept or None, request_state=state)

    async def log(self, level: LoggingLevel, data: Any, logger: str | None = None) -> None:
        """Send a log message about this call, on its stream: to a 2025-era client always, to a
        2026-era client only when the request asked for that level (``_meta`` logLevel)."""
        with warnings.catch_warnings():
            # Deprecated as a capability in 2026-07-28; still how a call's log reaches either era.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            sending = self._ctx.session.send_log_message(
                level, data, logger, related_request_id=self._ctx.request_id
            )
        await sending

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress; sent (as SSE) only when the request carried a progressToken."""
        await self._ctx.session.report_progress(progress, total, message)
