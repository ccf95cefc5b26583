"""Many replicas on one Temporal: 3 API and 2 worker processes, every round of a flow on another API.

Nothing about an exchange or a task lives in an API process: the task is in Temporal, the exchange
in its sealed ``requestState`` (one key ring shared by configuration). So any API serves any round,
a replayed final round on another replica is answered from the first one's record, a person's
answer page is served by any replica, and killing an API and a worker mid-flow loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from longtools.temporal import DevServer, start_dev_server
from tests.conftest import Served, server_ready, spawn, worker_ready
from tests.pages import PageClient
from tests.proxy import RoundRobin
from tests.wire import TASKS_EXTENSION, Legacy, Stream, eventually, post, result, sse_lines

TOKEN = secrets.token_urlsafe(24)
AUTH = {"authorization": f"Bearer {TOKEN}"}
OPENS_LINKS: dict[str, Any] = {"form": {}, "url": {}}
"""Elicitation of a host that shows forms and sends its person to pages: the helpdesk's approval,
a person's question, comes to it as a URL request."""
TASK_CAPS: dict[str, Any] = {"elicitation": OPENS_LINKS, "extensions": {TASKS_EXTENSION: {}}}
FORM_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
URL_CAPS: dict[str, Any] = {"elicitation": OPENS_LINKS}
LINKS = "longtools.dev/answer-links"
COMPLETE = "notifications/elicitation/complete"


@dataclass
class Cluster:
    tmp: Path
    temporal: DevServer
    apis: list[Served] = field(default_factory=list)
    workers: list[Served] = field(default_factory=list)
    _turn: Iterator[int] = field(default_factory=itertools.count)

    @property
    def env(self) -> dict[str, str]:
        return {
            "LONGTOOLS_AUTH_TOKENS": f"{TOKEN}=operator",
            "LONGTOOLS_HELPDESK_WORK_S": "1",
            "LONGTOOLS_TOOLS": "tests.long_tools",
        }

    def spawn(self, command: str) -> tuple[subprocess.Popen[str], Path]:
        args = [command, "--conformance-fixtures", "--temporal-address", self.temporal.address]
        return spawn(self.tmp, [*args, "--port", "0"] if command == "api" else args, self.env)

    def next_url(self) -> str:
        """The next live API, round robin: consecutive rounds never share a process."""
        live = [api for api in self.apis if api.process.poll() is None]
        return live[next(self._turn) % len(live)].url

    def call(self, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None) -> dict[str, Any]:
        return result(post(self.next_url(), method, params, caps=caps, headers=AUTH))

    def tool(
        self, name: str, arguments: dict[str, Any], caps: dict[str, Any] = FORM_CAPS, **more: Any
    ) -> Any:
        return self.call("tools/call", {"name": name, "arguments": arguments, **more}, caps)

    def task(self, task_id: str) -> dict[str, Any]:
        return self.call("tasks/get", {"taskId": task_id}, TASK_CAPS)

    def wait_task(self, task_id: str, status: str, within: float = 40) -> dict[str, Any]:
        return eventually(lambda: self.task(task_id), lambda task: task["status"] == status, within)

    def approve(self, link: str, base: str | None = None) -> None:
        """The person signs in on ``base``'s pages (the next live API unless told) and approves
        at ``link``'s path there: any replica serves any answer page."""
        base = base or self.next_url().removesuffix("/mcp")
        with PageClient(base) as person:
            person.sign_in(TOKEN)
            sent = person.answer(link, {"confirm": True})
        assert "Your answer was sent" in sent.text, sent.text

    def approve_task(self, task_id: str) -> None:
        """The person approves the task's question at the link its views give."""
        [link] = self.task(task_id)["_meta"][LINKS].values()
        self.approve(link)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("replicas")
    temporal = asyncio.run(start_dev_server(tmp / "temporal" / "temporal.db"))
    made = Cluster(tmp=tmp, temporal=temporal)
    try:
        # Five cold starts of ~4 s each, side by side: spawn all, then wait for each.
        apis = [made.spawn("api") for _ in range(3)]
        workers = [made.spawn("worker") for _ in range(2)]
        made.apis = [server_ready(spawned) for spawned in apis]
        made.workers = [worker_ready(spawned) for spawned in workers]
        yield made
    finally:
        for served in [*made.apis, *made.workers]:
            served.stop()
        temporal.stop()


