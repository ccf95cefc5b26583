"""A long tool on a real ``longtools serve``, over MCP 2026-07-28 and the Tasks extension.

The server is a child process on a free loopback port, with a data dir of its own; it is always
stopped, and dies with the test process. Requests are plain JSON-RPC over HTTP (``httpx``), the
wire any client speaks: nothing of the server or of Temporal is imported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import html
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from longtools._protocol import PROGRESS_META, TASKS_EXTENSION
from longtools.testing._common import (
    AnswerRejected,
    NotAsked,
    NotATask,
    NotAuthorized,
    Question,
    RequestFailed,
    ServeFailed,
    Task,
    TaskState,
    ToolResult,
    number,
)

VERSION = "2026-07-28"
_URL_LINE = re.compile(r"longtools serving MCP at (http://\S+/mcp)")
_CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "extensions": {TASKS_EXTENSION: {}}}
"""A tasks client that shows forms and opens links: a person's question comes as a URL request."""
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_ERRORS = re.compile(r'<p class="error" id="(?:f-([^"]*)-error|form-error)"[^>]*>([^<]*)</p>')
"""What the test client declares: form answers and the Tasks extension."""
_INVALID_PARAMS = -32602
_NOT_AUTHORIZED = "Not authorized to use this tool"
"""What the server says on every path when a tool's ``authorize=`` check refuses."""
_NOT_ALLOWED_PAGE = "You are not allowed to answer this task any more."
_NUMBERS = re.compile(r" ?\([0-9.e+-]+(/[0-9.e+-]+)?\)$")
_LOG_TAIL = 6000


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG = 1: the server gets SIGTERM when the thread that started it ends (the
    # event loop's thread: the test process), even when that process is killed outright.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def _longtools() -> list[str]:
    beside = Path(sys.executable).with_name("longtools")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("longtools")
    if found:
        return [found]
    return [sys.executable, "-c", "from longtools.cli import main; main()"]


class Served:
    """A running ``longtools serve`` (``serve()``) and an MCP client of it."""

    def __init__(self, url: str, http: httpx.AsyncClient, log_path: Path, data_dir: Path) -> None:
        self.url = url
        """The MCP endpoint, ``http://127.0.0.1:PORT/mcp``."""
        self.log_path = log_path
        """The server's log (its stderr)."""
        self.data_dir = data_dir
        self._http = http
        self._ids = itertools.count(1)
        self.headers: dict[str, str] = {}
        """Sent with every request (e.g. ``{"authorization": "Bearer ..."}``)."""

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, caps: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """One stateless JSON-RPC request; its ``result``.

        Raises:
            RequestFailed: a JSON-RPC error, or an HTTP error status.
        """
        sent = dict(params or {})
        sent["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": dict(_CAPS if caps is None else caps),
            "io.modelcontextprotocol/clientInfo": {"name": "longtools.testing", "version": "0"},
            **sent.get("_meta", {}),
        }
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": VERSION,
            "mcp-method": method,
            **self.headers,
        }
        name = sent.get("name", sent.get("uri", sent.get("taskId")))
        if isinstance(name, str):
            headers["mcp-name"] = name
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": sent}
        response = await self._http.post(self.url, content=json.dumps(body), headers=headers)
        message = _message(response)
        if message is None:
            raise RequestFailed(
                method, response.status_code, f"HTTP {response.status_code}: {response.text[:500]}"
            )
        if "error" in message:
            error = message["error"]
            raise RequestFailed(
                method, int(error.get("code", 0)), str(error.get("message", "")), error.get("data")
            )
        result: dict[str, Any] = message.get("result", {})
        return result

    async def answer_on_page(self, link: str, answer: Mapping[str, Any]) -> None:
        """Answer a question on its page, as its person does in a browser (``serve()`` runs
        without authentication: its pages are this computer's person's).

        Raises:
            AnswerRejected: the page refused the answer (each field's error in words).
            NotAuthorized: the tool's check refuses the signed-in person's answer (403).
            RequestFailed: the page did not open or answer (e.g. the question is closed).
        """
        opened = await self._http.get(link)
        found = _CSRF.search(opened.text)
        if opened.status_code != 200 or found is None:
            raise RequestFailed("answer page", opened.status_code, f"HTTP {opened.status_code}: {link}")
        form: list[tuple[str, str]] = [("csrf", found.group(1)), ("action", str(answer.get("action")))]
        for name, value in (answer.get("content") or {}).items():
            for item in value if isinstance(value, list) else [value]:
                if item is not False and item is not None:
                    form.append((name, "true" if item is True else str(item)))
        sent = await self._http.post(
            link,
            content=urlencode(form),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        if sent.status_code == 422:
            said = "; ".join(
                f"{field}: {html.unescape(error)}" if field else html.unescape(error)
                for field, error in _ERRORS.findall(sent.text)
            )
            raise AnswerRejected(f"the page refused the answer: {said}")
        if sent.status_code == 403 and _NOT_ALLOWED_PAGE in sent.text:
            raise NotAuthorized(f"the page refused the answer: {_NOT_ALLOWED_PAGE}")
        if sent.status_code != 303:
            raise RequestFailed("answer page", sent.status_code, f"HTTP {sent.status_code}: {link}")

    async def start(self, tool: str, arguments: Mapping[str, Any] | None = None) -> ServedTask:
        """Call the long tool ``tool`` as a task (the client declares the Tasks extension).

        Raises:
            NotATask: the server answered at once (a quick tool, bad arguments: see its result).
            RequestFailed: a JSON-RPC error.
        """
        created = await self.request("tools/call", {"name": tool, "arguments": dict(arguments or {})})
        if created.get("resultType") != "task":
            raise NotATask(tool, ToolResult.from_wire(created))
        return ServedTask(str(created["taskId"]), tool, self)

    def task(self, task_id: str, tool: str = "?") -> ServedTask:
        """A handle on a task already started (by another client too, as the same principal)."""
        return ServedTask(task_id, tool, self)

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        answers: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        max_rounds: int = 20,
    ) -> ToolResult:
        """Call ``tool`` without the Tasks extension (MRTR rounds): each form question is answered
        from ``answers`` by its key (the form's content, accepted), until the tool answers.

        Raises:
            NotAsked: the tool asked a question that ``answers`` has no answer for.
            RequestFailed: a JSON-RPC error.
        """
        params: dict[str, Any] = {"name": tool, "arguments": dict(arguments or {})}
        given = dict(answers or {})
        for _ in range(max_rounds):
            answered = await self.request("tools/call", params, caps={"elicitation": {"form": {}}})
            if answered.get("resultType") != "input_required":
                return ToolResult.from_wire(answered)
            asked = {
                key: Question.from_wire(key, r) for key, r in (answered.get("inputRequests") or {}).items()
            }
            missing = [q for key, q in asked.items() if key not in given]
            if missing:
                words = "; ".join(f"{q.key!r}: {q.message}" for q in missing)
                raise NotAsked(f"{tool} asked what no answer was given for: {words}")
            params = {
                "name": tool,
                "arguments": dict(arguments or {}),
                "inputResponses": {key: {"action": "accept", "content": dict(given[key])} for key in asked},
            }
            if "requestState" in answered:
                params["requestState"] = answered["requestState"]
        raise RequestFailed("tools/call", 0, f"{tool} still asked after {max_rounds} rounds")


