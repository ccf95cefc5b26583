"""The MCP protocol layer: the official SDK's low-level ``Server`` over a ``Registry``. API process.

The low-level server is used rather than ``MCPServer`` because a longtools tool is a function of
one pydantic input model (``MCPServer`` derives the schema from a function's parameters instead),
and because tools/call routes a long tool to its Temporal workflow (``_long.py``). Everything on the
wire (envelope, header ladder, error codes, requestState sealing) stays the SDK's.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from typing import Any

import structlog
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    TextResourceContents,
)
from mcp_types import Prompt as WirePrompt
from mcp_types import Resource as WireResource
from mcp_types import ResourceTemplate as WireResourceTemplate
from mcp_types import Tool as WireTool
from pydantic import ValidationError

from service._auth import principal_of
from service._logging import request_info
from service._long import LongTools
from service._registry import Registry, ResourceContent, ToolError, to_call_result, tool_error_result
from service._round import Round
from service._settings import Settings
from service._tasks import Tasks
from workflows import ProtocolError

log = structlog.get_logger("longtools.mcp")

_MAX_COMPLETIONS = 100  # spec: at most 100 values per completion response


def build_server(settings: Settings, registry: Registry, *, version: str, tasks: Tasks) -> Server[Any]:
    """A low-level SDK server answering from ``registry``, sealing state with the configured keys."""
    long_tools = LongTools(settings, tasks)
    handlers = _Handlers(registry, long_tools)
    server: Server[Any] = Server(
        settings.server_name,
        version=version,
        get_tool_input_schema=handlers.tool_input_schema,
        on_list_tools=handlers.list_tools,
        on_list_prompts=handlers.list_prompts,
        on_get_prompt=handlers.get_prompt,
        on_list_resources=handlers.list_resources,
        on_list_resource_templates=handlers.list_resource_templates,
        on_read_resource=handlers.read_resource,
        on_completion=handlers.complete,
    )
    # Registered directly, not as on_call_tool: that typed slot does not admit the Tasks
    # extension's CreateTaskResult (resultType "task"), which the runner passes through as is.
    server.add_request_handler("tools/call", CallToolRequestParams, handlers.call_tool)
    long_tools.install(server)
    # Outermost first: record the outcome, refuse oversized state before spending an AEAD open on
    # it, then the SDK's boundary unseals inbound and seals outbound requestState.
    server.middleware.append(_record_outcome)
    server.middleware.append(_StateSizeLimit(settings.max_request_state_bytes))
    server.middleware.append(
        RequestStateBoundary(state_security(settings), default_audience=settings.server_name)
    )
    return server


def state_security(settings: Settings) -> RequestStateSecurity:
    """The requestState policy: the configured key ring, or a loudly announced ephemeral key."""
    keys = settings.state_key_ring()
    if keys is None:
        log.warning(
            "state_keys_unset",
            detail="LONGTOOLS_STATE_KEYS is not set: requestState is sealed with a key that lives only "
            "in this process, so another replica or a restart rejects it. Set it for any deployment.",
        )
        keys = [os.urandom(32)]
    return RequestStateSecurity(
        keys=keys,
        ttl=settings.state_ttl_s,
        audience=settings.server_name,
        bind_principal=principal_of,
    )


async def _record_outcome(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Note the JSON-RPC outcome for the one log event the HTTP layer writes per request."""
    info = request_info()
    try:
        result = await call_next(ctx)
    except MCPError as exc:
        info["outcome"] = f"error {exc.error.code}"
        raise
    except ValidationError:
        info["outcome"] = "error invalid params"
        raise
    # Inside the middleware chain a result is already the wire dict (the SDK runner serializes
    # it there so every middleware sees what goes out).
    wire = result if isinstance(result, dict) else {}
    info["outcome"] = "tool_error" if wire.get("isError") else wire.get("resultType", "complete")
    return result


