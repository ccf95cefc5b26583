"""Nothing is lost when processes die: Temporal, worker and API as separate real processes.

- kill -9 of all three mid-flow, restart on the same data dir: every task (and an MRTR exchange
  between its rounds) finishes, answers given before the crash are kept, no ticket is closed
  twice, tasks/get answers throughout;
- with every worker stopped, tasks/get still shows a waiting task and its page takes the answer;
- tasks/cancel during a long activity settles the task as cancelled within the heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from longtools.temporal import DevServer, start_dev_server
from tests.conftest import Served, server_ready, spawn, start_server, worker_ready
from tests.pages import PageClient
from tests.wire import eventually, metric, post, result, wait_for_task

TASKS = "io.modelcontextprotocol/tasks"
CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "extensions": {TASKS: {}}}
"""A tasks client that sends its person to a page: the approval is shown to it as a URL request."""
NO_TASKS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
"""The same without tasks: held in MRTR rounds, where the approval comes as a URL request."""
CONFIRM = {"confirm": True, "reason": "Resolved"}
"""The person's approval, on the page."""
WENT = {"action": "accept"}
"""A host's word on a URL request: its person went to the page (not the answer)."""
LINKS = "longtools.dev/answer-links"


class Cluster:
    """Temporal, a worker and an API as three processes over one data dir, each killable."""

    def __init__(self, tmp: Path, work_s: float) -> None:
        self.tmp = tmp
        self.env = {"LONGTOOLS_HELPDESK_WORK_S": str(work_s)}
        self.temporal: DevServer | None = None
        self.worker: Served | None = None
        self.api: Served | None = None
        self.port = 0

    @property
    def address(self) -> str:
        assert self.temporal is not None
        return self.temporal.address

    def start_temporal(self) -> None:
        self.temporal = asyncio.run(start_dev_server(self.tmp / "data" / "temporal.db", port=self.port))
        self.port = int(self.temporal.address.rsplit(":", 1)[1])  # the same port after a restart

    def spawn_worker(self) -> tuple[subprocess.Popen[str], Path]:
        return spawn(self.tmp, ["worker", "--temporal-address", self.address], self.env)

    def spawn_api(self) -> tuple[subprocess.Popen[str], Path]:
        args = ["api", "--port", "0", "--no-auth", "--temporal-address", self.address]
        return spawn(self.tmp, args, self.env)

    def start_worker(self) -> None:
        self.worker = worker_ready(self.spawn_worker())

    def start_api(self) -> None:
        self.api = server_ready(self.spawn_api())

    def start_all(self) -> None:
        self.start_temporal()
        # Side by side: each is seconds of cold start, mostly imports on one core.
        worker, api = self.spawn_worker(), self.spawn_api()
        self.worker = worker_ready(worker)
        self.api = server_ready(api)

    def kill_all(self) -> None:
        """kill -9, no goodbyes: API, worker, then Temporal."""
        for served in (self.api, self.worker):
            if served is not None:
                served.stop(signal.SIGKILL)
        if self.temporal is not None:
            os.kill(self.temporal.pid, signal.SIGKILL)
            self.temporal.stop()  # reaps it

    def stop_all(self) -> None:
        for served in (self.api, self.worker):
            if served is not None and served.process.poll() is None:
                served.stop()
        if self.temporal is not None:
            self.temporal.stop()

    @property
    def url(self) -> str:
        assert self.api is not None
        return self.api.url

    def tool(self, name: str, arguments: dict[str, Any], caps: dict[str, Any] = CAPS) -> dict[str, Any]:
        return result(post(self.url, "tools/call", {"name": name, "arguments": arguments}, caps=caps))

    def task(self, task_id: str) -> dict[str, Any]:
        return result(post(self.url, "tasks/get", {"taskId": task_id}, caps=CAPS))

    def approve(self, task_id: str) -> None:
        """The person approves on the task's answer page, the link every view of it gives."""
        assert self.api is not None
        [link] = self.task(task_id)["_meta"][LINKS].values()
        approve_on_the_page(self.api.base, link)

    def until(
        self, task_id: str, ready: Callable[[dict[str, Any]], bool], within: float = 30
    ) -> dict[str, Any]:
        return eventually(lambda: self.task(task_id), ready, within)

    def tickets(self, customer: str, count: int) -> list[str]:
        made = [
            self.tool("create_ticket", {"title": f"issue {n}", "customer": customer}) for n in range(count)
        ]
        return [ticket["structuredContent"]["ticketId"] for ticket in made]

    def closes(self, ticket_id: str) -> int:
        ticket = self.tool("get_ticket", {"ticketId": ticket_id})["structuredContent"]
        return sum(1 for entry in ticket["history"] if entry["event"] == "closed")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path, work_s=3)
    try:
        yield made
    finally:
        made.stop_all()