def _reason(value: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"reason": value}}


def _events(cluster: Cluster, ticket_id: str) -> list[str]:
    ticket = cluster.tool("get_ticket", {"ticketId": ticket_id})["structuredContent"]
    return [entry["event"] for entry in ticket["history"]]


def _new_ticket(cluster: Cluster, customer: str) -> str:
    made = cluster.tool("create_ticket", {"title": "Printer on fire", "customer": customer})
    ticket_id: str = made["structuredContent"]["ticketId"]
    return ticket_id


def test_a_quick_mrtr_exchange_and_its_replay_on_other_replicas_close_once(cluster: Cluster) -> None:
    ticket_id = _new_ticket(cluster, f"c-{secrets.token_hex(4)}")
    asked = cluster.tool("close_ticket", {"ticketId": ticket_id})
    assert asked["resultType"] == "input_required"
    final = {"inputResponses": {"close_reason": _reason("Resolved")}, "requestState": asked["requestState"]}
    done = cluster.tool("close_ticket", {"ticketId": ticket_id}, **final)
    assert done["structuredContent"]["status"] == "closed", done

    # The same final round again, on each of the other replicas: the recorded outcome, no second close.
    for _ in range(2):
        replayed = cluster.tool("close_ticket", {"ticketId": ticket_id}, **final)
        assert replayed == done
    assert _events(cluster, ticket_id) == ["created", "closed"]


def test_a_multi_round_exchange_moves_between_replicas(cluster: Cluster) -> None:
    name = "test_input_required_result_multi_round"
    first = cluster.tool(name, {})
    second = cluster.tool(
        name,
        {},
        inputResponses={"step1": {"action": "accept", "content": {"name": "Ada"}}},
        requestState=first["requestState"],
    )
    assert set(second["inputRequests"]) == {"step2"}
    third = cluster.tool(
        name,
        {},
        inputResponses={"step2": {"action": "accept", "content": {"color": "green"}}},
        requestState=second["requestState"],
    )
    assert third["content"][0]["text"] == "Multi-round complete for Ada who likes green"


def test_a_task_with_input_is_created_read_answered_and_finished_on_different_replicas(
    cluster: Cluster,
) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    tickets = [_new_ticket(cluster, customer) for _ in range(2)]
    created = cluster.tool("bulk_close_tickets", {"customer": customer}, caps=TASK_CAPS)
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    cluster.wait_task(task_id, "input_required")
    cluster.approve_task(task_id)  # read on one replica, answered on another one's page
    done = cluster.wait_task(task_id, "completed")
    assert done["result"]["structuredContent"]["closed"] == tickets
    for ticket_id in tickets:
        assert _events(cluster, ticket_id) == ["created", "closed"]


def test_a_tasks_get_right_after_an_answer_acked_on_another_replica_never_lists_that_question(
    cluster: Cluster,
) -> None:
    """Ours (issue 14): each replica may answer tasks/get from what it knows, but never with a
    question another replica has just acked an answer to. 12 questions, each read, answered and
    read again on three different replicas, across two continue-as-new runs."""
    created = cluster.tool("questions", {"count": 12, "every": 5}, caps=TASK_CAPS)
    task_id = created["taskId"]
    urls = [api.url for api in cluster.apis]

    def read(url: str) -> dict[str, Any]:
        return result(post(url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS, headers=AUTH))

    for n in range(12):
        waiting = cluster.wait_task(task_id, "input_required")
        [key] = waiting["inputRequests"]
        assert all(key in read(url)["inputRequests"] for url in urls)  # every replica has read it
        answering, *others = urls[n % 3 :] + urls[: n % 3]
        answer = {"action": "accept", "content": {"value": n}}
        params = {"taskId": task_id, "inputResponses": {key: answer}}
        result(post(answering, "tasks/update", params, caps=TASK_CAPS, headers=AUTH))
        for url in others:
            after = read(url)
            assert key not in after.get("inputRequests", {}), (n, after)
    done = cluster.wait_task(task_id, "completed")
    assert done["result"]["content"][0]["text"] == str(sum(range(12)))


