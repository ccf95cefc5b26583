"""The person's pages, served by the API process on the port of ``/mcp``: a question answered in
the browser through its sealed link, a task followed live, the list of one's tasks, the decisions
waiting for one (as an approver, or as the person who asked), and the sign-in that tells who the
person is (a pasted token, OpenID Connect, or on a server without authentication, this computer).
Server-rendered HTML and a little JavaScript, no build step.

May import ``longtools.tasks``, ``longtools.auth``, ``longtools.tools``, ``longtools.temporal``,
``longtools.workflows`` (what marks a question), ``longtools.decisions`` (who decides, the proposal,
the votes) and the shared ``longtools._*`` modules; never
``longtools.server``, which mounts it, nor the client or the command line.
"""

from __future__ import annotations

from longtools.pages._app import Holds, Pages

__all__ = ["Holds", "Pages"]
