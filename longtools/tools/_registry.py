"""What a server offers: tools, prompts, resources, resource templates, completions. API process.

A quick tool is a typed async function ``(args: InputModel, round: Round) -> result`` run in the
API. Its input model is its ``inputSchema``; an output model, if declared, is its ``outputSchema``
and the result's ``structuredContent``. It may return ``round.ask(...)`` (an
``InputRequiredResult``) to ask the client for something and is then re-run with the answers.

A long tool is a Temporal workflow class (in ``longtools/workflows/``) whose run method takes the input
model; its side effects are activities (in ``longtools/activities/``), registered here too so the worker
serves them. It runs as a task for clients that declare the tasks extension, and through MRTR
rounds for those that do not (unless its ``task_support`` is ``required``).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, overload

import structlog
from mcp.shared.uri_template import UriTemplate
from mcp_types import (
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    PromptArgument,
    PromptMessage,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, RootModel
from temporalio import workflow as temporal_workflow

from longtools.auth import Authorize
from longtools.decisions import redacted
from longtools.tools._round import Round
from longtools.workflows._ending import EndTask
from longtools.workflows._errors import ToolError
from longtools.workflows._once import OnceRecord

__all__ = [
    "Registry",
    "Tool",
    "ToolError",
    "ToolReturn",
    "as_wire",
    "to_call_result",
    "tool_error_result",
    "wire_call_result",
]

log = structlog.get_logger("longtools.tools")

ToolReturn: TypeAlias = BaseModel | CallToolResult | InputRequiredResult | str
ToolHandler: TypeAlias = Callable[[Any, Round], Awaitable[ToolReturn]]
PromptHandler: TypeAlias = Callable[
    [Mapping[str, str], Round], Awaitable[GetPromptResult | InputRequiredResult | Sequence[PromptMessage]]
]
ResourceContent: TypeAlias = str | bytes
ResourceReader: TypeAlias = Callable[
    [Mapping[str, str], Round], Awaitable[ResourceContent | InputRequiredResult]
]
Completer: TypeAlias = Callable[[str, Mapping[str, str]], Sequence[str]]
TaskSupport: TypeAlias = Literal["forbidden", "optional", "required"]
BeforeStart: TypeAlias = Callable[[Any, Round], Awaitable[BaseModel | InputRequiredResult]]
"""Quick MRTR rounds a long tool runs in the API before its workflow starts; returns the
workflow's input (the spec's order: MRTR first, then the task)."""
Summary: TypeAlias = Callable[[Any], str]
"""A long tool's one line about a task, from its input model (``"orders-db, reader role"``)."""
SUMMARY_MAX = 200
"""Characters of a task's summary kept (it is shown on one line of the person's pages)."""


