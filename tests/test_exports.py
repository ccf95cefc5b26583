"""The tool-author API is a deliberate surface: adding or removing a name is a reviewed change."""

from __future__ import annotations

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
