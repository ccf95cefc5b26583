"""Fixtures the official MCP conformance suite's server scenarios call. API process.

Served only with ``--conformance-fixtures``. Names, arguments and literal outputs follow the
suite's scenarios (``@modelcontextprotocol/conformance`` 0.2.0-alpha.12) and its reference
everything-server; they exist to be checked, not used.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import anyio
from mcp_types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    InputRequiredResult,
    PromptArgument,
    PromptMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, ConfigDict, Field

from longtools.tools._registry import (
    Prompt,
    Registry,
    Resource,
    ResourceContent,
    ResourceTemplate,
    Tool,
    ToolError,
    ToolHandler,
    ToolReturn,
)
from longtools.tools._round import Round, missing_capability
from longtools.workflows._inputs import elicit, list_roots, sample
from longtools.workflows.conformance import (
    ConfirmDelete,
    DeleteInput,
    FailingJob,
    GreetInput,
    GreetTask,
    MultiInput,
    NoInput,
    ProtocolErrorJob,
    SlowCompute,
    SlowComputeInput,
)

# A 1x1 PNG and a minimal RIFF/WAVE, as the suite's reference server sends them.
PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


class NoArgs(BaseModel):
    """A tool without arguments."""


class HeaderArgs(BaseModel):
    """SEP-2243: ``region`` is mirrored in the ``Mcp-Param-Region`` header, which must match it."""

    region: str = Field(json_schema_extra={"x-mcp-header": "Region"})


# SEP-1613 / SEP-2106: the schema a server emits must keep the full 2020-12 vocabulary.
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


class Contact(BaseModel):
    """Accepts what the 2020-12 schema describes (the tool lists that schema verbatim)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    address: dict[str, str] | None = None
    contactMethod: str | None = None
    phone: str | None = None
    email: str | None = None


class NameForm(BaseModel):
    name: str


class ConfirmForm(BaseModel):
    ok: bool


class ColorForm(BaseModel):
    color: str


class ContextForm(BaseModel):
    context: str


# The 2025 era's elicitation scenarios (their questions are pushed; the answers are fixed).
class PromptArgs(BaseModel):
    prompt: str


class MessageArgs(BaseModel):
    message: str


class InfoForm(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


class DefaultsForm(BaseModel):
    """SEP-1034: every primitive field carries a default."""

    name: str = Field("John Doe", description="User name")
    age: int = Field(30, description="User age")
    score: float = Field(95.5, description="User score")
    status: Literal["active", "inactive", "pending"] = Field("active", description="User status")
    verified: bool = Field(True, description="Verification status")


def _choices(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


# SEP-1330: the five enum shapes, as raw schema (a pydantic model cannot emit oneOf or enumNames).
ENUMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Pick one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Pick one titled option",
            "oneOf": _choices(
                ("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")
            ),
        },
        "legacyEnum": {
            "type": "string",
            "description": "Pick one (legacy enumNames)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Pick several options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Pick several titled options",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": _choices(
                    ("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")
                )
            },
        },
    },
    "required": [],
}


class EnumsAnswer(BaseModel):
    untitledSingle: str | None = None
    titledSingle: str | None = None
    legacyEnum: str | None = None
    untitledMulti: list[str] | None = None
    titledMulti: list[str] | None = None


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def _content(*blocks: ContentBlock, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=list(blocks), is_error=is_error)


def _image() -> ImageContent:
    return ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")


def _embedded(uri: str, mime_type: str, text: str) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    )


async def _simple_text(args: NoArgs, rnd: Round) -> ToolReturn:
    return _content(_text("This is a simple text response for testing."))


async def _image_content(args: NoArgs, rnd: Round) -> ToolReturn:
    return _content(_image())


