"""A listen stream carried on by the gate once its request has been answered (``_gate.Handoff``):
frames as the SDK writes them, pings when silent, the client leaving, its place given back; then
against a real ``longtools serve``, streams of several tasks and of list changes only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal, cast

import anyio
import httpx
import pytest
from mcp.server._streamable_http_modern import _SSE_PING_INTERVAL, _SingleExchangeDispatchContext
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.transport_context import TransportContext
from mcp_types import ClientCapabilities, SubscriptionsListenRequestParams, SubscriptionsListenResult
from prometheus_client import CollectorRegistry, Gauge
from starlette.types import Message, Receive, Scope, Send
from temporalio.service import RPCError, RPCStatusCode

from longtools._settings import Settings
from longtools.auth import ANONYMOUS
from longtools.server import _listen
from longtools.server._gate import HANDOFF, Handoff, McpGate, Write, handoff_of
from longtools.server._listen import PING, TaskListens, _Frames, _Rest
from longtools.server._people import Audience, People
from longtools.server._wire import raw_notification
from longtools.tasks import AnswerLinks, Mark, TaskIds, TaskNotFound, Tasks, TaskView
from tests.conftest import STATE_KEY, Served, bearer
from tests.wire import TASKS_EXTENSION, Stream, eventually, headers_for, meta, post, result

SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
IDS = TaskIds([bytes(32)])
T1, T2 = IDS.new(ANONYMOUS), IDS.new("someone else")
"""The task the fake ``Tasks`` knows (the anonymous caller's), and another principal's."""
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}


def _view(status: Literal["working", "completed"], **fields: Any) -> TaskView:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    return TaskView(
        task_id=T1,
        tool="tool",
        status=status,
        created_at=at,
        updated_at=at,
        ttl_ms=60_000,
        mark=Mark("run", 1),
        **fields,
    )


class _Tasks:
    """What a stream asks of ``Tasks``: each change it waits for comes at once, or (``held``) when
    the test calls ``change()``; the task then reads as the next of ``script``, which is raised
    when it is an exception."""

    def __init__(self, script: list[TaskView | Exception], *, held: bool = False) -> None:
        self.script = script
        self.held = held
        self.stopping = False
        self.ids = IDS
        self.waiting: list[Callable[[], None]] = []

    def when_changed(self, view: TaskView, callback: Callable[[], None]) -> Callable[[], None]:
        self.waiting.append(callback)
        if not self.held:
            asyncio.get_running_loop().call_soon(self.change)
        return lambda: self.waiting.remove(callback) if callback in self.waiting else None

    def change(self) -> None:
        self.waiting.pop(0)()

    async def changed(self, view: TaskView, principal: str) -> TaskView:
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    async def read(self, task_id: str, principal: str) -> TaskView:
        return await self.changed(_view("working"), principal)

    async def until_stopping(self) -> None:
        await anyio.sleep_forever()

    async def get(self, task_id: str, principal: str) -> TaskView:
        if task_id != T1:
            raise TaskNotFound(task_id)
        return _view("working")


def _no_extension() -> MCPError:
    raise AssertionError("every stream here declares the extension")


def _listens(tasks: _Tasks) -> tuple[TaskListens, Gauge]:
    gauge = Gauge("streams", "open streams", registry=CollectorRegistry())
    settings = Settings(state_keys=STATE_KEY)
    listens = TaskListens(
        settings, cast(Tasks, tasks), lambda view: 500, _no_extension, gauge, People(settings)
    )
    return listens, gauge


def _audience() -> Audience:
    """A client that declared nothing, as every stream here is."""
    settings = Settings(state_keys=STATE_KEY)
    return Audience(
        links=AnswerLinks(settings),
        principal="ann",
        base="http://127.0.0.1:1",
        url_mode=False,
        legacy=False,
    )


def _open(gauge: Gauge) -> float:
    return gauge._value.get()  # type: ignore[no-any-return]


def _writer() -> tuple[list[bytes], Write]:
    frames: list[bytes] = []

    async def write(frame: bytes) -> None:
        frames.append(frame)

    return frames, write


def _data(frame: bytes) -> dict[str, Any]:
    lines = frame.decode().split("\r\n")
    assert lines[0] == "event: message" and lines[-2:] == ["", ""], frame
    decoded: dict[str, Any] = json.loads(lines[1].removeprefix("data: "))
    return decoded


async def test_a_change_is_framed_byte_for_byte_as_the_sdk_frames_it() -> None:
    # Unicode, a nested null and a result: everything the SDK's dumps decide on.
    structured = {"note": "café ☕", "none": None, "list": [1, None]}
    view = _view("completed", message="done ✓", result={"content": [], "structuredContent": structured})
    listens, _ = _listens(_Tasks([]))
    meta_ = {SUBSCRIPTION: "l-1"}
    rest = _Rest(listens, "ann", "l-1", _audience())
    frames, write = _writer()
    out = _Frames(write, rest, listens.pings)
    await out.task(view)
    out.stop(b"")

    sink, source = anyio.create_memory_object_stream[bytes](1)
    with sink, source:
        dctx = _SingleExchangeDispatchContext(
            transport=TransportContext(kind="streamable-http", can_send_request=False),
            request_id="l-1",
            message_metadata=None,
            sink=sink,
        )
        session = ServerSession(dctx, Connection.from_envelope("2026-07-28", None, None))
        await session.send_notification(
            raw_notification("notifications/tasks", listens.task_params(view, meta_, _audience())),
            related_request_id="l-1",
        )
        assert frames == [source.receive_nowait()]
    rest.release()


def test_a_carried_stream_is_pinged_as_often_as_the_sdk_pings_the_streams_it_carries() -> None:
    assert _listen.PING_S == _SSE_PING_INTERVAL


async def _carried(rest: _Rest, write: Write, last: bytes) -> bytes:
    """The stream as the gate carries it, until it ends; its last frame."""
    ended = asyncio.Event()
    rest.carry_on(write, ended.set)
    try:
        with anyio.fail_after(5):
            await ended.wait()
    finally:
        last = rest.close(last)
    return last


async def test_a_carried_stream_pings_when_silent_and_ends_with_the_sdks_last_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_listen, "PING_S", 0.05)
    tasks = _Tasks([_view("completed")], held=True)
    listens, gauge = _listens(tasks)
    rest = _Rest(listens, "ann", 7, _audience())
    rest.views = [_view("working")]
    assert _open(gauge) == 1
    frames: list[bytes] = []

    async def write(frame: bytes) -> None:
        frames.append(frame)
        if frames == [PING, PING]:
            tasks.change()  # the task changes once the stream has been silent twice

    last = await _carried(rest, write, b"the SDK's last frame")
    assert last == b"the SDK's last frame"
    assert frames[:2] == [PING, PING]
    [change] = [_data(frame) for frame in frames[2:]]
    assert change["method"] == "notifications/tasks"
    assert change["params"]["status"] == "completed" and change["params"]["_meta"] == {SUBSCRIPTION: 7}
    assert _open(gauge) == 0
    rest.release()  # given back once only
    assert _open(gauge) == 0


async def test_a_carried_stream_reads_its_task_afresh_a_moment_after_a_failed_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Temporal out of reach for a moment: logged, then read again, and the stream goes on."""
    monkeypatch.setattr(_listen, "_RETRY_S", 0.01)
    unavailable = RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")
    listens, gauge = _listens(_Tasks([unavailable, _view("completed")]))
    rest = _Rest(listens, "ann", 7, _audience())
    rest.views = [_view("working")]
    frames, write = _writer()
    assert await _carried(rest, write, b"last") == b"last"
    assert [_data(frame)["params"]["status"] for frame in frames] == ["completed"]
    assert _open(gauge) == 0


async def test_a_stopping_process_ends_a_carried_stream_with_the_sdks_last_frame() -> None:
    tasks = _Tasks([], held=True)
    listens, gauge = _listens(tasks)
    rest = _Rest(listens, "ann", 7, _audience())
    rest.views = [_view("working")]
    frames, write = _writer()
    ended = asyncio.Event()
    rest.carry_on(write, ended.set)
    tasks.stopping = True
    tasks.change()  # as Changes.stop() calls every waiter
    with anyio.fail_after(5):
        await ended.wait()
    assert rest.close(b"last") == b"last"
    assert frames == [] and _open(gauge) == 0


async def test_a_failure_while_carried_ends_the_stream_as_the_sdk_would() -> None:
    listens, gauge = _listens(_Tasks([ValueError("a bug")]))
    rest = _Rest(listens, "ann", 7, _audience())
    rest.views = [_view("working")]
    frames, write = _writer()
    last = await _carried(rest, write, b"unused")
    assert frames == []
    assert _data(last) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "Internal server error"},
    }
    assert _open(gauge) == 0


