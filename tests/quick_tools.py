"""Quick tools only (``--tools tests.quick_tools``): a deployment with no long tool at all."""

from tests.promise_tools import register_quick as register

__all__ = ["register"]
