"""A scripted stand-in for a model API, on loopback: what a host sends its model is logged, and the
reply follows a fixed script instead of a model.

One server speaks the four APIs the hosts use, told apart by path:
- Anthropic Messages (``POST .../v1/messages``, streamed or not; ``.../count_tokens``): Claude Code;
- OpenAI Responses (``POST .../responses``, server-sent events): Codex CLI;
- Chat Completions (``POST .../chat/completions``): Copilot CLI with a BYOK provider;
- Gemini (``POST .../models/<m>:streamGenerateContent`` / ``:generateContent`` / ``:countTokens``).

The script, the same in every API (``Script.decide``):
1. a request that does not offer ``bulk_close_tickets`` (a host's side request: a title, a quota
   check, a routing question) gets a short text, or for a JSON-schema request the smallest object
   the schema allows;
2. first, call ``bulk_close_tickets`` with ``{"customer": CUSTOMER}``;
3. after a tool result: if the host offers ``task_status``, the result names a task that has not
   ended, and fewer than ``max_follow`` follow-ups were made, call ``task_status`` (after
   ``follow_delay`` seconds), saying the link of any person's question in the same reply, as a
   model would;
4. otherwise end the turn with a text that relays what the last tool result said (its links left
   out), then every answer link any tool result gave, each after ``RELAYED`` (a real model passes
   the link on; the mark tells the model's link from one the host showed itself).

Every request is logged to ``model.jsonl`` with the reply given, and the tool results as the model
met them (``seen``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from tests.threaded import InThread, serve_in_thread

LINK = re.compile(r"https?://[^\s\"'<>\\)\]]+/answer/[A-Za-z0-9_\-]+")
TASK_ID = re.compile(r'taskId "([^"]+)"')
TERMINAL_WORDS = re.compile(
    r'Task "[^"]+" \([^)]*\) (has completed|ended with an error|failed:|was cancelled)'
)
MODEL_NAME = "stand-in-model"
RELAYED = "[link relayed by the model]"
"""Written before each link the stand-in says, so that a link on a screen after it is the model's."""


@dataclass
class Call:
    id: str
    name: str
    args: Any


@dataclass
class Result:
    id: str
    text: str
    is_error: bool = False


@dataclass
class Turn:
    """One request as the script reads it, whatever the API."""

    api: str
    tools: list[str]
    calls: list[Call] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    last_is_result: bool = False
    json_schema: Any = None
    raw: str = ""
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Responses API namespaces: a tool's full name -> (namespace, name inside it)."""
    last_user_text: str = ""
    """The text of the last message when it is not a tool result (a host's notice, a new prompt)."""


@dataclass
class Reply:
    text: str | None = None
    call: Call | None = None
    json_value: Any = None


