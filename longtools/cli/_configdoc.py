"""``docs/configuration.md``, generated from the settings model and the CLI so it cannot drift.

Run ``python -m longtools.cli._configdoc > docs/configuration.md`` after changing a setting or a flag;
``tests/test_docs_examples.py`` fails while the page and :func:`render` differ.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath
from typing import Any, Literal, get_args, get_origin

import typer
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from longtools._settings import Settings
from longtools.cli._commands import cli

REGENERATE = "python -m longtools.cli._configdoc > docs/configuration.md"
_ENV_HINT = re.compile(r"\s*\[env [^\]]*\]")


@dataclass(frozen=True)
class _Option:
    """One command-line option, with the commands that take it."""

    name: str
    """The Python parameter name (``temporal_address``), matched against setting names."""
    flag: str
    """As typed: ``--temporal-address``, or ``--examples/--no-examples``."""
    envvar: str | None
    help: str
    commands: tuple[str, ...]


def render() -> str:
    """The whole Markdown page."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    options = _options()
    lines = [
        "# Configuration",
        "",
        f"Every setting is an environment variable `{prefix}<NAME>`. A command-line flag, where one "
        "exists, overrides it. A process reads its settings once, at start. Lists are comma-separated; "
        "booleans are `true` or `false`.",
        "",
        "This page is generated from `longtools/_settings.py` and the CLI. Do not edit it by hand; run "
        f"`{REGENERATE}`.",
        "",
        "| variable | default | flag | meaning |",
        "|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        option = options.get(name)
        flag = f"`{option.flag}` ({', '.join(option.commands)})" if option is not None else ""
        cells = [f"`{prefix}{name.upper()}`", _default(field), flag, _meaning(field)]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    settings = Settings.model_fields
    client = [option for option in options.values() if option.envvar and option.name not in settings]
    if client:
        lines += [
            "",
            "## Client commands",
            "",
            "The client commands read these variables; a server ignores them.",
            "",
            "| variable | flag | commands | meaning |",
            "|---|---|---|---|",
        ]
        for option in client:
            cells = [f"`{option.envvar}`", f"`{option.flag}`", ", ".join(option.commands), option.help]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _options() -> dict[str, _Option]:
    """Every option of every command (``task get`` included), by parameter name."""
    found: dict[str, _Option] = {}
    for path, params in _commands(typer.main.get_command(cli), ()):
        for param in params:
            if getattr(param, "param_type_name", None) != "option" or not isinstance(param.name, str):
                continue
            flag = "/".join([*param.opts, *param.secondary_opts])
            known = found.get(param.name)
            commands = (*known.commands, path) if known is not None else (path,)
            envvar = param.envvar if isinstance(param.envvar, str) else None
            help_text = _ENV_HINT.sub("", getattr(param, "help", None) or "")
            found[param.name] = _Option(param.name, flag, envvar, help_text, commands)
    return found


def _commands(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Sequence[Any]]]:
    """(``"serve"`` or ``"task get"``, its parameters) for every leaf command, in CLI order."""
    subcommands = getattr(command, "commands", None)
    if isinstance(subcommands, dict):
        for name, sub in subcommands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), list(command.params)


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True, validated_data={})
    if value is None or value is PydanticUndefined:
        return "unset"
    if value in ([], (), {}, ""):
        return "empty"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, PurePath | int | float | str):
        return f"`{value}`"
    return f"`{value!r}`"


def _meaning(field: FieldInfo) -> str:
    text = field.description or ""
    if get_origin(field.annotation) is Literal:
        text += " One of " + ", ".join(f"`{choice}`" for choice in get_args(field.annotation)) + "."
    return text


def _cell(text: str) -> str:
    """Table-safe: one line, no bare pipe."""
    return " ".join(text.split()).replace("|", "\\|")


if __name__ == "__main__":
    sys.stdout.write(render())
