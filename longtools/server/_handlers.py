"""The MCP protocol layer: the official SDK's low-level ``Server`` over a ``Registry``. API process.

The low-level server is used rather than ``MCPServer`` because a longtools tool is a function of
one pydantic input model (``MCPServer`` derives the schema from a function's parameters instead),
and because tools/call routes a long tool to its Temporal workflow (``_long_tools.py``). Everything on the
wire (envelope, header ladder, error codes, requestState sealing) stays the SDK's.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Literal, TypeVar

import structlog
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import X_MCP_HEADER_KEY
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    EmptyResult,
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
    ServerCapabilities,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextResourceContents,
    ToolExecution,
    UnsubscribeRequestParams,
)
from mcp_types import Prompt as WirePrompt
from mcp_types import Resource as WireResource
from mcp_types import ResourceTemplate as WireResourceTemplate
from mcp_types import Tool as WireTool
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import BaseModel, ValidationError

from longtools._logging import request_info
from longtools._metrics import Metrics
from longtools._settings import Settings
from longtools.auth import authorized, caller_of, principal_of
from longtools.server._exchange import STATE_REFUSED, Exchange
from longtools.server._legacy_tasks import TASK_CALL, method_not_found, speaks_tasks
from longtools.server._limits import HeldRounds
from longtools.server._long_tools import LongTools
from longtools.server._people import People, with_url_ids
from longtools.server._pushed import (
    Interrupted,
    Rounds,
    Unanswered,
    is_legacy,
    needs_capability,
    play_rounds,
)
from longtools.server._task_tools import TASK_TOOLS, task_tool_listing
from longtools.server._wire import (
    NOT_AUTHORIZED,
    asks_a_person,
    follows_by_tools,
    invalid_arguments,
    temporal_errors,
    told_in_words,
)
from longtools.tasks import KeyReused, RunOnce, Tasks, args_digest, derive_id, key_reused, state_used
from longtools.tools import (
    Registry,
    ResourceContent,
    Round,
    Tool,
    ToolError,
    ToolReturn,
    as_wire,
    tool_error_result,
    wire_call_result,
)
from longtools.workflows import ProtocolError

log = structlog.get_logger("longtools.mcp")
T = TypeVar("T")

_MAX_COMPLETIONS = 100  # spec: at most 100 values per completion response
IDEMPOTENCY_META = "longtools.dev/idempotency-key"
"""``_meta`` key of a ``tools/call`` idempotency key: the same key from the same principal for the
same tool gets the first call's task or result instead of a second run."""
_MAX_IDEMPOTENCY_KEY = 200


def build_server(
    settings: Settings,
    registry: Registry,
    *,
    version: str,
    tasks: Tasks,
    once: RunOnce,
    metrics: Metrics,
    held: HeldRounds,
    people: People,
) -> Server[Any]:
    """A low-level SDK server answering from ``registry``, sealing state with the configured keys.
    ``held`` bounds the requests it holds open (shared with the pages); ``people`` shows a person's
    questions to each client as it may answer them."""
    keys = _key_ring(settings)
    # Idempotency ids are derived from the first key, never from the key itself (domain separation).
    id_secret = tasks.ids.secret
    long_tools = LongTools(settings, tasks, metrics, held=held, people=people)
    # Logs name a principal by a keyed hash, the same everywhere (the tasks' own log events too).
    hash_principal = tasks.hash_principal
    taken = sorted(set(TASK_TOOLS) & set(registry.tools))
    if taken:
        raise ValueError(f"Tool names reserved for the built-in task tools: {', '.join(taken)}")
    handlers = _Handlers(settings, registry, long_tools, once, id_secret, hash_principal)
    server: Server[Any] = _Server(
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
    # The SDK's span per request, opened only while there is a tracer provider to take it.
    server.middleware[:] = [_WhenTraced(m) if _opens_spans(m) else m for m in server.middleware]
    # Registered directly, not as on_call_tool: that typed slot does not admit the Tasks
    # extension's CreateTaskResult (resultType "task"), which the runner passes through as is.
    server.add_request_handler("tools/call", CallToolRequestParams, handlers.call_tool)
    server.add_request_handler(TASK_CALL, CallToolRequestParams, handlers.call_tool_as_task)
    # The 2025 era's own methods (the runner answers -32601 to them at 2026-07-28).
    server.add_request_handler("logging/setLevel", SetLevelRequestParams, handlers.set_level)
    server.add_request_handler("resources/subscribe", SubscribeRequestParams, handlers.subscribe)
    server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, handlers.subscribe)
    long_tools.install(server)
    # Outermost first: observe the outcome, refuse oversized state before spending an AEAD open on
    # it, then the SDK's boundary unseals inbound and seals outbound requestState.
    server.middleware.append(_Observe(metrics, registry, hash_principal))
    server.middleware.append(_Inbound(settings))
    server.middleware.append(_UrlRequestIds())
    server.middleware.append(
        RequestStateBoundary(state_security(settings, keys), default_audience=settings.server_name)
    )
    return server