def test_a_task_listened_to_on_one_replica_is_answered_and_run_on_others(cluster: Cluster) -> None:
    """The stream's events come from Temporal, not from the replica that took the answer."""
    customer = f"c-{secrets.token_hex(4)}"
    tickets = [_new_ticket(cluster, customer) for _ in range(2)]
    task_id = cluster.tool("bulk_close_tickets", {"customer": customer}, caps=TASK_CAPS)["taskId"]
    stream = Stream(cluster.apis[0].url, [task_id], AUTH, elicitation=OPENS_LINKS)
    try:
        eventually(lambda: stream.frames, lambda frames: len(frames) >= 2)  # the ack and the snapshot
        [request] = cluster.wait_task(task_id, "input_required")["inputRequests"].values()
        cluster.approve(request["params"]["url"], cluster.apis[1].base)
        eventually(lambda: stream.frames, lambda frames: "result" in frames[-1], within=60)
    finally:
        stream.close()
    told = [frame["params"] for frame in stream.frames if frame.get("method") == "notifications/tasks"]
    statuses = [task["status"] for task in told]
    assert statuses[0] in ("working", "input_required") and statuses[-1] == "completed"
    assert "input_required" in statuses and "working" in statuses[statuses.index("input_required") :]
    assert told[-1]["result"]["structuredContent"]["closed"] == tickets


def _went_to_the_page(asked: dict[str, Any]) -> dict[str, Any]:
    """The host's word on each URL request of a round, once its person is back: they went there
    (the page has the answer)."""
    return {key: {"action": "accept"} for key in asked["inputRequests"]}


def _link(asked: dict[str, Any]) -> str:
    """The answer link of a round's one question, a URL request."""
    [request] = asked["inputRequests"].values()
    assert request["params"]["mode"] == "url", request
    return str(request["params"]["url"])


def test_a_long_tool_through_mrtr_rounds_moves_between_replicas(cluster: Cluster) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    ticket_id = _new_ticket(cluster, customer)
    reply = cluster.tool("bulk_close_tickets", {"customer": customer}, caps=URL_CAPS)
    assert reply["resultType"] == "input_required"
    cluster.approve(_link(reply))
    answers = _went_to_the_page(reply)
    for _ in range(10):  # state-only "not yet" rounds until the work is done, each on the next API
        reply = cluster.tool(
            "bulk_close_tickets",
            {"customer": customer},
            caps=URL_CAPS,
            inputResponses=answers,
            requestState=reply["requestState"],
        )
        if reply.get("resultType", "complete") == "complete":
            break
        answers = {}
    assert reply["structuredContent"]["closed"] == [ticket_id], reply
    assert _events(cluster, ticket_id) == ["created", "closed"]


def test_a_task_is_cancelled_through_another_replica(cluster: Cluster) -> None:
    created = cluster.tool("slow_compute", {"seconds": 60}, caps=TASK_CAPS)
    task_id = created["taskId"]
    cluster.wait_task(task_id, "working")
    assert cluster.call("tasks/cancel", {"taskId": task_id}, TASK_CAPS)["resultType"] == "complete"
    assert cluster.wait_task(task_id, "cancelled")["status"] == "cancelled"


