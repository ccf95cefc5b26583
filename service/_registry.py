"""What a server offers: tools, prompts, resources, resource templates, completions. API process.

A quick tool is a typed async function ``(args: InputModel, round: Round) -> result``. Its input
model is its ``inputSchema``; an output model, if declared, is its ``outputSchema`` and the
result's ``structuredContent``. It may return ``round.ask(...)`` (an ``InputRequiredResult``) to
ask the client for something and is then re-run with the answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from mcp.shared.uri_template import UriTemplate
from mcp_types import (
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    PromptArgument,
    PromptMessage,
    ToolAnnotations,
)
from pydantic import BaseModel

from service._round import Round

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


class ToolError(Exception):
    """A tool's own, expected failure: the client gets ``isError: true`` with this message."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_model: type[BaseModel]
    handler: ToolHandler
    output_model: type[BaseModel] | None = None
    title: str | None = None
    annotations: ToolAnnotations | None = None
    schema: Mapping[str, Any] | None = None
    """The ``inputSchema`` to list instead of the model's own, for what pydantic cannot generate
    (2020-12 conditionals, anchors); arguments are still validated by ``input_model``."""
    input_schema: dict[str, Any] = field(init=False, compare=False, repr=False)
    output_schema: dict[str, Any] | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Computed once: tools/list runs on every client start and the schemas never change.
        listed = dict(self.schema) if self.schema is not None else _model_schema(self.input_model)
        object.__setattr__(self, "input_schema", listed)
        output = _model_schema(self.output_model) if self.output_model is not None else None
        object.__setattr__(self, "output_schema", output)


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
    ) -> Callable[[ToolHandler], ToolHandler]:
        """Register a quick tool: ``@registry.tool("name", input=Args, output=Out)``."""

        def register(handler: ToolHandler) -> ToolHandler:
            self.add_tool(
                Tool(
                    name=name,
                    description=description or (handler.__doc__ or "").strip(),
                    input_model=input,
                    output_model=output,
                    handler=handler,
                    title=title,
                    annotations=annotations,
                )
            )
            return handler

        return register


def _add_unique(table: dict[Any, Any], key: Any, value: Any, kind: str) -> None:
    if key in table:
        raise ValueError(f"{kind} {key!r} is registered twice")
    table[key] = value
