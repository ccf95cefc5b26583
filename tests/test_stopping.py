"""Stopping and slowness: nothing in flight is cut, and a slow Temporal is a prompt, clear error.

- a worker told to stop lets the activity it runs finish (within LONGTOOLS_WORKER_SHUTDOWN_S);
- an API told to stop answers its held MRTR rounds at once with "not yet", so their clients go
  on elsewhere (or after the restart) instead of losing the connection;
- with Temporal frozen, a call that needs it answers "task service unavailable" within the
  configured Temporal call timeout, not never.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from longtools.temporal import DevServer, start_dev_server
from tests.conftest import Served, start_server, start_worker, start_worker_and_api
from tests.promise_tools import effects
from tests.wire import TASKS_EXTENSION, error, eventually, is_sse, post, result, sse_messages, wait_for_task

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
UNAVAILABLE = {"code": -32603, "message": "The task service is unavailable; try again shortly"}


@pytest.fixture
def temporal(tmp_path: Path) -> Iterator[DevServer]:
    server = asyncio.run(start_dev_server(tmp_path / "temporal" / "temporal.db"))
    try:
        yield server
    finally:
        os.kill(server.pid, signal.SIGCONT)  # in case a test froze it
        server.stop()


def test_a_stopping_worker_lets_its_running_activity_finish(tmp_path: Path, temporal: DevServer) -> None:
    tools = ("--tools", "tests.promise_tools", "--temporal-address", temporal.address)
    worker, api = start_worker_and_api(tmp_path, *tools)
    data = tmp_path / "data"
    try:
        task = result(
            post(
                api.url, "tools/call", {"name": "one_slow_step", "arguments": {"label": "s"}}, caps=TASK_CAPS
            )
        )
        eventually(lambda: "slow_step s started attempt 1" in effects(data))
        worker.process.send_signal(signal.SIGTERM)
        # Stopping, but not gone: the step is let finish, so it is not cut and run a second time.
        (data / "release-s").touch()
        assert worker.stop(timeout=30) == 0
        assert "slow_step s finished attempt 1" in effects(data)
        worker = start_worker(tmp_path, *tools)  # the rolling restart's new worker ends the task
        done = wait_for_task(api.url, task["taskId"], lambda now: now["status"] == "completed")
        assert done["result"]["content"][0]["text"] == "stepped s"
        assert [line for line in effects(data) if line.startswith("slow_step s started")] == [
            "slow_step s started attempt 1"
        ]
    finally:
        api.stop()
        worker.stop()


def test_a_stopping_api_answers_its_held_rounds_at_once(tmp_path: Path) -> None:
    served = start_server(tmp_path, "--conformance-fixtures", env={"LONGTOOLS_MRTR_WAIT_S": "60"})
    answers: list[httpx.Response] = []
    call = {"name": "slow_compute", "arguments": {"seconds": 120}}
    caps: dict[str, Any] = {"elicitation": {}}  # it follows the call through rounds, not the task tools
    holding = threading.Thread(target=lambda: answers.append(post(served.url, "tools/call", call, caps=caps)))
    try:
        holding.start()
        eventually(lambda: _held(served) == 1)
        assert served.stop() == 0
        holding.join(timeout=30)
        [answer] = answers
        body = sse_messages(answer)[-1] if is_sse(answer) else answer.json()
        # "Not yet": the state the client retries with, on another replica or after the restart.
        assert body["result"]["resultType"] == "input_required"
        assert "inputRequests" not in body["result"] and body["result"]["requestState"]
    finally:
        served.stop()
        holding.join(timeout=30)


def _held(served: Served) -> float:
    for line in httpx.get(f"{served.base}/metrics").text.splitlines():
        if line.startswith("longtools_mrtr_held_rounds "):
            return float(line.split()[1])
    return 0.0


def test_a_frozen_temporal_is_a_prompt_unavailable_error(tmp_path: Path, temporal: DevServer) -> None:
    tools = ("--conformance-fixtures", "--temporal-address", temporal.address)
    env = {"LONGTOOLS_TEMPORAL_RPC_TIMEOUT_S": "1"}
    worker, api = start_worker_and_api(tmp_path, *tools, env=env)
    try:
        task = result(
            post(
                api.url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}, caps=TASK_CAPS
            )
        )
        os.kill(temporal.pid, signal.SIGSTOP)  # accepts connections, answers nothing
        for method, params in (
            ("tools/call", {"name": "slow_compute", "arguments": {"seconds": 1}}),
            ("tasks/get", {"taskId": task["taskId"]}),
            ("tasks/cancel", {"taskId": task["taskId"]}),
        ):
            # Bounded by httpx's 30 s: without Temporal call timeouts these wait for ever.
            assert error(post(api.url, method, params, caps=TASK_CAPS), 200) == UNAVAILABLE, method
        ready = httpx.get(f"{api.base}/readyz", timeout=30)
        assert ready.status_code == 503
        assert httpx.get(f"{api.base}/livez").status_code == 200  # alive: nothing to restart
        os.kill(temporal.pid, signal.SIGCONT)
        eventually(lambda: httpx.get(f"{api.base}/readyz").status_code == 200)
        assert wait_for_task(api.url, task["taskId"], lambda now: now["status"] == "working")
    finally:
        os.kill(temporal.pid, signal.SIGCONT)
        api.stop()
        worker.stop()
