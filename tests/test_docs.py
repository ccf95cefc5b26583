"""Every shell command and Python snippet in docs/ runs, against a real server, so the docs cannot rot.

For each page, its ```bash blocks and its ```python snippets run in the order of the page, in one
bash session (``set -euo pipefail``, so any failing command fails the test), with ``longtools``
and the venv's ``python`` on PATH and ``http://127.0.0.1:8000`` pointing at a fresh ``longtools
serve`` started for that page: what a reader who follows the page top to bottom gets. A snippet
runs as a file (``python snippet.py``). A page may say which server it needs with
``<!-- docs-test: serve ARGS -->``; its ```python blocks that start with ``# name.py`` are files a
reader saves, written next to it first (and importable, for ``--tools``), not run here. A block
that cannot run here (Docker, a server the test starts itself, an excerpt) is preceded by
``<!-- not run: why -->``; a block without either runs. A transcript (```console) a reader types
by hand is preceded by ``<!-- docs-test: in its place: COMMAND -->``, the command that does the
same without a prompt, which the test runs where the transcript stands. A page whose tools ask a
person says ``<!-- docs-test: a person answers: FIELD=VALUE ... -->``: while its commands run, a
person answers each question that waits on the pages, with those values for the fields it has.

Every ```python block of docs/ and README.md, run or not, compiles as a file.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import start_server
from tests.pages import PageClient

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")
_IN_ITS_PLACE = re.compile(r"<!-- docs-test: in its place: (.+?) -->\s*$")
_SERVER = re.compile(r"<!-- docs-test: serve(.*?)-->")
_PERSON = re.compile(r"<!-- docs-test: a person answers:(.*?)-->")
_FILE = re.compile(r"# [\w.]+\.py")
_PUBLIC_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class Block:
    language: str
    body: str
    line: int
    not_run: str | None
    """Why it is not run, or None."""
    in_its_place: str | None
    """The command the test runs where this block stands, or None."""

    @property
    def file(self) -> str | None:
        """The file name of a block a reader saves (its first line is ``# name.py``), or None."""
        first = self.body.split("\n", 1)[0]
        return first[2:] if self.language == "python" and _FILE.fullmatch(first) else None

    @property
    def runs(self) -> bool:
        if self.not_run is not None:
            return False
        return self.language == "bash" or (self.language == "python" and self.file is None)


def _blocks(text: str) -> list[Block]:
    """Every fenced block, with what the line before it says."""
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = _NOT_RUN.search(before)
        instead = _IN_ITS_PLACE.search(before)
        found.append(
            Block(
                language=match.group(1),
                body=match.group(2),
                line=text.count("\n", 0, match.start()) + 1,
                not_run=reason.group(1) if reason else None,
                in_its_place=instead.group(1) if instead else None,
            )
        )
    return found


def _pages() -> list[Path]:
    """The pages with at least one block to run."""
    return sorted(
        page for page in DOCS.glob("*.md") if any(block.runs for block in _blocks(page.read_text()))
    )


def test_every_shell_block_in_the_docs_runs_or_says_why_not() -> None:
    for page in DOCS.glob("*.md"):
        for block in _blocks(page.read_text()):
            if block.language in ("sh", "shell"):
                pytest.fail(f"{page.name}: use ```bash for commands (or ```console for a transcript)")
            if block.language in ("bash", "python") and block.not_run is not None:
                assert len(block.not_run) > 10, (
                    f"{page.name}: say why a block is not run: {block.body[:60]!r}"
                )


def test_every_python_block_compiles_as_a_file() -> None:
    """As a reader would save it and run it: no top-level await or return, no excerpt that only
    makes sense inside a function it does not show."""
    failed = []
    for page in [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]:
        for block in _blocks(page.read_text()):
            if block.language != "python":
                continue
            try:
                compile(block.body, f"{page.name}:{block.line}", "exec", dont_inherit=True)
            except SyntaxError as exc:
                failed.append(f"{page.name}:{block.line + (exc.lineno or 0)}: {exc.msg}")
    assert failed == []


def _script(blocks: list[Block], where: Path, url: str) -> str:
    """The page's runnable blocks as one bash script, in their order; snippets as files."""
    steps = []
    for number, block in enumerate(blocks):
        if block.in_its_place is not None:
            steps.append(block.in_its_place)
        elif block.runs and block.language == "bash":
            steps.append(block.body)
        elif block.runs:
            name = f"docs_snippet_{number}.py"
            (where / name).write_text(block.body.replace(_PUBLIC_URL, url))
            steps.append(f"python {name}")
    return "set -euo pipefail\n" + "\n".join(steps).replace(_PUBLIC_URL, url)


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.name)
def test_the_commands_of_a_docs_page_run(page: Path, tmp_path: Path) -> None:
    text = page.read_text()
    blocks = _blocks(text)
    for block in blocks:
        if block.file is not None:
            (tmp_path / block.file).write_text(block.body)
    wanted = _SERVER.search(text)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    served = start_server(tmp_path, *shlex.split(wanted.group(1) if wanted else ""), env=env)
    (tmp_path / ".longtools").symlink_to(tmp_path / "data")  # the default data dir the docs name
    person = _PERSON.search(text)
    answering = _Person(served.base, shlex.split(person.group(1))) if person else None
    try:
        done = subprocess.run(
            ["bash", "-c", _script(blocks, tmp_path, served.base)],
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
        if answering is not None:
            answering.stop()
        served.stop()
    assert done.returncode == 0, f"{page.name}:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    if answering is not None:
        assert answering.answered, f"{page.name}: the person had nothing to answer"


class _Person(threading.Thread):
    """A person at a browser, answering every question that waits on the server's pages (the
    server runs without authentication: the pages are this computer's person's)."""

    def __init__(self, base: str, pairs: list[str]) -> None:
        super().__init__(daemon=True)
        self._base = base
        self._values = dict(pair.split("=", 1) for pair in pairs)
        self._stopped = threading.Event()
        self.answered: list[str] = []
        self.start()

    def run(self) -> None:
        with PageClient(self._base) as browser:
            while not self._stopped.wait(0.2):
                listed = browser.get("/tasks")
                for link in re.findall(r'href="(/answer/[^"]+)"', listed.text):
                    opened = browser.get(link)
                    if opened.status != 200:
                        continue  # answered meanwhile
                    names = set(opened.forms().names)
                    fields = {name: value for name, value in self._values.items() if name in names}
                    browser.send(link, opened, {k: True if v == "true" else v for k, v in fields.items()})
                    self.answered.append(link)

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=10)


def test_every_picture_a_page_shows_is_there() -> None:
    """The screenshots are taken by the browser tests (``LONGTOOLS_SCREENSHOTS=docs/images``)."""
    shown = [
        (page, name)
        for page in [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
        for name in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page.read_text())
    ]
    assert len(shown) >= 7  # the quickstart's and security's
    assert [f"{page.name}: {name}" for page, name in shown if not (page.parent / name).is_file()] == []
