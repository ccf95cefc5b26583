"""The load generator for a 2025-era client (B1L, B2L): `bench.load`'s client, with a session.

Run as ``python -m bench.legacy_load`` with `bench.load.Spec` on stdin; it prints one JSON object.
Standard library only, like `bench.load`, whose connections, parsing and measured window it uses.

Each client opens a session once, outside the window: ``initialize`` (protocol 2025-11-25, form
elicitation declared, no version header yet), then ``notifications/initialized``. Every later
request carries ``MCP-Protocol-Version: 2025-11-25`` and the ``Mcp-Session-Id`` the server gave
(none when it gave none: the SDK's stateless shape keeps no session), and a new JSON-RPC id.

- ``legacy-call`` (B1L): one keep-alive connection per client; ``tools/call`` back to back, each
  answer read whole (JSON or an SSE stream) and checked for HTTP 200 and the text.
- ``legacy-elicit`` (B2L): two keep-alive connections per client. The ``tools/call`` is answered
  with an SSE stream, read event by event on the first connection: it carries the server's
  ``elicitation/create``, and later the result. The answer to the question is a separate POST
  (its body the JSON-RPC response, accepting ``{"confirm": true}``), sent on the second
  connection, because the first is busy with the stream until the result ends it. An exchange
  lasts from sending the call until both the result and the answer's 202 have arrived.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

from bench.load import (
    Connection,
    Failed,
    Flows,
    Response,
    Spec,
    check_complete,
    header,
    main,
    measure,
    message,
    result_of,
)

VERSION: Final = "2025-11-25"
CLIENT_CAPABILITIES: Final[dict[str, Any]] = {"elicitation": {"form": {}}}
KINDS: Final = ("legacy-call", "legacy-elicit")
_ACCEPT: Final = {"action": "accept", "content": {"confirm": True}}
_CHUNK_LIMIT: Final = 1 << 20  # no answer here comes near it: a bigger chunk is a broken stream


def post(spec: Spec, session: str | None, body: bytes, *, handshake: bool = False) -> bytes:
    """One raw 2025-era POST. ``initialize`` (``handshake``) carries no version header: the
    client learns the version from its answer."""
    head = (
        f"POST {spec.path} HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{spec.port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        + ("" if handshake else f"MCP-Protocol-Version: {VERSION}\r\n")
        + ("" if session is None else f"Mcp-Session-Id: {session}\r\n")
        + f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class Template:
    """A message pre-built around the one part that changes, its JSON-RPC id."""

    def __init__(self, spec: Spec, session: str | None, rest: dict[str, Any]) -> None:
        self._spec = spec
        self._session = session
        self._prefix = b'{"jsonrpc":"2.0","id":'
        self._suffix = b"," + json.dumps(rest, separators=(",", ":")).encode()[1:]

    def build(self, request_id: object) -> bytes:
        body = self._prefix + json.dumps(request_id).encode() + self._suffix
        return post(self._spec, self._session, body)


def call_template(spec: Spec, session: str | None) -> Template:
    params = {"name": spec.tool, "arguments": {"text": spec.text}}
    return Template(spec, session, {"method": "tools/call", "params": params})


def answer_template(spec: Spec, session: str | None) -> Template:
    return Template(spec, session, {"result": _ACCEPT})


async def open_session(conn: Connection, spec: Spec) -> tuple[str | None, dict[str, Any]]:
    """``initialize`` and ``notifications/initialized`` on ``conn``: the session id the server
    gave (None when it keeps no session) and its initialize result."""
    params = {
        "protocolVersion": VERSION,
        "capabilities": CLIENT_CAPABILITIES,
        "clientInfo": {"name": "longtools-bench", "version": "0"},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    await conn.send(post(spec, None, body.encode(), handshake=True))
    response = await conn.receive()
    result = result_of(response)
    if result.get("protocolVersion") != VERSION:
        raise Failed(f"initialize did not agree on {VERSION}: {json.dumps(result)[:300]}")
    session = header(response.head, b"mcp-session-id")
    notice = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await conn.send(post(spec, session, notice.encode()))
    acknowledged = await conn.receive()
    if acknowledged.status != 202:
        raise Failed(f"notifications/initialized: HTTP {acknowledged.status} {acknowledged.body[:200]!r}")
    return session, result


class Stream:
    """One answer read message by message: an SSE stream (chunked) as its events arrive, or a JSON
    body as its one message. The connection is reusable once `next` has returned None."""

    def __init__(self, reader: asyncio.StreamReader, head: bytes) -> None:
        self._reader = reader
        lower = head.lower()
        self.status = int(head[9:12])
        self._sse = b"\r\ncontent-type: text/event-stream" in lower
        self._chunked = b"\r\ntransfer-encoding: chunked" in lower
        self._length = header(head, b"content-length")
        self._buffer = b""
        self._ended = False

    @classmethod
    async def open(cls, conn: Connection) -> Stream:
        reader = conn.reader
        return cls(reader, await reader.readuntil(b"\r\n\r\n"))

    async def next(self) -> dict[str, Any] | None:
        """The next JSON-RPC message, or None at the end of the answer."""
        if not self._sse:
            if self._ended:
                return None
            self._ended = True
            if self._length is None:
                raise Failed(f"HTTP {self.status}: a JSON answer without Content-Length")
            body = await self._reader.readexactly(int(self._length))
            return message(Response(self.status, body))
        while True:
            end = self._buffer.find(b"\n\n")
            if end >= 0:
                event, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
                data = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
                if data and any(data):  # comments (pings) and a priming event carry no message
                    return message(Response(self.status, b"\n".join(data)))
                continue
            if self._ended:
                if self._buffer.strip():
                    raise Failed(f"an SSE stream ended inside an event: {self._buffer[:200]!r}")
                return None
            piece = await self._piece()
            if piece:
                self._buffer += piece.replace(b"\r\n", b"\n")

    async def _piece(self) -> bytes:
        if not self._chunked:
            raise Failed("an SSE answer that is not chunked")
        size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size > _CHUNK_LIMIT:
            raise Failed(f"an SSE chunk of {size} bytes")
        if size == 0:
            await self._reader.readuntil(b"\r\n")  # no trailers: the blank line ends the body
            self._ended = True
            return b""
        return (await self._reader.readexactly(size + 2))[:-2]


def question_id(pushed: dict[str, Any]) -> object:
    """The id of a pushed ``elicitation/create`` that asks the ``confirm`` form question."""
    params = pushed.get("params")
    if pushed.get("method") != "elicitation/create" or "id" not in pushed or not isinstance(params, dict):
        raise Failed(f"not an elicitation/create request: {json.dumps(pushed)[:300]}")
    schema = params.get("requestedSchema")
    fields = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(fields, dict) or fields.get("confirm", {}).get("type") != "boolean":
        raise Failed(f"the confirm question is missing: {json.dumps(pushed)[:300]}")
    if params.get("mode", "form") != "form":
        raise Failed(f"not a form elicitation: {json.dumps(pushed)[:300]}")
    return pushed["id"]


class Client:
    """One 2025-era client: its session and connections, and its next JSON-RPC id."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.conn = Connection(spec.port)
        self.back = Connection(spec.port)  # legacy-elicit: the answers' POSTs
        self.next_id = 1
        self.session: str | None = None
        self.opened: dict[str, Any] = {}
        self.call = call_template(spec, None)
        self.answer = answer_template(spec, None)

    async def open(self) -> None:
        self.session, self.opened = await open_session(self.conn, self.spec)
        self.call = call_template(self.spec, self.session)
        self.answer = answer_template(self.spec, self.session)

    async def call_once(self) -> Response:
        """legacy-call: one ``tools/call``, its answer read whole."""
        self.next_id += 1
        await self.conn.send(self.call.build(self.next_id))
        return await self.conn.receive()

    async def exchange(self, record: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """legacy-elicit: one ``tools/call`` whose stream asks ``confirm``, answered at once; its
        final message (checked to answer this call). ``record`` collects each message."""
        self.next_id += 1
        call_id = self.next_id
        await self.conn.send(self.call.build(call_id))
        stream = await Stream.open(self.conn)
        if stream.status != 200:
            raise Failed(f"HTTP {stream.status} to tools/call: {await stream.next()}")
        pushed = await stream.next()
        if pushed is None:
            raise Failed("the stream ended without a question")
        await self.back.send(self.answer.build(question_id(pushed)))
        final = await stream.next()
        rest = await stream.next()
        acknowledged = await self.back.receive()
        if record is not None:
            record += [pushed, {"answer_status": acknowledged.status}, final or {}]
        if acknowledged.status != 202:
            raise Failed(f"the answer: HTTP {acknowledged.status} {acknowledged.body[:200]!r}")
        if final is None or final.get("id") != call_id or rest is not None:
            raise Failed(f"not the one answer to the call: {json.dumps(final)[:300]}, then {rest}")
        return final

    def close(self) -> None:
        self.conn.close()
        self.back.close()


class LegacyRun(Flows["Client"]):
    """B1L and B2L: each connection is a client with a session of its own."""

    def __init__(self, spec: Spec) -> None:
        if spec.kind not in KINDS:
            raise Failed(f"unknown kind {spec.kind!r}: {', '.join(KINDS)}")
        super().__init__(spec)

    async def open(self) -> Client:
        client = Client(self.spec)
        try:
            await client.open()  # in the warm-up: a client opens its session once
        except BaseException:
            client.close()
            raise
        return client

    async def one(self, client: Client) -> bool:
        if self.spec.kind == "legacy-call":
            response = await client.call_once()
            if response.status != 200 or self.expect not in response.body:
                self._error(f"HTTP {response.status} {response.body[:200]!r}")
                return False
            return True
        try:
            final = await client.exchange()
        except (Failed, ValueError) as exc:
            self._error(str(exc))
            client.close()  # a broken exchange leaves the stream half read: start both afresh
            return False
        if self.expect not in json.dumps(final.get("result")).encode():
            self._error(f"not the text: {json.dumps(final)[:200]}")
            return False
        return True

    def close(self, client: Client) -> None:
        client.close()


async def check(spec: Spec) -> dict[str, Any]:
    """One client, one operation, every answer validated in full; the answers, for the record."""
    if spec.kind not in KINDS:
        raise Failed(f"unknown kind {spec.kind!r}: {', '.join(KINDS)}")
    client = Client(spec)
    try:
        await client.open()
        answers: list[dict[str, Any]] = [{"initialize": client.opened, "session": client.session is not None}]
        if spec.kind == "legacy-call":
            result = result_of(await client.call_once())
            answers.append(result)
        else:
            final = await client.exchange(answers)
            if not isinstance(final.get("result"), dict):
                raise Failed(f"no result: {json.dumps(final)[:300]}")
            result = final["result"]
        check_complete(result, spec.text)
    finally:
        client.close()
    return {"ok": True, "answers": answers}


async def timed(spec: Spec) -> dict[str, Any]:
    return await measure(LegacyRun(spec), spec)


if __name__ == "__main__":
    main(check, timed)