@dataclass(frozen=True)
class Tool:
    """A quick tool (``handler``) or a long tool (``workflow``): exactly one of the two."""

    name: str
    description: str
    input_model: type[BaseModel]
    """What a call's arguments are validated into (``parse_arguments``). A model that leaves
    pydantic's ``extra`` unset refuses names it does not declare and is listed with
    ``additionalProperties: false``; one that sets ``extra`` itself (``"allow"``, ``"ignore"``)
    keeps it."""
    handler: ToolHandler | None = None
    output_model: type[BaseModel] | None = None
    title: str | None = None
    annotations: ToolAnnotations | None = None
    schema: Mapping[str, Any] | None = None
    """The ``inputSchema`` to list instead of the model's own, for what pydantic cannot generate
    (2020-12 conditionals, anchors); arguments are still validated by ``input_model``."""
    workflow: type | None = None
    """A ``@workflow.defn`` class whose run method takes one ``input_model`` argument."""
    task_support: TaskSupport = "forbidden"
    before: BeforeStart | None = None
    authorize: Authorize | None = None
    """Checked on every round of every call (a decision from round 1 may no longer hold in round 2)."""
    summary: Summary | None = None
    """A long tool's line about one task, from its input, shown on the person's pages (where eight
    tasks of one tool would otherwise look alike); without it, the arguments the call gave."""
    asks_person: bool = False
    """A long tool whose workflow may ask a person's question. A client that follows tasks but
    declared no elicitation (the MCP Inspector CLI, which shows a task's end and nothing else) would
    follow its task blind while it waits for the person: its call is answered in words, with the
    link, once the task asks within ``task_tool_wait_s`` (else with the task, as any tool's)."""
    workflow_name: str = field(init=False, compare=False, repr=False)
    input_schema: dict[str, Any] = field(init=False, compare=False, repr=False)
    output_schema: dict[str, Any] | None = field(init=False, compare=False, repr=False)

    @property
    def replay_safe(self) -> bool:
        """Whether repeating a round is harmless by the tool's own declaration (read-only or
        idempotent), so its rounds need no single-use record."""
        hints = self.annotations
        return hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)

    def __post_init__(self) -> None:
        if (self.handler is None) == (self.workflow is None):
            raise ValueError(f"tool {self.name!r} needs exactly one of handler= or workflow=")
        if self.workflow is not None:
            # The SDK keeps the definition on the class; its name is what a client starts. temporalio
            # has no public accessor for it (1.35), so this reads the SDK's own, as its worker does.
            definition = temporal_workflow._Definition.must_from_class(self.workflow)
            object.__setattr__(self, "workflow_name", definition.name)
        elif self.task_support != "forbidden":
            raise ValueError(f"quick tool {self.name!r} cannot run as a task; register a workflow")
        # Computed once: tools/list runs on every client start and the schemas never change.
        listed = dict(self.schema) if self.schema is not None else _model_schema(self.input_model)
        if self.schema is None and _refuses_unknown(self.input_model):
            listed["additionalProperties"] = False
        object.__setattr__(self, "input_schema", listed)
        output = _model_schema(self.output_model) if self.output_model is not None else None
        object.__setattr__(self, "output_schema", output)

    def summary_of(self, args: BaseModel) -> str | None:
        """The line the pages show about a task of this tool started with ``args``: its
        ``summary``, else the arguments the call gave (``customer: acme``), on one line and at
        most ``SUMMARY_MAX`` characters; None when there is nothing to say."""
        try:
            said = self.summary(args) if self.summary is not None else _arguments_line(args)
        except Exception as exc:  # the tool's own code: a task starts without its line, never fails for it
            log.warning("tool_summary_failed", tool=self.name, error=type(exc).__name__)
            return None
        line = re.sub(r"\s+", " ", str(said)).strip()
        if len(line) > SUMMARY_MAX:
            line = line[: SUMMARY_MAX - 1].rstrip() + "…"
        return line or None

    def parse_arguments(self, arguments: Mapping[str, Any]) -> BaseModel:
        """A call's arguments, validated into the tool's input model.

        A name the model does not declare is refused (pydantic's default would drop it, so
        ``deploy(servce="api")`` ran with the default service and the caller never learnt of its
        typo), unless the model sets ``extra`` itself (``"allow"``, ``"ignore"``). Only the top
        level: a nested model keeps its own rule.

        Raises:
            ValidationError: the arguments do not fit; an unknown name is an ``extra_forbidden`` error.
        """
        if _refuses_unknown(self.input_model):
            return self.input_model.model_validate(arguments, extra="forbid")
        return self.input_model.model_validate(arguments)


def _refuses_unknown(model: type[BaseModel]) -> bool:
    return "extra" not in model.model_config and not issubclass(model, RootModel)


def _arguments_line(args: BaseModel) -> str:
    """The arguments a call gave (not the defaults it left), as ``name: value; ...``, a field its
    author marked sensitive as ``[redacted]`` (the line is kept in the task's memo and shown on
    the person's pages)."""
    given = redacted(args, given_only=True)
    if list(given) == [""]:  # a RootModel's input
        return json.dumps(given[""], ensure_ascii=False)
    return "; ".join(
        f"{name}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for name, value in given.items()
    )


def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


@dataclass(frozen=True)
class Prompt:
    name: str
    description: str
    handler: PromptHandler
    arguments: tuple[PromptArgument, ...] = ()
    title: str | None = None


@dataclass(frozen=True)
class Resource:
    uri: str
    name: str
    reader: ResourceReader
    mime_type: str | None = None
    description: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class ResourceTemplate:
    uri_template: str
    name: str
    reader: ResourceReader
    mime_type: str | None = None
    description: str | None = None
    title: str | None = None
    parsed: UriTemplate = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parsed", UriTemplate.parse(self.uri_template))

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.parsed.match(uri)
        if found is None:
            return None
        return {key: value if isinstance(value, str) else ",".join(value) for key, value in found.items()}


