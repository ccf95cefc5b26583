"""``longtools task show``: a real task of a real ``serve`` whose activity failed, its history
decrypted event by event (issue 25). The task is the one of ``tests.failing_tools``: a question,
its answer (a signal), then an activity that fails for good.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Served, start_server
from tests.failing_tools import FAILURE
from tests.wire import TASKS_EXTENSION, post, result, wait_for_task

_LONGTOOLS = str(Path(sys.executable).with_name("longtools"))
_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}


@dataclass
class FailedTask:
    served: Served
    task_id: str
    address: str
    data_dir: Path


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FailedTask]:
    tmp = tmp_path_factory.mktemp("show")
    # No configured payload ring: serve keeps its own in <data-dir>/keys.json, which task show reads.
    served = start_server(tmp, "--tools", "tests.failing_tools", env={"LONGTOOLS_PAYLOAD_KEYS": ""})
    try:
        call = {"name": "deploy", "arguments": {"service": "billing"}}
        task_id = str(result(post(served.url, "tools/call", call, caps=_CAPS))["taskId"])
        asked = wait_for_task(served.url, task_id, lambda now: bool(now.get("inputRequests")), 60)
        [key] = asked["inputRequests"]
        answer = {key: {"action": "accept", "content": {"environment": "staging"}}}
        result(post(served.url, "tasks/update", {"taskId": task_id, "inputResponses": answer}, caps=_CAPS))
        wait_for_task(served.url, task_id, lambda now: now["status"] == "failed", 60)
        started = next(line for line in served.log_text().splitlines() if '"temporal_started"' in line)
        yield FailedTask(served, task_id, json.loads(started)["address"], tmp / "data")
    finally:
        served.stop()


def _show(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("LONGTOOLS_")}
    return subprocess.run(
        [_LONGTOOLS, "task", "show", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, **(env or {})},
    )


def test_task_show_prints_the_decrypted_history_and_the_activity_failure(failed: FailedTask) -> None:
    done = _show(failed.task_id, "--temporal-address", failed.address, "--data-dir", str(failed.data_dir))
    assert done.returncode == 0, done.stderr
    shown = done.stdout
    assert shown.startswith(f"task {failed.task_id}: FAILED (tests.deploy, run ")
    assert '"longtools.tool": "deploy"' in shown  # the memo
    assert 'WorkflowExecutionStarted  {"workflowType": {"name": "tests.deploy"}' in shown
    assert '"input": [{"service": "billing"}]' in shown  # the arguments
    assert '"signalName": "longtools.answer"' in shown and '"environment": "staging"' in shown
    failure = f"QuotaExceeded: {FAILURE} (billing to staging)"
    lines = shown.splitlines()
    at = next(index for index, line in enumerate(lines) if "  ActivityTaskFailed  " in line)
    assert lines[at + 1].strip() == f"failure: {failure}"  # the event's failure, right under it
    assert f"\nfailure: ActivityFailure: Activity task failed <- caused by {failure}\n" in shown
    assert "tests/failing_tools.py" in shown  # the stack trace of the activity's error
    assert "binary/encrypted" not in shown and "Traceback" not in done.stderr


def test_task_show_json_has_each_event_and_the_failure(failed: FailedTask) -> None:
    address = ["--temporal-address", failed.address]
    done = _show(failed.task_id, *address, "--data-dir", str(failed.data_dir), "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["status"] == "FAILED" and shown["memo"]["longtools.tool"] == "deploy"
    kinds = [event["type"] for event in shown["events"]]
    assert kinds[0] == "WorkflowExecutionStarted" and kinds[-1] == "WorkflowExecutionFailed"
    assert "WorkflowExecutionSignaled" in kinds and "ActivityTaskFailed" in kinds
    assert shown["failure"]["cause"]["message"] == f"{FAILURE} (billing to staging)"


def test_task_show_with_a_key_not_in_the_ring_says_so_and_shows_no_plaintext(failed: FailedTask) -> None:
    other = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    done = _show(failed.task_id, "--temporal-address", failed.address, env={"LONGTOOLS_PAYLOAD_KEYS": other})
    assert done.returncode == 0, done.stderr
    assert "not in the key ring" in done.stdout
    assert FAILURE not in done.stdout and "staging" not in done.stdout


def test_task_show_of_an_unknown_task_is_one_line(failed: FailedTask) -> None:
    unknown = secrets.token_hex(20)
    done = _show(unknown, "--temporal-address", failed.address, "--data-dir", str(failed.data_dir))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"longtools: no task {unknown} in namespace 'default' at {failed.address} (a closed task is kept "
        "for the namespace's retention, 24 h on the dev server)"
    ]


def test_task_show_without_keys_says_where_it_looked(tmp_path: Path) -> None:
    done = _show("0" * 40, "--data-dir", str(tmp_path))
    assert done.returncode == 2
    assert "no payload keys: set LONGTOOLS_PAYLOAD_KEYS" in done.stderr and "Traceback" not in done.stderr
