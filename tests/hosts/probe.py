"""A scripted MCP 2026-07-28 server for probing how a host reads one exact shape of a question
(``run --probe SCENARIO,...``): not longtools, so the shape can be varied a field at a time.

It answers ``server/discover`` and ``tools/list`` as longtools does (one tool, ``bulk_close_tickets``),
and ``tools/call`` per scenario:

- ``url-no-id``: ``input_required`` with a URL-mode ``elicitation/create`` as longtools sends it at
  2026-07-28: ``{mode: "url", message, url}``;
- ``url-id``: the same with an ``elicitationId`` (as 2025-11-25 requires);
- ``form``: a form request with ``mode: "form"``; ``form-no-mode``: the same without ``mode``;
- ``text-link``: a plain result (``isError: false``) whose text carries a link;
- ``text-link-error``: the same with ``isError: true``.

A retried call (with ``inputResponses``) ends with a result that quotes what the host sent back, so
the host's answer is on the wire and in what reaches its model. A 2025-era ``initialize`` is refused
(``-32022`` with the supported versions, as longtools' 2026-only answer would), so this probes
2026-07-28 hosts only.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SCENARIOS = ("url-no-id", "url-id", "form", "form-no-mode", "text-link", "text-link-error")
VERSION = "2026-07-28"
SERVER_META = {"io.modelcontextprotocol/serverInfo": {"name": "longtools-probe", "version": "0.0.0"}}
MESSAGE = "Close 2 tickets for acme?"
SCHEMA = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "description": "Close all of them?"},
        "reason": {"type": "string", "enum": ["Resolved", "Duplicate", "Cancelled"], "default": "Resolved"},
    },
    "required": ["confirm"],
}
TOOL = {
    "name": "bulk_close_tickets",
    "title": "Close all tickets of a customer",
    "description": "Close all open tickets of a customer after one confirmation.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "customer": {"type": "string", "description": "The customer whose open tickets close."}
        },
        "required": ["customer"],
        "additionalProperties": False,
    },
}


class Probe:
    def __init__(self, scenario: str) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown probe scenario {scenario!r}; one of {', '.join(SCENARIOS)}")
        self.scenario = scenario
        self.url = ""
        self.base = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Probe:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        app = Starlette(routes=[Route("/{path:path}", self._handle, methods=["GET", "POST", "DELETE"])])
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the probe server never started")
            time.sleep(0.01)
        self.base = f"http://127.0.0.1:{port}"
        self.url = self.base + "/mcp"
        return self

    def close(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            self._thread.join(timeout=5)

    def link(self) -> str:
        return f"{self.base}/answer/probe-{self.scenario}-0123456789abcdefghijklmnopqrstuvwxyz"

    def _question(self) -> dict[str, Any]:
        if self.scenario == "url-no-id":
            return {
                "method": "elicitation/create",
                "params": {"mode": "url", "message": MESSAGE, "url": self.link()},
            }
        if self.scenario == "url-id":
            return {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": MESSAGE,
                    "url": self.link(),
                    "elicitationId": "probe-elicitation-1",
                },
            }
        if self.scenario == "form":
            return {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": MESSAGE, "requestedSchema": SCHEMA},
            }
        return {"method": "elicitation/create", "params": {"message": MESSAGE, "requestedSchema": SCHEMA}}

    async def _handle(self, request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405)
        try:
            message = json.loads(await request.body())
        except ValueError:
            return JSONResponse(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
            )
        if "id" not in message:  # a notification
            return Response(status_code=202)
        method = message.get("method")
        params = message.get("params") or {}
        rid = message["id"]

        def ok(result: dict[str, Any]) -> JSONResponse:
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        **result,
                        "resultType": result.get("resultType", "complete"),
                        "_meta": SERVER_META,
                    },
                }
            )

        if method == "initialize":
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {
                        "code": -32022,
                        "message": "Unsupported protocol version",
                        "data": {"supported": [VERSION]},
                    },
                }
            )
        if method == "server/discover":
            return ok(
                {
                    "cacheScope": "private",
                    "capabilities": {"tools": {"listChanged": False}},
                    "supportedVersions": [VERSION],
                    "ttlMs": 0,
                }
            )
        if method == "tools/list":
            return ok({"cacheScope": "private", "tools": [TOOL]})
        if method == "tools/call":
            if self.scenario.startswith("text-link"):
                text = f"Only the person may approve this, on its page: {self.link()}"
                return ok(
                    {"content": [{"type": "text", "text": text}], "isError": self.scenario.endswith("error")}
                )
            responses = params.get("inputResponses")
            if responses is None:
                return ok(
                    {
                        "resultType": "input_required",
                        "inputRequests": {"input": self._question()},
                        "requestState": "probe-state-1",
                    }
                )
            state = params.get("requestState")
            answered = json.dumps(responses)
            text = f"probe: the host answered with inputResponses={answered} (requestState {state!r})"
            return ok({"content": [{"type": "text", "text": text}], "isError": False})
        return JSONResponse(
            {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}}
        )