class _Server(Server[Any]):
    """The SDK's server, advertising per era what each era has.

    ``logging/setLevel`` is served for the 2025 era only, so the 2026 era's capabilities keep no
    ``logging`` (log delivery there is a per-request opt-in); the tasks extension is a 2026-era
    extension, so ``initialize`` does not offer it (the 2025-era path adds 2025-11-25's own tasks).
    """

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            # The SDK reads a served subscriptions/listen as "lists and resources may change": here
            # it serves task status, and nothing else ever changes.
            changes = {"list_changed": False}
            return capabilities.model_copy(
                update={
                    "logging": None,
                    "tools": _copied(capabilities.tools, changes),
                    "prompts": _copied(capabilities.prompts, changes),
                    "resources": _copied(capabilities.resources, {**changes, "subscribe": False}),
                }
            )
        return capabilities

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(notification_options, experimental_capabilities, {})


M = TypeVar("M", bound=BaseModel)


def _copied(model: M | None, update: dict[str, Any]) -> M | None:
    return None if model is None else model.model_copy(update=update)


def _key_ring(settings: Settings) -> list[bytes]:
    """The configured key ring.

    There is no per-process fallback: such a key breaks every other replica and every restart
    (requestState, idempotency ids). ``launch`` refuses to start `api` without a ring and `serve`
    keeps one in its data dir, so a missing ring here is a bug in the caller.

    Raises:
        MissingKeyRing: ``settings`` has no state keys.
    """
    return settings.require_state_keys()


def state_security(settings: Settings, keys: list[bytes]) -> RequestStateSecurity:
    """The requestState policy: sealed with the first key, opened with any.

    Sealed to live as long as the longest-lived state (a long tool's continuation lives as long as
    its task); each state's own, shorter end is in its plaintext (``_exchange.py``).
    """
    return RequestStateSecurity(
        keys=keys,
        ttl=max(settings.state_ttl_s, settings.task_ttl_s),
        audience=settings.server_name,
        bind_principal=principal_of,
    )


class _Observe:
    """Note each request's outcome: in its one log event, and in the metrics.

    A ``tools/call`` round counts as an MRTR round: ``started`` when a first round asks, then
    ``input_required`` per asking round, ``completed`` when a continuation ends with a result,
    ``expired`` when its state was refused, ``rejected`` for any other error of a continuation.
    """

    def __init__(self, metrics: Metrics, registry: Registry, hash_principal: Callable[[str], str]) -> None:
        self._metrics = metrics
        self._tools = registry.tools
        self._hash = hash_principal

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        info = request_info()
        info["principal"] = self._hash(principal_of(ctx))
        params = ctx.params or {}
        method = "tools/call" if ctx.method == TASK_CALL else ctx.method
        named = params.get("name") if method == "tools/call" else None
        tool = named if isinstance(named, str) and named in self._tools else None  # labels stay bounded
        continuing = params.get("requestState") is not None
        era: Literal["2026", "2025"] = "2025" if is_legacy(ctx) else "2026"
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            info["outcome"] = f"error {exc.error.code}"
            _link_span(info)
            self._metrics.request(method, "error", era)
            if tool is not None and continuing:
                expired = exc.error.message == STATE_REFUSED
                self._metrics.mrtr(tool, "expired" if expired else "rejected")
            raise
        except ValidationError:
            info["outcome"] = "error invalid params"
            self._metrics.request(method, "error", era)
            raise
        # Inside the middleware chain a result is already the wire dict (the SDK runner serializes
        # it there so every middleware sees what goes out).
        wire = result if isinstance(result, dict) else {}
        outcome = "tool_error" if wire.get("isError") else str(wire.get("resultType", "complete"))
        info["outcome"] = outcome
        _link_span(info)
        self._metrics.request(method, outcome, era)
        if tool is not None:
            if outcome == "input_required":
                if not continuing:
                    self._metrics.mrtr(tool, "started")
                if wire.get("inputRequests"):  # a state-only round asks nothing: "still working"
                    self._metrics.mrtr(tool, "input_required")
            elif continuing:
                self._metrics.mrtr(tool, "completed")
        return result