def _text_of(value: Any) -> str:
    """All the text of a tool result's content, whatever its shape (a string, blocks, an object)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text_of(item) for item in value)
    if isinstance(value, dict):
        text = value.get("text")
        if isinstance(text, str):
            return text
        for key in ("content", "output", "response", "result"):
            if key in value:
                return _text_of(value[key])
        return json.dumps(value)
    return str(value)


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value (keys too), for looking names up in what a host sent."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [str(k), *_strings(v)]]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _tool_named(tools: list[str], suffix: str) -> str | None:
    for name in tools:
        if (
            name == suffix
            or name.endswith("__" + suffix)
            or name.endswith("_" + suffix)
            or name.endswith("-" + suffix)
            or name.endswith("." + suffix)
            or name.endswith("/" + suffix)
        ):
            return name
    return None


def _sample(schema: Any) -> Any:
    """The smallest value a JSON schema allows (enough for a host's own JSON side requests)."""
    if not isinstance(schema, dict):
        return {}
    if schema.get("enum"):
        return schema["enum"][0]
    if schema.get("anyOf"):
        return _sample(schema["anyOf"][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    kind = (kind or "object").lower() if isinstance(kind, str) else "object"
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _sample(prop) for name, prop in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "user" if "speaker" in json.dumps(schema) else "stand-in"


class Script:
    def __init__(
        self, customer: str, max_follow: int = 2, follow_delay: float = 2.0, tool: str = "bulk_close_tickets"
    ) -> None:
        self.customer = customer
        self.tool = tool
        self.max_follow = max_follow
        self.follow_delay = follow_delay
        self._ids = itertools.count(1)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}_{uuid.uuid4().hex[:8]}"

    def decide(self, turn: Turn) -> tuple[Reply, float]:
        """The reply, and how long to wait before giving it."""
        bulk = _tool_named(turn.tools, self.tool)
        search = _tool_named(turn.tools, "ToolSearch")
        if bulk is None and search and not any(call.name == search for call in turn.calls):
            # Claude Code defers MCP tools: their names are listed in the prompt, loaded with ToolSearch.
            wanted = f"(?:{re.escape(self.tool)}|task_status)"
            deferred = sorted(set(re.findall(rf"[\w.\-]*{wanted}\b", turn.raw)))
            if deferred:
                return Reply(
                    call=Call(self.new_id("call_"), search, {"query": "select:" + ",".join(deferred)})
                ), 0
        if bulk is None:
            if turn.json_schema is not None:
                return Reply(json_value=_sample(turn.json_schema)), 0
            return Reply(text="OK."), 0
        if not any(call.name == bulk for call in turn.calls):
            return Reply(call=Call(self.new_id("call_"), bulk, {"customer": self.customer})), 0
        if not turn.last_is_result or not turn.results:
            if turn.last_user_text.strip():
                # A host's own message after the call (e.g. a background task's notification).
                return Reply(
                    text="(stand-in model) The host told me:\n" + turn.last_user_text.strip()[:2000]
                ), 0
            return Reply(text="(stand-in model) Nothing more to do."), 0
        links = list(dict.fromkeys(link for result in turn.results for link in LINK.findall(result.text)))
        last = turn.results[-1]
        status = _tool_named(turn.tools, "task_status")
        follows = sum(1 for call in turn.calls if call.name == status) if status else 0
        found = TASK_ID.search(last.text)
        if status and found and not TERMINAL_WORDS.search(last.text) and follows < self.max_follow:
            said = f"A person must approve this on its page: {RELAYED} {links[-1]}" if links else None
            return Reply(text=said, call=Call(self.new_id("call_"), status, {"taskId": found.group(1)})), (
                self.follow_delay
            )
        # The tool's words with its links left out, then each link after the RELAYED mark: what
        # reaches a screen from the model can be told from what the host showed itself.
        quoted = LINK.sub("<link>", last.text.strip()[:2000]) or "(no text)"
        lines = ["(stand-in model) The tool said:", quoted]
        if last.is_error:
            lines.insert(1, "(it was an error)")
        ended = bool(TERMINAL_WORDS.search(last.text))
        for link in links:
            lines.append(
                f"The link it gave earlier: {RELAYED} {link}"
                if ended
                else f"To approve, open: {RELAYED} {link}"
            )
        return Reply(text="\n".join(lines)), 0


# --- the four APIs: each reads a request into a Turn and writes a Reply ----------------------------


def _anthropic_turn(body: dict[str, Any]) -> Turn:
    turn = Turn("anthropic", [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)])
    messages = body.get("messages") or []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                turn.calls.append(Call(block.get("id", ""), block.get("name", ""), block.get("input")))
            elif block.get("type") == "tool_result":
                turn.results.append(
                    Result(
                        block.get("tool_use_id", ""),
                        _text_of(block.get("content")),
                        bool(block.get("is_error")),
                    )
                )
    if messages:
        last = messages[-1]
        content = last.get("content")
        turn.last_is_result = (
            last.get("role") == "user"
            and isinstance(content, list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        )
        if last.get("role") == "user" and not turn.last_is_result and turn.calls:
            turn.last_user_text = _text_of(content)
    return turn


def _anthropic_reply(reply: Reply, stream: bool, script: Script) -> Response:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    if reply.json_value is not None:
        blocks.append({"type": "text", "text": json.dumps(reply.json_value)})
    if reply.call:
        blocks.append(
            {
                "type": "tool_use",
                "id": "toolu_" + reply.call.id,
                "name": reply.call.name,
                "input": reply.call.args,
            }
        )
    stop = "tool_use" if reply.call else "end_turn"
    message = {
        "id": script.new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": MODEL_NAME,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }
    if not stream:
        return JSONResponse(message)

    def events() -> list[str]:
        out = [
            _sse(
                {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
                "message_start",
            )
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                out.append(
                    _sse(
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                        "content_block_start",
                    )
                )
                out.append(
                    _sse(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": block["text"]},
                        },
                        "content_block_delta",
                    )
                )
            else:
                start = {**block, "input": {}}
                out.append(
                    _sse(
                        {"type": "content_block_start", "index": index, "content_block": start},
                        "content_block_start",
                    )
                )
                out.append(
                    _sse(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                        },
                        "content_block_delta",
                    )
                )
            out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        out.append(
            _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 10},
                },
                "message_delta",
            )
        )
        out.append(_sse({"type": "message_stop"}, "message_stop"))
        return out

    return _stream(events())


