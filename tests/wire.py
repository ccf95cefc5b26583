"""Raw JSON-RPC over HTTP for exact wire assertions (no MCP client in between)."""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import httpx
from prometheus_client.parser import text_string_to_metric_families

VERSION = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
ALL_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
_ids = itertools.count(1)
T = TypeVar("T")


def meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": ALL_CAPS if caps is None else caps,
        "io.modelcontextprotocol/clientInfo": {"name": "longtools-tests", "version": "0"},
        **extra,
    }


def headers_for(method: str, params: dict[str, Any]) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": method,
    }
    name = params.get("name", params.get("uri", params.get("taskId")))
    if isinstance(name, str):
        headers["mcp-name"] = name
    return headers


def post(
    url: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    caps: dict[str, Any] | None = None,
    headers: Mapping[str, str | None] | None = None,
    with_meta: bool = True,
    timeout: float = 30,
) -> httpx.Response:
    """POST one request; ``headers`` entries override the defaults (None removes one)."""
    params = dict(params or {})
    if with_meta and "_meta" not in params:
        params["_meta"] = meta(caps)
    sent = headers_for(method, params)
    for key, value in (headers or {}).items():
        if value is None:
            sent.pop(key, None)
        else:
            sent[key] = value
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    return httpx.post(url, content=json.dumps(body), headers=sent, timeout=timeout)


def result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a 200 response (JSON or the final SSE event)."""
    assert response.status_code == 200, response.text
    body = sse_messages(response)[-1] if is_sse(response) else response.json()
    assert "result" in body, body
    return body["result"]  # type: ignore[no-any-return]


def error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert "error" in body, body
    return body["error"]  # type: ignore[no-any-return]


def is_sse(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("text/event-stream")


def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    messages = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            messages.append(json.loads(line.removeprefix("data: ")))
    return messages


def get_task(url: str, task_id: str, headers: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """``tasks/get`` from a client that declares the tasks extension and form elicitation (it is
    shown a person's question as the form its host puts before the person)."""
    caps: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
    return result(post(url, "tasks/get", {"taskId": task_id}, caps=caps, headers=headers))


def wait_for_task(
    url: str,
    task_id: str,
    ready: Callable[[dict[str, Any]], bool],
    within: float = 30,
    headers: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """Poll ``tasks/get`` until ``ready(task)``, bounded by ``within`` seconds."""
    return eventually(lambda: get_task(url, task_id, headers), ready, within)


def eventually(probe: Callable[[], T], ready: Callable[[T], bool] = bool, within: float = 30) -> T:
    """``probe()`` until ``ready(value)``, bounded by ``within`` seconds: the state under test lives
    in other processes (Temporal, a server), so there is no event to wait on."""
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if ready(value):
            return value
        assert time.monotonic() < deadline, f"never got there: {value!r}"
        time.sleep(0.05)


LEGACY_VERSION = "2025-11-25"


class Legacy:
    """A raw 2025-era session: ``initialize``, then every request with its ``Mcp-Session-Id``."""

    def __init__(
        self,
        url: str,
        *,
        caps: dict[str, Any] | None = None,
        version: str = LEGACY_VERSION,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self.caps = ALL_CAPS if caps is None else caps
        self.version = version
        self.extra = dict(headers or {})
        self.session = ""
        self.negotiated = ""

    def headers(self) -> dict[str, str]:
        sent = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **self.extra,
        }
        if self.session:
            sent["mcp-session-id"] = self.session
            sent["mcp-protocol-version"] = self.negotiated
        return sent

    def open(self) -> dict[str, Any]:
        """initialize and notifications/initialized; the InitializeResult."""
        params = {
            "protocolVersion": self.version,
            "capabilities": self.caps,
            "clientInfo": {"name": "longtools-tests", "version": "0"},
        }
        response = self.send({"jsonrpc": "2.0", "id": next(_ids), "method": "initialize", "params": params})
        initialized = result(response)
        self.session = response.headers["mcp-session-id"]
        self.negotiated = initialized["protocolVersion"]
        assert self.send({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        return initialized

    def send(self, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.url, content=json.dumps(body), headers=self.headers(), timeout=60)

    def request(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        return self.send({"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or {}})

    def answer(self, request_id: Any, answer: dict[str, Any]) -> httpx.Response:
        """POST the client's answer to a request the server pushed."""
        return self.send({"jsonrpc": "2.0", "id": request_id, "result": answer})


def sse_lines(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE stream, as they arrive."""
    for line in lines:
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


class Stream:
    """An open ``subscriptions/listen`` stream of ``task_ids``, read on a thread: its frames (the
    JSON-RPC messages) as they come. ``elicitation`` is what its client declared (form only unless
    told: a person's question then reads ``working``, its link in ``statusMessage``)."""

    def __init__(
        self,
        url: str,
        task_ids: list[str],
        auth: dict[str, str],
        elicitation: dict[str, Any] | None = None,
    ) -> None:
        caps: dict[str, Any] = {
            "elicitation": {"form": {}} if elicitation is None else elicitation,
            "extensions": {TASKS_EXTENSION: {}},
        }
        params = {"notifications": {"taskIds": task_ids}, "_meta": meta(caps)}
        self.id = f"l-{secrets.token_hex(3)}"
        body = {"jsonrpc": "2.0", "id": self.id, "method": "subscriptions/listen", "params": params}
        headers = {**headers_for("subscriptions/listen", params), **auth}
        self.frames: list[dict[str, Any]] = []
        self._client = httpx.Client(timeout=60)
        self._response = self._client.send(
            self._client.build_request("POST", url, content=json.dumps(body), headers=headers), stream=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for message in sse_lines(self._response.iter_lines()):
                self.frames.append(message)
        except httpx.HTTPError:
            pass

    def close(self) -> None:
        self._response.close()
        self._client.close()
        self._reader.join(timeout=10)


def metric(base: str, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` on the Prometheus ``/metrics`` of the server at
    ``base`` (0 before it is first counted)."""
    wanted = frozenset(labels.items())
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics").text):
        for sample in family.samples:
            if sample.name == name and frozenset(sample.labels.items()) == wanted:
                return float(sample.value)
    return 0.0
