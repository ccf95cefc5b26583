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
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.threaded import InThread, serve_in_thread

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
        self._served: InThread | None = None

    def start(self) -> Probe:
        self._served = serve_in_thread(self._handle)
        self.base = f"http://127.0.0.1:{self._served.port}"
        self.url = self.base + "/mcp"
        return self

    def close(self) -> None:
        if self._served is not None:
            self._served.close(force=True)

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
