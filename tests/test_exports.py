"""The tool-author API is a deliberate surface: adding or removing a name is a reviewed change."""

from __future__ import annotations

import subprocess
import sys

import longtools


def test_the_public_api_is_exactly_this() -> None:
    assert sorted(longtools.__all__) == [
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
    for name in longtools.__all__:
        assert getattr(longtools, name) is not None


def test_the_terminal_client_does_not_import_the_server_side() -> None:
    """`longtools call` starts in the time its own stack takes (the mcp SDK), not the server's too."""
    server_side = ("fastapi", "temporalio", "prometheus_client", "longtools.server")
    code = (
        "import sys, longtools.cli, longtools.client;"
        f" print([m for m in {server_side!r} if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