def test_killing_an_api_and_a_worker_mid_flow_loses_no_flow(cluster: Cluster) -> None:
    """In flight at the kill: a task closing tickets (answered, inside an activity), a task waiting
    for its answer, a long tool's MRTR exchange between rounds, and a quick exchange between rounds.
    The person answers the helpdesk's approvals on the pages of replicas still up."""
    closing_customer, waiting_customer, mrtr_customer = (f"c-{secrets.token_hex(4)}" for _ in range(3))
    closing = [_new_ticket(cluster, closing_customer) for _ in range(2)]
    waiting_tickets = [_new_ticket(cluster, waiting_customer) for _ in range(2)]
    mrtr_long_ticket = _new_ticket(cluster, mrtr_customer)
    quick_ticket = _new_ticket(cluster, f"c-{secrets.token_hex(4)}")

    closing_task = cluster.tool("bulk_close_tickets", {"customer": closing_customer}, caps=TASK_CAPS)[
        "taskId"
    ]
    cluster.wait_task(closing_task, "input_required")
    cluster.approve_task(closing_task)
    waiting_task = cluster.tool("bulk_close_tickets", {"customer": waiting_customer}, caps=TASK_CAPS)[
        "taskId"
    ]
    cluster.wait_task(waiting_task, "input_required")
    long_round = cluster.tool("bulk_close_tickets", {"customer": mrtr_customer}, caps=URL_CAPS)
    assert long_round["resultType"] == "input_required"
    asked = cluster.tool("close_ticket", {"ticketId": quick_ticket})

    cluster.apis[1].stop(signal.SIGKILL)
    cluster.workers[0].stop(signal.SIGKILL)

    cluster.approve_task(waiting_task)
    final = {"inputResponses": {"close_reason": _reason("Duplicate")}, "requestState": asked["requestState"]}
    closed = cluster.tool("close_ticket", {"ticketId": quick_ticket}, **final)
    assert closed["structuredContent"]["status"] == "closed"
    cluster.approve(_link(long_round))  # its link may name the killed replica: another serves it
    answers = _went_to_the_page(long_round)
    for _ in range(10):
        long_round = cluster.tool(
            "bulk_close_tickets",
            {"customer": mrtr_customer},
            caps=URL_CAPS,
            inputResponses=answers,
            requestState=long_round["requestState"],
        )
        if long_round.get("resultType", "complete") == "complete":
            break
        answers = {}
    assert long_round["structuredContent"]["closed"] == [mrtr_long_ticket]
    for task_id, tickets in ((closing_task, closing), (waiting_task, waiting_tickets)):
        assert cluster.wait_task(task_id, "completed")["result"]["structuredContent"]["closed"] == tickets

    # A restarted API answers a replay of the final round from the record, too.
    cluster.apis[1] = server_ready(cluster.spawn("api"))
    replayed = result(
        post(
            cluster.apis[1].url,
            "tools/call",
            {"name": "close_ticket", "arguments": {"ticketId": quick_ticket}, **final},
            caps=FORM_CAPS,
            headers=AUTH,
        )
    )
    assert replayed == closed
    for ticket_id in [*closing, *waiting_tickets, mrtr_long_ticket, quick_ticket]:
        assert _events(cluster, ticket_id) == ["created", "closed"]


# The 2025 era behind a round-robin balancer ------------------------------------------------------


@pytest.fixture(scope="module")
def balancer(cluster: Cluster) -> Iterator[RoundRobin]:
    """Round robin over two replicas the tests above never kill."""
    proxy = RoundRobin([cluster.apis[0].url, cluster.apis[2].url]).start()
    yield proxy
    proxy.close()


def _bulk_call(customer: str, call_id: str, **meta: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": "bulk_close_tickets", "arguments": {"customer": customer}, "_meta": meta},
    }


def _legacy_ticket(session: Legacy, customer: str) -> str:
    params = {"name": "create_ticket", "arguments": {"title": "Printer on fire", "customer": customer}}
    ticket_id: str = result(session.request("tools/call", params))["structuredContent"]["ticketId"]
    return ticket_id


