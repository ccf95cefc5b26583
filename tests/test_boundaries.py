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
CODE = ("service", "workflows", "activities")

_SUBPACKAGES = ("auth", "cli", "client", "server", "tasks", "temporal", "tools")
_ALL = tuple(f"service.{name}" for name in _SUBPACKAGES)

FORBIDDEN: dict[str, tuple[str, ...]] = {
    # The client runs in a person's shell against any server: the wire and nothing else.
    "service.client": (
        "service.",
        "temporalio",
        "fastapi",
        "prometheus_client",
        "uvicorn",
        "workflows",
        "activities",
    ),
    "service.server": ("service.client", "service.cli"),
    "service.tasks": ("service.server", "service.client", "service.cli"),
    "service.temporal": ("service.server", "service.tasks", "service.auth", "service.client", "service.cli"),
    "service.tools": ("service.server", "service.tasks", "service.temporal", "service.client", "service.cli"),
    "service.auth": (
        "service.server",
        "service.tasks",
        "service.temporal",
        "service.tools",
        "service.client",
        "service.cli",
    ),
    # The modules every process shares (settings, logging, metrics, tracing, wire names).
    "service._": _ALL,
    "workflows": ("service",),
    "activities": ("service", "workflows"),
}
ALLOWED = {"service.client": ("service.client", "service._protocol")}


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
    """The rule a module is checked by: its subpackage, ``service._`` or the top package."""
    for sub in _ALL:
        if module == sub or module.startswith(sub + "."):
            return sub
    if module.startswith("service._"):
        return "service._"
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
                if imported == "service.cli" or imported.startswith("service.cli."):
                    if part != "service.cli":
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
        "service/__init__.py": "",
        "service/_settings.py": "from service.server import create_app\n",
        "service/client/__init__.py": "from service._protocol import TASKS_EXTENSION\n",
        "service/client/_terminal.py": "import temporalio\nfrom service.tasks import Tasks\n",
        "service/server/__init__.py": "",
        "service/server/_app.py": "from service.tasks._gateway import T\nfrom service.client import run\n",
        "service/tasks/__init__.py": "",
        "service/tasks/_gateway.py": "from service.server import _app\nfrom service.tools import Registry\n",
        "service/tools/__init__.py": "def f():\n    from service.cli import main\n",
        "workflows/__init__.py": "from service import Registry\n",
        "activities/__init__.py": "from workflows import ask\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert crossings(tmp_path) == [
        "service/_settings.py:1: service._ must not import service.server",
        "service/client/_terminal.py:1: service.client must not import temporalio",
        "service/client/_terminal.py:2: service.client must not import service.tasks",
        "service/server/_app.py:1: service.tasks._gateway is private; import from service.tasks",
        "service/server/_app.py:2: service.server must not import service.client",
        "service/tasks/_gateway.py:1: service.tasks must not import service.server",
        "service/tasks/_gateway.py:1: service.tasks must not import service.server._app",
        "service/tools/__init__.py:2: service.tools must not import service.cli",
        "workflows/__init__.py:1: workflows must not import service",
        "activities/__init__.py:1: activities must not import workflows",
    ]
