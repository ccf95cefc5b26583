"""The tool-author API is a deliberate surface: adding or removing a name is a reviewed change."""

from __future__ import annotations

import subprocess
import sys

import service


def test_the_public_api_is_exactly_this() -> None:
    assert sorted(service.__all__) == [
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
    for name in service.__all__:
        assert getattr(service, name) is not None


def test_the_terminal_client_does_not_import_the_server_side() -> None:
    """`longtools call` starts in the time its own stack takes (the mcp SDK), not the server's too."""
    server_side = ("fastapi", "temporalio", "prometheus_client", "service.server")
    code = f"import sys, service.cli, service.client; print([m for m in {server_side!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
