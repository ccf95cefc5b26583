"""The official ``mcp`` client (2.3.x) against a real ``longtools serve``: negotiation and MRTR."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import (
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
    Root,
    TextContent,
)


class Recorder:
    """Client callbacks that answer like a person would and remember what they were asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        properties = getattr(params, "requested_schema", {}).get("properties", {})
        if "reason" in properties:
            return ElicitResult(action="accept", content={"reason": "Resolved"})
        content: dict[str, Any] = {}
        for name, prop in properties.items():
            content[name] = True if prop.get("type") == "boolean" else "Ada"
        return ElicitResult(action="accept", content=content)

    async def sample(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        self.asked.append("sampling")
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="Paris"), model="test"
        )

    async def roots(self, context: ClientRequestContext) -> ListRootsResult:
        self.asked.append("roots")
        return ListRootsResult(roots=[Root.model_validate({"uri": "file:///work", "name": "work"})])


def _client(url: str, recorder: Recorder) -> Client:
    return Client(
        url,
        elicitation_callback=recorder.elicit,
        sampling_callback=recorder.sample,
        list_roots_callback=recorder.roots,
    )


async def test_auto_mode_negotiates_2026_07_28_without_initialize(server: Any) -> None:
    """The client probes server/discover and stays modern: no fallback to the initialize handshake."""
    logged_before = len(server.log_text())  # the server is shared: 2025-era tests initialize on it
    with anyio.fail_after(30):
        async with _client(server.url, Recorder()) as client:
            assert client.protocol_version == "2026-07-28"
            tools = await client.list_tools()
    names = {tool.name for tool in tools.tools}
    assert {"echo", "create_ticket", "get_ticket", "close_ticket", "bulk_close_tickets"} <= names
    assert '"initialize"' not in server.log_text()[logged_before:]


async def test_a_multi_round_call_completes_through_the_callbacks(server: Any) -> None:
    recorder = Recorder()
    with anyio.fail_after(30):
        async with _client(server.url, recorder) as client:
            result = await client.call_tool("test_input_required_result_multi_round", {})
    assert isinstance(result, CallToolResult)
    assert result.is_error is not True
    assert len(recorder.asked) >= 2


async def _new_ticket(client: Client) -> str:
    made = await client.call_tool("create_ticket", {"title": "Printer on fire", "customer": "acme"})
    assert made.structured_content is not None
    ticket: str = made.structured_content["ticketId"]
    return ticket


async def test_close_ticket_asks_the_reason_then_closes(server: Any) -> None:
    recorder = Recorder()
    with anyio.fail_after(30):
        async with _client(server.url, recorder) as client:
            ticket = await _new_ticket(client)
            result = await client.call_tool("close_ticket", {"ticketId": ticket})
    assert recorder.asked == [f"Why is ticket {ticket} being closed?"]
    assert result.structured_content is not None
    assert result.structured_content["ticketId"] == ticket
    assert result.structured_content["status"] == "closed"
    assert result.structured_content["closeReason"] == "Resolved"


async def test_every_input_kind_is_answered_in_one_round(server: Any) -> None:
    recorder = Recorder()
    with anyio.fail_after(30):
        async with _client(server.url, recorder) as client:
            result = await client.call_tool("test_input_required_result_multiple_inputs", {})
    assert result.is_error is not True
    assert {"sampling", "roots"} <= set(recorder.asked)


async def test_each_round_has_the_raw_shape_the_spec_gives(server: Any) -> None:
    """allow_input_required=True: the client hands back every round as it came off the wire."""
    with anyio.fail_after(30):
        async with _client(server.url, Recorder()) as client:
            ticket = await _new_ticket(client)
            first = await client.session.call_tool(
                "close_ticket", {"ticketId": ticket}, allow_input_required=True
            )
            assert isinstance(first, InputRequiredResult)
            assert first.result_type == "input_required"
            assert first.input_requests is not None
            question = first.input_requests["close_reason"]
            assert question.method == "elicitation/create"
            schema = question.params.model_dump(by_alias=True)["requestedSchema"]
            assert schema["properties"]["reason"]["enum"] == ["Resolved", "Duplicate", "Cancelled"]
            assert first.request_state is not None and first.request_state.startswith("v1.")

            # A round that answers nothing: the same question again, under a fresh state.
            again = await client.session.call_tool(
                "close_ticket",
                {"ticketId": ticket},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(again, InputRequiredResult)
            assert again.input_requests is not None and set(again.input_requests) == {"close_reason"}
            assert again.request_state not in (None, first.request_state)

            final = await client.session.call_tool(
                "close_ticket",
                {"ticketId": ticket},
                input_responses={
                    "close_reason": ElicitResult(action="accept", content={"reason": "Cancelled"})
                },
                request_state=again.request_state,
                allow_input_required=True,
            )
    assert isinstance(final, CallToolResult)
    assert final.result_type == "complete"
    assert final.structured_content is not None
    assert final.structured_content["ticketId"] == ticket
    assert final.structured_content["status"] == "closed"
    assert final.structured_content["closeReason"] == "Cancelled"


async def test_a_prompt_asks_through_the_same_loop(server: Any) -> None:
    recorder = Recorder()
    with anyio.fail_after(30):
        async with _client(server.url, recorder) as client:
            prompt = await client.get_prompt("test_input_required_result_prompt")
    assert recorder.asked == ["What context should the prompt use?"]
    content = prompt.messages[0].content
    assert isinstance(content, TextContent) and content.text == "Prompt with context: Ada"


async def test_resources_and_templates_read_through_the_client(server: Any) -> None:
    with anyio.fail_after(30):
        async with _client(server.url, Recorder()) as client:
            listed = await client.list_resources()
            templated = await client.read_resource("test://template/42/data")
    assert [str(res.uri) for res in listed.resources][:2] == ["test://static-text", "test://static-binary"]
    text = templated.contents[0]
    assert getattr(text, "text", "") == '{"id":"42","templateTest":true,"data":"Data for ID: 42"}'