class _Client:
    """The SDK's side of a listen request, as the handler sees it: its session, id and scope."""

    client_capabilities = ClientCapabilities(extensions={TASKS_EXTENSION: {}})
    protocol_version = "2026-07-28"

    def __init__(self, scope: dict[str, Any]) -> None:
        self.sent: list[dict[str, Any]] = []
        self.request_id = 5
        self.session = self
        self.request = self
        self.scope = scope

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        assert related_request_id == 5
        self.sent.append(notification.model_dump(by_alias=True, mode="json", exclude_none=True))


async def _listen_to(
    tasks: _Tasks, scope: dict[str, Any]
) -> tuple[_Client, SubscriptionsListenResult, Gauge]:
    listens, gauge = _listens(tasks)
    client = _Client(scope)
    params = SubscriptionsListenRequestParams.model_validate({"notifications": {"taskIds": [T1, T2]}})
    with anyio.fail_after(5):
        done = await listens.listen(cast(ServerRequestContext[Any, Any], client), params)
    return client, done, gauge


async def test_a_stream_that_did_not_come_through_the_gate_is_followed_in_its_handler() -> None:
    tasks = _Tasks([_view("completed")])
    client, done, gauge = await _listen_to(tasks, {})
    assert [sent["method"] for sent in client.sent] == [
        "notifications/subscriptions/acknowledged",
        "notifications/tasks",
        "notifications/tasks",
    ]
    assert client.sent[0]["params"]["notifications"] == {"taskIds": [T1]}  # T2 is not the caller's
    assert [sent["params"]["status"] for sent in client.sent[1:]] == ["working", "completed"]
    assert (done.meta or {})[SUBSCRIPTION] == 5
    assert _open(gauge) == 0