def _waiting(task: dict[str, Any]) -> bool:
    return bool(task["status"] == "input_required")


def _on_any_port(requests: dict[str, Any]) -> dict[str, Any]:
    """``inputRequests`` with each URL request's link cut to its path: a restarted API is on a
    new port."""
    cut: dict[str, Any] = json.loads(json.dumps(requests))
    for request in cut.values():
        if request["params"].get("mode") == "url":
            request["params"]["url"] = urlsplit(request["params"]["url"]).path
    return cut


def approve_on_the_page(base: str, link: str) -> None:
    """The person opens ``link`` (on loopback without auth: signed in) and approves."""
    with PageClient(base) as person:
        sent = person.answer(link, CONFIRM)
    assert "Your answer was sent" in sent.text, sent.text


def test_kill_9_of_temporal_worker_and_api_loses_nothing(cluster: Cluster) -> None:
    cluster.start_all()
    waiting_tickets = cluster.tickets("acme", 2)
    working_tickets = cluster.tickets("globex", 2)
    mrtr_tickets = cluster.tickets("initech", 1)
    waiting = cluster.tool("bulk_close_tickets", {"customer": "acme"})["taskId"]
    working = cluster.tool("bulk_close_tickets", {"customer": "globex"})["taskId"]
    # A client without the tasks extension, between two MRTR rounds: all it holds is requestState.
    mrtr_call = {"name": "bulk_close_tickets", "arguments": {"customer": "initech"}}
    asked_mrtr = result(post(cluster.url, "tools/call", mrtr_call, caps=NO_TASKS))
    asked = cluster.until(waiting, _waiting)["inputRequests"]
    cluster.until(working, _waiting)
    cluster.approve(working)  # given before the crash: must be kept
    cluster.until(working, lambda t: t["status"] == "working" and "Clos" in t.get("statusMessage", ""))

    cluster.kill_all()
    cluster.start_all()

    # The restarted API reads both tasks at once: the question is still there, word for word, its
    # link the same page on the new API's port.
    assert _on_any_port(cluster.task(waiting)["inputRequests"]) == _on_any_port(asked)
    cluster.approve(waiting)
    # The exchange's question is a URL request: the person answers on its page, the client's
    # retry only says they went there.
    ((mrtr_key, mrtr_request),) = asked_mrtr["inputRequests"].items()
    assert cluster.api is not None
    approve_on_the_page(cluster.api.base, mrtr_request["params"]["url"])
    retry = {**mrtr_call, "requestState": asked_mrtr["requestState"], "inputResponses": {mrtr_key: WENT}}
    finished = result(post(cluster.url, "tools/call", retry, caps=NO_TASKS))
    while finished["resultType"] == "input_required":  # still working: retry with the new state
        finished = result(
            post(
                cluster.url,
                "tools/call",
                {**mrtr_call, "requestState": finished["requestState"]},
                caps=NO_TASKS,
            )
        )
    assert finished["structuredContent"]["closed"] == mrtr_tickets
    for task_id in (waiting, working):
        done = cluster.until(task_id, lambda t: t["status"] != "working" and not _waiting(t), within=60)
        assert done["status"] == "completed", done
        assert not done["result"]["isError"], done
    for ticket in waiting_tickets + working_tickets + mrtr_tickets:
        assert cluster.closes(ticket) == 1, ticket


