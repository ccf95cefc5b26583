"""``longtools call`` and ``longtools task``: a terminal client for any MCP 2026-07-28 server. CLI process.

Built on the SDK's ``Client`` (MRTR rounds, header and ``_meta`` stamping) plus the Tasks extension
(``_follow.py``). A person sees prompts for what a tool asks (``_forms.py``), a status line
with the elapsed time while a task runs, and the result: text, and ``structuredContent`` as
JSON. Prompts and status go to stderr, results to stdout, so ``--raw`` output can be piped.
Every failure a person can cause or meet is one line that says what to do next.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    DiscoverResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    Implementation,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError
from rich.console import Console
from rich.status import Status
from rich.text import Text

from longtools.client._follow import (
    Detached,
    Follower,
    TaskCancelled,
    TaskFailed,
    TasksExtension,
    TaskState,
    cancel_task,
    get_task,
    is_not_found,
    update_task,
)
from longtools.client._forms import FormError, FormPrompter, content_from_pairs, missing_required, url_prompt

VERSION = "2026-07-28"
_CLIENT_INFO = Implementation(name="longtools-cli", version="1")
_elicit_request: TypeAdapter[ElicitRequest] = TypeAdapter(ElicitRequest)


class ClientError(Exception):
    """A failure a person reads: one line, what happened and what to do next."""


class Interrupted(Exception):
    """Ctrl-C at a prompt."""


@dataclass
class Terminal:
    """What a person sees and types: prompts and the status line on stderr, results on stdout."""

    answers: Mapping[str, str] = field(default_factory=dict)
    """``--answer field=value`` pairs, used for any form whose fields they name."""
    err: Console = field(default_factory=lambda: Console(stderr=True, highlight=False, soft_wrap=True))
    out: Console = field(default_factory=lambda: Console(highlight=False, soft_wrap=True))
    interactive: bool = field(default_factory=lambda: sys.stdin.isatty())
    _status: Status | None = None
    _started: float = field(default_factory=time.monotonic)
    _last: str = ""

    # The status line -----------------------------------------------------------------------

    def show(self, state: str, message: str | None) -> None:
        elapsed = time.monotonic() - self._started
        text = f"{state} · {elapsed:.0f}s" + (f" · {message}" if message else "")
        if not self.err.is_terminal:
            line = f"{state}" + (f": {message}" if message else "")
            if line != self._last:  # a log-like line per change when nobody watches a spinner
                self.err.print(line)
                self._last = line
            return
        if self._status is None:
            self._status = self.err.status(text)
            self._status.start()
        else:
            self._status.update(text)

    def pause(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def on_task(self, task: TaskState) -> None:
        if task.status in ("working", "input_required"):
            self.show(f"task {task.status}", task.status_message)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.show("working", message)

    # Answers ---------------------------------------------------------------------------------

    async def elicit(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        return self.answer_elicitation(params)

    async def answer_wire(self, key: str, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """A task's input request (wire JSON) answered; only elicitation is declared."""
        try:
            params = _elicit_request.validate_python(request).params
        except ValidationError:
            raise ClientError(f"the server asked for something this client cannot answer ({key})") from None
        result = self.answer_elicitation(params)
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    def answer_elicitation(self, params: ElicitRequestParams) -> ElicitResult:
        self.pause()
        if not isinstance(params, ElicitRequestFormParams):
            if not self.interactive:
                raise ClientError(f"the tool needs you to open {params.url}; run this in a terminal")
            with _prompting():
                return url_prompt(self.err, params.message, params.url)
        schema: Mapping[str, Any] = params.requested_schema or {}
        fields = schema.get("properties", {})
        given = {key: value for key, value in self.answers.items() if key in fields}
        if given or not self.interactive:
            missing = missing_required(schema, given)
            if not missing:
                try:
                    return ElicitResult(action="accept", content=content_from_pairs(schema, given))
                except FormError as exc:
                    raise ClientError(f"--answer does not fit {params.message!r}: {exc}") from None
            if not self.interactive:
                needed = " ".join(f"--answer {name}=..." for name in missing)
                raise ClientError(f"the tool asks {params.message!r}; answer it with {needed}")
        try:
            with _prompting():
                return FormPrompter(self.err).prompt(params.message, schema)
        except FormError as exc:
            raise ClientError(f"the tool asks with a form this client cannot show: {exc}") from None

    # Results ---------------------------------------------------------------------------------

    def result(self, result: CallToolResult, raw: bool) -> int:
        """Print a tool's result; the exit code is 1 for a tool error."""
        self.pause()
        if raw:
            self.out.print(result.model_dump_json(by_alias=True, exclude_none=True), markup=False)
            return 1 if result.is_error else 0
        structured = result.structured_content
        for block in result.content:
            if isinstance(block, TextContent):
                if structured is not None and _same_json(block.text, structured):
                    continue  # the text form of structuredContent, shown below as JSON
                target = self.err if result.is_error else self.out
                target.print(block.text, markup=False)
            else:
                self.out.print(f"[{block.type} content]", markup=False)
        if structured is not None:
            self.out.print(json.dumps(structured, indent=2, ensure_ascii=False), markup=False)
        return 1 if result.is_error else 0


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


