"""Long tools on the wire: ``tools/call`` as a task or as MRTR rounds, and ``tasks/*``. API process.

The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) is served on the SDK's low-level
server with ``add_request_handler``: the SDK has no implementation of it, and its ``Extension``
API belongs to ``MCPServer``, which this server does not use (see ``_handlers.py``). Everything else
on the wire (envelope, headers, requestState sealing, error mapping) stays the SDK's.

A client that declares the extension on a ``tools/call`` of a long tool gets a task at once. One
that does not gets the same tool through MRTR rounds: each round holds the request open while
the workflow runs (up to ``mrtr_wait_s``), then answers with the result, with the workflow's
questions, or with a state-only "not yet" result. The sealed ``requestState`` names the workflow
and the questions already answered, so any replica serves the next round.
"""

from __future__ import annotations

import contextlib
import time
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import structlog
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolResult,
    InputRequiredResult,
    PaginatedRequestParams,
    RequestParams,
    SubscriptionsListenRequestParams,
)
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from longtools._logging import request_info
from longtools._metrics import Metrics
from longtools._protocol import TASKS_EXTENSION
from longtools._settings import Settings
from longtools.auth import caller_of, principal_of
from longtools.decisions import approvers_decision
from longtools.server._exchange import Exchange, state_refused
from longtools.server._legacy_tasks import LegacyTasks, method_not_found, speaks_tasks
from longtools.server._limits import HeldRounds, answers_too_large, limit_reached
from longtools.server._listen import TaskListens
from longtools.server._people import Audience, People, complete_urls, deliver, spoken_lately
from longtools.server._pushed import is_legacy
from longtools.server._task_tools import TaskTools, as_call_of
from longtools.server._wire import (
    NOT_AUTHORIZED,
    UNAVAILABLE,
    asks_a_person,
    declares_tasks,
    follows_by_tools,
    poll_task,
    read_task,
    temporal_errors,
    told_in_words,
)
from longtools.tasks import (
    TERMINAL,
    AnswerNotAuthorized,
    AnswerRejected,
    AnswersTooLarge,
    OwnerAttributeMissing,
    PersonMustAnswer,
    TaskNotFound,
    Tasks,
    TaskView,
    TooManyTasks,
    args_digest,
    key_reused,
    state_used,
)
from longtools.tools import Round, Tool, as_wire, tool_error_result
from longtools.workflows import InputRequest

log = structlog.get_logger("longtools.long")

_STATE_PREFIX = "longtools-task:"
_MAX_TASK_ID = 200
_POLL_AGE_SHARE = 20
_POLL_BACKOFF_MAX = 10
_requests_adapter: TypeAdapter[InputRequest] = TypeAdapter(InputRequest)


class TaskParams(RequestParams):
    # Typed loosely on purpose: the SDK answers a params model's own validation error with a bare
    # "Invalid request parameters"; checked in _view instead, the error says what is wrong (and the
    # capability check comes first, as the extension asks).
    task_id: Any = Field(None, alias="taskId")

    def checked_task_id(self) -> str:
        if not isinstance(self.task_id, str) or not 0 < len(self.task_id) <= _MAX_TASK_ID:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"params.taskId must be a string of 1 to {_MAX_TASK_ID} characters",
            )
        return self.task_id


class UpdateTaskParams(TaskParams):
    input_responses: Any = Field(None, alias="inputResponses")

    def checked_responses(self) -> dict[str, Any]:
        if not isinstance(self.input_responses, dict):
            raise MCPError(
                code=INVALID_PARAMS, message="params.inputResponses must be an object of answers by key"
            )
        return self.input_responses


class _Continuation(BaseModel):
    """A long tool's own state in its requestState, once its task runs (see ``_exchange.py``)."""

    task: str
    sent: list[str] = []
    """Question keys whose answers were already delivered to the workflow."""
    shown: float = 0
    """The last progress value this exchange sent: the next round goes on from it, never back."""
    armed: float | None = None
    """When (Unix time) the task is cancelled unless the client comes back, as last armed
    (``Endings.keep_exchange``): a round re-arms it only once that nears."""
    urls: list[str] = []
    """2025 era: keys of the URL requests asked, whose ``notifications/elicitation/complete`` is still
    to be sent (once the page has answered them)."""