def test_with_every_worker_stopped_a_task_is_read_and_answered_then_continues(cluster: Cluster) -> None:
    cluster.start_all()
    (ticket,) = cluster.tickets("initech", 1)
    task_id = cluster.tool("bulk_close_tickets", {"customer": "initech"})["taskId"]
    asked = cluster.until(task_id, _waiting)["inputRequests"]
    assert cluster.worker is not None
    assert cluster.worker.stop() == 0

    for _ in range(3):  # reads keep working with no worker at all
        assert cluster.task(task_id)["inputRequests"] == asked
    cluster.approve(task_id)  # durably accepted: Temporal holds the signal
    assert cluster.task(task_id)["status"] in ("input_required", "working")
    assert cluster.closes(ticket) == 0

    cluster.start_worker()
    done = cluster.until(task_id, lambda t: t["status"] == "completed")
    assert done["result"]["structuredContent"]["closed"] == [ticket]
    assert cluster.closes(ticket) == 1


def test_a_held_round_sees_a_question_asked_while_it_waits_though_no_worker_ran_when_it_began(
    cluster: Cluster,
) -> None:
    """Ours (issue 14): a held MRTR round waits on the task's history, which needs no worker, and
    is woken by the question the workflow asks once a worker starts; it answers with it."""
    cluster.env["LONGTOOLS_MRTR_WAIT_S"] = "120"  # the round cannot end by running out of time
    cluster.start_all()
    (ticket,) = cluster.tickets("hooli", 1)  # the helpdesk's quick tools run on the API, records on a worker
    assert cluster.worker is not None
    assert cluster.worker.stop() == 0
    replies: list[dict[str, Any]] = []
    params = {"name": "bulk_close_tickets", "arguments": {"customer": "hooli"}}
    held = threading.Thread(
        target=lambda: replies.append(result(post(cluster.url, "tools/call", params, caps=NO_TASKS)))
    )
    held.start()
    try:
        eventually(
            lambda: cluster.api is not None and metric(cluster.api.base, "longtools_mrtr_held_rounds") == 1
        )
        cluster.start_worker()
    finally:
        held.join(timeout=150)
    (reply,) = replies
    assert reply["resultType"] == "input_required"
    [question] = reply["inputRequests"].values()
    assert question["params"]["message"].endswith("for hooli?")
    assert cluster.closes(ticket) == 0


def test_cancel_during_a_long_activity_stops_it_within_the_heartbeat_timeout(tmp_path: Path) -> None:
    served = start_server(tmp_path, env={"LONGTOOLS_HELPDESK_WORK_S": "60"})
    try:
        url = served.url
        made = result(
            post(
                url,
                "tools/call",
                {"name": "create_ticket", "arguments": {"title": "slow", "customer": "umbrella"}},
            )
        )
        ticket = made["structuredContent"]["ticketId"]
        created = result(
            post(
                url,
                "tools/call",
                {"name": "bulk_close_tickets", "arguments": {"customer": "umbrella"}},
                caps=CAPS,
            )
        )
        task_id = created["taskId"]

        deadline = time.monotonic() + 20  # one budget for both waits below
        current = wait_for_task(url, task_id, lambda t: LINKS in t.get("_meta", {}), within=20)
        [link] = current["_meta"][LINKS].values()
        approve_on_the_page(served.base, link)
        closing = deadline - time.monotonic()
        wait_for_task(url, task_id, lambda t: "Clos" in t.get("statusMessage", ""), within=closing)
        time.sleep(0.5)  # let the activity get well into its 60 s of work

        cancelled_at = time.monotonic()
        result(post(url, "tasks/cancel", {"taskId": task_id}, caps=CAPS))
        current = wait_for_task(url, task_id, lambda t: t["status"] != "working", within=10)
        took = time.monotonic() - cancelled_at
        assert current["status"] == "cancelled"
        # WAIT_CANCELLATION_COMPLETED: "cancelled" means the activity itself acknowledged and stopped,
        # far sooner than its 60 s of work (the heartbeat timeout is 2 s; this is no speed test).
        assert took < 10, f"cancel took {took:.1f}s"
        ticket_now = result(
            post(url, "tools/call", {"name": "get_ticket", "arguments": {"ticketId": ticket}})
        )
        assert ticket_now["structuredContent"]["status"] == "open"
    finally:
        served.stop()
