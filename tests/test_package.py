"""longtools is one package, ``longtools``: a tool author's project beside it keeps its own names.

tests/outside_project is such a project, with the package names most Temporal projects use
(``workflows/``, ``activities/``) and a tool module, ``deploy_tools``. It is copied out of the
repository and served by a real ``longtools serve --tools deploy_tools`` with only its folder on
``PYTHONPATH``; ``mypy --strict`` checks it there; and the wheel longtools builds installs
``longtools`` alone. When longtools installed ``service``, ``workflows`` and ``activities`` as
top-level packages (before commit dce8f5d), the author's ``workflows`` shadowed longtools' own and
the server could not load its workflow code: "No module named 'workflows._metrics'".
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, post, result, wait_for_task

REPO = Path(__file__).resolve().parent.parent
OUTSIDE_PROJECT = Path(__file__).resolve().parent / "outside_project"
WAITING = "input_required"
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}


def copy_outside_project(where: Path) -> Path:
    """tests/outside_project, copied to ``where/project`` (outside the repository)."""
    project = where / "project"
    shutil.copytree(OUTSIDE_PROJECT, project, ignore=shutil.ignore_patterns("__pycache__", ".mypy_cache"))
    return project


def serve_outside_project(where: Path) -> Served:
    """``longtools serve --tools deploy_tools`` with the copied project (only) on ``PYTHONPATH``."""
    project = copy_outside_project(where)
    path = os.pathsep.join(part for part in (str(project), os.environ.get("PYTHONPATH")) if part)
    return start_server(where, "--tools", "deploy_tools", "--no-examples", env={"PYTHONPATH": path})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = serve_outside_project(tmp_path_factory.mktemp("outside"))
    try:
        yield server
    finally:
        server.stop()


def test_the_outside_projects_tools_are_listed(served: Served) -> None:
    tools = {tool["name"]: tool for tool in result(post(served.url, "tools/list"))["tools"]}
    assert {"deploy_service", "service_status", "label_service"} <= set(tools)
    described = tools["deploy_service"]["description"]  # the docstring of the project's workflow
    assert described == "Deploy a service, once a person has picked the environment."


def test_its_quick_tool_answers(served: Served) -> None:
    call = {"name": "service_status", "arguments": {"service": "api"}}
    answered = result(post(served.url, "tools/call", call))
    assert answered["isError"] is False
    assert answered["structuredContent"] == {"service": "api", "healthy": True}


def test_its_long_tool_runs_its_own_workflow_asks_with_an_enum_and_deploys(served: Served) -> None:
    call = {"name": "deploy_service", "arguments": {"service": "api", "version": "1.4.2"}}
    created = result(post(served.url, "tools/call", call, caps=TASK_CAPS))
    assert created["resultType"] == "task", created
    task_id = created["taskId"]

    waiting = wait_for_task(served.url, task_id, lambda task: task["status"] != "working")
    assert waiting["status"] == WAITING, waiting
    (key,) = waiting["inputRequests"]
    question = waiting["inputRequests"][key]["params"]
    assert question["message"] == "Deploy api 1.4.2 where?"
    assert question["requestedSchema"]["properties"]["environment"]["enum"] == ["staging", "production"]

    answer = {key: {"action": "accept", "content": {"environment": "production"}}}
    update = {"taskId": task_id, "inputResponses": answer}
    assert result(post(served.url, "tasks/update", update, caps=TASK_CAPS))["resultType"] == "complete"
    done = wait_for_task(served.url, task_id, lambda task: task["status"] not in ("working", WAITING))
    assert done["status"] == "completed", done
    assert done["result"]["isError"] is False
    assert done["result"]["structuredContent"] == {
        "service": "api",
        "version": "1.4.2",
        "environment": "production",
        "deployment": f"api@1.4.2 on production by {task_id}",  # the project's own activity ran
    }
    assert "No module named" not in served.log_text()


def test_the_outside_project_passes_mypy_strict(tmp_path: Path) -> None:
    project = copy_outside_project(tmp_path)
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "mypy-cache"), "."]
    checked = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("Success: no issues found in 5 source files"), checked.stdout


def _build_wheel(out: Path) -> Path:
    """The wheel of this checkout, built offline: with uv from its cache (``./dev`` filled it with
    hatchling when it installed longtools), or with the hatchling installed beside pip."""
    uv = Path(sys.executable).with_name("uv")
    if uv.exists():
        command = [str(uv), "build", "--wheel", "--offline", "--out-dir", str(out), str(REPO)]
    elif importlib.util.find_spec("hatchling") is not None:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        command += ["--wheel-dir", str(out), str(REPO)]
    else:
        pytest.fail("neither uv nor hatchling is installed beside this Python: nothing builds the wheel")
    built = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("longtools-*.whl")
    return wheel


def test_the_wheel_installs_only_longtools_with_its_type_marker(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        (record_name,) = [name for name in archive.namelist() if name.endswith(".dist-info/RECORD")]
        record = archive.read(record_name).decode()
        entry_points = archive.read(record_name.replace("RECORD", "entry_points.txt")).decode()
    installed = [row[0] for row in csv.reader(io.StringIO(record)) if row]  # what pip installs
    dist_info = record_name.split("/")[0]
    assert {path.split("/")[0] for path in installed} == {"longtools", dist_info}
    assert "longtools/py.typed" in installed
    assert not [path for path in installed if "__pycache__" in path or path.endswith(".pyc")]
    assert "longtools = longtools.cli:main" in entry_points
