"""A Python MCP client driver: one JSON script in, one JSON line out, like the Node drivers beside it.

Run it with the Python of the venv whose client library it should drive; it imports only what
that library has, so one script serves several versions that cannot share a venv:

    .venv/bin/python tests/clients/py/client_driver.py URL script.json            # mcp 2.3, fastmcp 4.1.4
    .venv-fastmcp2/bin/python tests/clients/py/client_driver.py URL script.json   # fastmcp 2.14, mcp 1.30
    .venv-mcp1/bin/python tests/clients/py/client_driver.py URL script.json       # mcp 1.12.4

script.json:
    {
      "client": "mcp" | "mcp-session" | "fastmcp" | "fastmcp-tasks",
          # mcp: mcp 2.x's ``mcp.Client`` (``mode`` below); mcp-session: mcp 1.x's ``ClientSession``
          # over ``streamablehttp_client`` (``initialize`` at the library's own latest version);
          # fastmcp: ``fastmcp.Client`` (2.x or 4.x) and ``call_tool_mcp``; fastmcp-tasks: fastmcp
          # 4.x with ``fastmcp_tasks.client.call_tool_task`` then ``task.result()`` (the quickstart's)
      "mode": "auto" | "legacy",      # mcp and fastmcp 4.x only; the library's default otherwise
      "token": "a bearer token",      # optional
      "elicitation": true,            # register the library's elicitation handler (default true);
                                      # without one the library declares no elicitation
      "answers": [{"action": "accept", "content": {...}}, ...],
                                      # what the handler returns, in order; the last one again for
                                      # every later question (a host's handler is a function)
      "eventsFile": "/path",          # optional: one JSON line appended per event as it happens
                                      # (each question before it is answered, the task id once a
                                      # task is made, each step's outcome), so a test can act while
                                      # a call is held
      "steps": [{"op": "listTools"}, {"op": "callTool", "name": "...", "arguments": {...}}],
                                      # listTools: what a host does first (and what some libraries
                                      # check a result's structuredContent against);
                                      # "op": "callToolTask" (fastmcp-tasks only) makes a task and
                                      # drives it to its end; in arguments, "$taskId" and a key
                                      # "$questionKey" stand for the last result's task id and its
                                      # first answer link's key (a chat host's model answering)
      "timeoutS": 120                 # the whole run; past it the output says so and the driver ends
    }

Output, one JSON line on stdout: ``libraries`` (the installed versions of mcp, fastmcp,
fastmcp-tasks), ``protocolVersion`` (as the library negotiated it, when it says), ``results`` (per
step: the result as on the wire, ``{"tools": [names]}`` for listTools, or ``{"error": {"type",
"message", "code"?, "data"?}}``),
``elicitations`` (the first 200 questions: ``mode``, ``params``, ``answer``), ``elicitationCount``
and ``errors`` (what ended the run early). Exit 0 unless the driver itself is misused (2).
Typed loosely on purpose: the libraries differ per venv, so each is imported by name.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

_KEPT = 200


def _load(name: str) -> Any:
    return importlib.import_module(name)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _jsonable(value: Any) -> Any:
    """A pydantic model (or anything else) as plain JSON, the wire's aliases kept."""
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return value


def _error(exc: BaseException) -> dict[str, Any]:
    found: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    data = getattr(exc, "error", None)  # mcp's McpError/MCPError carry the JSON-RPC error
    if data is not None:
        found["code"] = getattr(data, "code", None)
        found["data"] = _jsonable(getattr(data, "data", None))
    return found


