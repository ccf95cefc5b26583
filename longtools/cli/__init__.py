"""The ``longtools`` command: launches ``serve`` (API, worker and an embedded Temporal dev server),
``api``, ``worker`` and ``codec-server``, runs the terminal client, checks task ledgers offline
(``audit``), and generates the configuration page. The process a person starts.

May import every other part of ``longtools``; nothing imports it.
"""

from __future__ import annotations

from longtools.cli._commands import cli, main

__all__ = ["cli", "main"]
