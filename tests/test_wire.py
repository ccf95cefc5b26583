"""The 2026-07-28 wire, asserted byte for byte with raw HTTP against a real ``longtools serve``."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from mcp_types import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from tests.wire import VERSION, error, headers_for, is_sse, meta, post, result, sse_messages


def test_discover_names_the_one_supported_version_and_the_server(mcp_url: str) -> None:
    """Spec-mandated: server/discover is implemented; serverInfo rides in the result _meta."""
    discovered = result(post(mcp_url, "server/discover"))
    assert discovered["resultType"] == "complete"
    assert discovered["supportedVersions"] == [VERSION]
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "longtools"
    assert set(discovered["capabilities"]) >= {"tools", "prompts", "resources", "completions"}


@pytest.mark.parametrize(
    "missing", ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]
)
def test_a_missing_required_meta_key_is_invalid_params_with_400(mcp_url: str, missing: str) -> None:
    """Spec-mandated (basic/index.mdx): missing per-request fields are -32602, HTTP 400."""
    params_meta = meta()
    del params_meta[missing]
    err = error(post(mcp_url, "tools/list", {"_meta": params_meta}), 400)
    assert err["code"] == INVALID_PARAMS


def test_no_meta_at_all_is_invalid_params_with_400(mcp_url: str) -> None:
    err = error(post(mcp_url, "tools/list", with_meta=False), 400)
    assert err["code"] == INVALID_PARAMS


@pytest.mark.parametrize("version", ["2099-01-01", "2026-01-01", "banana"])
def test_an_unsupported_version_is_refused_with_the_supported_list(mcp_url: str, version: str) -> None:
    """Spec-mandated: -32022 with data.supported and data.requested, HTTP 400. (A 2025-era version
    is served: tests/test_legacy.py.)"""
    params = {"_meta": {**meta(), "io.modelcontextprotocol/protocolVersion": version}}
    response = post(mcp_url, "tools/list", params, headers={"mcp-protocol-version": version})
    err = error(response, 400)
    assert err["code"] == UNSUPPORTED_PROTOCOL_VERSION
    assert err["data"] == {"supported": [VERSION], "requested": version}
    assert isinstance(response.json()["id"], int)


def test_a_version_header_that_disagrees_with_meta_is_a_header_mismatch(mcp_url: str) -> None:
    params = {"_meta": {**meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
    err = error(post(mcp_url, "tools/list", params), 400)
    assert err["code"] == HEADER_MISMATCH


def test_a_missing_version_header_is_a_header_mismatch(mcp_url: str) -> None:
    err = error(post(mcp_url, "tools/list", headers={"mcp-protocol-version": None}), 400)
    assert err["code"] == HEADER_MISMATCH


@pytest.mark.parametrize(
    ("override", "method", "params"),
    [
        ({"mcp-method": "tools/call"}, "tools/list", {}),
        ({"mcp-method": None}, "tools/list", {}),
        ({"mcp-name": "close_ticket"}, "tools/call", {"name": "echo", "arguments": {"text": "x"}}),
        ({"mcp-name": None}, "tools/call", {"name": "echo", "arguments": {"text": "x"}}),
    ],
)
def test_routing_headers_that_disagree_with_the_body_are_refused(
    mcp_url: str, override: dict[str, str | None], method: str, params: dict[str, object]
) -> None:
    """Spec-mandated (SEP-2243): Mcp-Method/Mcp-Name must equal the body, else -32020 and 400."""
    err = error(post(mcp_url, method, params, headers=override), 400)
    assert err["code"] == HEADER_MISMATCH


def _raw_post(url: httpx.URL, head: str, body: bytes) -> bytes:
    with socket.create_connection((url.host, url.port), timeout=10) as conn:
        conn.sendall(head.encode() + body)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_a_header_value_is_compared_without_its_surrounding_whitespace(mcp_url: str) -> None:
    """RFC 9110 section 5.5 (the suite's http-header-validation): whichever HTTP parser uvicorn uses."""
    params = {"name": "echo", "arguments": {"text": "x"}, "_meta": meta()}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    url = httpx.URL(mcp_url)
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\n"
        f"Mcp-Method:  tools/call \r\nMcp-Name: \techo \r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    # httpx refuses to send such a header, so the request is written by hand.
    answer = _raw_post(url, head, body)
    status, _, payload = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 200"), answer
    assert json.loads(payload)["result"]["structuredContent"] == {"text": "x"}


def test_a_refused_host_is_refused_next_to_an_allowed_one_after_allowed_requests(mcp_url: str) -> None:
    """DNS-rebinding guard (the SDK's transport security, which reads a request's first Host): the
    gate remembers the Host, Origin and Content-Type sets that passed, and two Host headers are
    another set than either alone. Ours (issue 35)."""
    assert post(mcp_url, "server/discover").status_code == 200
    params = {"_meta": meta()}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": params}).encode()
    url = httpx.URL(mcp_url)
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: evil.example.net\r\nHost: {url.host}:{url.port}\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: {VERSION}\r\nMcp-Method: server/discover\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    answer = _raw_post(url, head, body)
    assert answer.startswith(b"HTTP/1.1 421"), answer
    assert post(mcp_url, "server/discover", headers={"host": "evil.example.net"}).status_code == 421


def test_an_unknown_method_is_method_not_found_with_404(mcp_url: str) -> None:
    err = error(post(mcp_url, "tools/explode"), 404)
    assert err["code"] == METHOD_NOT_FOUND


@pytest.mark.parametrize("method", ["tasks/list", "tasks/result", "ping", "logging/setLevel"])
def test_removed_and_unserved_methods_are_method_not_found(mcp_url: str, method: str) -> None:
    err = error(post(mcp_url, method), 404)
    assert err["code"] == METHOD_NOT_FOUND


@pytest.mark.parametrize("verb", ["GET", "DELETE", "PUT"])
def test_only_post_is_served_on_the_endpoint(mcp_url: str, verb: str) -> None:
    """Spec: 405 to GET and DELETE (no standalone stream; a sealed 2025-era session is not revoked)."""
    response = httpx.request(verb, mcp_url, headers={"mcp-protocol-version": VERSION})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_a_session_id_is_ignored_and_never_minted(mcp_url: str) -> None:
    response = post(mcp_url, "tools/list", headers={"mcp-session-id": "abc"})
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers


def test_a_notification_is_accepted_with_202(mcp_url: str) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = httpx.post(
        mcp_url,
        json=body,
        headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": VERSION},
    )
    assert response.status_code == 202


def test_an_unknown_tool_is_invalid_params(mcp_url: str) -> None:
    err = error(post(mcp_url, "tools/call", {"name": "no_such_tool", "arguments": {}}), 400)
    assert err["code"] == INVALID_PARAMS


def test_bad_arguments_are_a_tool_error_the_model_can_read(mcp_url: str) -> None:
    """SEP-1303: input validation failures are tool execution errors (isError), not protocol errors."""
    called = result(post(mcp_url, "tools/call", {"name": "close_ticket", "arguments": {"ticketId": "a b/c"}}))
    assert called["isError"] is True
    assert "ticketId" in called["content"][0]["text"]


def test_echo_returns_structured_content_matching_its_output_schema(mcp_url: str) -> None:
    called = result(post(mcp_url, "tools/call", {"name": "echo", "arguments": {"text": "héllo"}}))
    assert called["resultType"] == "complete"
    assert called["structuredContent"] == {"text": "héllo"}
    assert called["isError"] is False
    listed = result(post(mcp_url, "tools/list"))["tools"]
    echo = next(tool for tool in listed if tool["name"] == "echo")
    assert echo["inputSchema"]["required"] == ["text"]
    assert echo["outputSchema"]["properties"]["text"]["type"] == "string"


def test_an_oversized_body_is_refused_with_a_clear_jsonrpc_error(mcp_url: str) -> None:
    big = "x" * (1_048_576 + 10)
    response = post(mcp_url, "tools/call", {"name": "echo", "arguments": {"text": big}})
    err = error(response, 413)
    assert err["code"] == INVALID_REQUEST
    assert "too large" in err["message"]


def test_an_oversized_request_state_is_refused_with_a_clear_error(mcp_url: str) -> None:
    params = {"name": "close_ticket", "arguments": {"ticketId": "T-9"}, "requestState": "v1." + "A" * 20_000}
    err = error(post(mcp_url, "tools/call", params), 400)
    assert err["code"] == INVALID_PARAMS
    assert "requestState is larger than" in err["message"]


def _open_ticket(url: str) -> str:
    arguments = {"title": "Printer on fire", "customer": "acme"}
    made = result(post(url, "tools/call", {"name": "create_ticket", "arguments": arguments}))
    ticket: str = made["structuredContent"]["ticketId"]
    return ticket


def test_an_undeclared_input_kind_is_never_sent(mcp_url: str) -> None:
    """Spec-mandated (mrtr.mdx): no inputRequests entry the client has no capability for."""
    no_elicitation: dict[str, object] = {"sampling": {}, "roots": {}}
    called = result(
        post(
            mcp_url,
            "tools/call",
            {"name": "close_ticket", "arguments": {"ticketId": _open_ticket(mcp_url)}},
            caps=no_elicitation,
        )
    )
    assert called["resultType"] == "complete"
    assert called["isError"] is True
    assert "elicitation" in called["content"][0]["text"]


def test_a_url_only_elicitation_client_gets_no_form_request(mcp_url: str) -> None:
    called = result(
        post(
            mcp_url,
            "tools/call",
            {"name": "close_ticket", "arguments": {"ticketId": _open_ticket(mcp_url)}},
            caps={"elicitation": {"url": {}}},
        )
    )
    assert called["isError"] is True
    assert "elicitation" in called["content"][0]["text"]


def test_input_required_is_never_returned_on_list_methods(mcp_url: str) -> None:
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        assert result(post(mcp_url, method))["resultType"] == "complete"


def test_missing_capability_is_minus_32021_with_required_capabilities(mcp_url: str) -> None:
    """A fixture tool that can only ask by sampling, called without sampling, says what it needs."""
    called = post(
        mcp_url, "tools/call", {"name": "test_input_required_result_sampling", "arguments": {}}, caps={}
    )
    err = error(called, 400)
    assert err["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert err["data"]["requiredCapabilities"] == {"sampling": {}}


def test_progress_streams_as_sse_and_ends_with_the_result(mcp_url: str) -> None:
    params = {
        "name": "test_tool_with_progress",
        "arguments": {},
        "_meta": meta(progressToken="p-1"),
    }
    response = post(mcp_url, "tools/call", params)
    assert response.status_code == 200
    assert is_sse(response)
    messages = sse_messages(response)
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert len(progress) >= 2
    assert all(m["params"]["progressToken"] == "p-1" for m in progress)
    assert messages[-1]["result"]["resultType"] == "complete"


def test_a_progress_token_spelled_with_an_escape_still_streams(mcp_url: str) -> None:
    """Ours (issue 35): the gate does not parse a body that spells no key asking for a stream; one
    that spells it with a JSON escape is parsed, and streams as the SDK reads it."""
    params = {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta(progressToken="p-2")}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    escaped = body.replace('"progressToken"', '"progress\\u0054oken"')
    assert escaped != body
    response = httpx.post(mcp_url, content=escaped, headers=headers_for("tools/call", params), timeout=30)
    assert is_sse(response)
    messages = sse_messages(response)
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert progress and all(m["params"]["progressToken"] == "p-2" for m in progress)
    assert messages[-1]["result"]["resultType"] == "complete"


def test_without_progress_token_the_same_tool_answers_plain_json(mcp_url: str) -> None:
    response = post(mcp_url, "tools/call", {"name": "test_tool_with_progress", "arguments": {}})
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["result"]["resultType"] == "complete"


def test_a_tool_whose_every_question_is_undeclared_says_all_it_needs(mcp_url: str) -> None:
    """Ours: rather than a state-only round the client would retry forever, -32021 naming every kind."""
    called = post(
        mcp_url, "tools/call", {"name": "test_input_required_result_capabilities", "arguments": {}}, caps={}
    )
    err = error(called, 400)
    assert err["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert err["data"]["requiredCapabilities"] == {"elicitation": {}, "sampling": {}}


def test_only_the_declared_kinds_are_asked_for(mcp_url: str) -> None:
    called = post(
        mcp_url,
        "tools/call",
        {"name": "test_input_required_result_capabilities", "arguments": {}},
        caps={"sampling": {}},
    )
    asked = result(called)
    assert asked["resultType"] == "input_required"
    assert {request["method"] for request in asked["inputRequests"].values()} == {"sampling/createMessage"}


def test_a_chunked_oversized_body_is_refused_without_a_server_error(mcp_url: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{},"pad":"'
        for _ in range(40):
            yield b"x" * 32_768
        yield b'"}}'

    response = httpx.post(mcp_url, content=chunks(), headers=headers_for("tools/list", {}))
    assert response.status_code == 413
    assert "too large" in response.text.lower()


def test_a_tools_log_reaches_a_2026_client_only_at_the_level_it_asked_for(mcp_url: str) -> None:
    """Spec (2026-07-28 logging): log delivery is a per-request opt-in (``_meta`` logLevel), on the
    request's own stream; absent means none. ``rnd.log`` sends at info."""
    quiet = post(mcp_url, "tools/call", {"name": "test_tool_with_logging"})
    assert not is_sse(quiet)
    asked = {
        "name": "test_tool_with_logging",
        "_meta": {**meta(), "io.modelcontextprotocol/logLevel": "info"},
    }
    loud = post(mcp_url, "tools/call", asked)
    logged = [
        message["params"]
        for message in sse_messages(loud)
        if message.get("method") == "notifications/message"
    ]
    assert [entry["data"] for entry in logged] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert {entry["level"] for entry in logged} == {"info"}
    too_high = {
        "name": "test_tool_with_logging",
        "_meta": {**meta(), "io.modelcontextprotocol/logLevel": "error"},
    }
    assert not [
        m
        for m in sse_messages(post(mcp_url, "tools/call", too_high))
        if m.get("method") == "notifications/message"
    ]