class ServedTask(Task):
    """A task of a real server: ``tasks/get``, ``tasks/update``, ``tasks/cancel``."""

    def __init__(self, task_id: str, tool: str, served: Served) -> None:
        super().__init__(task_id, tool)
        self._served = served

    async def state(self) -> TaskState:
        task = await self._served.request("tasks/get", {"taskId": self.task_id})
        requests = task.get("inputRequests") or {}
        questions = {key: Question.from_wire(key, request) for key, request in requests.items()}
        status = task.get("status")
        message = task.get("statusMessage")
        meta = task.get("_meta")
        shown = meta.get(PROGRESS_META) if isinstance(meta, Mapping) else None
        progress = shown if isinstance(shown, Mapping) else {}
        if progress and isinstance(message, str):
            # statusMessage carries the numbers as " (3/10)" for clients that show only it; the
            # state has them apart, like an embedded task's.
            message = _NUMBERS.sub("", message) or None
        result = task.get("result")
        error = task.get("error")
        return TaskState(
            self.task_id,
            status
            if status in ("working", "input_required", "completed", "failed", "cancelled")
            else "working",
            message=message if isinstance(message, str) else None,
            progress=number(progress.get("progress")),
            total=number(progress.get("total")),
            questions=questions if status == "input_required" else {},
            result=ToolResult.from_wire(result) if isinstance(result, Mapping) else None,
            error=error if isinstance(error, Mapping) else None,
        )

    async def _send(self, key: str, question: Question, answer: Mapping[str, Any]) -> None:
        if question.page is not None:
            await self._served.answer_on_page(question.page, answer)
            return
        try:
            await self._served.request(
                "tasks/update", {"taskId": self.task_id, "inputResponses": {key: dict(answer)}}
            )
        except RequestFailed as exc:
            if exc.code == _INVALID_PARAMS and exc.error_message == _NOT_AUTHORIZED:
                raise NotAuthorized(f"task {self.task_id} ({self.tool}): {exc.error_message}") from None
            if exc.code == _INVALID_PARAMS:
                raise AnswerRejected(f"task {self.task_id} ({self.tool}): {exc.error_message}") from None
            raise

    async def cancel(self) -> None:
        await self._served.request("tasks/cancel", {"taskId": self.task_id})