def _responses_turn(body: dict[str, Any]) -> Turn:
    names: list[str] = []
    namespaced: dict[str, tuple[str, str]] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            for inner in tool["tools"]:
                if isinstance(inner, dict) and inner.get("name"):
                    full = f"{tool.get('name')}__{inner['name']}"
                    names.append(full)
                    namespaced[full] = (tool.get("name", ""), inner["name"])
        elif tool.get("name"):
            names.append(tool["name"])
    turn = Turn("responses", names, namespaced=namespaced)
    items = body.get("input") or []
    if isinstance(items, str):
        items = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            name = item.get("name", "")
            if item.get("namespace"):
                name = f"{item['namespace']}__{name}"
            turn.calls.append(Call(item.get("call_id", ""), name, item.get("arguments")))
        elif kind == "function_call_output":
            output = item.get("output")
            turn.results.append(Result(item.get("call_id", ""), _text_of(output)))
    if items and isinstance(items[-1], dict):
        turn.last_is_result = items[-1].get("type") == "function_call_output"
    fmt = ((body.get("text") or {}).get("format") or {}) if isinstance(body.get("text"), dict) else {}
    if fmt.get("type") == "json_schema":
        turn.json_schema = fmt.get("schema") or {}
    return turn


def _responses_reply(reply: Reply, script: Script, turn: Turn) -> Response:
    response_id = script.new_id("resp_")
    output: list[dict[str, Any]] = []
    text = reply.text
    if reply.json_value is not None:
        text = json.dumps(reply.json_value)
    if text:
        output.append(
            {
                "type": "message",
                "id": script.new_id("msg_"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    if reply.call:
        item = {
            "type": "function_call",
            "id": script.new_id("fc_"),
            "call_id": reply.call.id,
            "name": reply.call.name,
            "arguments": json.dumps(reply.call.args),
            "status": "completed",
        }
        if reply.call.name in turn.namespaced:
            item["namespace"], item["name"] = turn.namespaced[reply.call.name]
        output.append(item)
    base = {"id": response_id, "object": "response", "created_at": int(time.time()), "model": MODEL_NAME}
    out = [
        _sse(
            {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}},
            "response.created",
        )
    ]
    for index, item in enumerate(output):
        out.append(
            _sse(
                {"type": "response.output_item.added", "output_index": index, "item": item},
                "response.output_item.added",
            )
        )
        if item["type"] == "message":
            out.append(
                _sse(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                    },
                    "response.output_text.delta",
                )
            )
        out.append(
            _sse(
                {"type": "response.output_item.done", "output_index": index, "item": item},
                "response.output_item.done",
            )
        )
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 20,
    }
    out.append(
        _sse(
            {
                "type": "response.completed",
                "response": {**base, "status": "completed", "output": output, "usage": usage},
            },
            "response.completed",
        )
    )
    return _stream(out)


