"""longtools: an MCP server (2026-07-28, stateless Streamable HTTP) for long-running tools.

The public API for running the service and for writing quick tools::

    from service import Registry, Round, ToolError, elicit

    registry = Registry()

    @registry.tool("greet", input=GreetInput, output=GreetOutput)
    async def greet(args: GreetInput, rnd: Round) -> ToolReturn:
        answer = rnd.elicited("name", NameForm)
        if answer is None:
            return rnd.ask({"name": elicit("Your name?", NameForm)})
        ...

A long tool is a Temporal workflow (see ``workflows``) registered in one line::

    registry.long_tool("bulk_close_tickets", workflow=BulkCloseTickets, input=BulkCloseInput)
    registry.add_activities(acts.open_tickets, acts.close_ticket)

A module with ``register(registry, settings)`` adds tools of your own (``--tools my.module``).
A tool may pass ``authorize=check``: ``async def check(caller: Caller, args) -> bool`` runs on
every round of every call, so a permission withdrawn between rounds stops the call.

The rest of ``service`` is the service itself, one subpackage per process or concern (``server``,
``tasks``, ``auth``, ``tools``, ``temporal``, ``client``, ``cli``); docs/architecture.md maps them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service._settings import Settings
    from service.auth import Authorize, Caller
    from service.server import create_app
    from service.tools import (
        Prompt,
        Registry,
        Resource,
        ResourceTemplate,
        Round,
        Tool,
        ToolError,
        ToolReturn,
    )
    from workflows import Elicited, InputRequest, elicit, list_roots, sample

# Loaded on first use (PEP 562): `import service.client` (the terminal client) then does not pull
# in the server side, and `from service import Registry` in a tool module costs the same as before.
_HOME = {
    "create_app": "service.server",
    "Authorize": "service.auth",
    "Caller": "service.auth",
    "Prompt": "service.tools",
    "Registry": "service.tools",
    "Resource": "service.tools",
    "ResourceTemplate": "service.tools",
    "Tool": "service.tools",
    "ToolError": "service.tools",
    "ToolReturn": "service.tools",
    "Round": "service.tools",
    "Settings": "service._settings",
    "Elicited": "workflows",
    "InputRequest": "workflows",
    "elicit": "workflows",
    "list_roots": "workflows",
    "sample": "workflows",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'service' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "Authorize",
    "Caller",
    "Elicited",
    "InputRequest",
    "Prompt",
    "Registry",
    "Resource",
    "ResourceTemplate",
    "Round",
    "Settings",
    "Tool",
    "ToolError",
    "ToolReturn",
    "create_app",
    "elicit",
    "list_roots",
    "sample",
]