def missing_tasks_extension() -> MCPError:
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"This request needs the {TASKS_EXTENSION} extension; declare it in clientCapabilities",
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


class LongTools:
    def __init__(
        self, settings: Settings, tasks: Tasks, metrics: Metrics, *, held: HeldRounds, people: People
    ) -> None:
        self._settings = settings
        self._tasks = tasks
        self._metrics = metrics
        self.people = people
        self._held = held
        self.legacy = LegacyTasks(
            settings, tasks, poll_interval_ms=self._poll_interval_ms, held=self._held, people=self.people
        )
        self.task_tools = TaskTools(settings, tasks, self._poll_interval_ms, self._held, self.people)
        self._listens = TaskListens(
            settings,
            tasks,
            self._poll_interval_ms,
            missing_tasks_extension,
            metrics.listen_streams,
            self.people,
        )

    def stopping(self) -> bool:
        """Whether this process is stopping (held rounds then answer at once)."""
        return self._tasks.stopping

    def holding(self, principal: str) -> AbstractContextManager[None]:
        """Count a wait of ``principal``'s against the held-round bounds while inside (a 2025-era
        call waiting for a pushed answer holds a connection just as a held round does).

        Raises:
            MCPError: -32600 naming the bound that was reached.
        """
        return self._held.hold(principal)

    def install(self, server: Server[Any]) -> None:
        """Advertise the extension and serve its three methods and its task status notifications
        (``subscriptions/listen``), and the 2025-11-25 tasks methods to 2025-era sessions
        (``tasks/result`` and ``tasks/list`` stay -32601 at 2026-07-28)."""
        server.extensions[TASKS_EXTENSION] = {}
        server.add_request_handler("tasks/get", TaskParams, self.get_task)
        server.add_request_handler("tasks/update", UpdateTaskParams, self.update_task)
        server.add_request_handler("tasks/cancel", TaskParams, self.cancel_task)
        server.add_request_handler("tasks/result", TaskParams, self.task_result)
        server.add_request_handler("tasks/list", PaginatedRequestParams, self.list_tasks)
        server.add_request_handler(
            "subscriptions/listen", SubscriptionsListenRequestParams, self._listens.listen
        )

    # tools/call -------------------------------------------------------------------------------

    async def call(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Tool,
        args: BaseModel,
        rnd: Round,
        exchange: Exchange,
        *,
        idempotency_key: str | None = None,
        legacy_task: bool = False,
    ) -> CallToolResult | InputRequiredResult | dict[str, Any]:
        """``legacy_task``: a 2025-11-25 ``tools/call`` with ``params.task``."""
        modern_task = (
            not is_legacy(ctx)
            and declares_tasks(rnd.client_capabilities)
            and tool.task_support != "forbidden"
        )
        as_task = legacy_task or modern_task
        # A tool that requires a task is never served as a plain call, not even one that answers
        # with its task: SEP-2663 asks for -32021 (2026), 2025-11-25 for -32601.
        by_tools = not as_task and tool.task_support != "required" and follows_by_tools(ctx)
        # A tool that may ask a person, called by a tasks client that can be asked nothing: told
        # where the task stands once it asks within task_tool_wait_s, else given the task. (Only
        # such a tool: a tasks client is owed its task at once, the conformance suite checks.)
        asks_nobody = modern_task and tool.asks_person and told_in_words(ctx)
        if tool.task_support == "required" and not (as_task or by_tools):
            if speaks_tasks(ctx):  # 2025-11-25: a tool that requires a task is -32601 without one
                raise MCPError(code=METHOD_NOT_FOUND, message=f"{tool.name} must be called as a task")
            raise missing_tasks_extension()
        continuation = _continuation(rnd.request_state)
        async with temporal_errors("tools/call"):
            if continuation is not None:
                return await self._continue(ctx, tool, continuation, rnd, exchange)
            if tool.before is not None:
                prepared = await tool.before(args, rnd)
                if isinstance(prepared, InputRequiredResult):
                    refused = asks_a_person(f"Tool {tool.name}", prepared)
                    if refused is not None:
                        return tool_error_result(refused)
                    expires_at = time.time() + self._settings.state_ttl_s
                    return exchange.next_round(
                        prepared, expires_at=expires_at, max_rounds=self._settings.max_rounds
                    )
                args = prepared
            principal = principal_of(ctx)
            # A call that will be held (a round, or the task tools' first wait) takes its place
            # under the held-request bounds before it starts anything: one refused at a bound
            # must leave no task behind.
            with self._held.hold(principal) if not as_task or asks_nobody else contextlib.nullcontext():
                base = self.people.audience(ctx).base
                view = await self._begin(tool, args, principal, exchange, idempotency_key, base)
                if legacy_task:
                    self._tasks.follow(view, self._poll_interval_ms(view))  # the client polls it next
                    return self.legacy.created(ctx, tool, view)
                if by_tools:
                    return await self.task_tools.started(ctx, view)
                if asks_nobody:
                    return await self._asked_or_created(ctx, tool, view)
                if as_task:
                    return await self._created(tool, view)
                return await self._hold(ctx, tool, _Continuation(task=view.task_id), rnd, exchange, view)

    async def _begin(
        self,
        tool: Tool,
        args: BaseModel,
        principal: str,
        exchange: Exchange,
        idempotency_key: str | None,
        base: str,
    ) -> TaskView:
        """The call's task: started now, or the one its idempotency key or exchange names. ``base``:
        where the caller reached this server (the task's notifications link there)."""
        try:
            if idempotency_key is not None:
                task_id = self._tasks.ids.derived(principal, "task", principal, tool.name, idempotency_key)
                view, created = await self._start_keyed(tool, args, principal, task_id, base)
            elif exchange.rounds:
                # The last round of a pre-phase: the exchange names its task, so a replay of this
                # round (a proxy's retry, a lost response) finds the task, not a second one.
                task_id = self._tasks.ids.derived(principal, "exchange", principal, tool.name, exchange.id)
                view, created = await self._start_for_exchange(tool, args, principal, task_id, base)
            else:
                view, created = await self._tasks.start(tool, args, principal, base=base)
        except TooManyTasks:
            limit = self._settings.max_active_tasks_per_principal
            raise limit_reached(
                "max_active_tasks_per_principal", limit, "You have too many tasks running"
            ) from None
        except OwnerAttributeMissing:
            raise MCPError(code=INTERNAL_ERROR, message=UNAVAILABLE) from None
        if created:
            self._metrics.task_created(tool.name)
        request_info()["task_id"] = view.task_id
        return view

    async def _created(self, tool: Tool, view: TaskView) -> CallToolResult | dict[str, Any]:
        """A 2026-era call's answer once its task has started: the task (server-directed creation:
        the start is durable, so tasks/get already finds it), or its result when it is done at
        once (``task_inline_ms``; the spec leaves the choice to the server, per request)."""
        if self._settings.task_inline_ms:
            result = await self._tasks.completed_within(
                tool, view.task_id, self._settings.task_inline_ms / 1000
            )
            if result is not None:
                return result
        interval = self._poll_interval_ms(view)
        self._tasks.follow(view, interval)  # the client polls it next
        return {"resultType": "task", **view.wire(interval)}

    async def _asked_or_created(
        self, ctx: ServerRequestContext[Any, Any], tool: Tool, view: TaskView
    ) -> CallToolResult | dict[str, Any]:
        """Where the task stands in words (its questions, a person's with its link) if it asks
        within ``task_tool_wait_s``, else the task."""
        view = await self._tasks.wait(
            view.task_id,
            principal_of(ctx),
            lambda now: now.status != "working",
            self._settings.task_tool_wait_s,
            since=view,
        )
        if view.status == "input_required":
            return self.task_tools.shown(ctx, view, tool)
        return await self._created(tool, view)

    async def _start_keyed(
        self, tool: Tool, args: BaseModel, principal: str, task_id: str, base: str
    ) -> tuple[TaskView, bool]:
        """The task of this principal's idempotency key for ``tool``: started now, or the existing one."""
        try:
            view, created = await self._start_derived(tool, args, principal, task_id, base)
        except TaskNotFound:
            raise MCPError(
                code=INVALID_PARAMS, message="This idempotency key's task has expired; use a new key"
            ) from None
        except _OtherArguments:
            raise key_reused() from None
        return view, created

    async def _start_for_exchange(
        self, tool: Tool, args: BaseModel, principal: str, task_id: str, base: str
    ) -> tuple[TaskView, bool]:
        try:
            return await self._start_derived(tool, args, principal, task_id, base)
        except TaskNotFound:
            raise state_refused() from None  # the exchange's task has outlived its TTL
        except _OtherArguments:
            raise state_used() from None  # a replay with other answers, which led to other arguments

    async def _start_derived(
        self, tool: Tool, args: BaseModel, principal: str, task_id: str, base: str
    ) -> tuple[TaskView, bool]:
        digest = args_digest(args.model_dump(mode="json"))
        view, created = await self._tasks.start(
            tool, args, principal, task_id=task_id, args_digest=digest, base=base
        )
        if view.args_digest != digest:
            raise _OtherArguments
        return view, created

    async def _continue(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Tool,
        state: _Continuation,
        rnd: Round,
        exchange: Exchange,
    ) -> CallToolResult | InputRequiredResult:
        request_info()["task_id"] = state.task
        principal = principal_of(ctx)
        with self._held.hold(principal):  # before the answers go in: a refused round changes nothing
            read = self._tasks.to_answer if rnd.input_responses else self._tasks.get
            try:
                view = await read(state.task, principal)
            except TaskNotFound:
                raise _work_expired() from None
            if rnd.input_responses and view.status == "input_required":
                responses = {key: as_wire(answer) for key, answer in rnd.input_responses.items()}
                audience = self.people.audience(ctx)
                # An answer that does not fit is skipped: its question is asked again (SEP-2322).
                try:
                    delivered, words = await deliver(
                        self._tasks,
                        audience,
                        view,
                        responses,
                        caller=caller_of(ctx),
                        # 2025 era: the answers to the questions this held call pushed.
                        via="pushed" if audience.legacy else "form",
                        skip_invalid=True,
                    )
                except AnswerNotAuthorized:  # as a round refused by the tool's check: a tool error
                    return tool_error_result(NOT_AUTHORIZED)
                except AnswersTooLarge:
                    raise answers_too_large(self._settings.max_task_answer_bytes) from None
                if any(action != "accept" for action in words.values()):
                    # The host's decline or cancel says its person did not go to the page (a host
                    # that shows no prompt says it at once), not how they would answer. The call
                    # ends with the link, for the model and the person to go on with; the task
                    # waits for the page, and is no longer the exchange's to end.
                    await self._tasks.endings.release_exchange(state.task)
                    return self._at_page(tool, view, audience)
                # A URL request the person went to is answered on its page: held like one delivered.
                state = state.model_copy(update={"sent": sorted({*state.sent, *delivered, *words})})
            return await self._hold(ctx, tool, state, rnd, exchange, view)

    async def _hold(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Tool,
        state: _Continuation,
        rnd: Round,
        exchange: Exchange,
        task: TaskView,
    ) -> CallToolResult | InputRequiredResult:
        """Hold this round open while ``task`` works, then answer with what it came to (the caller
        counts it against the held-request bounds)."""
        if task.status not in TERMINAL:  # before the wait: a client may leave while it is held
            armed = await self._tasks.endings.keep_exchange(
                state.task, state.armed, self._settings.mrtr_wait_s
            )
            state = state.model_copy(update={"armed": armed})
        sent = set(state.sent)

        def settled(view: TaskView) -> bool:
            return view.status in TERMINAL or bool(set(view.input_requests or {}) - sent)

        last: str | None = None

        async def progress(view: TaskView) -> None:
            # What the tool reports, as progress notifications (SSE) while the round is held. The
            # value must grow with each one, across rounds too: the tool's own numbers when it
            # gives them (a step back waits until they pass the last one sent), else a count.
            nonlocal state, last
            if view.status_message is None or view.status_message == last:
                return
            last = view.status_message
            value = state.shown + 1 if view.progress is None else view.progress
            if value <= state.shown:
                return
            state = state.model_copy(update={"shown": value})
            total = view.total if view.progress is not None else None
            await rnd.progress(value, total, view.message or view.status_message)

        principal = principal_of(ctx)
        try:
            view = await self._tasks.wait(
                state.task, principal, settled, self._settings.mrtr_wait_s, seen=progress
            )
        except TaskNotFound:
            raise _work_expired() from None  # the task's TTL ran out while this round was held
        audience = self.people.audience(ctx)
        if state.urls:  # those the page has answered: the client may stop waiting for them
            still = await complete_urls(ctx, view, set(state.urls))
            state = state.model_copy(update={"urls": sorted(still)})
        if view.status == "completed" and view.result is not None:
            return CallToolResult.model_validate(view.result)
        if view.status == "failed" and view.error is not None:
            raise MCPError(code=int(view.error["code"]), message=str(view.error["message"]))
        if view.status == "cancelled":
            return tool_error_result(f"The call to {tool.name} was cancelled")
        # The continuation lives as long as the task: a person may take that long to answer.
        expires_at = task.created_at.timestamp() + task.ttl_ms / 1000
        unsent = {key: request for key, request in (view.input_requests or {}).items() if key not in sent}
        shown = audience.questions(view)
        questions = {key: _requests_adapter.validate_python(shown[key]) for key in unsent if key in shown}
        max_rounds = self._settings.max_rounds
        if unsent and not questions and any(audience.page_only(request) for request in unsent.values()):
            # Only a person can answer, on the page, and this client cannot send them there: the
            # call ends saying where; the task waits for the person (it is no longer the exchange's).
            await self._tasks.endings.release_exchange(state.task)
            return self._at_page(tool, view, audience)
        if audience.legacy:  # each URL request asked gets its "complete" once the page has its answer
            urls = {key for key in questions if audience.as_url(unsent[key])}
            state = state.model_copy(update={"urls": sorted({*state.urls, *urls})})
        following = _STATE_PREFIX + state.model_dump_json()
        if not questions:  # still working: the client retries with this state
            working = rnd.ask({}, state=following)
            return exchange.next_round(working, expires_at=expires_at, max_rounds=max_rounds, counts=False)
        try:
            return exchange.next_round(
                rnd.ask(questions, state=following), expires_at=expires_at, max_rounds=max_rounds
            )
        except MCPError:
            # Too many rounds, or the client cannot answer what the tool asks (now or on a retry):
            # nobody can carry the work on, so it stops.
            await self._tasks.cancel(view)
            raise

    def _at_page(self, tool: Tool, view: TaskView, audience: Audience) -> CallToolResult:
        """A call that ends while its task waits for a person on a page: where, in words and as the
        task (``structuredContent``, as the task tools show it), for the model and the person."""
        result = tool_error_result(_page_only_text(tool, view, audience))
        task = audience.wire(view, self._poll_interval_ms(view), as_urls=True)
        return as_call_of(tool, result.model_copy(update={"structured_content": task}))

    # tasks/* ----------------------------------------------------------------------------------

    def _poll_interval_ms(self, view: TaskView) -> int:
        """What suits the task's state. A task waiting for a person need not be read twice a second;
        a working one is read less often the longer it has worked (a twentieth of its age, from
        ``task_poll_interval_ms`` up to ten times that), like a backoff: one that has run for a
        minute is not likely to end in the next half second."""
        if view.status == "input_required":
            return self._settings.task_input_poll_interval_ms
        base = self._settings.task_poll_interval_ms
        age_ms = (datetime.now(UTC) - view.created_at).total_seconds() * 1000
        return int(min(max(base, age_ms / _POLL_AGE_SHARE), base * _POLL_BACKOFF_MAX))

    async def get_task(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        if is_legacy(ctx):
            return await self.legacy.get(ctx, _legacy_task_id(ctx, params))
        view, interval = await poll_task(
            ctx, self._tasks, self._task_id(ctx, params), self._poll_interval_ms, self._held
        )
        return self.people.audience(ctx).wire(view, interval)

    async def update_task(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
    ) -> dict[str, Any]:
        if is_legacy(ctx):
            raise method_not_found()  # 2025-11-25 answers through the questions tasks/result pushes
        view = await read_task(ctx, self._tasks, self._task_id(ctx, params), to_answer=True)
        responses = params.checked_responses()
        if view.status != "input_required":
            return {}
        caller = caller_of(ctx)
        principal = caller.principal
        audience = self.people.audience(ctx)
        try:
            async with temporal_errors("tasks/update"):
                delivered, words = await deliver(
                    self._tasks, audience, view, responses, caller=caller, via="form", skip_invalid=False
                )
                if words:  # not answers: noted, so the question is not listed again at once
                    await self._tasks.hear(view, words)

                def settled(now: TaskView) -> bool:
                    open_now = set(now.input_requests or {})
                    return now.status != "input_required" or not (
                        delivered & open_now
                        or any(k in open_now and not spoken_lately(now, k) for k in words)
                    )

                with self._held.hold_if_free(principal) as may_wait:
                    if (delivered or words) and may_wait:
                        # The signal is durable now. Wait briefly for the workflow to take it, so
                        # a tasks/get right after this ack no longer lists what it settled (with
                        # no worker running the wait runs out, and it is taken when one starts;
                        # at the held-request bound the ack comes at once).
                        await self._tasks.wait(
                            view.task_id, principal, settled, self._settings.answer_settle_s
                        )
        except AnswerNotAuthorized:
            # The words of a call the tool's check refuses, as -32602 like every answer this method
            # refuses (one that does not fit, a person's question): the request is well-formed, but
            # it carries an answer its sender may not give. Nothing was delivered.
            raise MCPError(code=INVALID_PARAMS, message=NOT_AUTHORIZED) from None
        except PersonMustAnswer as exc:
            # Said with the link: the person who reads the client's error can go there.
            message = f"{exc}: {audience.link(view, exc.key)}"
            raise MCPError(code=INVALID_PARAMS, message=message) from None
        except AnswerRejected as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        except AnswersTooLarge:
            raise answers_too_large(self._settings.max_task_answer_bytes) from None
        return {}

    async def cancel_task(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        if is_legacy(ctx):
            return await self.legacy.cancel(ctx, _legacy_task_id(ctx, params))
        view = await self._view(ctx, params)
        async with temporal_errors("tasks/cancel"):
            await self._tasks.cancel(view)
        return {}

    async def task_result(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        return await self.legacy.result(ctx, _legacy_task_id(ctx, params))

    async def list_tasks(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> dict[str, Any]:
        if not speaks_tasks(ctx):
            raise method_not_found()
        return await self.legacy.list(ctx, params.cursor)

    async def _view(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> TaskView:
        return await read_task(ctx, self._tasks, self._task_id(ctx, params))

    def _task_id(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> str:
        """The task a ``tasks/*`` request names, checked."""
        if not declares_tasks(ctx.session.client_capabilities):
            raise missing_tasks_extension()
        task_id = params.checked_task_id()
        headers = getattr(ctx.request, "headers", None)
        named = headers.get("mcp-name") if headers is not None else None
        # SEP-2663: tasks/* carry the task id in Mcp-Name (the SDK checks it only for core methods).
        # A header that disagrees with the body is refused: a proxy may have routed or authorized on
        # it. An absent one is tolerated, as a routing hint the server itself does not need:
        # fastmcp 4.1.4's tasks client never sends it.
        if named is not None and decode_header_value(named) != task_id:
            raise MCPError(code=HEADER_MISMATCH, message="Mcp-Name header does not match params.taskId")
        return task_id


class _OtherArguments(Exception):
    """A derived task id is taken by a task started with other arguments."""


def _legacy_task_id(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> str:
    """The task id of a ``tasks/*`` request at 2025-11-25; the methods do not exist before it, nor
    ``tasks/result`` after it."""
    if not speaks_tasks(ctx):
        raise method_not_found()
    return params.checked_task_id()


def _work_expired() -> MCPError:
    return MCPError(code=INVALID_PARAMS, message="This call's work has expired; call the tool again")


def _page_only_text(tool: Tool, view: TaskView, audience: Audience) -> str:
    lines = [
        f"{tool.name} waits for a person to answer on its page; only they can. The task "
        f"({view.task_id}) goes on once they have; they see it at {audience.base}/tasks."
    ]
    for key, link in audience.person_links(view).items():
        question = (view.input_requests or {})[key]
        message = (question.get("params") or {}).get("message", "")
        decision = approvers_decision(question)
        if decision is not None:
            lines.append(f"- {message} Approvers decide at {link} ({decision.said()})")
        else:
            lines.append(f"- {message} Answer at {link}")
    return "\n".join(lines)


def _continuation(request_state: str | None) -> _Continuation | None:
    if request_state is None or not request_state.startswith(_STATE_PREFIX):
        return None
    try:
        return _Continuation.model_validate_json(request_state.removeprefix(_STATE_PREFIX))
    except ValidationError:  # sealed by us, so only a bug gets here; treat it like a lapsed state
        raise state_refused() from None