class Run:
    """What the driver did and saw, and the script's answers."""

    def __init__(self, url: str, script: dict[str, Any]) -> None:
        self.url = url
        self.script = script
        self.answers: list[dict[str, Any]] = list(script.get("answers") or [{"action": "cancel"}])
        self.events = Path(script["eventsFile"]) if script.get("eventsFile") else None
        self.out: dict[str, Any] = {
            "libraries": {name: _version(name) for name in ("mcp", "fastmcp", "fastmcp-tasks")},
            "protocolVersion": None,
            "results": [],
            "elicitations": [],
            "elicitationCount": 0,
            "errors": [],
        }

    def event(self, kind: str, **fields: Any) -> None:
        if self.events is not None:
            with self.events.open("a") as file:
                file.write(json.dumps({"kind": kind, **fields}) + "\n")

    def answer_for(self, params: Any) -> dict[str, Any]:
        """Record the question (and write its event) before it is answered; the answer to give."""
        count = self.out["elicitationCount"]
        answer: dict[str, Any] = self.answers[min(count, len(self.answers) - 1)]
        shown = _jsonable(params)
        mode = shown.get("mode", "form") if isinstance(shown, dict) else "form"
        self.out["elicitationCount"] = count + 1
        if count < _KEPT:
            self.out["elicitations"].append({"mode": mode, "params": shown, "answer": answer})
            self.event("elicitation", n=count, mode=mode, params=shown, answer=answer)
        return answer

    def headers(self) -> dict[str, str]:
        token = self.script.get("token")
        return {"authorization": f"Bearer {token}"} if token else {}

    def arguments(self, step: dict[str, Any]) -> dict[str, Any]:
        """The step's arguments, ``$taskId`` and ``$questionKey`` filled from the last result."""
        results: list[dict[str, Any]] = self.out["results"]
        last: dict[str, Any] = next((r for r in reversed(results) if "structuredContent" in r), {})
        shown = last.get("structuredContent") or {}
        links = (shown.get("_meta") or {}).get("longtools.dev/answer-links") or {}
        key = next(iter(links), None)

        def fill(value: Any) -> Any:
            if value == "$taskId":
                return shown.get("taskId")
            if isinstance(value, dict):
                return {(key if k == "$questionKey" else k): fill(v) for k, v in value.items()}
            return value

        filled: dict[str, Any] = fill(dict(step.get("arguments") or {}))
        return filled

    def result(self, value: dict[str, Any]) -> None:
        self.out["results"].append(value)
        self.event("result", step=len(self.out["results"]) - 1, result=value)


async def _run_mcp(run: Run) -> None:
    """mcp 2.x: ``mcp.Client`` over a streamable HTTP transport with the bearer token."""
    mcp, types = _load("mcp"), _load("mcp_types")
    httpx2, streamable = _load("httpx2"), _load("mcp.client.streamable_http")

    async def elicit(context: Any, params: Any) -> Any:
        return types.ElicitResult(**run.answer_for(params))

    callback = elicit if run.script.get("elicitation", True) else None
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(headers=run.headers(), timeout=timeout) as http:
        transport = streamable.streamable_http_client(run.url, http_client=http)
        mode = run.script.get("mode", "auto")
        async with mcp.Client(transport, mode=mode, elicitation_callback=callback) as client:
            run.out["protocolVersion"] = str(client.protocol_version)
            for step in run.script["steps"]:
                try:
                    if step.get("op", "callTool") == "listTools":
                        run.result(_tools(await client.list_tools()))
                    else:
                        called = await client.call_tool(step["name"], run.arguments(step))
                        run.result(_jsonable(called))
                except Exception as exc:
                    run.result({"error": _error(exc)})


def _tools(listed: Any) -> dict[str, Any]:
    return {"tools": [tool.name for tool in getattr(listed, "tools", listed)]}


async def _run_mcp_session(run: Run) -> None:
    """mcp 1.x: ``ClientSession`` over ``streamablehttp_client``, as a 2025 host builds it."""
    mcp, types, streamable = _load("mcp"), _load("mcp.types"), _load("mcp.client.streamable_http")

    async def elicit(context: Any, params: Any) -> Any:
        return types.ElicitResult(**run.answer_for(params))

    kwargs: dict[str, Any] = {"elicitation_callback": elicit} if run.script.get("elicitation", True) else {}
    async with streamable.streamablehttp_client(run.url, headers=run.headers()) as streams:
        read, write, _ = streams
        async with mcp.ClientSession(read, write, **kwargs) as session:
            initialized = await session.initialize()
            run.out["protocolVersion"] = initialized.protocolVersion
            for step in run.script["steps"]:
                try:
                    if step.get("op", "callTool") == "listTools":
                        run.result(_tools(await session.list_tools()))
                    else:
                        called = await session.call_tool(step["name"], run.arguments(step))
                        run.result(_jsonable(called))
                except Exception as exc:
                    run.result({"error": _error(exc)})


