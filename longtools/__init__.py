"""longtools: an MCP server for long-running tools on Temporal, and what tool authors import.

Everything a tool module needs comes from here: quick tools (``Registry``, ``Round``, ``elicit``)
and long tools' workflow code (``ask_form``, ``ask``, ``report``, ``ToolError``)::

    from longtools import Registry, Round, ToolError, ToolReturn, ask_form, elicit, report

    registry = Registry()

    @registry.tool("greet", input=GreetInput, output=GreetOutput)
    async def greet(args: GreetInput, rnd: Round) -> ToolReturn:
        answer = rnd.elicited("name", NameForm)
        if answer is None:
            return rnd.ask({"name": elicit("Your name?", NameForm)})
        ...

A long tool is a Temporal workflow registered in one line::

    registry.long_tool("bulk_close_tickets", workflow=BulkCloseTickets, input=BulkCloseInput)
    registry.add_activities(acts.open_tickets, acts.close_ticket)

A module with ``register(registry, settings)`` adds tools of your own (``--tools my.module``).
A tool may pass ``authorize=check``: ``async def check(caller: Caller, args) -> bool`` runs on
every round of every call, and on every answer to a long tool's task (with the task's arguments),
so a permission withdrawn between rounds stops the call, and one withdrawn while a task waits stops
its answers.
``longtools.testing`` runs a long tool in tests.

The rest of ``longtools`` is the service itself, one subpackage per process or concern
(``server``, ``tasks``, ``auth``, ``tools``, ``temporal``, ``client``, ``cli``, and the code that
runs in the worker: ``workflows``, ``activities``); docs/architecture.md maps them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from longtools._settings import Settings
    from longtools.auth import Authorize, Caller
    from longtools.server import create_app
    from longtools.tools import (
        Prompt,
        Registry,
        Resource,
        ResourceTemplate,
        Round,
        Tool,
        ToolError,
        ToolReturn,
    )
    from longtools.workflows import (
        Elicited,
        InputRequest,
        ProtocolError,
        ask,
        ask_form,
        elicit,
        list_roots,
        report,
        sample,
    )

# Loaded on first use (PEP 562): `import longtools.cli` or `longtools.client` (the terminal client)
# then does not pull in the server side, and neither does Temporal's sandbox when workflow code
# imports this package.
_HOME = {
    "create_app": "longtools.server",
    "Authorize": "longtools.auth",
    "Caller": "longtools.auth",
    "Prompt": "longtools.tools",
    "Registry": "longtools.tools",
    "Resource": "longtools.tools",
    "ResourceTemplate": "longtools.tools",
    "Tool": "longtools.tools",
    "ToolError": "longtools.tools",
    "ToolReturn": "longtools.tools",
    "Round": "longtools.tools",
    "Settings": "longtools._settings",
    "Elicited": "longtools.workflows",
    "InputRequest": "longtools.workflows",
    "ProtocolError": "longtools.workflows",
    "ask": "longtools.workflows",
    "ask_form": "longtools.workflows",
    "elicit": "longtools.workflows",
    "list_roots": "longtools.workflows",
    "report": "longtools.workflows",
    "sample": "longtools.workflows",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'longtools' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "Authorize",
    "Caller",
    "Elicited",
    "InputRequest",
    "Prompt",
    "ProtocolError",
    "Registry",
    "Resource",
    "ResourceTemplate",
    "Round",
    "Settings",
    "Tool",
    "ToolError",
    "ToolReturn",
    "ask",
    "ask_form",
    "create_app",
    "elicit",
    "list_roots",
    "report",
    "sample",
]
