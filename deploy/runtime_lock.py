"""Print the runtime part of requirements.lock: what longtools needs without its `test` extra.

requirements.lock (``uv pip compile --universal --generate-hashes --extra test``) says, under each
package, which packages require it (``# via ...``). Starting from ``[project] dependencies`` in
pyproject.toml, a package is kept when a kept package requires it. Kept entries are copied as they
are (version, environment marker, hashes), so the Docker image installs the very versions the
tests ran with, hash-checked, without pytest, mypy, ruff or fastmcp.

    python deploy/runtime_lock.py requirements.lock pyproject.toml > runtime.lock

Keeping a package that only some kept package's optional extra needs is harmless (it is locked
and hashed like the rest); missing one is caught by ``pip check`` in the Dockerfile.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def canonical(name: str) -> str:
    """PEP 503 normal form, as uv writes names in ``# via`` lines."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(pyproject: str) -> list[str]:
    """The canonical names in ``[project] dependencies`` and in every optional extra but ``test``
    (e.g. ``otel``, so traces work in the image); extras and markers of each entry are dropped."""
    project = tomllib.loads(pyproject)["project"]
    requirements = list(project["dependencies"])
    for extra, entries in project.get("optional-dependencies", {}).items():
        if extra != "test":
            requirements.extend(entries)
    names = []
    for requirement in requirements:
        match = _NAME.match(requirement.strip())
        if match is None:
            raise ValueError(f"cannot read the requirement {requirement!r} in pyproject.toml")
        names.append(canonical(match.group()))
    return names


def parse_lock(text: str) -> dict[str, tuple[list[str], set[str]]]:
    """{name: (the entry's lines, the names of the packages that require it)}, in file order."""
    entries: dict[str, tuple[list[str], set[str]]] = {}
    current: str | None = None
    in_via = False
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            match = _NAME.match(line)
            if match is None:
                raise ValueError(f"cannot read the lock line {line!r}")
            current = canonical(match.group())
            entries[current] = ([line], set())
            in_via = False
            continue
        if current is None:
            continue  # the header
        lines, parents = entries[current]
        lines.append(line)
        comment = line.strip()
        if comment.startswith("# via"):
            rest = comment.removeprefix("# via").strip()
            in_via = not rest
            if rest:
                parents.add(canonical(rest.split()[0]))
        elif in_via and comment.startswith("#   "):
            parents.add(canonical(comment.removeprefix("#").split()[0]))
        else:
            in_via = False
    return entries


def runtime_lock(lock: str, pyproject: str) -> str:
    entries = parse_lock(lock)
    kept = set(runtime_requirements(pyproject))
    missing = sorted(kept - entries.keys())
    if missing:
        raise ValueError(f"requirements.lock lacks {', '.join(missing)}: regenerate it from pyproject.toml")
    grew = True
    while grew:
        grew = False
        for name, (_, parents) in entries.items():
            if name not in kept and parents & kept:
                kept.add(name)
                grew = True
    out = ["# The runtime part of requirements.lock, written by deploy/runtime_lock.py."]
    for name, (lines, _) in entries.items():
        if name in kept:
            out.extend(lines)
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python deploy/runtime_lock.py requirements.lock pyproject.toml", file=sys.stderr)  # noqa: T201
        return 2
    try:
        text = runtime_lock(Path(argv[1]).read_text(), Path(argv[2]).read_text())
    except (OSError, ValueError, KeyError) as exc:
        print(f"runtime_lock: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
