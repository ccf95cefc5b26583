"""Connecting to Temporal and the data converter every connection uses. API and worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import structlog
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from longtools._settings import Settings
from longtools.temporal._codec import EncryptionCodec

log = structlog.get_logger("longtools.temporal")

DEFAULT_ADDRESS = "127.0.0.1:7233"


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says Temporal could not be reached (a failed connect raises RuntimeError)."""
    if isinstance(exc, RPCError):
        return exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)
    if isinstance(exc, NotConnected):
        return True
    return isinstance(exc, RuntimeError) and str(exc).startswith("Failed client connect")


class NotConnected(RuntimeError):
    """The API has not reached Temporal yet since it started (it keeps trying in the background)."""


class Connection:
    """The API's Temporal client, connected in the background: no request waits on a connection.

    A lazy client would make the first request after a start wait for the connection, and a
    Temporal that accepts connections but does not answer held that request for 30 s, whatever the
    call timeout. Until the connection is made, calling this raises ``NotConnected`` at once (the
    client's "task service unavailable"); once made, the SDK keeps it up and every call has its
    timeout. ``client`` is one connected already (a worker's, in ``serve``).
    """

    _RETRY_S = 1.0

    def __init__(self, settings: Settings, client: Client | None = None) -> None:
        self._settings = settings
        self._client = client
        self._connecting: asyncio.Task[None] | None = None

    def __call__(self) -> Client:
        if self._client is None:
            raise NotConnected("Temporal has not been reached yet")
        return self._client

    def start(self) -> None:
        if self._client is None and self._connecting is None:
            self._connecting = asyncio.create_task(self._connect())

    async def close(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connecting

    async def _connect(self) -> None:
        failures = 0
        while self._client is None:
            try:
                self._client = await connect(self._settings)
            except RuntimeError as exc:  # the SDK's "Failed client connect"
                failures += 1
                if failures == 1 or failures % 60 == 0:  # said once, then about once a minute
                    log.warning(
                        "temporal_unreachable", address=self._settings.temporal_address, detail=str(exc)
                    )
                await asyncio.sleep(self._RETRY_S)
        log.info("temporal_connected", address=self._settings.temporal_address)


async def connect(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """A client for the configured Temporal.

    The pydantic converter is passed explicitly: the default one also "works" with pydantic models
    through deprecated v1 paths and silently loses types. ``runtime`` (``Metrics.runtime()``)
    carries the metrics of this client and of every worker built on it; None is the SDK's default
    runtime, which records none.

    Everything this client and its workers write is encrypted with the payload key ring (see
    ``data_converter``).

    Raises:
        MissingKeyRing: no payload keys are configured (``launch`` makes sure they are).
    """
    return await Client.connect(
        settings.temporal_address or DEFAULT_ADDRESS,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(settings),
        runtime=runtime,
    )


def data_converter(settings: Settings) -> DataConverter:
    """The pydantic converter with every payload encrypted by the payload key ring.

    Failures carry their message and stack trace as an encrypted payload too (Temporal stores them
    in plain text otherwise): a tool's error text can hold what the person typed.

    Raises:
        MissingKeyRing: no payload keys are configured.
    """
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=EncryptionCodec(settings.require_payload_keys()),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
