"""The terminal client: ``longtools call``, ``longtools tools`` and ``longtools task
get|watch|answer|cancel|audit``, an MCP 2026-07-28 client for a person at a terminal, with forms for the
questions a tool asks. Runs in the user's shell, against any server.

May import ``longtools._protocol`` and third-party code only: nothing of the server, nothing of
Temporal, and of the MCP SDK only ``mcp_types`` at a prompt, so ``longtools call`` loads fast
and speaks only the wire.
"""

from __future__ import annotations

from longtools.client._audit import task_audit
from longtools.client._terminal import (
    CallRequest,
    Terminal,
    call,
    explain,
    task_answer,
    task_cancel,
    task_get,
    task_watch,
    tools,
)
from longtools.client._wire import ClientError

__all__ = [
    "CallRequest",
    "ClientError",
    "Terminal",
    "call",
    "explain",
    "task_answer",
    "task_audit",
    "task_cancel",
    "task_get",
    "task_watch",
    "tools",
]
