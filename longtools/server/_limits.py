"""Bounds on what one caller, one task and one process may hold; one error for every bound. API process.

Each bound is a setting, and going over it is a JSON-RPC error (``-32600``, HTTP 400) whose message
and ``data.limit`` name the setting: the client learns which bound it met, the operator which
variable raises it. Nothing here is a security rejection, so the error says what happened.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from prometheus_client import Gauge

__all__ = ["HeldRounds", "answers_too_large", "limit_reached"]


def limit_reached(setting: str, value: int, what: str) -> MCPError:
    """-32600 naming the bound: ``setting`` is the Settings field, ``what`` says what was refused."""
    variable = f"LONGTOOLS_{setting.upper()}"
    return MCPError(
        code=INVALID_REQUEST,
        message=f"{what}: the limit is {value} ({variable})",
        data={"limit": variable, "value": value},
    )


def answers_too_large(limit: int) -> MCPError:
    """A task has taken ``max_task_answer_bytes`` of answers (each is written to its history)."""
    return limit_reached("max_task_answer_bytes", limit, "This task cannot take more bytes of answers")


class HeldRounds:
    """The requests this process holds open while a task works, per principal and in all: MRTR
    rounds, 2025-era calls waiting for a pushed answer, ``tasks/result``, the task tools' waits,
    paced ``tasks/get`` polls, ``tasks/update`` settles and cancels waiting for the end.

    A held request costs a connection and a waiter; without a bound one caller could hold them
    all. Counted in this process only: each replica has its own share, as it has its own
    connections.
    """

    def __init__(self, *, per_principal: int, total: int, gauge: Gauge) -> None:
        self._per_principal = per_principal
        self._total = total
        self._gauge = gauge
        self._held: Counter[str] = Counter()
        self._all = 0

    @contextmanager
    def hold(self, principal: str) -> Iterator[None]:
        """Count one held request for ``principal`` while inside; refused over either bound.

        Raises:
            MCPError: -32600 naming the bound that was reached.
        """
        if self._all >= self._total:
            raise limit_reached("max_held_rounds", self._total, "This server holds too many rounds open")
        if self._held[principal] >= self._per_principal:
            raise limit_reached(
                "max_held_rounds_per_principal",
                self._per_principal,
                "You have too many calls waiting on this server at once",
            )
        with self._counted(principal):
            yield

    @contextmanager
    def hold_if_free(self, principal: str) -> Iterator[bool]:
        """Count one held request while inside if both bounds allow it; whether it was counted.
        For a wait that is only a courtesy (a paced poll, a settle), which a request at the bound
        skips: it is answered at once instead of refused."""
        if self._all >= self._total or self._held[principal] >= self._per_principal:
            yield False
            return
        with self._counted(principal):
            yield True

    @contextmanager
    def _counted(self, principal: str) -> Iterator[None]:
        self._held[principal] += 1
        self._all += 1
        self._gauge.inc()
        try:
            yield
        finally:
            self._gauge.dec()
            self._all -= 1
            self._held[principal] -= 1
            if not self._held[principal]:
                del self._held[principal]