def _chat_turn(body: dict[str, Any]) -> Turn:
    tools = [
        (t.get("function") or {}).get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)
    ]
    turn = Turn("chat", tools)
    messages = body.get("messages") or []
    for message in messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                turn.calls.append(
                    Call(call.get("id", ""), function.get("name", ""), function.get("arguments"))
                )
        elif message.get("role") == "tool":
            turn.results.append(Result(message.get("tool_call_id", ""), _text_of(message.get("content"))))
    if messages:
        turn.last_is_result = messages[-1].get("role") == "tool"
    fmt = body.get("response_format") or {}
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        turn.json_schema = (fmt.get("json_schema") or {}).get("schema") or {}
    return turn


def _chat_reply(reply: Reply, stream: bool, script: Script) -> Response:
    completion_id = script.new_id("chatcmpl-")
    text = reply.text
    if reply.json_value is not None:
        text = json.dumps(reply.json_value)
    calls = (
        [
            {
                "id": reply.call.id,
                "type": "function",
                "function": {"name": reply.call.name, "arguments": json.dumps(reply.call.args)},
            }
        ]
        if reply.call
        else []
    )
    finish = "tool_calls" if calls else "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    base = {"id": completion_id, "created": int(time.time()), "model": MODEL_NAME}
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
        return JSONResponse(
            {
                **base,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )
    chunk = {**base, "object": "chat.completion.chunk"}
    out = [
        _sse(
            {
                **chunk,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                ],
            }
        )
    ]
    if text:
        out.append(
            _sse({**chunk, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
        )
    if calls:
        delta = [{"index": 0, **calls[0]}]
        out.append(
            _sse({**chunk, "choices": [{"index": 0, "delta": {"tool_calls": delta}, "finish_reason": None}]})
        )
    out.append(
        _sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage})
    )
    out.append("data: [DONE]\n\n")
    return _stream(out)


def _gemini_turn(body: dict[str, Any]) -> Turn:
    tools = [
        fd.get("name", "")
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
        for fd in tool.get("functionDeclarations") or tool.get("function_declarations") or []
    ]
    turn = Turn("gemini", tools)
    contents = body.get("contents") or []
    pending: dict[str, list[str]] = {}
    for content in contents:
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if "functionCall" in part:
                call = part["functionCall"]
                cid = call.get("id") or f"{call.get('name')}#{len(turn.calls)}"
                pending.setdefault(call.get("name", ""), []).append(cid)
                turn.calls.append(Call(cid, call.get("name", ""), call.get("args")))
            elif "functionResponse" in part:
                response = part["functionResponse"]
                ids = pending.get(response.get("name", ""), [])
                cid = response.get("id") or (ids.pop(0) if ids else "")
                turn.results.append(Result(cid, _text_of(response.get("response"))))
    if contents:
        last_parts = contents[-1].get("parts") or []
        turn.last_is_result = any(isinstance(p, dict) and "functionResponse" in p for p in last_parts)
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if schema is not None or config.get("responseMimeType") == "application/json":
        turn.json_schema = schema or {}
    return turn


def _gemini_reply(reply: Reply, stream: bool, script: Script) -> Response:
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    if reply.json_value is not None:
        parts.append({"text": json.dumps(reply.json_value)})
    if reply.call:
        parts.append({"functionCall": {"name": reply.call.name, "args": reply.call.args}})
    body = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
        "modelVersion": MODEL_NAME,
        "responseId": script.new_id("gem_"),
    }
    if not stream:
        return JSONResponse(body)
    return _stream([_sse(body)])


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def _stream(chunks: list[str]) -> StreamingResponse:
    async def gen() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk.encode()

    return StreamingResponse(gen(), media_type="text/event-stream", headers={"cache-control": "no-cache"})