def test_a_2025_session_and_its_pushed_question_move_between_replicas(
    cluster: Cluster, balancer: RoundRobin
) -> None:
    session = Legacy(balancer.url, caps=URL_CAPS, headers=AUTH)
    session.open()
    customer = f"c-{secrets.token_hex(4)}"
    tickets = [_legacy_ticket(session, customer) for _ in range(2)]
    body = _bulk_call(customer, "bulk-1", progressToken="p-1")
    with httpx.stream("POST", balancer.url, json=body, headers=session.headers(), timeout=60) as stream:
        holder = balancer.routed[-1].upstream
        messages = sse_lines(stream.iter_lines())
        question = next(messages)
        assert (question["method"], question["params"]["mode"]) == ("elicitation/create", "url")
        # The host's word (its person went to the page), then the person's answer on the page.
        assert session.answer(question["id"], {"action": "accept"}).status_code == 202
        answered_on = balancer.routed[-1].upstream
        cluster.approve(question["params"]["url"], answered_on.removesuffix("/mcp"))
        rest = list(messages)
    assert answered_on != holder  # the host's word and the page's answer went to the other replica
    assert [message["params"] for message in rest if message.get("method") == COMPLETE] == [
        {"elicitationId": question["params"]["elicitationId"]}
    ]
    assert rest[-1]["result"]["structuredContent"]["closed"] == tickets
    assert any(message.get("method") == "notifications/progress" for message in rest[:-1])
    # Every request of the session alternated between the two replicas.
    used = balancer.upstreams_of(session.session)
    assert set(used) == {cluster.apis[0].url, cluster.apis[2].url}
    assert all(first != second for first, second in itertools.pairwise(used))
    for ticket_id in tickets:
        assert _events(cluster, ticket_id) == ["created", "closed"]


def test_killing_the_replica_that_holds_a_long_call_loses_nothing_and_the_call_reattaches(
    cluster: Cluster, balancer: RoundRobin
) -> None:
    """The documented way back (docs/protocol.md): call again with the same idempotency key."""
    session = Legacy(balancer.url, caps=URL_CAPS, headers=AUTH)
    session.open()
    customer = f"c-{secrets.token_hex(4)}"
    tickets = [_legacy_ticket(session, customer) for _ in range(3)]
    key = {"longtools.dev/idempotency-key": f"bulk-{customer}"}
    body = _bulk_call(customer, "bulk-1", progressToken="p-1", **key)
    with httpx.stream("POST", balancer.url, json=body, headers=session.headers(), timeout=60) as stream:
        holder = next(api for api in cluster.apis if api.url == balancer.routed[-1].upstream)
        messages = sse_lines(stream.iter_lines())
        question = next(messages)
        assert session.answer(question["id"], {"action": "accept"}).status_code == 202
        survivor = next(url for url in balancer.upstreams if url != holder.url)
        cluster.approve(question["params"]["url"], survivor.removesuffix("/mcp"))
        progress = next(message for message in messages if message.get("method") != COMPLETE)
        assert progress["method"] == "notifications/progress"  # the work has begun: kill its holder
        holder.stop(signal.SIGKILL)
        with contextlib.suppress(httpx.HTTPError):
            assert all("result" not in message for message in messages)

    body = _bulk_call(customer, "bulk-2", progressToken="p-2", **key)
    with httpx.stream("POST", balancer.url, json=body, headers=session.headers(), timeout=60) as stream:
        final = (
            list(sse_lines(stream.iter_lines()))[-1]
            if stream.headers["content-type"] == ("text/event-stream")
            else json.loads(stream.read())
        )
    assert final["id"] == "bulk-2"
    assert final["result"]["structuredContent"]["closed"] == tickets
    for ticket_id in tickets:
        assert _events(cluster, ticket_id) == ["created", "closed"]
