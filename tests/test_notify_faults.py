"""Notifications under faults (issue 33), against real processes and a real webhook receiver: a
receiver down for 30 s gets every event once it is back; a worker killed (SIGKILL) in the middle
of a delivery sends it again under the same ``webhook-id``; a channel that always fails never holds
the task, and its failure is counted, logged, in the ledger and in ``longtools task show``.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Served, free_port, start_server, start_worker, start_worker_and_api
from tests.pages import PageClient, signed_in_people
from tests.receivers import Hook, WebhookReceiver, wait_for, webhook_secret
from tests.wire import TASKS_EXTENSION, eventually, metric, post, result

PEOPLE = {name: secrets.token_urlsafe(24) for name in ("alice", "bob")}
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
DECISIONS = "longtools.dev/decisions"
_LONGTOOLS = str(Path(sys.executable).parent / "longtools")


def _notify_env(*urls: str, **more: str) -> dict[str, str]:
    return {
        "LONGTOOLS_WEBHOOKS": ",".join(urls),
        "LONGTOOLS_WEBHOOK_SECRETS": webhook_secret(),
        "LONGTOOLS_NOTIFY_RETRY_MAX_S": "2",
        **more,
    }


def _as(who: str | None) -> dict[str, str]:
    return {} if who is None else {"authorization": f"Bearer {PEOPLE[who]}"}


def _start(url: str, who: str | None = None) -> str:
    params = {"name": "decide", "arguments": {"principals": ["bob"]}}
    return str(result(post(url, "tools/call", params, caps=TASK_CAPS, headers=_as(who)))["taskId"])


def _task(url: str, task_id: str, who: str | None = None) -> dict[str, Any]:
    return result(post(url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=_as(who)))


def _cancel(url: str, task_id: str) -> None:
    result(post(url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS))


def _of(receiver: WebhookReceiver, task_id: str, kind: str) -> Callable[[], list[Hook]]:
    return lambda: [
        hook
        for hook in receiver.received()
        if hook.json()["data"]["taskId"] == task_id and hook.json()["type"] == kind
    ]


def _counted(base: str, channel: str, outcome: str) -> float:
    return metric(base, "longtools_notifications_total", channel=channel, outcome=outcome)


def test_a_receiver_down_for_30_s_gets_every_event_once_it_is_back(tmp_path: Path) -> None:
    with WebhookReceiver() as receiver:
        receiver.down()
        served = start_server(
            tmp_path, "--no-auth", "--tools", "tests.decision_tools", env=_notify_env(receiver.url)
        )
        try:
            down_at = time.monotonic()
            task_id = _start(served.url)
            eventually(lambda: _task(served.url, task_id), lambda now: DECISIONS in now.get("_meta", {}))
            _cancel(served.url, task_id)  # its end is told too
            eventually(lambda: _task(served.url, task_id), lambda now: now["status"] == "cancelled")
            # Both events are being tried, and fail, while the receiver is down.
            eventually(
                lambda: _counted(served.base, "webhook", "error"), lambda errors: errors >= 4, within=30
            )
            time.sleep(max(0.0, 30 - (time.monotonic() - down_at)))  # the rest of the outage
            assert receiver.received() == []
            receiver.up()
            came_back = time.monotonic()
            [waiting] = wait_for(_of(receiver, task_id, "task.waiting"), within=30)
            [ended] = wait_for(_of(receiver, task_id, "task.ended"), within=30)
            print(f"both events arrived {time.monotonic() - came_back:.2f} s after the receiver came back")  # noqa: T201
            assert ended.json()["data"]["status"] == "cancelled"
            assert waiting.headers["webhook-id"] != ended.headers["webhook-id"]
            assert _counted(served.base, "webhook", "failed") == 0
        finally:
            served.stop()


def test_a_worker_killed_during_a_delivery_sends_it_again_under_the_same_webhook_id(tmp_path: Path) -> None:
    from longtools.temporal import start_dev_server

    temporal = asyncio.run(start_dev_server(tmp_path / "temporal" / "temporal.db"))
    with WebhookReceiver() as receiver:
        receiver.behaviour.hold = threading.Event()  # the first try hangs at the receiver
        tools = ("--no-examples", "--tools", "tests.decision_tools", "--temporal-address", temporal.address)
        env = _notify_env(receiver.url)
        worker, api = start_worker_and_api(tmp_path, *tools, env=env)
        again: Served | None = None
        try:
            task_id = _start(api.url)
            [held] = wait_for(lambda: list(receiver.behaviour.holding), within=30)
            worker.stop(signal.SIGKILL)  # in the middle of the delivery: the receiver has it, no answer
            hold, receiver.behaviour.hold = receiver.behaviour.hold, None
            hold.set()
            again = start_worker(tmp_path, *tools, env=env)
            [delivered] = wait_for(_of(receiver, task_id, "task.waiting"), within=60)
            assert delivered.headers["webhook-id"] == held.headers["webhook-id"]
            assert delivered.body == held.body
            _cancel(api.url, task_id)
            wait_for(_of(receiver, task_id, "task.ended"), within=30)
        finally:
            for served in (api, again):
                if served is not None:
                    served.stop()
            if worker.process.poll() is None:
                worker.stop()
            temporal.stop()


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Its only channel is a webhook nobody ever listens on; a delivery is given up after 6 s."""
    env = {
        "LONGTOOLS_AUTH_TOKENS": ",".join(f"{token}={name}" for name, token in PEOPLE.items()),
        "LONGTOOLS_PAYLOAD_KEYS": "",
        **_notify_env(f"http://127.0.0.1:{free_port()}/never", LONGTOOLS_NOTIFY_GIVE_UP_S="6"),
    }
    served = start_server(tmp_path_factory.mktemp("failing"), "--tools", "tests.decision_tools", env=env)
    try:
        yield served
    finally:
        served.stop()