@dataclass
class Registry:
    """Everything one server exposes; names are unique per kind."""

    tools: dict[str, Tool] = field(default_factory=dict)
    prompts: dict[str, Prompt] = field(default_factory=dict)
    resources: dict[str, Resource] = field(default_factory=dict)
    templates: dict[str, ResourceTemplate] = field(default_factory=dict)
    completers: dict[tuple[str, str, str], Completer] = field(default_factory=dict)
    """(``"ref/prompt"`` or ``"ref/resource"``, prompt name or URI template, argument) -> completer."""
    activities: list[Callable[..., Any]] = field(default_factory=list)
    """Activity functions (or bound methods) the worker runs for the long tools."""

    @property
    def workflows(self) -> list[type]:
        """The long tools' workflows, and longtools' own (the record of requests that run once, and
        the end of a task that must end)."""
        return [
            OnceRecord,
            EndTask,
            *(tool.workflow for tool in self.tools.values() if tool.workflow is not None),
        ]

    def add_activities(self, *activities: Callable[..., Any]) -> None:
        self.activities.extend(activities)

    def add_tool(self, tool: Tool) -> None:
        _add_unique(self.tools, tool.name, tool, "tool")

    def add_prompt(self, prompt: Prompt) -> None:
        _add_unique(self.prompts, prompt.name, prompt, "prompt")

    def add_resource(self, resource: Resource) -> None:
        _add_unique(self.resources, resource.uri, resource, "resource")

    def add_template(self, template: ResourceTemplate) -> None:
        _add_unique(self.templates, template.uri_template, template, "resource template")

    def add_completer(self, ref_type: str, ref: str, argument: str, completer: Completer) -> None:
        _add_unique(self.completers, (ref_type, ref, argument), completer, "completer")

    def tool(
        self,
        name: str,
        *,
        input: type[BaseModel],
        output: type[BaseModel] | None = None,
        description: str | None = None,
        title: str | None = None,
        annotations: ToolAnnotations | None = None,
        authorize: Authorize | None = None,
    ) -> Callable[[ToolHandler], ToolHandler]:
        """Register a quick tool: ``@registry.tool("name", input=Args, output=Out)``."""

        def register(handler: ToolHandler) -> ToolHandler:
            self.add_tool(
                Tool(
                    name=name,
                    description=description or inspect.cleandoc(handler.__doc__ or ""),
                    input_model=input,
                    output_model=output,
                    handler=handler,
                    title=title,
                    annotations=annotations,
                    authorize=authorize,
                )
            )
            return handler

        return register

    def long_tool(
        self,
        name: str,
        *,
        workflow: type,
        input: type[BaseModel],
        output: type[BaseModel] | None = None,
        task_support: TaskSupport = "optional",
        description: str | None = None,
        title: str | None = None,
        annotations: ToolAnnotations | None = None,
        before: BeforeStart | None = None,
        authorize: Authorize | None = None,
        summary: Summary | None = None,
        asks_person: bool = False,
    ) -> None:
        """Register a long tool: one line naming its workflow class and its models.

        ``summary`` makes the line the person's pages show about each task from its input
        (default: the arguments the call gave); it runs in the API when the task starts.
        ``asks_person``: its workflow may ask a person's question (``by="person"`` or
        ``sensitive=True``; see ``Tool.asks_person``).
        """
        self.add_tool(
            Tool(
                name=name,
                description=description or inspect.cleandoc(workflow.__doc__ or ""),
                input_model=input,
                output_model=output,
                workflow=workflow,
                task_support=task_support,
                title=title,
                annotations=annotations,
                before=before,
                authorize=authorize,
                summary=summary,
                asks_person=asks_person,
            )
        )


def _add_unique(table: dict[Any, Any], key: Any, value: Any, kind: str) -> None:
    if key in table:
        raise ValueError(f"{kind} {key!r} is registered twice")
    table[key] = value


@overload
def as_wire(value: BaseModel) -> dict[str, Any]: ...
@overload
def as_wire(value: Any) -> Any: ...
def as_wire(value: Any) -> Any:
    """A model as the JSON the wire carries (by alias, without nulls); anything else as it is."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def tool_error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
"""``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` without a new encoder per call."""


def to_call_result(tool: Tool, result: Any) -> CallToolResult | InputRequiredResult:
    """A tool's return value on the wire; a long tool's arrives as JSON from its workflow's history."""
    if isinstance(result, CallToolResult | InputRequiredResult):
        return result
    text, structured = _text_and_structure(tool, result)
    if structured is None:
        return CallToolResult(content=[TextContent(type="text", text=text)])
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def wire_call_result(tool: Tool, result: Any) -> dict[str, Any]:
    """``as_wire(to_call_result(tool, result))``, without the models: a quick tool's answer goes to
    the SDK as the JSON it would dump them to (and validates it there, as it does the models)."""
    if isinstance(result, CallToolResult | InputRequiredResult):
        return as_wire(result)
    text, structured = _text_and_structure(tool, result)
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        wire["structuredContent"] = structured
    wire["isError"] = False
    wire["resultType"] = "complete"
    return wire


def _text_and_structure(tool: Tool, result: Any) -> tuple[str, dict[str, Any] | None]:
    """A tool's value as its text block, and its ``structuredContent`` when the tool declares an output."""
    if isinstance(result, BaseModel):  # what a tool returns most often: never a Mapping
        result = result.model_dump(mode="json", by_alias=True)
    elif tool.output_model is not None and isinstance(result, Mapping):
        result = tool.output_model.model_validate(result).model_dump(mode="json", by_alias=True)
    if isinstance(result, Mapping | list):
        text = _COMPACT_JSON(result)
        if tool.output_model is None or not isinstance(result, Mapping):
            return text, None
        return text, dict(result)
    return "" if result is None else str(result), None