def _link_span(info: Mapping[str, Any]) -> None:
    """Tag the SDK's span of this request (it continues the ``traceparent`` from ``_meta``) with what
    links it to the other requests of one exchange or task."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    exchange = info.get("task_id") or info.get("exchange")  # a task's requests share its id
    if exchange is not None:
        span.set_attribute("longtools.exchange", str(exchange))
    if info.get("round") is not None:
        span.set_attribute("longtools.round", int(info["round"]))
    span.set_attribute("longtools.principal", str(info.get("principal")))


class _WhenTraced:
    """The SDK's span per request (its ``OpenTelemetryMiddleware``, on by default), opened only
    while a tracer provider is installed: ``LONGTOOLS_TRACES``, or one an OpenTelemetry distro
    set. Without one, the SDK's spans go nowhere, yet opening them (with the ``traceparent`` read
    from ``_meta``) took about 9% of the API's CPU per plain ``tools/call`` and per MRTR round;
    the SDK says to drop the middleware to opt out. Asked on every request, so a provider
    installed later is served too."""

    def __init__(self, traced: ServerMiddleware[Any]) -> None:
        self._traced = traced

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return await call_next(ctx)
        return await self._traced(ctx, call_next)


def _opens_spans(middleware: object) -> bool:
    # By name: the SDK keeps the class in a private module (mcp.server._otel).
    return type(middleware).__name__ == "OpenTelemetryMiddleware"


class _Inbound:
    """Bounds on what a round carries, checked before any work.

    A size says nothing secret, so an oversized state is refused before an AEAD open is spent on it.
    """

    def __init__(self, settings: Settings) -> None:
        self._max_state = settings.max_request_state_bytes
        self._max_answers = settings.max_input_responses

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params or {}
        state = params.get("requestState")
        if isinstance(state, str) and len(state) > self._max_state:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"requestState is larger than {self._max_state} bytes; start the request again",
            )
        answers = params.get("inputResponses")
        if isinstance(answers, dict) and len(answers) > self._max_answers:
            raise MCPError(
                code=INVALID_PARAMS, message=f"inputResponses holds more than {self._max_answers} answers"
            )
        return await call_next(ctx)


class _UrlRequestIds:
    """A 2026-era round's URL requests carry an ``elicitationId`` (``with_url_ids``): put back
    into the wire JSON, which the SDK's 2026 models shaped without it."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            return with_url_ids(result)
        return result


