"""Which tools a server offers: built-ins, the helpdesk example, fixtures, and yours.

A tool module of your own is any importable module with ``register(registry, settings)``; load it
with ``--tools my.module`` (repeatable) or ``LONGTOOLS_TOOLS=my.module,other.module``. The API and
every worker must load the same modules (the worker runs their workflows and activities).
"""

from __future__ import annotations

import importlib

from longtools._settings import Settings
from longtools.tools._echo import register_echo
from longtools.tools._registry import Registry


class ToolModuleError(Exception):
    """A configured tool module cannot be loaded or registered (the message names it and why)."""


def default_registry(settings: Settings) -> Registry:
    """Built-in tools, the examples and fixtures when switched on, and the configured modules."""
    registry = Registry()
    register_echo(registry)
    if settings.examples:
        from longtools.tools._helpdesk import register_helpdesk

        register_helpdesk(registry, settings)
    if settings.conformance_fixtures:
        from longtools.tools._conformance import register_conformance_fixtures

        register_conformance_fixtures(registry)
    for name in settings.tools:
        _load(name, registry, settings)
    return registry


def _load(name: str, registry: Registry, settings: Settings) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ToolModuleError(f"cannot import tool module {name!r}: {exc}") from exc
    register = getattr(module, "register", None)
    if not callable(register):
        raise ToolModuleError(f"tool module {name!r} has no register(registry, settings) function")
    try:
        register(registry, settings)
    except ValueError as exc:  # e.g. a name registered twice
        raise ToolModuleError(f"tool module {name!r}: {exc}") from exc
