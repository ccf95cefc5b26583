"""Placeholder replaced below."""
from service._registry import Registry


def register_conformance_fixtures(registry: Registry) -> None:
    pass