def test_a_channel_that_always_fails_never_holds_the_task_and_its_failure_is_seen(
    failing: Served, tmp_path: Path
) -> None:
    task_id = _start(failing.url, "alice")
    asked = eventually(
        lambda: _task(failing.url, task_id, "alice"), lambda now: DECISIONS in now.get("_meta", {})
    )
    [decision] = asked["_meta"][DECISIONS].values()
    # Given up (after 6 s of tries) while the task waits: counted, logged, and in its ledger.
    eventually(lambda: _counted(failing.base, "webhook", "failed"), lambda failed: failed >= 1, within=30)
    assert _counted(failing.base, "webhook", "error") >= 2
    assert '"notification_failed"' in failing.log_text()
    with signed_in_people(failing.base, PEOPLE) as people:
        bob: PageClient = people("bob")
        bob.send(decision["link"], bob.get(decision["link"]), {"note": "fine"})
    done = eventually(lambda: _task(failing.url, task_id, "alice"), lambda now: now["status"] != "working")
    assert done["status"] == "completed"
    ledger = httpx.get(f"{failing.base}/tasks/{task_id}/ledger", headers=_as("alice"))
    entries = [json.loads(line) for line in ledger.text.splitlines() if line.strip()]
    [notified] = [entry for entry in entries if entry["kind"] == "notified"]
    assert notified["data"]["sent"] == [] and list(notified["data"]["failed"]) == ["webhook 1"]
    # The operator's view of the task names the notification and its last error.
    started = next(line for line in failing.log_text().splitlines() if '"temporal_started"' in line)
    address = json.loads(started)["address"]
    data_dir = str(failing.log_path.parent / "data")
    shown = subprocess.run(
        [_LONGTOOLS, "task", "show", task_id, "--temporal-address", address, "--data-dir", data_dir],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("LONGTOOLS_")},
    )
    assert shown.returncode == 0, shown.stderr
    assert f"notification {task_id}.waiting." in shown.stdout and "webhook 1" in shown.stdout
