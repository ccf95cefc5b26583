"""Tasks as tools: how a client with neither tasks nor elicitation follows and answers a long tool.
API process.

Chat hosts (claude.ai connectors, Claude Desktop, ChatGPT) call tools and show their results to a
model, nothing more: no task API to poll, no way to put a question to a person. For such a client a
long tool's call starts its task and answers, once the task has ended or asked or after
``task_tool_wait_s``, with a plain tool result that says where the task stands, in words the model
can relay (each question with its fields). Three built-in tools let the model go on:
``task_status``, ``task_answer`` (answers checked against the question's form, like
``tasks/update``'s) and ``task_cancel``. Each result carries the task as ``tasks/get`` shows it
as ``structuredContent``, and the same in words as text. Owner-checked like ``tasks/*``: an unknown
task id and another principal's read the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from mcp.server.context import ServerRequestContext
from mcp_types import CallToolResult, TextContent
from mcp_types import Tool as WireTool
from pydantic import BaseModel, Field, ValidationError

from longtools._logging import request_info
from longtools._protocol import ANSWER_LINKS_META
from longtools._settings import Settings
from longtools.auth import Caller, caller_of, principal_of
from longtools.decisions import approvers_decision
from longtools.server._limits import HeldRounds, answers_too_large
from longtools.server._people import Audience, People
from longtools.server._wire import NOT_AUTHORIZED, cancel_task, invalid_arguments, temporal_errors
from longtools.tasks import (
    TERMINAL,
    AnswerNotAuthorized,
    AnswerRejected,
    AnswersTooLarge,
    PersonMustAnswer,
    TaskNotFound,
    Tasks,
    TaskView,
)
from longtools.tools import Tool, tool_error_result

__all__ = ["TASK_TOOLS", "TaskTools", "as_call_of"]

_MAX_TASK_ID = 200
_NOT_ASKING = "It is not waiting for an answer now."
_MAX_TEXT = 4000
"""Most characters of a result's own text repeated in a task tool's text."""


class _TaskRef(BaseModel):
    task_id: str = Field(
        alias="taskId",
        min_length=1,
        max_length=_MAX_TASK_ID,
        description="The task's id, as a result named it.",
    )


class _TaskAnswer(_TaskRef):
    answers: dict[str, dict[str, Any]] = Field(
        description="Answers by question key, each as the question's kind takes it: for a form, "
        '{"action": "accept", "content": {<field>: <value>, ...}}, or {"action": "decline"} to refuse '
        'and {"action": "cancel"} to dismiss it.',
        min_length=1,
    )


TASK_TOOLS: Final[dict[str, tuple[str, type[_TaskRef]]]] = {
    "task_status": (
        "Where a long-running task stands: still working, waiting for an answer (with its questions), "
        "or done (with its result). Waits a few seconds for news before it answers.",
        _TaskRef,
    ),
    "task_answer": (
        "Answer the questions a long-running task waits on; then says where the task stands.",
        _TaskAnswer,
    ),
    "task_cancel": ("Stop a long-running task; says how it ended.", _TaskRef),
}
"""The three task tools: name, description, input model."""


def task_tool_listing() -> list[WireTool]:
    return [
        WireTool(
            name=name,
            title=name.replace("_", " ").capitalize(),
            description=description,
            input_schema={**model.model_json_schema(by_alias=True), "additionalProperties": False},
        )
        for name, (description, model) in TASK_TOOLS.items()
    ]


class TaskTools:
    """The task tools' calls, and the result a long tool's call gives such a client."""

    def __init__(
        self,
        settings: Settings,
        tasks: Tasks,
        poll_interval_ms: Callable[[TaskView], int],
        held: HeldRounds,
        people: People,
    ) -> None:
        self._settings = settings
        self._tasks = tasks
        self._poll_interval_ms = poll_interval_ms
        self._held = held
        self._people = people

    async def started(self, ctx: ServerRequestContext[Any, Any], view: TaskView) -> CallToolResult:
        """A long tool's call: its task once it has ended or asked, or after ``task_tool_wait_s``
        (the caller counts the wait against the held-request bounds)."""
        async with temporal_errors("tools/call"):
            view = await self._tasks.wait(
                view.task_id, principal_of(ctx), _settled, self._settings.task_tool_wait_s, since=view
            )
        return self._shown(view, self._people.audience(ctx))

    def shown(self, ctx: ServerRequestContext[Any, Any], view: TaskView, tool: Tool) -> CallToolResult:
        """Where ``view`` stands, as the answer to a call of ``tool`` itself (``as_call_of``)."""
        return as_call_of(tool, self._shown(view, self._people.audience(ctx)))

    async def call(
        self, ctx: ServerRequestContext[Any, Any], name: str, arguments: Mapping[str, Any] | None
    ) -> CallToolResult:
        _, model = TASK_TOOLS[name]
        try:
            args = model.model_validate(arguments or {}, extra="forbid")  # like Tool.parse_arguments
        except ValidationError as exc:
            return invalid_arguments(name, exc)
        request_info()["task_id"] = args.task_id
        caller = caller_of(ctx)
        principal = caller.principal
        audience = self._people.audience(ctx)
        try:
            async with temporal_errors(name):
                if name == "task_cancel":
                    view = await self._tasks.get(args.task_id, principal)
                    settle_s = self._settings.answer_settle_s
                    view = await cancel_task(self._tasks, self._held, view, principal, settle_s)
                    return self._shown(view, audience)
                with self._held.hold(principal):
                    read = self._tasks.get if name == "task_status" else self._tasks.to_answer
                    view = await read(args.task_id, principal)
                    if name == "task_status":
                        view = await self._news(view, principal)
                    else:
                        assert isinstance(args, _TaskAnswer)
                        outcome = await self._answer(view, caller, args.answers, audience)
                        if isinstance(outcome, CallToolResult):
                            return outcome
                        view = outcome
        except TaskNotFound:
            return tool_error_result(
                f"There is no task {args.task_id!r} of yours: the id is wrong, or the task has expired."
            )
        return self._shown(view, audience)

    async def _news(self, view: TaskView, principal: str) -> TaskView:
        """A working task after its next change, or after ``task_tool_wait_s`` (a model that polls
        then costs one call per change, not one per second)."""
        if view.status != "working":
            return view
        return await self._tasks.wait(
            view.task_id,
            principal,
            lambda now: now.status != "working" or now.status_message != view.status_message,
            self._settings.task_tool_wait_s,
            since=view,
        )

    async def _answer(
        self, view: TaskView, caller: Caller, answers: Mapping[str, Any], audience: Audience
    ) -> TaskView | CallToolResult:
        principal = caller.principal
        if view.status != "input_required":
            return self._refused(view, _NOT_ASKING, audience)
        open_questions = view.input_requests or {}
        unknown = sorted(set(answers) - set(open_questions))
        if unknown:
            return self._refused(
                view,
                f"It asks no question {', '.join(map(repr, unknown))}; "
                f"the open ones are {', '.join(map(repr, sorted(open_questions)))}.",
                audience,
            )
        try:
            delivered = set(await self._tasks.answer(view, answers, caller=caller, via="model"))
        except AnswerNotAuthorized:  # the tool's check refuses the caller now: as a refused call
            return tool_error_result(NOT_AUTHORIZED)
        except PersonMustAnswer as exc:  # a model may not answer it: only the person, on its page
            where = f"Ask the person to open {audience.link(view, exc.key)} and answer there."
            return self._refused(view, f"{exc}. {where}", audience)
        except AnswerRejected as exc:  # nothing was sent
            return self._refused(view, f"{exc}. {_what_fits(exc.key, open_questions[exc.key])}", audience)
        except AnswersTooLarge:
            raise answers_too_large(self._settings.max_task_answer_bytes) from None
        if not delivered:  # it ended (cancelled, expired, answered elsewhere) since it was read
            return self._refused(await self._tasks.read(view.task_id, principal), _NOT_ASKING, audience)
        # Once the workflow has taken the answers, wait for what they lead to: the next question,
        # the end, or the wait's bound.
        return await self._tasks.wait(
            view.task_id,
            principal,
            lambda now: _settled(now) and not delivered & set(now.input_requests or {}),
            self._settings.task_tool_wait_s,
            since=view,
        )

    def _refused(self, view: TaskView, why: str, audience: Audience) -> CallToolResult:
        shown = self._shown(view, audience)
        text = f"Not answered. {why}\n\n{_text_of(shown)}"
        return shown.model_copy(update={"content": [TextContent(type="text", text=text)], "is_error": True})

    def _shown(self, view: TaskView, audience: Audience) -> CallToolResult:
        task = audience.wire(view, self._poll_interval_ms(view), as_urls=True)
        links = task.get("_meta", {}).get(ANSWER_LINKS_META, {})
        return CallToolResult(
            content=[TextContent(type="text", text=_in_words(view, links))], structured_content=task
        )


def as_call_of(tool: Tool, shown: CallToolResult) -> CallToolResult:
    """A task tool's kind of result (the task in words, and as ``structuredContent``) as the answer
    to a call of ``tool`` itself, which is not the tool's result. Clients check a tool's
    ``structuredContent`` against the output schema it lists (the TypeScript SDK also when
    ``isError``) and want it in every result that is not an error: for a tool that lists one, the
    answer is a tool error with the task in words only. The answer links are in ``_meta`` either
    way, and in the words."""
    links = (shown.structured_content or {}).get("_meta", {}).get(ANSWER_LINKS_META)
    update: dict[str, Any] = {"meta": {ANSWER_LINKS_META: links}} if links else {}
    if tool.output_schema is not None:
        update |= {"structured_content": None, "is_error": True}
    return shown.model_copy(update=update)


def _settled(view: TaskView) -> bool:
    return view.status in TERMINAL or view.status == "input_required"


def _text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def _in_words(view: TaskView, links: Mapping[str, str]) -> str:
    head = f'Task "{view.task_id}" ({view.tool})'
    lines: list[str] = []
    if view.status == "working":
        lines.append(f"{head} is still working.")
        if view.status_message:
            lines.append(f"Latest news: {view.status_message}")
        lines.append(f'To follow it, call task_status with taskId "{view.task_id}".')
    elif view.status == "input_required":
        questions = view.input_requests or {}
        lines.append(f"{head} is waiting for an answer to {len(questions)} question(s).")
        if view.status_message:
            lines.append(f"Latest news: {view.status_message}")
        for key, question in questions.items():
            lines.append("")
            link = links.get(key)
            lines.extend(_question(key, question) if link is None else _persons_question(key, question, link))
        lines.append("")
        if set(questions) - set(links):
            lines.append(
                f'Ask the person, then call task_answer with taskId "{view.task_id}" and answers by '
                "question key."
            )
        lines.append(f'To stop the task instead, call task_cancel with taskId "{view.task_id}".')
    elif view.status == "completed":
        result = view.result or {}
        said = _result_text(result)
        verdict = "ended with an error" if result.get("isError") else "has completed"
        lines.append(f"{head} {verdict}.")
        if said:
            lines.append(f"Result: {said}")
    elif view.status == "failed":
        error = view.error or {}
        lines.append(f"{head} failed: {error.get('message', 'no reason given')}.")
    else:
        lines.append(f"{head} was cancelled.")
    return "\n".join(lines)


def _question(key: str, question: Mapping[str, Any]) -> list[str]:
    method = question.get("method")
    params = question.get("params") or {}
    if method == "elicitation/create" and params.get("mode") == "url":
        return [
            f'Question "{key}": {params.get("message", "")}',
            f"  The person should open {params.get('url')} and say when done; then answer "
            f'"{key}" with {{"action": "accept"}} (or "decline").',
        ]
    if method == "elicitation/create":
        schema = params.get("requestedSchema") or {}
        lines = [f'Question "{key}": {params.get("message", "")}']
        lines.extend(f"  - {line}" for line in _fields(schema))
        example = {name: _example(prop) for name, prop in (schema.get("properties") or {}).items()}
        lines.append(
            f'  Answer as "{key}": {json.dumps({"action": "accept", "content": example})}, '
            'or {"action": "decline"}.'
        )
        return lines
    if method == "sampling/createMessage":
        return [
            f'Question "{key}": the tool asks for a model reply to these messages: '
            f"{json.dumps(params.get('messages', []))[:_MAX_TEXT]}",
            f'  Answer as "{key}": {{"role": "assistant", "content": {{"type": "text", "text": "..."}}, '
            '"model": "<your model>"}.',
        ]
    return [
        f'Question "{key}": which folders (roots) the tool may use.',
        f'  Answer as "{key}": {{"roots": [{{"uri": "file:///path", "name": "..."}}]}}.',
    ]


def _persons_question(key: str, question: Mapping[str, Any], link: str) -> list[str]:
    """A question only the person may answer: the link to give them, never a form to fill in; for
    a decision, who decides and how it stands (``longtools.decisions``)."""
    params = question.get("params") or {}
    decision = approvers_decision(question)
    if decision is not None:
        return [
            f'Question "{key}": {params.get("message", "")}',
            f"  Approvers decide this on its page, not you and not the person you speak for: "
            f"{decision.said()}. Give the approvers this link: {link} . "
            "Call task_status to see when they have decided.",
        ]
    return [
        f'Question "{key}": {params.get("message", "")}',
        f"  Only the person may answer this, on its page: give them this link to open: {link} . "
        "You cannot answer it with task_answer; call task_status to see when they have.",
    ]


def _fields(schema: Mapping[str, Any]) -> list[str]:
    """Each field of a form, in words: name, kind, whether required, allowed values, description."""
    required = set(schema.get("required") or ())
    lines = []
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, Mapping):
            continue
        kind = prop.get("type", "value")
        if kind == "array":
            kind = "list"
        parts = [str(kind), "required" if name in required else "optional"]
        allowed = _allowed(prop)
        if allowed:
            parts.append(f"one of {allowed}")
        if "default" in prop:
            parts.append(f"default {json.dumps(prop['default'])}")
        described = prop.get("description") or prop.get("title")
        lines.append(f"{name} ({', '.join(parts)})" + (f": {described}" if described else ""))
    return lines


def _example(prop: Any) -> Any:
    """A value of the field's kind, for the model to copy the shape of an answer from."""
    if not isinstance(prop, Mapping):
        return None
    if "default" in prop:
        return prop["default"]
    allowed = _allowed(prop)
    if allowed is not None and prop.get("type") != "array":
        return json.loads(allowed.split(", ")[0])
    return {"boolean": True, "integer": 0, "number": 0, "array": []}.get(str(prop.get("type")), "...")


def _allowed(prop: Mapping[str, Any]) -> str | None:
    items = prop.get("items") if prop.get("type") == "array" else prop
    if not isinstance(items, Mapping):
        return None
    values: list[Any] = list(items.get("enum") or ())
    for choice in items.get("oneOf") or items.get("anyOf") or ():
        if isinstance(choice, Mapping) and "const" in choice:
            values.append(choice["const"])
    return ", ".join(json.dumps(value) for value in values) or None


def _what_fits(key: str, question: Mapping[str, Any]) -> str:
    """What an answer to ``question`` looks like, for a misfit's tool error."""
    return "What fits: " + " ".join(line.strip() for line in _question(key, question)[1:])


def _result_text(result: Mapping[str, Any]) -> str:
    texts = [
        str(block.get("text", ""))
        for block in result.get("content") or ()
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    said = "\n".join(texts)
    if not said and result.get("structuredContent") is not None:
        said = json.dumps(result["structuredContent"])
    return said[:_MAX_TEXT]
