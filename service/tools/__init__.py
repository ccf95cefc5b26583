"""The tools a longtools server offers by default. API process."""

from __future__ import annotations

from service._registry import Registry
from service._settings import Settings
from service.tools._echo import register_echo
from service.tools._helpdesk import TicketStore, register_helpdesk

__all__ = ["default_registry"]


def default_registry(settings: Settings) -> Registry:
    """Built-in tools, plus the conformance fixtures when they are switched on."""
    registry = Registry()
    register_echo(registry)
    register_helpdesk(registry, TicketStore(settings.data_dir / "helpdesk.sqlite3"))
    if settings.conformance_fixtures:
        from service.tools._conformance import register_conformance_fixtures

        register_conformance_fixtures(registry)
    return registry