def _message(response: httpx.Response) -> dict[str, Any] | None:
    """The JSON-RPC response in ``response`` (plain JSON, or the last message of an SSE stream)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        answers = [m for m in found if isinstance(m, dict) and ("result" in m or "error" in m)]
        return answers[-1] if answers else None
    with contextlib.suppress(ValueError):
        body = response.json()
        if isinstance(body, dict) and ("result" in body or "error" in body):
            return body
    return None


@asynccontextmanager
async def serve(
    *args: str,
    data_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    pythonpath: Sequence[str | Path] = (),
    within: float = 60,
) -> AsyncIterator[Served]:
    """Run ``longtools serve --port 0 ARGS`` (e.g. ``"--tools", "my_tools"``) until the block ends.

    The API takes a free loopback port, its Temporal dev server another
    (``LONGTOOLS_TEMPORAL_PORT=0``). Its state goes in ``data_dir`` (``--data-dir``; a temporary
    directory, removed afterwards, when None), its log in ``data_dir/serve.log``. ``pythonpath``
    goes in front of the server's ``PYTHONPATH``, so it imports your tool modules; ``env`` adds
    settings (``LONGTOOLS_*``). Waits ``within`` seconds for its "longtools serving MCP at URL"
    line and for ``/readyz``; on exit stops it (SIGTERM, then SIGKILL after 20 s). It also dies
    with the test process.

    Raises:
        ServeFailed: it did not start or become ready; the message ends with its log.
    """
    async with AsyncExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="longtools-serve-"))
        where = Path(data_dir)
        await asyncio.to_thread(where.mkdir, parents=True, exist_ok=True)
        log_path = where / "serve.log"
        paths = [str(path) for path in pythonpath] + [p for p in [os.environ.get("PYTHONPATH", "")] if p]
        full_env = {**os.environ, "LONGTOOLS_TEMPORAL_PORT": "0", **(env or {})}
        if paths:
            full_env["PYTHONPATH"] = os.pathsep.join(paths)
        with log_path.open("ab") as log_file:
            process = await asyncio.create_subprocess_exec(
                *_longtools(),
                "serve",
                "--port",
                "0",
                *args,
                "--data-dir",
                str(where),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log_file,
                env=full_env,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        stack.push_async_callback(_stop, process)
        url = await _url(process, log_path, within)
        # Whatever else the server prints goes to its log, so its stdout never fills up.
        drain = asyncio.create_task(_drain(process, log_path))
        stack.callback(drain.cancel)
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=httpx.Timeout(60, connect=10)))
        await _ready(http, url.removesuffix("/mcp"), process, log_path, within)
        yield Served(url, http, log_path, where)


async def _url(process: asyncio.subprocess.Process, log_path: Path, within: float) -> str:
    assert process.stdout is not None
    try:
        async with asyncio.timeout(within):
            while line := await process.stdout.readline():
                found = _URL_LINE.search(line.decode(errors="replace"))
                if found:
                    return found.group(1)
    except TimeoutError:
        raise ServeFailed(f"longtools serve printed no URL within {within:g}s:\n{_tail(log_path)}") from None
    raise ServeFailed(f"longtools serve exited ({await process.wait()}) before it served:\n{_tail(log_path)}")


async def _ready(
    http: httpx.AsyncClient, base: str, process: asyncio.subprocess.Process, log_path: Path, within: float
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    status = "no answer"
    while loop.time() < deadline and process.returncode is None:
        with contextlib.suppress(httpx.HTTPError):
            response = await http.get(f"{base}/readyz", timeout=5)
            if response.status_code == 200:
                return
            status = f"HTTP {response.status_code}"
        await asyncio.sleep(0.05)
    raise ServeFailed(
        f"longtools serve at {base} was not ready within {within:g}s ({status}):\n{_tail(log_path)}"
    )


async def _drain(process: asyncio.subprocess.Process, log_path: Path) -> None:
    assert process.stdout is not None
    with log_path.open("ab") as log_file:
        while chunk := await process.stdout.read(65536):
            log_file.write(chunk)


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


def _tail(log_path: Path) -> str:
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    return text[-_LOG_TAIL:]