@contextlib.contextmanager
def _prompting() -> Iterator[None]:
    """Ctrl-C at a prompt interrupts it at once (asyncio's own handler would wait for the input)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    except (KeyboardInterrupt, EOFError):
        raise Interrupted from None
    finally:
        signal.signal(signal.SIGINT, previous)


# Connecting -------------------------------------------------------------------------------------


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def probe(url: str, token: str | None) -> DiscoverResult:
    """``server/discover`` by hand first: its HTTP status tells a wrong URL, a missing token or a
    server that is down apart, which the SDK client reports as one generic error."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": _CLIENT_INFO.model_dump(),
            }
        },
    }
    headers = {
        **_headers(token),
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": "server/discover",
    }
    try:
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(url, json=body, headers=headers)
    except httpx2.InvalidURL:
        raise ClientError(
            f"{url} is not a URL; give the server's MCP endpoint, e.g. http://host:8000/mcp"
        ) from None
    except httpx2.ConnectError:
        raise ClientError(f"cannot connect to {url}: is the server running?") from None
    except httpx2.TimeoutException:
        raise ClientError(f"{url} did not answer within 10 s") from None
    except httpx2.HTTPError as exc:
        raise ClientError(f"cannot talk to {url}: {exc}") from None
    if response.status_code == 401:
        if token:
            raise ClientError("the server refused the token (HTTP 401); check --token or LONGTOOLS_TOKEN")
        raise ClientError("the server needs a token (HTTP 401); pass --token or set LONGTOOLS_TOKEN")
    if response.status_code == 403:
        raise ClientError("the server refused this request (HTTP 403): the token lacks a permission it needs")
    if response.status_code in (404, 405):
        raise ClientError(f"no MCP endpoint at {url} (HTTP {response.status_code}); it usually ends in /mcp")
    if response.status_code == 421:
        raise ClientError("the server does not accept this host name (HTTP 421); use the name it serves")
    try:
        payload = _last_message(response)
    except ValueError:
        raise ClientError(f"{url} did not answer as an MCP server (HTTP {response.status_code})") from None
    error = payload.get("error")
    if isinstance(error, dict):
        if error.get("code") == -32022:
            offered = ", ".join((error.get("data") or {}).get("supported", [])) or "none"
            raise ClientError(f"the server does not speak MCP {VERSION} (it offers: {offered})")
        raise ClientError(f"the server refused server/discover: {error.get('message')}")
    try:
        return DiscoverResult.model_validate(payload.get("result"))
    except ValidationError:
        raise ClientError(f"{url} did not answer server/discover as MCP {VERSION} describes") from None