class StandIn:
    """The stand-in model server; ``url`` is its origin (``http://127.0.0.1:<port>``)."""

    def __init__(self, script: Script, log: Path) -> None:
        self.script = script
        self.log = log
        self.url = ""
        self._lock = threading.Lock()
        self._served: InThread | None = None
        self._t0 = time.monotonic()

    def start(self) -> StandIn:
        self._served = serve_in_thread(self._handle, methods=("GET", "POST", "DELETE", "PUT", "HEAD"))
        self.url = f"http://127.0.0.1:{self._served.port}"
        return self

    def close(self) -> None:
        if self._served is not None:
            self._served.close(force=True)

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        with self._lock:
            lines = self.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def _write(self, entry: dict[str, Any]) -> None:
        entry = {"t": round(time.monotonic() - self._t0, 3), **entry}
        with self._lock, self.log.open("a") as out:
            out.write(json.dumps(entry) + "\n")

    async def _handle(self, request: Request) -> Response:
        path = request.url.path
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        entry: dict[str, Any] = {
            "method": request.method,
            "path": path,
            "query": request.url.query,
            "body": body,
        }
        if request.headers.get("upgrade", "").lower() == "websocket":
            entry["note"] = "websocket upgrade refused"
            self._write(entry)
            return Response("no websockets here", status_code=426)
        turn: Turn | None = None
        if request.method == "POST" and path.endswith("/messages/count_tokens"):
            self._write(entry)
            return JSONResponse({"input_tokens": 100})
        if request.method == "POST" and path.endswith("/messages"):
            turn = _anthropic_turn(body)
        elif request.method == "POST" and path.endswith("/responses"):
            turn = _responses_turn(body)
        elif request.method == "POST" and path.endswith("/chat/completions"):
            turn = _chat_turn(body)
        elif request.method == "POST" and ":countTokens" in path:
            self._write(entry)
            return JSONResponse({"totalTokens": 100})
        elif request.method == "POST" and (":streamGenerateContent" in path or ":generateContent" in path):
            turn = _gemini_turn(body)
        elif request.method == "GET" and path.rstrip("/").endswith("/models"):
            self._write(entry)
            return JSONResponse(
                {
                    "object": "list",
                    "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "stand-in"}],
                    "models": [
                        {"name": f"models/{MODEL_NAME}", "supportedGenerationMethods": ["generateContent"]}
                    ],
                }
            )
        if turn is None:
            entry["note"] = "not an API the stand-in speaks: 404"
            self._write(entry)
            return JSONResponse({"error": {"message": f"stand-in: no such endpoint {path}"}}, status_code=404)
        turn.raw = "\n".join(_strings(body))
        reply, delay = self.script.decide(turn)
        entry["turn"] = {
            "api": turn.api,
            "tools": turn.tools,
            "calls": [vars(c) for c in turn.calls],
            "last_is_result": turn.last_is_result,
        }
        entry["seen"] = [vars(r) for r in turn.results]
        if turn.last_user_text:
            entry["notice"] = turn.last_user_text
        entry["reply"] = {
            "text": reply.text,
            "call": vars(reply.call) if reply.call else None,
            "json": reply.json_value,
            "delay_s": delay,
        }
        self._write(entry)
        if delay:
            await asyncio.sleep(delay)
        if turn.api == "anthropic":
            return _anthropic_reply(reply, bool(body.get("stream")), self.script)
        if turn.api == "responses":
            return _responses_reply(reply, self.script, turn)
        if turn.api == "chat":
            return _chat_reply(reply, bool(body.get("stream")), self.script)
        return _gemini_reply(reply, ":streamGenerateContent" in path, self.script)
