"""Task status pushed on ``subscriptions/listen`` (2026-07-28, tasks extension), against a real
``longtools serve``: the official ``mcp`` client listening to its own task, then raw HTTP for who
is told what, and the bounds."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
from mcp import Client
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp_types import (
    ElicitRequestParams,
    ElicitResult,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsListenRequest,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from pydantic import BaseModel, ConfigDict

from tests.conftest import Served, bearer
from tests.pages import PageClient
from tests.wire import (
    TASKS_EXTENSION,
    Stream,
    error,
    eventually,
    headers_for,
    meta,
    post,
    result,
    wait_for_task,
)

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
LINKS = "longtools.dev/answer-links"


class _Task(BaseModel):
    """A ``notifications/tasks`` params, kept whole."""

    model_config = ConfigDict(extra="allow")


class _Tasks(ClientExtension):
    """The tasks extension on the client: declared, and its status notifications observed."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [NotificationBinding(method="notifications/tasks", params_type=_Task, handler=self._note)]

    async def _note(self, params: _Task) -> None:
        self.seen.append(params.model_dump(by_alias=True))


def _start(url: str, name: str, arguments: dict[str, Any], who: str | None = None) -> str:
    params = {"name": name, "arguments": arguments}
    task_id: str = result(
        post(url, "tools/call", params, caps=TASK_CAPS, headers=bearer(who) if who else None)
    )["taskId"]
    return task_id


def _answer_when_asked(url: str, task_id: str) -> None:
    """The person approves on the task's answer page once it is asked (no auth: on loopback a
    visitor is signed in)."""
    asked = eventually(
        lambda: result(post(url, "tasks/get", {"taskId": task_id}, caps=TASK_CAPS)),
        lambda task: LINKS in task.get("_meta", {}),
    )
    [link] = asked["_meta"][LINKS].values()
    with PageClient(url.removesuffix("/mcp")) as person:
        sent = person.answer(link, {"confirm": True})
    assert "Your answer was sent" in sent.text, sent.text


async def _never_asked(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    """The listening host shows forms and opens links (so it is told its task asks), but it makes
    no call: nothing is asked of it."""
    raise AssertionError(f"asked on a listen stream: {params}")


async def test_the_mcp_client_listens_to_its_task_until_it_ends(mcp_url: str) -> None:
    customer = f"c-{secrets.token_hex(4)}"
    for n in range(2):
        result(
            post(
                mcp_url,
                "tools/call",
                {"name": "create_ticket", "arguments": {"title": f"t{n}", "customer": customer}},
            )
        )
    task_id = _start(mcp_url, "bulk_close_tickets", {"customer": customer})
    tasks = _Tasks()
    acks: list[SubscriptionFilter] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, SubscriptionsAcknowledgedNotification):
            acks.append(message.params.notifications)

    wanted = SubscriptionFilter.model_validate({"taskIds": [task_id, "no-such-task"]})
    request = SubscriptionsListenRequest(params=SubscriptionsListenRequestParams(notifications=wanted))
    with anyio.fail_after(90):
        async with Client(
            mcp_url, extensions=[tasks], message_handler=on_message, elicitation_callback=_never_asked
        ) as client:
            assert client.protocol_version == "2026-07-28"
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, _answer_when_asked, mcp_url, task_id)
                closed = await client.session.send_request(request, SubscriptionsListenResult)
    [ack] = acks
    assert (ack.model_extra or {})["taskIds"] == [task_id]  # an unknown id is left out, silently
    statuses = [seen["status"] for seen in tasks.seen]
    # The snapshot right after the ack shows the task as it was then (asking, or not yet); then
    # every change: asking (the person, on the page), working on the answer, done.
    asked = statuses.index("input_required")
    assert asked <= 1 and set(statuses[:asked]) <= {"working"}
    assert "working" in statuses[asked:] and statuses[-1] == "completed"
    assert {seen["taskId"] for seen in tasks.seen} == {task_id}
    subscription = (closed.meta or {})[SUBSCRIPTION]
    assert all(seen["_meta"][SUBSCRIPTION] == subscription for seen in tasks.seen)
    completed = tasks.seen[-1]
    assert len(completed["result"]["structuredContent"]["closed"]) == 2


def _listen(url: str, params: dict[str, Any], who: str, caps: dict[str, Any] = TASK_CAPS) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": f"l-{secrets.token_hex(3)}",
        "method": "subscriptions/listen",
        "params": params,
    }
    params["_meta"] = meta(caps)
    return httpx.post(
        url,
        content=json.dumps(body),
        headers={**headers_for("subscriptions/listen", params), **bearer(who)},
        timeout=30,
    )


def _streams(url: str, count: int, task_ids: list[str], who: str) -> Iterator[Stream]:
    for _ in range(count):
        yield Stream(url, task_ids, bearer(who))


def test_a_stream_tells_only_of_the_callers_own_tasks(owners: Served) -> None:
    anns = _start(owners.url, "confirm_delete", {"filename": "a"}, "ann")
    bens = _start(owners.url, "confirm_delete", {"filename": "b"}, "ben")
    # The stream's first word is the task as it is then: once it asks, what it tells is fixed.
    wait_for_task(owners.url, bens, lambda task: task["status"] == "input_required", headers=bearer("ben"))
    stream = Stream(owners.url, [anns, bens], bearer("ben"))
    try:
        ack = eventually(lambda: stream.frames, lambda frames: len(frames) >= 2)[0]
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"taskIds": [bens]}
        assert ack["params"]["_meta"][SUBSCRIPTION] == stream.id
        cancelled = {"taskId": anns}
        result(post(owners.url, "tasks/cancel", cancelled, caps=TASK_CAPS, headers=bearer("ann")))
        result(post(owners.url, "tasks/cancel", {"taskId": bens}, caps=TASK_CAPS, headers=bearer("ben")))
        final = eventually(lambda: stream.frames, lambda frames: "result" in frames[-1])[-1]
        assert final["result"]["_meta"][SUBSCRIPTION] == stream.id  # the graceful close
    finally:
        stream.close()
    told = [frame["params"] for frame in stream.frames if frame.get("method") == "notifications/tasks"]
    assert {task["taskId"] for task in told} == {bens}
    assert [task["status"] for task in told] == ["input_required", "cancelled"]


def test_listening_needs_the_extension_and_is_bounded(owners: Served) -> None:
    task_id = _start(owners.url, "confirm_delete", {"filename": "c"}, "ann")
    without = _listen(owners.url, {"notifications": {"taskIds": [task_id]}}, "ann", caps={"elicitation": {}})
    assert error(without, 400)["code"] == -32021
    too_many = _listen(owners.url, {"notifications": {"taskIds": ["a", "b", "c", "d"]}}, "ann")
    assert error(too_many, 400)["data"] == {"limit": "LONGTOOLS_MAX_LISTEN_TASK_IDS", "value": 3}
    held = list(_streams(owners.url, 2, [task_id], "ann"))
    try:
        eventually(lambda: all(stream.frames for stream in held))
        third = _listen(owners.url, {"notifications": {"taskIds": [task_id]}}, "ann")
        assert error(third, 400)["data"] == {"limit": "LONGTOOLS_MAX_LISTENS_PER_PRINCIPAL", "value": 2}
        # The bound is per principal. Owning none of the tasks named, the stream closes at once.
        other = Stream(owners.url, [task_id], bearer("ben"))
        eventually(lambda: other.frames, lambda frames: len(frames) == 2)
        assert other.frames[0]["params"]["notifications"] == {"taskIds": []}
        assert "result" in other.frames[-1]
        other.close()
    finally:
        for stream in held:
            stream.close()