async def test_a_handler_hands_the_rest_of_its_stream_to_the_gate_with_its_place() -> None:
    handoff = Handoff()
    client, _, gauge = await _listen_to(_Tasks([_view("completed")]), {HANDOFF: handoff})
    assert [sent["params"].get("status") for sent in client.sent] == [None, "working"]  # ack, snapshot
    assert handoff.rest is not None and _open(gauge) == 1  # still counted: the stream goes on
    frames, write = _writer()
    assert isinstance(handoff.rest, _Rest)
    assert await _carried(handoff.rest, write, b"last") == b"last"
    assert [_data(frame)["params"]["status"] for frame in frames] == ["completed"]
    assert _open(gauge) == 0


class _Rest_:
    """A handed-off stream that writes ``frames``, then waits for ``until`` (if given), then ends."""

    def __init__(self, frames: list[bytes], until: anyio.Event | None = None) -> None:
        self.frames = frames
        self.until = until
        self.outcome = ""
        self.running: asyncio.Task[None] | None = None

    def carry_on(self, write: Write, end: Callable[[], None]) -> None:
        async def run() -> None:
            for frame in self.frames:
                await write(frame)
            if self.until is not None:
                await self.until.wait()
            self.outcome = "ended"
            end()

        self.running = asyncio.get_running_loop().create_task(run())

    def close(self, last: bytes) -> bytes:
        if self.running is None:
            self.outcome = "dropped"
        elif not self.running.done():
            self.running.cancel()
            self.outcome = "cancelled"
        return last


