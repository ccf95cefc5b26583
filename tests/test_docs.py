"""Every shell command in docs/ runs, against a real server, so the docs cannot rot.

For each page, its ```bash blocks run in order in one bash session (``set -euo pipefail``, so any
failing command fails the test), with ``longtools`` on PATH and ``http://127.0.0.1:8000`` pointing
at a fresh ``longtools serve`` started for that page. A page may say which server it needs with
``<!-- docs-test: serve ARGS -->``; its ```python blocks that start with ``# name.py`` are written
next to it first (and importable, for ``--tools``). A block that cannot run here (Docker, a server
the test starts itself) is preceded by ``<!-- not run: why -->``; a block without either runs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import start_server

DOCS = Path(__file__).resolve().parent.parent / "docs"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")
_SERVER = re.compile(r"<!-- docs-test: serve(.*?)-->")
_PUBLIC_URL = "http://127.0.0.1:8000"


def _blocks(text: str) -> list[tuple[str, str, str | None]]:
    """(language, body, the reason it is not run or None) of every fenced block."""
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = _NOT_RUN.search(before)
        found.append((match.group(1), match.group(2), reason.group(1) if reason else None))
    return found


def _pages() -> list[Path]:
    """The pages with at least one block to run."""
    return sorted(
        page
        for page in DOCS.glob("*.md")
        if any(lang == "bash" and reason is None for lang, _, reason in _blocks(page.read_text()))
    )


def test_every_shell_block_in_the_docs_runs_or_says_why_not() -> None:
    for page in DOCS.glob("*.md"):
        for language, body, reason in _blocks(page.read_text()):
            if language in ("sh", "shell"):
                pytest.fail(f"{page.name}: use ```bash for commands (or ```console for a transcript)")
            if language == "bash" and reason is not None:
                assert len(reason) > 10, f"{page.name}: say why a block is not run: {body[:60]!r}"


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.name)
def test_the_commands_of_a_docs_page_run(page: Path, tmp_path: Path) -> None:
    text = page.read_text()
    blocks = _blocks(text)
    for language, body, _ in blocks:
        first = body.split("\n", 1)[0]
        if language == "python" and re.fullmatch(r"# [\w.]+\.py", first):
            (tmp_path / first[2:]).write_text(body)
    script = "\n".join(body for language, body, reason in blocks if language == "bash" and reason is None)
    wanted = _SERVER.search(text)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    served = start_server(tmp_path, *shlex.split(wanted.group(1) if wanted else ""), env=env)
    (tmp_path / ".longtools").symlink_to(tmp_path / "data")  # the default data dir the docs name
    try:
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + script.replace(_PUBLIC_URL, served.base)],
            cwd=tmp_path,
            env={
                **os.environ,
                **env,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            },
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        served.stop()
    assert done.returncode == 0, f"{page.name}:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