class _Handlers:
    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        long_tools: LongTools,
        once: RunOnce,
        id_secret: bytes,
        hash_principal: Callable[[str], str],
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._long_tools = long_tools
        self._once = once
        self._id_secret = id_secret
        self._hash = hash_principal
        self._annotated: dict[str, bool] = {}

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        """The schema the SDK checks a call's ``Mcp-Param-*`` headers against; None, "nothing to
        validate" in the SDK's words, for a tool whose schema annotates no header (``x-mcp-header``),
        which spares every call to it two walks of its schema."""
        tool = self._registry.tools.get(name)
        if tool is None:
            return None
        annotated = self._annotated.get(name)
        if annotated is None:  # tools never change once served: once per tool
            annotated = self._annotated[name] = _names_a_header(tool.input_schema)
        return tool.input_schema if annotated else None

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        """The tools, as this client can call them. A 2025-11-25 client is told which long tools it
        may call as tasks. One that follows long tools through the task tools gets those, and no
        output schema for a long tool, whose call answers with its task, not its result."""
        by_tools = follows_by_tools(ctx)
        tasks = speaks_tasks(ctx)
        tools = [
            WireTool(
                name=tool.name,
                title=tool.title,
                description=tool.description,
                input_schema=tool.input_schema,
                output_schema=None if by_tools and tool.handler is None else tool.output_schema,
                annotations=tool.annotations,
                execution=ToolExecution(task_support=tool.task_support)
                if tasks and tool.handler is None and tool.task_support != "forbidden"
                else None,
            )
            for tool in self._registry.tools.values()
        ]
        if by_tools or told_in_words(ctx) or self._settings.task_tools == "always":
            tools.extend(task_tool_listing())
        return ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        if params.name in TASK_TOOLS:
            return await self._long_tools.task_tools.call(ctx, params.name, params.arguments)
        if not is_legacy(ctx):
            return await self._call_round(ctx, params)
        return await self._legacy_call(ctx, params)

    async def call_tool_as_task(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        """A 2025-11-25 ``tools/call`` with ``params.task`` (renamed by the 2025-era path, see
        ``TASK_CALL``): a long tool's task, after any questions of its pre-phase."""
        if not speaks_tasks(ctx):
            raise method_not_found()
        tool = self._registry.tools.get(params.name)
        if tool is not None and (tool.handler is not None or tool.task_support == "forbidden"):
            raise MCPError(code=METHOD_NOT_FOUND, message=f"{tool.name} cannot be called as a task")
        return await self._legacy_call(ctx, params, as_task=True)

    async def _legacy_call(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams, *, as_task: bool = False
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        tool_name = params.name

        async def rounds(
            state: str | None, answers: dict[str, Any] | None
        ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
            again, typed = _next_round(ctx, CallToolRequestParams, state, answers)
            return await self._call_round(again, typed, as_task=as_task)

        try:
            return await self._play(ctx, rounds)
        except Unanswered as exc:
            return tool_error_result(str(exc))
        except Interrupted:
            return tool_error_result(
                f"This server is restarting while {tool_name} works; the work goes on. Call the tool "
                f"again with the same _meta[{IDEMPOTENCY_META!r}] to get back to it."
            )
        except MCPError as exc:
            lacking = needs_capability(exc)
            if lacking is None:
                raise
            return tool_error_result(
                f"{tool_name} needs to ask you something through {lacking}, which this client does not "
                "support (it did not declare that capability when it connected)"
            )

    async def _play(self, ctx: ServerRequestContext[Any, Any], rounds: Rounds[T]) -> T:
        """A 2025-era request's rounds, played out with their questions pushed; its waits for
        answers count against the held-round bounds, and a stopping process ends them."""
        holding = partial(self._long_tools.holding, principal_of(ctx))
        return await play_rounds(ctx, rounds, stopping=self._long_tools.stopping, holding=holding)

    async def _call_round(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams, *, as_task: bool = False
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        tool = self._registry.tools.get(params.name)
        if tool is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        try:
            args = tool.parse_arguments(params.arguments or {})
        except ValidationError as exc:
            return invalid_arguments(tool.name, exc)
        caller = caller_of(ctx)
        if not await authorized(tool.authorize, caller, args, tool=tool.name, hash_principal=self._hash):
            return tool_error_result(NOT_AUTHORIZED)
        exchange, rnd = _open_round(ctx, params.input_responses, params.request_state)
        key = _idempotency_key(ctx)
        if tool.handler is None:
            # The key names the task, also when it starts after pre-phase rounds (with a state).
            work = self._long_tools.call(
                ctx, tool, args, rnd, exchange, idempotency_key=key, legacy_task=as_task
            )
            return await _guarded(tool, work)
        continuing = params.request_state is not None
        if continuing and not tool.replay_safe:
            # A continuation round of a tool with side effects runs once: a replay (same answers),
            # on any replica and after a restart, gets the first outcome. The claim is named by
            # what the seal authenticates and a replay cannot change (the exchange and its round),
            # not by the sealed string: a replayed round re-seals its next state with a fresh nonce.
            round_id = (exchange.id, str(exchange.rounds))
            claim = derive_id(self._id_secret, "round", caller.principal, tool.name, *round_id)
            ttl_s = self._settings.state_ttl_s
            answers = ctx.params.get("inputResponses") if ctx.params is not None else None
            digest, reused = args_digest(answers), state_used
        elif key is not None and not continuing:
            claim = derive_id(self._id_secret, "call", caller.principal, tool.name, key)
            ttl_s = self._settings.idempotency_ttl_s
            digest, reused = args_digest(params.arguments), key_reused
        else:
            return await self._quick(tool, args, rnd, exchange)

        async def once() -> dict[str, Any]:
            return as_wire(await self._quick(tool, args, rnd, exchange))

        try:
            async with temporal_errors("tools/call"):
                return await self._once.run(
                    claim, digest, once, ttl_s=ttl_s, wait_s=self._settings.mrtr_wait_s
                )
        except KeyReused:
            raise reused() from None

    async def _quick(
        self, tool: Tool, args: BaseModel, rnd: Round, exchange: Exchange
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        """Run a quick tool's handler for one round; a round that asks continues the exchange. A
        result is its wire JSON (`wire_call_result`); a question or a failure is a model."""
        assert tool.handler is not None
        result = await _guarded(tool, _returned(tool, tool.handler(args, rnd)))
        if not isinstance(result, InputRequiredResult):
            return result
        refused = asks_a_person(f"Tool {tool.name}", result)
        if refused is not None:
            return tool_error_result(refused)
        return self._next_round(exchange, result)

    def _next_round(self, exchange: Exchange, result: InputRequiredResult) -> InputRequiredResult:
        # Every input_required round carries a state, so every later round is counted and (for a
        # tool with side effects) single-use; the exchange id links its rounds in logs and traces.
        expires_at = time.time() + self._settings.state_ttl_s
        return exchange.next_round(result, expires_at=expires_at, max_rounds=self._settings.max_rounds)

    async def set_level(
        self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        """Accepted, not kept: a 2025-era session is a sealed token, so no replica could remember the
        level; the only messages sent are those a tool logs during a call, on that call's stream."""
        return EmptyResult()

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams | UnsubscribeRequestParams
    ) -> EmptyResult:
        """Accepted for a resource this server has: its resources never change while it runs, so
        there is never an update to send."""
        uri = str(params.uri)
        known = uri in self._registry.resources or any(
            template.match(uri) is not None for template in self._registry.templates.values()
        )
        if not known:
            raise MCPError(code=INVALID_PARAMS, message=f"Resource not found: {uri}", data={"uri": uri})
        return EmptyResult()

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
        if not is_legacy(ctx):
            return await self._prompt_round(ctx, params)

        async def rounds(
            state: str | None, answers: dict[str, Any] | None
        ) -> GetPromptResult | InputRequiredResult:
            return await self._prompt_round(*_next_round(ctx, GetPromptRequestParams, state, answers))

        return await _answered(self._play(ctx, rounds))

    async def _prompt_round(
        self, ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams
    ) -> GetPromptResult | InputRequiredResult:
        prompt = self._registry.prompts.get(params.name)
        if prompt is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
        arguments = params.arguments or {}
        missing = [arg.name for arg in prompt.arguments if arg.required and arg.name not in arguments]
        if missing:
            raise MCPError(code=INVALID_PARAMS, message=f"Missing required arguments: {', '.join(missing)}")
        exchange, rnd = _open_round(ctx, params.input_responses, params.request_state)
        result = await prompt.handler(arguments, rnd)
        if isinstance(result, InputRequiredResult):
            refused = asks_a_person(f"Prompt {prompt.name}", result)
            if refused is not None:
                raise MCPError(code=INTERNAL_ERROR, message=refused)
            return self._next_round(exchange, result)
        if isinstance(result, GetPromptResult):
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
        if not is_legacy(ctx):
            return await self._resource_round(ctx, params)

        async def rounds(
            state: str | None, answers: dict[str, Any] | None
        ) -> ReadResourceResult | InputRequiredResult:
            return await self._resource_round(*_next_round(ctx, ReadResourceRequestParams, state, answers))

        return await _answered(self._play(ctx, rounds))

    async def _resource_round(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult | InputRequiredResult:
        uri = str(params.uri)
        exchange, rnd = _open_round(ctx, params.input_responses, params.request_state)
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
            refused = asks_a_person(f"Resource {uri}", content)
            if refused is not None:
                raise MCPError(code=INTERNAL_ERROR, message=refused)
            return self._next_round(exchange, content)
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


P = TypeVar("P", bound=BaseModel)


def _next_round(
    ctx: ServerRequestContext[Any, Any],
    params_type: type[P],
    state: str | None,
    answers: dict[str, Any] | None,
) -> tuple[ServerRequestContext[Any, Any], P]:
    """The request as a 2026-era client would send its next round: the same params, with the
    state and answers of the round before (used for a 2025-era client, whose questions are pushed)."""
    wire = {
        key: value
        for key, value in (ctx.params or {}).items()
        if key not in ("requestState", "inputResponses")
    }
    if state is not None:
        wire["requestState"] = state
    if answers is not None:
        wire["inputResponses"] = answers
    return replace(ctx, params=wire), params_type.model_validate(wire, by_name=False)


async def _answered(rounds: Awaitable[T]) -> T:
    """A prompt's or a resource's rounds: a question the client answered with an error fails the request."""
    try:
        return await rounds
    except Unanswered as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
    except Interrupted:
        raise MCPError(
            code=INTERNAL_ERROR, message="This server is restarting; send the request again"
        ) from None


def _resource_contents(
    uri: str, mime_type: str | None, content: ResourceContent
) -> TextResourceContents | BlobResourceContents:
    if isinstance(content, bytes):
        return BlobResourceContents(uri=uri, mime_type=mime_type, blob=base64.b64encode(content).decode())
    return TextResourceContents(uri=uri, mime_type=mime_type, text=content)


async def _returned(tool: Tool, result: Awaitable[ToolReturn]) -> InputRequiredResult | dict[str, Any]:
    returned = await result
    return returned if isinstance(returned, InputRequiredResult) else wire_call_result(tool, returned)


async def _guarded(tool: Tool, work: Awaitable[T]) -> T | CallToolResult:
    """A tool's own code (handler, pre-phase, start) with its failures mapped for the wire."""
    try:
        return await work
    except MCPError:
        raise
    except ToolError as exc:
        return tool_error_result(exc.message)
    except ProtocolError as exc:
        raise MCPError(code=exc.code, message=exc.message) from None
    except Exception:  # top-level handler boundary: a crash stays in the log, never on the wire
        log.exception("tool_crashed", tool=tool.name)
        return tool_error_result(f"Error executing tool {tool.name}")


def _open_round(
    ctx: ServerRequestContext[Any, Any], input_responses: Mapping[str, Any] | None, state: str | None
) -> tuple[Exchange, Round]:
    """The exchange this round belongs to (named in its log line) and the round the handler sees."""
    exchange, own_state = Exchange.open(state)
    info = request_info()
    info["exchange"], info["round"] = exchange.id, exchange.rounds + 1
    return exchange, Round(ctx, input_responses=input_responses, request_state=own_state)


def _names_a_header(schema: Any) -> bool:
    """Whether ``x-mcp-header`` is a key anywhere in ``schema``: where the SDK reads it or not, so
    a schema it would refuse is still handed to it."""
    if isinstance(schema, dict):
        return X_MCP_HEADER_KEY in schema or any(_names_a_header(value) for value in schema.values())
    if isinstance(schema, list):
        return any(_names_a_header(value) for value in schema)
    return False


def _idempotency_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    value = ctx.meta.get(IDEMPOTENCY_META) if ctx.meta is not None else None
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_IDEMPOTENCY_KEY:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"_meta[{IDEMPOTENCY_META!r}] must be a string of 1 to {_MAX_IDEMPOTENCY_KEY} characters",
        )
    return value