def _sdk(rest: _Rest_, *, final: bool = True) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """What the SDK does for a listen request: reads it, commits SSE, acknowledges, and (its
    handler having handed the rest off) sends its last frame."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        assert (await receive())["type"] == "http.request"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ack", "more_body": True})
        handoff = handoff_of(scope)
        assert handoff is not None
        handoff.rest = rest
        if final:
            await send({"type": "http.response.body", "body": b"last", "more_body": False})

    return app


async def _through_gate(
    app: Callable[[Scope, Receive, Send], Awaitable[None]], leave: anyio.Event
) -> list[Any]:
    async def unused(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("not this app")

    gate = McpGate(
        app,
        TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_body_bytes=1 << 20,
        legacy=unused,
        plain=unused,
        streams=lambda *request: True,
    )
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {}}).encode()
    headers = {
        **headers_for("subscriptions/listen", {}),
        "host": "127.0.0.1",
        "content-length": str(len(body)),
    }
    scope: Scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(key.encode(), value.encode()) for key, value in headers.items()],
    }
    messages: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if messages:
            return messages.pop(0)
        await leave.wait()
        return {"type": "http.disconnect"}

    sent: list[Any] = []

    async def send(message: Message) -> None:
        sent.append(message.get("body", message["type"]))

    with anyio.fail_after(5):
        await gate(scope, receive, send)
    return sent


async def test_the_gate_carries_a_handed_off_stream_on_and_ends_it_with_the_sdks_last_frame() -> None:
    rest = _Rest_([b"change"])
    sent = await _through_gate(_sdk(rest), anyio.Event())
    assert sent == ["http.response.start", b"ack", b"change", b"last"]
    assert rest.outcome == "ended"


async def test_a_client_that_leaves_ends_a_carried_stream_with_nothing_more_sent() -> None:
    leave = anyio.Event()
    rest = _Rest_([b"change"], until=anyio.Event())  # never ends on its own
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            assert await _through_gate(_sdk(rest), leave) == ["http.response.start", b"ack", b"change"]

        tg.start_soon(go)
        await anyio.sleep(0.05)
        assert rest.outcome == ""
        leave.set()
    assert rest.outcome == "cancelled"


async def test_a_stream_the_sdk_ended_before_its_last_frame_is_dropped() -> None:
    rest = _Rest_([b"change"])
    assert await _through_gate(_sdk(rest, final=False), anyio.Event()) == ["http.response.start", b"ack"]
    assert rest.outcome == "dropped"


# Against a real server.


def _open_streams(served: Served) -> float:
    for line in httpx.get(f"{served.base}/metrics", timeout=10).text.splitlines():
        if line.startswith("longtools_listen_streams "):
            return float(line.split()[1])
    raise AssertionError("no longtools_listen_streams")


def _start(url: str, who: str) -> str:
    params = {"name": "confirm_delete", "arguments": {"filename": secrets.token_hex(3)}}
    task_id: str = result(post(url, "tools/call", params, caps=TASK_CAPS, headers=bearer(who)))["taskId"]
    return task_id


def test_a_stream_of_two_tasks_tells_of_each_until_both_end(owners: Served) -> None:
    first, second = _start(owners.url, "ann"), _start(owners.url, "ann")
    stream = Stream(owners.url, [first, second], bearer("ann"))
    try:
        # The acknowledgement and both snapshots (each asks its question at once).
        told = eventually(lambda: stream.frames, lambda frames: len(frames) >= 3)
        assert told[0]["params"]["notifications"] == {"taskIds": [first, second]}
        for task_id in (first, second):
            result(
                post(owners.url, "tasks/cancel", {"taskId": task_id}, caps=TASK_CAPS, headers=bearer("ann"))
            )
        final = eventually(lambda: stream.frames, lambda frames: "result" in frames[-1])[-1]
        assert final["id"] == stream.id and final["result"]["_meta"][SUBSCRIPTION] == stream.id
    finally:
        stream.close()
    tasks = [frame["params"] for frame in stream.frames if frame.get("method") == "notifications/tasks"]
    for task_id in (first, second):
        statuses = [task["status"] for task in tasks if task["taskId"] == task_id]
        assert statuses[-1] == "cancelled" and set(statuses) <= {"working", "input_required", "cancelled"}
    assert all(task["_meta"][SUBSCRIPTION] == stream.id for task in tasks)
    eventually(lambda: _open_streams(owners), lambda count: count == 0)


def test_a_stream_of_list_changes_only_stays_open_and_gives_its_place_back_when_left(owners: Served) -> None:
    params: dict[str, Any] = {"notifications": {"toolsListChanged": True}, "_meta": meta(TASK_CAPS)}
    body = {"jsonrpc": "2.0", "id": "l-lists", "method": "subscriptions/listen", "params": params}
    seen: list[dict[str, Any]] = []
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST",
            owners.url,
            content=json.dumps(body),
            headers={**headers_for("subscriptions/listen", params), **bearer("ben")},
        ) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()

        def read() -> None:
            with contextlib.suppress(httpx.HTTPError):  # closed by this test
                seen.extend(json.loads(line[6:]) for line in lines if line.startswith("data: "))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        [ack] = eventually(lambda: seen)
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        assert _open_streams(owners) == 1
    reader.join(timeout=10)
    assert len(seen) == 1  # no result: the stream was open until the client left
    eventually(lambda: _open_streams(owners), lambda count: count == 0)