async def _audio_content(args: NoArgs, rnd: Round) -> ToolReturn:
    return _content(AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav"))


async def _embedded_resource(args: NoArgs, rnd: Round) -> ToolReturn:
    return _content(
        _embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    )


async def _multiple_content_types(args: NoArgs, rnd: Round) -> ToolReturn:
    return _content(
        _text("Multiple content types test:"),
        _image(),
        _embedded("test://mixed-content-resource", "application/json", '{"test":"data","value":123}'),
    )


async def _error_handling(args: NoArgs, rnd: Round) -> ToolReturn:
    raise ToolError("This tool intentionally returns an error for testing")


async def _with_progress(args: NoArgs, rnd: Round) -> ToolReturn:
    for step in (0, 50, 100):
        await rnd.progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await anyio.sleep(0.05)
    token = rnd.progress_token
    return _content(_text(str(token if token is not None else 0)))


async def _missing_capability(args: NoArgs, rnd: Round) -> ToolReturn:
    needed = sample("Any question", max_tokens=10)
    if not rnd.supports(needed):
        raise missing_capability(needed)
    return _content(_text("Success"))


async def _logging_tool(args: NoArgs, rnd: Round) -> ToolReturn:
    return _content(_text("This tool sends no log notifications unless a log level is requested."))


async def _with_logging(args: NoArgs, rnd: Round) -> ToolReturn:
    for step, text in enumerate(
        ("Tool execution started", "Tool processing data", "Tool execution completed")
    ):
        if step:
            await anyio.sleep(0.05)
        await rnd.log("info", text)
    return _content(_text("Tool with logging executed successfully"))


async def _sampling_prompt(args: PromptArgs, rnd: Round) -> ToolReturn:
    answer = rnd.sampled("sampling")
    if answer is None:
        return rnd.ask({"sampling": sample(args.prompt, max_tokens=100)})
    text = answer.content.text if isinstance(answer.content, TextContent) else ""
    return _content(_text(f"LLM response: {text}"))


def _elicited_text(
    rnd: Round, key: str, message: str, form: type[BaseModel] | Mapping[str, Any], answer: type[BaseModel]
) -> ToolReturn:
    got = rnd.elicited(key, answer)
    if got is None:
        return rnd.ask({key: elicit(message, form)})
    content = got.content.model_dump(mode="json", exclude_none=True) if got.content is not None else None
    return _content(_text(f"Elicitation completed: action={got.action}, content={content}"))


async def _elicitation_message(args: MessageArgs, rnd: Round) -> ToolReturn:
    return _elicited_text(rnd, "info", args.message, InfoForm, InfoForm)


async def _elicitation_defaults(args: NoArgs, rnd: Round) -> ToolReturn:
    message = "Please review and update the form fields with defaults"
    return _elicited_text(rnd, "defaults", message, DefaultsForm, DefaultsForm)


async def _elicitation_enums(args: NoArgs, rnd: Round) -> ToolReturn:
    return _elicited_text(
        rnd, "enums", "Please select options from the enum fields", ENUMS_SCHEMA, EnumsAnswer
    )


async def _elicitation(args: NoArgs, rnd: Round) -> ToolReturn:
    answer = rnd.elicited("user_name", NameForm)
    if answer is None or answer.content is None:
        return rnd.ask({"user_name": elicit("What is your name?", NameForm)})
    return _content(_text(f"Hello, {answer.content.name}!"))


async def _sampling(args: NoArgs, rnd: Round) -> ToolReturn:
    answer = rnd.sampled("capital_question")
    if answer is None:
        return rnd.ask({"capital_question": sample("What is the capital of France?", max_tokens=100)})
    text = answer.content.text if isinstance(answer.content, TextContent) else ""
    return _content(_text(f"Sampling result: {text}"))


async def _list_roots(args: NoArgs, rnd: Round) -> ToolReturn:
    answer = rnd.roots("client_roots")
    if answer is None:
        return rnd.ask({"client_roots": list_roots()})
    return _content(_text(f"Found {len(answer.roots)} root(s)"))


async def _request_state(args: NoArgs, rnd: Round) -> ToolReturn:
    answer = rnd.elicited("confirm", ConfirmForm) if rnd.request_state == "awaiting-confirm" else None
    if answer is None:
        return rnd.ask({"confirm": elicit("Please confirm", ConfirmForm)}, state="awaiting-confirm")
    return _content(_text("state-ok: requestState validated"))


async def _multiple_inputs(args: NoArgs, rnd: Round) -> ToolReturn:
    name = rnd.elicited("user_name", NameForm) if rnd.request_state == "awaiting-all" else None
    greeting = rnd.sampled("greeting")
    roots = rnd.roots("client_roots")
    if name is None or name.content is None or greeting is None or roots is None:
        return rnd.ask(
            {
                "user_name": elicit("What is your name?", NameForm),
                "greeting": sample("Generate a greeting", max_tokens=50),
                "client_roots": list_roots(),
            },
            state="awaiting-all",
        )
    text = greeting.content.text if isinstance(greeting.content, TextContent) else ""
    return _content(_text(f"Name: {name.content.name}; Greeting: {text}; Roots: {len(roots.roots)}"))


async def _multi_round(args: NoArgs, rnd: Round) -> ToolReturn:
    # The state names the step and, from step 2 on, the name already given; a nonce makes every
    # round's state distinct even when the same step is asked again.
    step, _, name = (rnd.request_state or "").partition(":")
    if step.startswith("step2") and name:
        color = rnd.elicited("step2", ColorForm)
        if color is not None and color.content is not None:
            return _content(_text(f"Multi-round complete for {name} who likes {color.content.color}"))
    elif step.startswith("step1"):
        first = rnd.elicited("step1", NameForm)
        name = first.content.name if first is not None and first.content is not None else ""
    if not name:
        return rnd.ask(
            {"step1": elicit("Step 1: What is your name?", NameForm)}, state=f"step1.{secrets.token_hex(4)}:"
        )
    return rnd.ask(
        {"step2": elicit("Step 2: What is your favorite color?", ColorForm)},
        state=f"step2.{secrets.token_hex(4)}:{name}",
    )


async def _capabilities(args: NoArgs, rnd: Round) -> ToolReturn:
    if rnd.request_state == "asked" and (rnd.input_responses.keys() & {"elicit_input", "sample_input"}):
        return _content(_text(f"Received: {', '.join(sorted(rnd.input_responses))}"))
    return rnd.ask(
        {
            "elicit_input": elicit("What is your name?", NameForm),
            "sample_input": sample("Sample request", max_tokens=50),
        },
        state="asked",
    )


_TOOLS: Sequence[tuple[str, str, ToolHandler]] = (
    ("test_simple_text", "Returns simple text content.", _simple_text),
    ("test_image_content", "Returns image content.", _image_content),
    ("test_audio_content", "Returns audio content.", _audio_content),
    ("test_embedded_resource", "Returns an embedded resource.", _embedded_resource),
    ("test_multiple_content_types", "Returns text, image and resource content.", _multiple_content_types),
    ("test_error_handling", "Always returns a tool error.", _error_handling),
    ("test_tool_with_progress", "Reports progress 0, 50, 100 before answering.", _with_progress),
    ("test_missing_capability", "Needs the sampling client capability.", _missing_capability),
    # The 2026-07-28 way to ask mid-call is an MRTR round, never a request on the response stream.
    ("test_streaming_elicitation", "Asks for a name through MRTR.", _elicitation),
    ("test_logging_tool", "Sends no log notification unless asked to.", _logging_tool),
    ("test_input_required_result_elicitation", "MRTR: asks for a name.", _elicitation),
    ("test_input_required_result_sampling", "MRTR: asks the client to sample.", _sampling),
    ("test_input_required_result_list_roots", "MRTR: asks for the client's roots.", _list_roots),
    ("test_input_required_result_request_state", "MRTR: round-trips requestState.", _request_state),
    ("test_input_required_result_multiple_inputs", "MRTR: three kinds of input at once.", _multiple_inputs),
    ("test_input_required_result_multi_round", "MRTR: two questions over three rounds.", _multi_round),
    # Same flow as request_state: the server seals the state, so a tampered echo never reaches it.
    ("test_input_required_result_tampered_state", "MRTR: rejects a tampered requestState.", _request_state),
    ("test_input_required_result_capabilities", "MRTR: asks only what the client declared.", _capabilities),
    # The 2025 era's: sent as log notifications and pushed questions on the call's stream.
    ("test_tool_with_logging", "Logs three info messages while it runs.", _with_logging),
    ("test_elicitation_sep1034_defaults", "Asks a form whose fields have defaults.", _elicitation_defaults),
    ("test_elicitation_sep1330_enums", "Asks a form with every enum shape.", _elicitation_enums),
)


async def _simple_prompt(arguments: Mapping[str, str], rnd: Round) -> Sequence[PromptMessage]:
    return [PromptMessage(role="user", content=_text("This is a simple prompt for testing."))]


async def _prompt_with_arguments(arguments: Mapping[str, str], rnd: Round) -> Sequence[PromptMessage]:
    text = f"Prompt with arguments: arg1='{arguments['arg1']}', arg2='{arguments['arg2']}'"
    return [PromptMessage(role="user", content=_text(text))]


async def _prompt_with_embedded_resource(arguments: Mapping[str, str], rnd: Round) -> Sequence[PromptMessage]:
    return [
        PromptMessage(
            role="user",
            content=_embedded(
                arguments["resourceUri"], "text/plain", "Embedded resource content for testing."
            ),
        ),
        PromptMessage(role="user", content=_text("Please process the embedded resource above.")),
    ]


async def _prompt_with_image(arguments: Mapping[str, str], rnd: Round) -> Sequence[PromptMessage]:
    return [
        PromptMessage(role="user", content=_image()),
        PromptMessage(role="user", content=_text("Please analyze the image above.")),
    ]


async def _input_required_prompt(
    arguments: Mapping[str, str], rnd: Round
) -> GetPromptResult | InputRequiredResult | Sequence[PromptMessage]:
    answer = rnd.elicited("user_context", ContextForm)
    if answer is None or answer.content is None:
        return rnd.ask({"user_context": elicit("What context should the prompt use?", ContextForm)})
    return [PromptMessage(role="user", content=_text(f"Prompt with context: {answer.content.context}"))]


async def _static_text(variables: Mapping[str, str], rnd: Round) -> ResourceContent:
    return "This is the content of the static text resource."


async def _static_binary(variables: Mapping[str, str], rnd: Round) -> ResourceContent:
    import base64

    return base64.b64decode(PNG_BASE64)


async def _watched(variables: Mapping[str, str], rnd: Round) -> ResourceContent:
    return "Watched resource content"


async def _template_data(variables: Mapping[str, str], rnd: Round) -> ResourceContent:
    item = variables["id"]
    return f'{{"id":"{item}","templateTest":true,"data":"Data for ID: {item}"}}'


async def _custom_header(args: HeaderArgs, rnd: Round) -> ToolReturn:
    return _content(_text(f"Region: {args.region}"))


async def _json_schema_2020_12(args: Contact, rnd: Round) -> ToolReturn:
    return _content(_text(f"Contact: {args.name or 'anonymous'}"))


def _argument(name: str, description: str) -> PromptArgument:
    return PromptArgument(name=name, description=description, required=True)


async def _greet(args: GreetInput, rnd: Round) -> ToolReturn:
    return f"Hello, {args.name}!"


async def _ask_name_then_start(args: NoInput, rnd: Round) -> GreetInput | InputRequiredResult:
    """test_tool_with_task: an MRTR round before the task starts (the spec's composition order)."""
    answer = rnd.elicited("user_name", NameForm)
    if answer is None:
        return rnd.ask({"user_name": elicit("What is your name?", NameForm)})
    return GreetInput(name=answer.content.name if answer.content is not None else "stranger")


def _register_task_fixtures(registry: Registry) -> None:
    registry.tool("greet", input=GreetInput, description="Greets synchronously (never a task).")(_greet)
    registry.long_tool("slow_compute", workflow=SlowCompute, input=SlowComputeInput)
    registry.long_tool("failing_job", workflow=FailingJob, input=NoInput, task_support="required")
    registry.long_tool("protocol_error_job", workflow=ProtocolErrorJob, input=NoInput)
    registry.long_tool("confirm_delete", workflow=ConfirmDelete, input=DeleteInput)
    registry.long_tool("multi_input", workflow=MultiInput, input=NoInput)
    registry.long_tool("test_tool_with_task", workflow=GreetTask, input=NoInput, before=_ask_name_then_start)


def register_conformance_fixtures(registry: Registry) -> None:
    _register_task_fixtures(registry)
    for name, description, handler in _TOOLS:
        registry.add_tool(Tool(name=name, description=description, input_model=NoArgs, handler=handler))
    registry.add_tool(
        Tool("test_sampling", "Asks the client to sample the prompt.", PromptArgs, _sampling_prompt)
    )
    registry.add_tool(
        Tool("test_elicitation", "Asks the user for a name and an email.", MessageArgs, _elicitation_message)
    )
    registry.add_tool(
        Tool("test_custom_header", "SEP-2243: a parameter mirrored in a header.", HeaderArgs, _custom_header)
    )
    registry.add_tool(
        Tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            Contact,
            _json_schema_2020_12,
            schema=JSON_SCHEMA_2020_12,
        )
    )
    for prompt in (
        Prompt("test_simple_prompt", "A simple prompt without arguments", _simple_prompt),
        Prompt(
            "test_prompt_with_arguments",
            "A prompt with required arguments",
            _prompt_with_arguments,
            arguments=(_argument("arg1", "First test argument"), _argument("arg2", "Second test argument")),
        ),
        Prompt(
            "test_prompt_with_embedded_resource",
            "A prompt that includes an embedded resource",
            _prompt_with_embedded_resource,
            arguments=(_argument("resourceUri", "URI of the resource to embed"),),
        ),
        Prompt("test_prompt_with_image", "A prompt that includes image content", _prompt_with_image),
        Prompt(
            "test_input_required_result_prompt",
            "MRTR: prompt that requires elicitation input",
            _input_required_prompt,
        ),
    ):
        registry.add_prompt(prompt)
    registry.add_resource(
        Resource(
            "test://static-text",
            "static-text",
            _static_text,
            mime_type="text/plain",
            description="A static text resource for testing",
            title="Static Text Resource",
        )
    )
    registry.add_resource(
        Resource(
            "test://static-binary",
            "static-binary",
            _static_binary,
            mime_type="image/png",
            description="A static binary resource (image) for testing",
            title="Static Binary Resource",
        )
    )
    registry.add_resource(
        Resource(
            "test://watched-resource",
            "watched-resource",
            _watched,
            mime_type="text/plain",
            description="A resource clients may subscribe to",
            title="Watched Resource",
        )
    )
    registry.add_template(
        ResourceTemplate(
            "test://template/{id}/data",
            "template",
            _template_data,
            mime_type="application/json",
            description="A resource template with parameter substitution",
            title="Resource Template",
        )
    )
    registry.add_completer(
        "ref/prompt",
        "test_prompt_with_arguments",
        "arg1",
        lambda value, context: [v for v in ("test", "testValue1", "testing") if v.startswith(value)],
    )
