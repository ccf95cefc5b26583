"""The API: the ASGI app, the HTTP gate in front of the SDK, the SDK server's handlers, quick
tools' MRTR rounds, long tools on the wire (``tools/call`` as a task or as rounds, and
``tasks/*``), and the 2025 era's sealed sessions and pushed questions. API process.

May import ``longtools.auth``, ``longtools.tools``, ``longtools.tasks``, ``longtools.temporal`` and the
shared ``longtools._*`` modules; never the terminal client or the command line.
"""

from __future__ import annotations

from longtools.server._app import MCP_PATH, create_app, front_door
from longtools.server._sessions import LegacySession, Seals

__all__ = ["MCP_PATH", "LegacySession", "Seals", "create_app", "front_door"]
