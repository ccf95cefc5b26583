"""Who is calling. API process.

There is no authentication yet, so every caller is the same principal. Tasks and requestState are
bound to it already, so turning authentication on later separates callers without a format change.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext

ANONYMOUS = "anonymous"


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str:
    return ANONYMOUS