class _StateSizeLimit:
    """Refuse a requestState larger than the configured bound (a size says nothing secret)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        state = ctx.params.get("requestState") if ctx.params is not None else None
        if isinstance(state, str) and len(state) > self._limit:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"requestState is larger than {self._limit} bytes; start the request again",
            )
        return await call_next(ctx)


class _Handlers:
    def __init__(self, registry: Registry, long_tools: LongTools) -> None:
        self._registry = registry
        self._long_tools = long_tools

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self._registry.tools.get(name)
        return None if tool is None else tool.input_schema

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(
            tools=[
                WireTool(
                    name=tool.name,
                    title=tool.title,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    output_schema=tool.output_schema,
                    annotations=tool.annotations,
                )
                for tool in self._registry.tools.values()
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        tool = self._registry.tools.get(params.name)
        if tool is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        try:
            args = tool.input_model.model_validate(params.arguments or {})
        except ValidationError as exc:
            # Bad arguments are the caller's to correct, so they are a tool error the model can read.
            return tool_error_result(f"Invalid arguments for tool {tool.name}: {_describe(exc)}")
        rnd = Round(ctx, input_responses=params.input_responses, request_state=params.request_state)
        try:
            if tool.handler is None:
                return await self._long_tools.call(ctx, tool, args, rnd)
            result = await tool.handler(args, rnd)
        except MCPError:
            raise
        except ToolError as exc:
            return tool_error_result(exc.message)
        except ProtocolError as exc:
            raise MCPError(code=exc.code, message=exc.message) from None
        except Exception:  # top-level handler boundary: a crash stays in the log, never on the wire
            log.exception("tool_crashed", tool=tool.name)
            return tool_error_result(f"Error executing tool {tool.name}")
        return to_call_result(tool, result)

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        return ListPromptsResult(
            prompts=[
                WirePrompt(
                    name=prompt.name,
                    title=prompt.title,
                    description=prompt.description,
                    arguments=list(prompt.arguments) or None,
                )
                for prompt in self._registry.prompts.values()
            ]
        )

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams
    ) -> GetPromptResult | InputRequiredResult:
        prompt = self._registry.prompts.get(params.name)
        if prompt is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
        arguments = params.arguments or {}
        missing = [arg.name for arg in prompt.arguments if arg.required and arg.name not in arguments]
        if missing:
            raise MCPError(code=INVALID_PARAMS, message=f"Missing required arguments: {', '.join(missing)}")
        rnd = Round(ctx, input_responses=params.input_responses, request_state=params.request_state)
        result = await prompt.handler(arguments, rnd)
        if isinstance(result, GetPromptResult | InputRequiredResult):
            return result
        return GetPromptResult(description=prompt.description, messages=list(result))

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(
            resources=[
                WireResource(
                    uri=res.uri,
                    name=res.name,
                    title=res.title,
                    description=res.description,
                    mime_type=res.mime_type,
                )
                for res in self._registry.resources.values()
            ]
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(
            resource_templates=[
                WireResourceTemplate(
                    uri_template=tpl.uri_template,
                    name=tpl.name,
                    title=tpl.title,
                    description=tpl.description,
                    mime_type=tpl.mime_type,
                )
                for tpl in self._registry.templates.values()
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult | InputRequiredResult:
        uri = str(params.uri)
        rnd = Round(ctx, input_responses=params.input_responses, request_state=params.request_state)
        resource = self._registry.resources.get(uri)
        if resource is not None:
            content = await resource.reader({}, rnd)
            mime_type = resource.mime_type
        else:
            for template in self._registry.templates.values():
                variables = template.match(uri)
                if variables is not None:
                    content = await template.reader(variables, rnd)
                    mime_type = template.mime_type
                    break
            else:
                # SEP-2164: resource-not-found is -32602 with the URI in data.
                raise MCPError(code=INVALID_PARAMS, message=f"Resource not found: {uri}", data={"uri": uri})
        if isinstance(content, InputRequiredResult):
            return content
        return ReadResourceResult(contents=[_resource_contents(uri, mime_type, content)])

    async def complete(
        self, ctx: ServerRequestContext[Any, Any], params: CompleteRequestParams
    ) -> CompleteResult:
        ref = params.ref
        target = ref.name if isinstance(ref, PromptReference) else ref.uri
        completer = self._registry.completers.get((ref.type, target, params.argument.name))
        values: Sequence[str] = ()
        if completer is not None:
            context = params.context.arguments if params.context and params.context.arguments else {}
            values = completer(params.argument.value, context)
        return CompleteResult(
            completion=Completion(
                values=list(values[:_MAX_COMPLETIONS]),
                total=len(values),
                has_more=len(values) > _MAX_COMPLETIONS,
            )
        )


def _resource_contents(
    uri: str, mime_type: str | None, content: ResourceContent
) -> TextResourceContents | BlobResourceContents:
    if isinstance(content, bytes):
        return BlobResourceContents(uri=uri, mime_type=mime_type, blob=base64.b64encode(content).decode())
    return TextResourceContents(uri=uri, mime_type=mime_type, text=content)


def _describe(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
    )