def _last_message(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        if not data:
            raise ValueError("no event")
        decoded = json.loads(data[-1])
    else:
        decoded = response.json()
    if not isinstance(decoded, dict):
        raise ValueError("not an object")
    return decoded


@asynccontextmanager
async def mcp_session(
    url: str, token: str | None, terminal: Terminal, *, tasks: bool
) -> AsyncIterator[tuple[Client, Follower, DiscoverResult]]:
    discover = await probe(url, token)
    if VERSION not in discover.supported_versions or VERSION not in MODERN_PROTOCOL_VERSIONS:
        raise ClientError(f"the server does not speak MCP {VERSION}")
    follower = Follower(answer=terminal.answer_wire, on_update=terminal.on_task)
    http = httpx2.AsyncClient(headers=_headers(token), timeout=httpx2.Timeout(30, read=300))
    client = Client(
        streamable_http_client(url, http_client=http),
        mode=VERSION,
        prior_discover=discover,
        client_info=_CLIENT_INFO,
        elicitation_callback=terminal.elicit,
        extensions=[TasksExtension(follower)] if tasks else None,
        cache=None,
    )
    async with http, client:
        yield client, follower, discover


# Commands ---------------------------------------------------------------------------------------


@dataclass
class CallRequest:
    url: str
    tool: str
    pairs: Sequence[str]
    json_args: str | None
    answers: Sequence[str]
    task: bool
    token: str | None
    raw: bool
    detach: bool = False


async def call(request: CallRequest, terminal: Terminal) -> int:
    terminal.answers = _pairs(request.answers, "--answer")
    if request.detach and not request.task:
        raise ClientError("--detach needs the tasks extension; drop --no-task")
    async with mcp_session(request.url, request.token, terminal, tasks=request.task) as (client, follower, _):
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        tool = listed.get(request.tool)
        if tool is None:
            known = ", ".join(sorted(listed)) or "none"
            raise ClientError(f"the server has no tool {request.tool!r} (it has: {known})")
        arguments = _arguments(tool.input_schema, request.pairs, request.json_args)
        follower.detach = request.detach
        try:
            result = await client.call_tool(request.tool, arguments, progress_callback=terminal.progress)
        except Detached as detached:
            terminal.out.print(detached.task_id, markup=False)
            return 0
        except asyncio.CancelledError:
            _uncancel()
            return await _interrupted(client, follower, terminal, request.url)
        except Interrupted:
            return await _interrupted(client, follower, terminal, request.url)
    return terminal.result(result, request.raw)


async def _interrupted(client: Client, follower: Follower, terminal: Terminal, url: str) -> int:
    """Ctrl-C: a running task may be cancelled on the server or left running (its id is printed)."""
    terminal.pause()
    task_id = follower.current
    if task_id is None:
        terminal.err.print("interrupted")
        return 130
    cancel = False
    if terminal.interactive:
        with contextlib.suppress(Interrupted), _prompting():
            # Text, not a str: rich would read "[y/N]" as markup and drop it.
            reply = terminal.err.input(Text(f"Cancel task {task_id} on the server? [y/N] ")).strip().lower()
            cancel = reply in ("y", "yes")
    if cancel:
        await cancel_task(client.session, task_id)
        terminal.err.print(f"task {task_id}: cancel requested")
        return 130
    terminal.err.print(f"task {task_id} keeps running; follow it with: longtools task watch {url} {task_id}")
    return 130


def _uncancel() -> None:
    # Ctrl-C cancelled this task (asyncio.run's handler); it is handled here, so later awaits work.
    current = asyncio.current_task()
    if current is not None:
        current.uncancel()


async def task_get(url: str, task_id: str, token: str | None, raw: bool, terminal: Terminal) -> int:
    async with mcp_session(url, token, terminal, tasks=True) as (client, _, _):
        task = await _get(client, task_id)
    if raw:
        terminal.out.print(task.model_dump_json(by_alias=True, exclude_none=True), markup=False)
        return 0
    line = f"task {task.task_id}: {task.status}" + (
        f" ({task.status_message})" if task.status_message else ""
    )
    terminal.out.print(line, markup=False)
    for key, question in (task.input_requests or {}).items():
        message = (question.get("params") or {}).get("message", "")
        terminal.out.print(f"  asks [{key}]: {message}", markup=False)
    if task.status == "completed" and task.result is not None:
        return terminal.result(CallToolResult.model_validate(task.result), raw=False)
    if task.status == "failed" and task.error is not None:
        terminal.out.print(f"  error {task.error.get('code')}: {task.error.get('message')}", markup=False)
    return 0


async def task_watch(
    url: str, task_id: str, token: str | None, answers: Sequence[str], terminal: Terminal
) -> int:
    terminal.answers = _pairs(answers, "--answer")
    async with mcp_session(url, token, terminal, tasks=True) as (client, follower, _):
        try:
            result = await follower.follow(client.session, task_id)
        except asyncio.CancelledError:
            _uncancel()
            return await _interrupted(client, follower, terminal, url)
        except Interrupted:
            return await _interrupted(client, follower, terminal, url)
        except MCPError as exc:
            raise _task_error(exc, task_id) from None
    return terminal.result(result, raw=False)


async def task_answer(
    url: str, task_id: str, token: str | None, pairs: Sequence[str], raw_json: str | None, terminal: Terminal
) -> int:
    async with mcp_session(url, token, terminal, tasks=True) as (client, _, _):
        task = await _get(client, task_id)
        asked = task.input_requests or {}
        if task.status != "input_required" or not asked:
            raise ClientError(f"task {task_id} is {task.status} and asks nothing")
        if raw_json is not None:
            responses = _json_object(raw_json, "--json")
        else:
            terminal.answers = _pairs(pairs, "answer")
            terminal.interactive = False
            responses = {key: await terminal.answer_wire(key, request) for key, request in asked.items()}
        try:
            await update_task(client.session, task_id, responses)
        except MCPError as exc:
            raise ClientError(f"the server refused the answer: {exc.error.message}") from None
        after = await _get(client, task_id)
    terminal.out.print(
        f"answered {', '.join(sorted(responses))}; task {task_id} is {after.status}", markup=False
    )
    return 0


async def task_cancel(url: str, task_id: str, token: str | None, terminal: Terminal) -> int:
    async with mcp_session(url, token, terminal, tasks=True) as (client, _, _):
        await _get(client, task_id)
        await cancel_task(client.session, task_id)
        after = await _get(client, task_id)
    terminal.out.print(f"task {task_id}: {after.status}", markup=False)
    return 0


async def _get(client: Client, task_id: str) -> TaskState:
    try:
        return await get_task(client.session, task_id)
    except MCPError as exc:
        raise _task_error(exc, task_id) from None


def _task_error(exc: MCPError, task_id: str) -> ClientError:
    if is_not_found(exc):
        return ClientError(f"task {task_id} not found: unknown, expired, or started by someone else")
    if exc.error.code == -32021:
        return ClientError("the server does not support the tasks extension")
    return ClientError(f"the server refused the request: {exc.error.message}")


def explain(exc: BaseException) -> str | None:
    """One line for a failure the CLI knows how to name, else None (a bug: shown with --debug)."""
    if isinstance(exc, ClientError):
        return str(exc)
    if isinstance(exc, TaskFailed):
        return f"the task failed: {exc.error.get('message', 'no message')} (error {exc.error.get('code')})"
    if isinstance(exc, TaskCancelled):
        return f"task {exc.task_id} was cancelled"
    if isinstance(exc, MCPError):
        return f"the server refused the call: {exc.error.message} (error {exc.error.code})"
    if isinstance(exc, httpx2.HTTPError | OSError):
        return f"the connection to the server failed: {exc}"
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return explain(exc.exceptions[0])
    return None


# Arguments --------------------------------------------------------------------------------------


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ClientError(f"{what} {item!r} is not key=value")
        pairs[key] = value
    return pairs


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ClientError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ClientError(f"{what} must be a JSON object")
    return value


def _arguments(schema: Mapping[str, Any], pairs: Sequence[str], json_args: str | None) -> dict[str, Any]:
    """``key=value`` pairs typed by the tool's inputSchema, over the ``--json`` object."""
    arguments = _json_object(json_args, "--json") if json_args is not None else {}
    properties: Mapping[str, Any] = schema.get("properties", {})
    for key, value in _pairs(pairs, "argument").items():
        arguments[key] = _typed(key, value, properties.get(key, {}))
    return arguments


def _typed(key: str, value: str, schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
        if kind == "boolean":
            lowered = value.lower()
            if lowered not in ("true", "false", "yes", "no", "1", "0"):
                raise ValueError(value)
            return lowered in ("true", "yes", "1")
        if kind in ("object", "array"):
            return json.loads(value)
    except ValueError:
        raise ClientError(f"argument {key}={value!r} is not a valid {kind}") from None
    return value
