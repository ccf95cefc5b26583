"""What a server offers and how it is declared (``Registry``, ``Round``, ...), and which tools it
loads: built-ins, the helpdesk example, conformance fixtures, and tool modules of your own. API and
worker processes (the API runs quick tools, the worker the long tools' workflows and activities).

May import ``longtools.auth`` (who is calling), ``longtools._settings``, ``longtools.workflows``
and ``longtools.activities``; nothing that talks to Temporal or to the wire.
"""

from __future__ import annotations

from longtools.tools._loading import ToolModuleError, default_registry
from longtools.tools._registry import (
    Prompt,
    Registry,
    Resource,
    ResourceContent,
    ResourceTemplate,
    Tool,
    ToolError,
    ToolReturn,
    as_wire,
    to_call_result,
    tool_error_result,
    wire_call_result,
)
from longtools.tools._round import Round, kind_supported, missing_capability, rounds_exceeded

__all__ = [
    "Prompt",
    "Registry",
    "Resource",
    "ResourceContent",
    "ResourceTemplate",
    "Round",
    "Tool",
    "ToolError",
    "ToolModuleError",
    "ToolReturn",
    "as_wire",
    "default_registry",
    "kind_supported",
    "missing_capability",
    "rounds_exceeded",
    "to_call_result",
    "tool_error_result",
    "wire_call_result",
]