def _fastmcp_client(run: Run) -> Any:
    fastmcp, elicitation = _load("fastmcp"), _load("fastmcp.client.elicitation")
    if run.script["client"] == "fastmcp-tasks":
        _load("fastmcp_tasks.client")  # its import makes every later Client declare the extension

    async def handler(message: str, response_type: Any, params: Any, context: Any) -> Any:
        answer = run.answer_for(params)
        return elicitation.ElicitResult(action=answer["action"], content=answer.get("content"))

    kwargs: dict[str, Any] = {"auth": run.script.get("token")}
    if run.script.get("elicitation", True):
        kwargs["elicitation_handler"] = handler
    if "mode" in run.script:
        kwargs["mode"] = run.script["mode"]
    return fastmcp.Client(run.url, **kwargs)


def _negotiated(client: Any) -> str | None:
    session = getattr(client, "session", None)
    version = getattr(session, "protocol_version", None)
    if version is None:
        initialized = getattr(client, "initialize_result", None)
        version = getattr(initialized, "protocolVersion", None)
    return None if version is None else str(version)


async def _run_fastmcp(run: Run) -> None:
    """fastmcp 2.x or 4.x ``Client``; tool calls through ``call_tool_mcp`` (the raw result, an
    ``isError`` one included) or, for ``callToolTask``, fastmcp-tasks' ``call_tool_task``."""
    async with _fastmcp_client(run) as client:
        run.out["protocolVersion"] = _negotiated(client)
        for step in run.script["steps"]:
            try:
                if step.get("op", "callTool") == "listTools":
                    run.result(_tools(await client.list_tools_mcp()))
                elif step.get("op", "callTool") == "callToolTask":
                    run.result(await _drive_task(run, client, step))
                else:
                    called = await client.call_tool_mcp(step["name"], run.arguments(step))
                    run.result(_jsonable(called))
            except Exception as exc:
                run.result({"error": _error(exc)})


async def _drive_task(run: Run, client: Any, step: dict[str, Any]) -> dict[str, Any]:
    tasks = _load("fastmcp_tasks.client")
    task = await tasks.call_tool_task(client, step["name"], run.arguments(step), raise_on_error=False)
    run.event("task", taskId=task.task_id)
    done = await task.result()  # polls tasks/get, answering through the handler with tasks/update
    shown: dict[str, Any] = {"content": _jsonable(done.content), "isError": bool(done.is_error)}
    if done.structured_content is not None:
        shown["structuredContent"] = _jsonable(done.structured_content)
    return shown


_CLIENTS = {"mcp": _run_mcp, "mcp-session": _run_mcp_session, "fastmcp": _run_fastmcp}


async def _main(run: Run) -> None:
    kind = run.script["client"]
    drive = _CLIENTS.get("fastmcp" if kind == "fastmcp-tasks" else kind)
    if drive is None:
        raise SystemExit(f"unknown client {kind!r}")
    try:
        await asyncio.wait_for(drive(run), timeout=float(run.script.get("timeoutS", 120)))
    except TimeoutError:
        run.out["errors"].append({"type": "TimeoutError", "message": "the run did not end in time"})
    except Exception as exc:
        run.out["errors"].append(_error(exc))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: client_driver.py URL script.json\n")
        return 2
    url, path = argv
    run = Run(url, json.loads(Path(path).read_text()))
    asyncio.run(_main(run))
    sys.stdout.write(json.dumps(run.out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
