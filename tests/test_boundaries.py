"""Ours: which part of the code may import which, read from the source, so a crossing fails CI.

The rules are the ones each package's ``__init__`` docstring states: the terminal client speaks
only the wire; workflow and activity code never reaches into the service; the API does not load
the command line or the client; the layers below the wire (tasks, Temporal, tools, auth) do not
import what builds on them. A part reaches another only through its package ``__init__``, never a
private ``_module`` of it (tests may; they are not checked).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("longtools",)

_SUBPACKAGES = (
    "auth", "cli", "client", "decisions", "notify", "pages", "people", "server", "tasks", "temporal",
    "tools",
)  # fmt: skip
# Workflow and activity code: checked by their own rules below, not by the layers of the service.
_CODE_PARTS = ("longtools.workflows", "longtools.activities")
_ALL = tuple(f"longtools.{name}" for name in _SUBPACKAGES)

_SERVICE = (
    "longtools.server",
    "longtools.pages",
    "longtools.tasks",
    "longtools.temporal",
    "longtools.tools",
    "longtools.auth",
    "longtools.workflows",
    "longtools.activities",
    "longtools.client",
    "longtools.cli",
)
"""Everything a shared part used by both workflows and the service must not build on."""

FORBIDDEN: dict[str, tuple[str, ...]] = {
    # The client runs in a person's shell against any server: the wire and nothing else.
    "longtools.client": (
        "longtools.",
        "temporalio",
        "fastapi",
        "prometheus_client",
        "uvicorn",
    ),
    "longtools.server": ("longtools.client", "longtools.cli"),
    # The person's pages are mounted by the server; they build on tasks and auth, never on it.
    "longtools.pages": ("longtools.server", "longtools.client", "longtools.cli"),
    "longtools.tasks": ("longtools.server", "longtools.pages", "longtools.client", "longtools.cli"),
    "longtools.temporal": (
        "longtools.server",
        "longtools.pages",
        "longtools.tasks",
        "longtools.auth",
        "longtools.client",
        "longtools.cli",
    ),
    "longtools.tools": (
        "longtools.server",
        "longtools.pages",
        "longtools.tasks",
        "longtools.temporal",
        "longtools.client",
        "longtools.cli",
    ),
    "longtools.auth": (
        "longtools.server",
        "longtools.pages",
        "longtools.tasks",
        "longtools.temporal",
        "longtools.tools",
        "longtools.client",
        "longtools.cli",
    ),
    # Who decides, on what, and the ledger; who hears of a task (notify); the people who signed in:
    # used by workflows (their workflow halves run in Temporal's sandbox), the worker, the API and
    # the pages, so they build on nothing of theirs. notify builds on decisions; people on neither.
    "longtools.decisions": _SERVICE,
    "longtools.notify": _SERVICE,
    "longtools.people": (*_SERVICE, "longtools.notify"),
    # The modules every process shares (settings, logging, metrics, tracing, wire names).
    "longtools._": _ALL,
    # Workflow code runs in Temporal's sandbox and activity code in the worker: neither reaches into
    # the service, and activities know nothing of workflows.
    "longtools.workflows": ("longtools.",),
    "longtools.activities": ("longtools.",),
}
ALLOWED = {
    # The metrics registry knows the name of the counter the notify workflow records.
    "longtools._": ("longtools.notify",),
    "longtools.client": ("longtools.client", "longtools._protocol"),
    "longtools.workflows": (
        "longtools.workflows",
        "longtools.activities",
        "longtools.decisions",
        "longtools.notify",
        "longtools.people",
    ),
    "longtools.activities": ("longtools.activities",),
}


def _module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, wherever it stands (functions, TYPE_CHECKING).

    ``from package import _private`` counts as importing ``package._private``.
    """
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names if a.name.startswith("_")]
    return found


def _part(module: str) -> str:
    """The rule a module is checked by: its subpackage, ``longtools._`` or the top package."""
    for sub in (*_ALL, *_CODE_PARTS):
        if module == sub or module.startswith(sub + "."):
            return sub
    if module.startswith("longtools._"):
        return "longtools._"
    return module.split(".")[0]


def _within(module: str, prefix: str) -> bool:
    return module == prefix.rstrip(".") or module.startswith(prefix if prefix.endswith(".") else prefix + ".")


def crossings(root: Path) -> list[str]:
    """Every import under ``root`` that crosses a boundary, as ``file:line: what``."""
    found: list[str] = []
    for top in CODE:
        for path in sorted((root / top).rglob("*.py")):
            importer = _module_name(path, root)
            part = _part(importer)
            where = f"{path.relative_to(root)}"
            for line, imported in _imports(path, root):
                allowed = ALLOWED.get(part, ())
                if any(_within(imported, ok) for ok in allowed):
                    continue
                if any(_within(imported, bad) for bad in FORBIDDEN.get(part, ())):
                    found.append(f"{where}:{line}: {part} must not import {imported}")
                    continue
                if imported == "longtools.cli" or imported.startswith("longtools.cli."):
                    if part != "longtools.cli":
                        found.append(f"{where}:{line}: nothing but the command line imports {imported}")
                    continue
                target = _part(imported)
                private = [p for p in imported.split(".")[2:] if p.startswith("_")]
                if target in _ALL and target != part and private:
                    found.append(f"{where}:{line}: {imported} is private; import from {target}")
    return found


def test_no_import_crosses_a_boundary() -> None:
    assert crossings(ROOT) == []


def test_a_crossing_is_found(tmp_path: Path) -> None:
    """The checker itself: each kind of crossing, planted in a small tree, is reported."""
    files = {
        "longtools/__init__.py": "",
        "longtools/_settings.py": "from longtools.server import create_app\n",
        "longtools/client/__init__.py": "from longtools._protocol import TASKS_EXTENSION\n",
        "longtools/client/_terminal.py": "import temporalio\nfrom longtools.tasks import Tasks\n",
        "longtools/server/__init__.py": "",
        "longtools/server/_app.py": (
            "from longtools.tasks._gateway import T\nfrom longtools.client import run\n"
        ),
        "longtools/tasks/__init__.py": "",
        "longtools/tasks/_gateway.py": (
            "from longtools.server import _app\nfrom longtools.tools import Registry\n"
        ),
        "longtools/tools/__init__.py": "def f():\n    from longtools.cli import main\n",
        "longtools/workflows/__init__.py": "from longtools import Registry\n",
        "longtools/activities/__init__.py": "from longtools.workflows import ask\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert crossings(tmp_path) == [
        "longtools/_settings.py:1: longtools._ must not import longtools.server",
        "longtools/activities/__init__.py:1: longtools.activities must not import longtools.workflows",
        "longtools/client/_terminal.py:1: longtools.client must not import temporalio",
        "longtools/client/_terminal.py:2: longtools.client must not import longtools.tasks",
        "longtools/server/_app.py:1: longtools.tasks._gateway is private; import from longtools.tasks",
        "longtools/server/_app.py:2: longtools.server must not import longtools.client",
        "longtools/tasks/_gateway.py:1: longtools.tasks must not import longtools.server",
        "longtools/tasks/_gateway.py:1: longtools.tasks must not import longtools.server._app",
        "longtools/tools/__init__.py:2: longtools.tools must not import longtools.cli",
        "longtools/workflows/__init__.py:1: longtools.workflows must not import longtools",
    ]
