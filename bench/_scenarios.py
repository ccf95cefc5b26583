"""The scenarios and, for each, the implementations that do the same work.

Roles: the ``floor`` is what the bare HTTP stack costs, the ``peer``s are what a user would pick
instead of longtools, ``ours`` are longtools' rows. Ratios in the table are to the best peer and to
the floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["floor", "peer", "ours"]
Kind = Literal["call", "mrtr"]

PAYLOAD = "0123456789abcdef"  # 16 bytes of text, echoed back by every implementation


@dataclass(frozen=True)
class Impl:
    key: str
    """Unique within a scenario; ``--impl`` selects by it."""
    label: str
    role: Role
    server: Literal["floor", "sdk", "fastmcp", "longtools"]
    tool: str


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    kind: Kind
    unit: str
    """What one operation is: a call, or a two-round exchange."""
    connections: int
    impls: tuple[Impl, ...]


FLOOR = "Starlette floor"
SDK = "mcp SDK 2.3.0 (MCPServer)"
FASTMCP = "fastmcp 4.1.4"

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        id="B1",
        title="plain tools/call of an echo tool, 16-byte text, 32 connections",
        kind="call",
        unit="calls",
        connections=32,
        impls=(
            Impl("floor", FLOOR, "floor", "floor", "echo"),
            Impl("sdk", SDK, "peer", "sdk", "echo"),
            Impl("fastmcp", FASTMCP, "peer", "fastmcp", "echo"),
            Impl("longtools", "longtools api", "ours", "longtools", "echo"),
        ),
    ),
    Scenario(
        id="B2",
        title="2-round MRTR exchange (one elicitation, answered at once), 32 connections",
        kind="mrtr",
        unit="exchanges",
        connections=32,
        impls=(
            Impl("floor", FLOOR, "floor", "floor", "confirm"),
            Impl("sdk", SDK, "peer", "sdk", "confirm"),
            Impl("fastmcp", FASTMCP, "peer", "fastmcp", "confirm"),
            Impl("longtools", "longtools api, idempotentHint", "ours", "longtools", "confirm"),
            Impl(
                "longtools-once",
                "longtools api, no annotations (single-use record in Temporal)",
                "ours",
                "longtools",
                "confirm_once",
            ),
        ),
    ),
)
