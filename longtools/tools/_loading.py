"""Which tools a server offers: built-ins, the helpdesk example, fixtures, and yours.

A tool module of your own is any importable module with ``register(registry, settings)``; load it
with ``--tools my.module`` (repeatable) or ``LONGTOOLS_TOOLS=my.module,other.module``. The API and
every worker must load the same modules (the worker runs their workflows and activities).

The current directory is not put on Python's path for them: a service started in a directory
anyone can write to would import whatever is there, and a ``json.py`` or ``typing.py`` lying there
would shadow the standard library for all of longtools. A module that is only in the current
directory gets a refusal that says so and names ``PYTHONPATH=.``.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import sysconfig
import traceback
from pathlib import Path

from longtools._settings import Settings
from longtools.tools._echo import register_echo
from longtools.tools._registry import Registry


class ToolModuleError(Exception):
    """A configured tool module cannot be loaded or registered (one line: which, where, and why)."""


def default_registry(settings: Settings) -> Registry:
    """Built-in tools, the examples and fixtures when switched on, and the configured modules."""
    registry = Registry()
    register_echo(registry)
    if settings.examples:
        from longtools.tools._helpdesk import register_helpdesk

        register_helpdesk(registry, settings)
    if settings.conformance_fixtures:
        from longtools.tools._conformance import register_conformance_fixtures

        register_conformance_fixtures(registry)
    for name in settings.tools:
        _load(name, registry, settings)
    return registry


def _load(name: str, registry: Registry, settings: Settings) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise ToolModuleError(_not_found(name, exc.name)) from exc
        raise ToolModuleError(f"cannot import tool module {name!r}: {_where(exc)}") from exc
    except Exception as exc:  # a syntax error, an import inside it, anything its top level raises
        raise ToolModuleError(f"cannot import tool module {name!r}: {_where(exc)}") from exc
    register = getattr(module, "register", None)
    if not callable(register):
        raise ToolModuleError(
            f"tool module {name!r} ({getattr(module, '__file__', None) or 'no file'}) has no "
            "register(registry, settings) function"
        )
    try:
        register(registry, settings)
    except Exception as exc:  # e.g. a name registered twice, a bad schema, a bug in register()
        raise ToolModuleError(f"tool module {name!r}: register() failed: {_where(exc)}") from exc


def _not_found(name: str, missing: str) -> str:
    """Why ``name`` is not importable, with what to do next."""
    top = missing.partition(".")[0]
    here = Path.cwd()
    local = [path for path in (here / f"{top}.py", here / top / "__init__.py") if path.is_file()]
    if local and str(here) not in map(_resolved, sys.path):
        return (
            f"cannot import tool module {name!r}: {local[0]} is in the current directory, which is not "
            f"on Python's path for the longtools command; run it with PYTHONPATH=. (or install the "
            "module into this Python)"
        )
    return (
        f"cannot import tool module {name!r}: no module named {missing!r} on Python's path; install it "
        "into this Python, or add its directory to PYTHONPATH"
    )


def _resolved(entry: str) -> str:
    return str(Path(entry or ".").resolve())


def _where(exc: BaseException) -> str:
    """``file:line: Type: message`` for ``exc``: where the tool author's code went wrong."""
    # One line: a message over several lines (pydantic's, for one) is joined.
    message = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    if isinstance(exc, SyntaxError) and exc.filename:
        # The place is the error itself, not a frame: the module never ran.
        return f"{exc.filename}:{exc.lineno}: {type(exc).__name__}: {exc.msg}"
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return what
    theirs = [frame for frame in frames if _authored(frame.filename)]
    frame = (theirs or frames)[-1]
    return f"{frame.filename}:{frame.lineno}: {what}"


@functools.cache  # only a tool module that fails to load needs it, not every start
def _libraries() -> tuple[str, ...]:
    return tuple(
        {
            os.path.normcase(os.path.realpath(path)) + os.sep
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if (path := sysconfig.get_paths().get(key))
        }
        | {os.path.normcase(os.path.realpath(Path(__file__).parents[1])) + os.sep}
    )


def _authored(filename: str) -> bool:
    """Whether a frame is the tool author's: not importlib's, the standard library's, an installed
    package's or longtools' own (a register() that misuses Registry is wrong at its own line)."""
    if filename.startswith("<"):
        return False
    return not os.path.normcase(os.path.realpath(filename)).startswith(_libraries())
