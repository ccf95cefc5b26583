"""``longtools call``, ``longtools tools`` and ``longtools task``: a terminal client for any MCP
2026-07-28 server. CLI process.

On the small wire client of ``_wire.py`` (MRTR rounds, the per-request ``_meta`` and headers) plus
the Tasks extension (``_follow.py``). A person sees prompts for what a tool asks (``_forms.py``),
a status line with the elapsed time while a task runs, a progress bar when the tool reports how
far it is, and the result: text, and ``structuredContent`` as JSON. Prompts and status go to
stderr, results to stdout, so ``--raw`` output can be piped. Every failure a person can cause or
meet is one line that says what to do next.

What a command does not need it does not import: rich (the status line, the bar, the prompts) only
when stderr is a terminal, the forms module only when a tool asks something.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from longtools._protocol import PROGRESS_META, TASKS_EXTENSION
from longtools.client._follow import (
    FINAL,
    Detached,
    Follower,
    Task,
    TaskCancelled,
    TaskFailed,
    cancel_task,
    get_task,
    is_not_found,
    on_a_page,
    poll_seconds,
    update_task,
)
from longtools.client._pages import DECLINE_KEYS, Keys, PageQuestion, page_questions, without_links
from longtools.client._wire import ClientError, Connection, RpcError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID
    from rich.status import Status

VERSION = "2026-07-28"
ELICITATION: dict[str, Any] = {"form": {}, "url": {}}
PROGRESS_TOKEN = "longtools-cli"
MAX_QUESTION_ROUNDS = 20
"""MRTR rounds that ask something, per call: a bound on a server that never stops asking."""
CANCEL_WAIT_S = 10.0
"""How long ``task cancel`` waits for the task to reach an end before saying it is still stopping."""
WAITING_EXIT = 3
"""``call`` or ``task watch`` left a task waiting for an answer it could not give without a terminal."""


class Interrupted(Exception):
    """Ctrl-C at a prompt."""


class Declined(Exception):
    """The person pressed the key that declines going to the page of the questions a task waits for."""

    def __init__(self, questions: Sequence[PageQuestion]) -> None:
        super().__init__("declined")
        self.questions = list(questions)


class Unanswered(Exception):
    """A question no ``--answer`` answers, met without a terminal to ask it at."""

    def __init__(self, message: str, fields: Sequence[str], page: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = list(fields)
        self.page = page
        """Where a person answers it, for a question answered on its page (a URL request)."""


@dataclass
class Terminal:
    """What a person sees and types: prompts and the status line on stderr, results on stdout."""

    answers: Mapping[str, str] = field(default_factory=dict)
    """``--answer field=value`` pairs, used for any form whose fields they name."""
    interactive: bool = field(default_factory=lambda: sys.stdin.isatty())
    cancel_on_question: bool = False
    """Without a terminal, a question a person answers on its page ends the following (raises
    ``Unanswered``, for ``call --cancel-on-question`` to cancel the task) instead of waiting."""
    live: bool = field(default_factory=lambda: sys.stderr.isatty() and os.environ.get("TERM") != "dumb")
    """A spinner and a bar on stderr (a terminal that can redraw a line); else a log-like line per
    change."""
    pages: dict[str, PageQuestion] = field(default_factory=dict)
    """The questions the task waits for on their pages, each shown once (by key)."""
    _console: Console | None = None
    _status: Status | None = None
    _bar: Progress | None = None
    _bar_id: TaskID | None = None
    _fraction: float = 0.0
    """The furthest the progress has been: the bar never runs backwards."""
    _started: float = field(default_factory=time.monotonic)
    _last: str = ""
    _keys: Keys | None = None

    @property
    def err(self) -> Console:
        if self._console is None:
            from rich.console import Console  # 0.1 s: only for the live display and prompts

            self._console = Console(stderr=True, highlight=False, soft_wrap=True)
        return self._console

    def out(self, text: str) -> None:
        self.pause()
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def say(self, text: str) -> None:
        """A line on stderr, below any live display."""
        self.pause()
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    # The status line and the progress bar ---------------------------------------------------

    def _log(self, line: str) -> None:
        if line != self._last:  # a log-like line per change when nobody watches a spinner
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            self._last = line

    def show(self, state: str, message: str | None) -> None:
        if not self.live:
            self._log(state + (f": {message}" if message else ""))
            return
        if self._bar is not None and self._bar_id is not None:
            self._bar.update(self._bar_id, description=_described(state, message))
            return
        elapsed = time.monotonic() - self._started
        text = f"{state} · {elapsed:.0f}s" + (f" · {message}" if message else "")
        if self._status is None:
            self._status = self.err.status(text)
            self._status.start()
        else:
            self._status.update(text)

    def progress(
        self, progress: float, total: float | None, message: str | None, state: str = "working"
    ) -> None:
        if total is None or total <= 0:
            self.show(state, f"{progress:g}" + (f" · {message}" if message else ""))
            return
        self._fraction = max(self._fraction, min(progress / total, 1.0))
        done = self._fraction * total
        if not self.live:
            self._log(f"{state} {done:g}/{total:g}" + (f": {message}" if message else ""))
            return
        if self._bar is None:
            self._start_bar()
        assert self._bar is not None and self._bar_id is not None
        self._bar.update(
            self._bar_id,
            completed=done,
            total=total,
            description=_described(state, message),
            count=f"{done:g}/{total:g}",
        )

    def _start_bar(self) -> None:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        if self._status is not None:
            self._status.stop()
            self._status = None
        self._bar = Progress(
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=self.err,
        )
        self._bar_id = self._bar.add_task("", total=None, count="")
        self._bar.start()

    def pause(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if self._bar is not None:
            self._bar.stop()  # its last frame stays on screen; a later update starts a new one
            self._bar = None
            self._bar_id = None

    def close(self) -> None:
        """Stop the live display and give the terminal its own mode back (before a prompt, and
        when a command ends)."""
        self.pause()
        if self._keys is not None:
            self._keys.off()

    def on_task(self, task: Task) -> None:
        status = task["status"]
        if status == "completed":  # it went on past its questions: the pages had the answers
            self._follow_pages({"status": status})
        if status not in ("working", "input_required"):
            return
        self._follow_pages(task)
        message = task.get("statusMessage")
        message = without_links(message if isinstance(message, str) else None, self.pages)
        if self.pages and not message:
            message = "waiting for the answer on its page"
        meta = task.get("_meta")
        reported = meta.get(PROGRESS_META) if isinstance(meta, dict) else None
        if isinstance(reported, dict) and _is_number(reported.get("progress")):
            total = reported.get("total")
            total = total if _is_number(total) else None
            # The numbers are in the bar's count: the message says them once, not twice.
            message = _without_numbers(message, reported["progress"], total)
            self.progress(reported["progress"], total, message, f"task {status}")
        else:
            self.show(f"task {status}", message)

    def _follow_pages(self, task: Task) -> None:
        """Show the link of each new question the task waits for on a page, and say when the page
        has the answer to one shown (it is no longer open)."""
        now = page_questions(task)
        for key, question in self.pages.items():
            if key not in now:
                said = f" to {_one_line(question.message)!r}" if question.message else ""
                self.say(f"The page has the answer{said}; following the task.")
        for key, question in now.items():
            shown = self.pages.get(key)
            if shown is None:
                self._show_page(question)
            elif not question.message and shown.message:
                now[key] = PageQuestion(key, shown.message, question.link, question.asked)
        self.pages = now
        if not now and self._keys is not None:
            self._keys.off()

    def _show_page(self, question: PageQuestion, *, held: bool = False) -> None:
        from longtools.client._forms import PAGE_HINT, PAGE_HINT_HELD, _clean, show_link

        self.pause()
        if self.interactive:
            show_link(self.err, question.message, question.link, PAGE_HINT_HELD if held else PAGE_HINT)
            return
        if self.cancel_on_question and not held:
            raise Unanswered(question.message, [], question.link)
        asks = _clean(question.message) if question.message else "a question"
        if question.decision is not None:
            stands = _clean(question.decision)
            self.say(f"{asks}: approvers decide it on its page ({stands}): {_clean(question.link)}")
            return
        self.say(f"{asks}: a person answers it on its page: {_clean(question.link)}")

    def idle(self, seconds: float) -> None:
        """Wait ``seconds`` before the task is read again; while it waits for a person's page,
        watch the keys for the one that declines going there.

        Raises:
            Declined: that key was pressed.
        """
        if not (self.interactive and self.pages) or (self._keys is not None and self._keys.ended):
            time.sleep(seconds)
            return
        if self._keys is None:
            self._keys = Keys(sys.stdin.fileno())
        self._keys.on()
        deadline = time.monotonic() + seconds
        hinted = False
        while (left := deadline - time.monotonic()) > 0:
            typed = self._keys.read(left)
            if self._keys.ended:
                time.sleep(max(deadline - time.monotonic(), 0))
                return
            if DECLINE_KEYS & set(typed):
                self.close()
                raise Declined(list(self.pages.values()))
            if typed and not hinted:  # y, n, Enter: a habit of the old y/n prompt, which is gone
                self.say("The task goes on by itself once the page has the answer: d declines, Ctrl-C stops.")
                hinted = True

    def on_notification(self, message: Mapping[str, Any]) -> None:
        params = message.get("params")
        if not isinstance(params, dict) or message.get("method") != "notifications/progress":
            return
        if _is_number(params.get("progress")):
            total, text = params.get("total"), params.get("message")
            self.progress(
                params["progress"],
                total if _is_number(total) else None,
                text if isinstance(text, str) else None,
            )

    # Answers ---------------------------------------------------------------------------------

    def answer_wire(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """An input request (wire JSON) answered; only elicitation is declared."""
        params = request.get("params")
        if request.get("method") != "elicitation/create" or not isinstance(params, dict):
            raise ClientError(f"the server asked for something this client cannot answer ({key})")
        return self.answer_elicitation(params)

    def answer_elicitation(self, params: Mapping[str, Any]) -> dict[str, Any]:
        from longtools.client._forms import (  # only when a tool asks: it loads jsonschema and rich
            FormError,
            FormPrompter,
            content_from_pairs,
            missing_required,
        )

        self.close()
        message = str(params.get("message", ""))
        if params.get("mode") == "url":
            # An MRTR round's URL request (a task's is never answered here, see Follower): shown,
            # and "accept" says so; the server holds the next round until the page has the answer.
            self._show_page(PageQuestion("", message, str(params.get("url", "")), True), held=True)
            return {"action": "accept"}
        schema = params.get("requestedSchema")
        schema = schema if isinstance(schema, dict) else {}
        fields = schema.get("properties", {})
        given = {key: value for key, value in self.answers.items() if key in fields}
        if given or not self.interactive:
            try:
                missing = missing_required(schema, given)
                if not missing:
                    return {"action": "accept", "content": content_from_pairs(schema, given)}
            except FormError as exc:
                raise ClientError(f"--answer does not fit {message!r}: {exc}") from None
            if not self.interactive:
                raise Unanswered(message, [*given, *missing])
        try:
            with _prompting():
                return _wire_answer(FormPrompter(self.err).prompt(message, schema))
        except FormError as exc:
            raise ClientError(f"the tool asks with a form this client cannot show: {exc}") from None

    # Results ---------------------------------------------------------------------------------

    def result(self, result: Mapping[str, Any], raw: bool) -> int:
        """Print a tool's result; the exit code is 1 for a tool error."""
        failed = result.get("isError") is True
        if raw:
            self.out(json.dumps(result, ensure_ascii=False, separators=(",", ":")))
            return 1 if failed else 0
        structured = result.get("structuredContent")
        content = result.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                if structured is not None and _same_json(block["text"], structured):
                    continue  # the text form of structuredContent, shown below as JSON
                if failed:  # an error, said on stderr like every other one the CLI prints
                    self.say(f"longtools: tool error: {block['text']}")
                else:
                    self.out(block["text"])
            else:
                self.out(f"[{block.get('type')} content]")
        if structured is not None:
            self.out(json.dumps(structured, indent=2, ensure_ascii=False))
        return 1 if failed else 0


def _described(state: str, message: str | None) -> str:
    return state + (f" · {message}" if message else "")


def _without_numbers(message: str | None, progress: float, total: float | None) -> str | None:
    """``message`` without the "(3/10)" a server adds for clients that show only the message."""
    if not message:
        return message
    numbers = f"{progress:g}" + ("" if total is None else f"/{total:g}")
    if message == numbers:
        return None
    return message.replace(f" ({numbers})", "", 1)


def _one_line(text: str) -> str:
    from longtools.client._forms import _one_line as one_line  # loaded once a page question is shown

    return one_line(text)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _wire_answer(result: Any) -> dict[str, Any]:
    answer: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return answer


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


@contextlib.contextmanager
def _prompting() -> Iterator[None]:
    """Ctrl-C or Ctrl-D at a prompt interrupts it (one exception for the command to handle)."""
    try:
        yield
    except (KeyboardInterrupt, EOFError):
        raise Interrupted from None


# Commands ---------------------------------------------------------------------------------------


def _capabilities(tasks: bool) -> dict[str, Any]:
    caps: dict[str, Any] = {"elicitation": ELICITATION}
    if tasks:
        caps["extensions"] = {TASKS_EXTENSION: {}}
    return caps


TASK_CAPS = _capabilities(tasks=True)


@dataclass
class CallRequest:
    url: str
    tool: str
    pairs: Sequence[str]
    json_args: str | None
    answers: Sequence[str]
    task: bool
    token: str | None
    raw: bool
    detach: bool = False
    cancel_on_question: bool = False


def call(request: CallRequest, terminal: Terminal) -> int:
    terminal.answers = _pairs(request.answers, "--answer")
    terminal.cancel_on_question = request.cancel_on_question
    if request.detach and not request.task:
        raise ClientError("--detach needs the tasks extension; drop --no-task")
    caps = _capabilities(request.task)
    connection = Connection(request.url, request.token)
    listed = {tool.get("name"): tool for tool in _list_tools(connection, caps)}
    tool = listed.get(request.tool)
    if tool is None:
        known = ", ".join(sorted(str(name) for name in listed)) or "none"
        raise ClientError(f"the server has no tool {request.tool!r} (it has: {known})")
    schema = tool.get("inputSchema")
    arguments = _arguments(schema if isinstance(schema, dict) else {}, request.pairs, request.json_args)
    follower = Follower(
        answer=terminal.answer_wire, on_update=terminal.on_task, idle=terminal.idle, detach=request.detach
    )
    try:
        result = _call_rounds(connection, request.tool, arguments, caps, terminal, follower)
    except Detached as detached:
        terminal.out(detached.task_id)
        return 0
    except (KeyboardInterrupt, Interrupted):
        return _interrupted(connection, follower, terminal, request.url)
    except Unanswered as unanswered:
        if follower.current is None:  # an MRTR question: nothing is left waiting on the server
            needed = " ".join(f"--answer {name}=..." for name in unanswered.fields)
            raise ClientError(f"the tool asks {unanswered.message!r}; answer it with {needed}") from None
        return _left_waiting(connection, follower.current, unanswered, request.url, terminal, request)
    except Declined as declined:
        assert follower.current is not None  # only a task's questions wait for a key
        return _declined(connection, follower.current, declined, request.url, terminal)
    finally:
        terminal.close()
    return terminal.result(result, request.raw)


def _call_rounds(
    connection: Connection,
    name: str,
    arguments: Mapping[str, Any],
    caps: Mapping[str, Any],
    terminal: Terminal,
    follower: Follower,
) -> dict[str, Any]:
    """``tools/call`` to its final result: MRTR rounds answered, a task followed."""
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments)}
    asked_rounds = 0
    waits = 0
    while True:
        result = connection.request(
            "tools/call", params, caps, notify=terminal.on_notification, progress_token=PROGRESS_TOKEN
        )
        kind = result.get("resultType", "complete")
        if kind == "complete":
            return result
        if kind == "task" and isinstance(result.get("taskId"), str):
            if follower.detach:
                raise Detached(result["taskId"])
            poll = result.get("pollIntervalMs")
            return follower.follow(
                connection, result["taskId"], caps, poll if isinstance(poll, int) else None
            )
        if kind != "input_required":
            raise ClientError(
                f"the server answered tools/call with resultType {kind!r}, which MCP does not define"
            )
        requests = result.get("inputRequests")
        requests = requests if isinstance(requests, dict) else {}
        params = {"name": name, "arguments": dict(arguments)}
        if requests:
            asked_rounds += 1
            if asked_rounds > MAX_QUESTION_ROUNDS:
                raise ClientError(
                    f"the tool asked more than {MAX_QUESTION_ROUNDS} rounds of questions; giving up"
                )
            params["inputResponses"] = {
                key: terminal.answer_wire(key, value)
                for key, value in requests.items()
                if isinstance(value, dict)
            }
            waits = 0
        else:
            # "Not yet": the server held the round while the work ran; back off briefly (as the
            # SDK's client does) in case it answered at once.
            time.sleep(min(0.05 * 2**waits, 0.25))
            waits += 1
        state = result.get("requestState")
        if isinstance(state, str):
            params["requestState"] = state


def _left_waiting(
    connection: Connection,
    task_id: str,
    unanswered: Unanswered,
    url: str,
    terminal: Terminal,
    request: CallRequest | None,
) -> int:
    """A task asks what no ``--answer`` gives, with no terminal to ask at: cancel it (when told
    to), or leave it waiting and say how to answer it or cancel it."""
    if request is not None and request.cancel_on_question:
        outcome = _cancel(connection, task_id)
        raise ClientError(f"task {task_id} asks {unanswered.message!r} (--cancel-on-question): {outcome}")
    fields = " ".join(f"{name}=..." for name in unanswered.fields)
    terminal.out(task_id)
    if unanswered.page is not None:
        terminal.say(
            f"longtools: task {task_id} waits for a person to answer {unanswered.message!r} on its page: "
            f"{unanswered.page}   follow it with: longtools task watch {shlex.quote(url)} -- {task_id}   "
            f"or cancel it with: longtools task cancel {shlex.quote(url)} -- {task_id}"
        )
        return WAITING_EXIT
    terminal.say(
        f"longtools: task {task_id} waits for an answer to {unanswered.message!r}; answer it with: "
        f"longtools task answer {shlex.quote(url)} -- {task_id} {fields}   or cancel it with: "
        f"longtools task cancel {shlex.quote(url)} -- {task_id}"
    )
    return WAITING_EXIT


def _declined(connection: Connection, task_id: str, declined: Declined, url: str, terminal: Terminal) -> int:
    """The person will not go to the page: said to the server (a URL request's ``decline``, which
    answers nothing: the task goes on waiting for its page), and how to follow or cancel the task."""
    asked = {question.key: {"action": "decline"} for question in declined.questions if question.asked}
    if asked:
        with contextlib.suppress(RpcError):  # the page may have had the answer just before
            update_task(connection, task_id, asked, TASK_CAPS)
    first = declined.questions[0]
    return _left_waiting(
        connection, task_id, Unanswered(first.message or "its question", [], first.link), url, terminal, None
    )


def _interrupted(connection: Connection, follower: Follower, terminal: Terminal, url: str) -> int:
    """Ctrl-C: a running task may be cancelled on the server or left running (its id is printed)."""
    terminal.close()
    if terminal.interactive or terminal.live:
        terminal.say("")  # the terminal echoed "^C" where the cursor was: what follows starts below it
    task_id = follower.current
    if task_id is None:
        terminal.say("interrupted")
        return 130
    cancel = False
    if terminal.interactive:
        with contextlib.suppress(Interrupted), _prompting():
            from rich.text import Text

            # Text, not a str: rich would read "[y/N]" as markup and drop it.
            reply = terminal.err.input(Text(f"Cancel task {task_id} on the server? [y/N] ")).strip().lower()
            cancel = reply in ("y", "yes")
    if cancel:
        terminal.say(_cancel(connection, task_id))
        return 130
    terminal.say(
        f"task {task_id} keeps running; follow it with: longtools task watch {shlex.quote(url)} -- {task_id}"
    )
    return 130


def tools(url: str, token: str | None, raw: bool, terminal: Terminal) -> int:
    """The server's tools: name, whether the server may answer a call with a task, title or description."""
    connection = Connection(url, token)
    listed = _list_tools(connection, TASK_CAPS)
    if raw:
        terminal.out(json.dumps(listed, ensure_ascii=False, separators=(",", ":")))
        return 0
    if not listed:
        terminal.out("the server has no tools")
        return 0
    as_task = _runs_as(connection)
    rows = [("TOOL", "TASK", "DESCRIPTION")]
    rows += [(str(tool.get("name")), as_task, _summary(tool)) for tool in listed]
    width = max(len(name) for name, _, _ in rows)
    for name, runs, summary in rows:
        terminal.out(f"{name:<{width}}  {runs:<4}  {summary}".rstrip())
    return 0


def _runs_as(connection: Connection) -> str:
    """Whether a call may run as a task, as 2026-07-28 says it: "may" when ``server/discover``
    advertises the Tasks extension, "no" when it does not (then no call ever does), "-" when the
    server does not say (no ``server/discover``).

    The same for every tool: under the extension (SEP-2663) the server decides per call, and a tool
    declares nothing (2025-11-25's ``execution.taskSupport`` is not in the 2026-07-28 ``Tool``). A
    2025-11-25 listing would describe another revision's calls, and a ``_meta`` key one server's.
    """
    try:
        found = connection.request("server/discover", {}, TASK_CAPS)
    except RpcError:
        return "-"
    capabilities = found.get("capabilities")
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return "may" if isinstance(extensions, dict) and TASKS_EXTENSION in extensions else "no"


def _summary(tool: Mapping[str, Any]) -> str:
    for key in ("title", "description"):
        text = tool.get(key)
        if isinstance(text, str) and text.strip():
            return text.strip().splitlines()[0]
    return ""


def _list_tools(connection: Connection, caps: Mapping[str, Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    for _ in range(100):  # pages; a bound on a server whose cursor never ends
        page = connection.request("tools/list", params, caps)
        listed = page.get("tools")
        tools.extend(tool for tool in (listed if isinstance(listed, list) else []) if isinstance(tool, dict))
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
        params = {"cursor": cursor}
    return tools


def task_get(url: str, task_id: str, token: str | None, raw: bool, terminal: Terminal) -> int:
    task = _get(Connection(url, token), task_id)
    if raw:
        terminal.out(json.dumps(task, ensure_ascii=False, separators=(",", ":")))
        return 0
    pages = page_questions(task) if task["status"] not in FINAL else {}
    said = task.get("statusMessage")
    message = without_links(said if isinstance(said, str) else None, pages)  # each has a line below
    terminal.out(
        f"task {task.get('taskId', task_id)}: {task['status']}" + (f" ({message})" if message else "")
    )
    asked = _asked(task)
    for key, question in asked.items():
        params = question.get("params")
        text = params.get("message", "") if isinstance(params, dict) else ""
        terminal.out(f"  asks [{key}]: {text}")
        page = pages.get(key)
        if page is not None and page.decision is not None:
            terminal.out(f"    approvers decide it on its page ({page.decision}): {page.link}")
        elif on_a_page(question):  # a person's question: where they answer it
            terminal.out(f"    answer it on its page: {question['params'].get('url')}")
    for key, page in pages.items():
        if key in asked:
            continue
        if page.decision is not None:  # approvers decide it; the person who asked follows it there
            terminal.out(
                f"  waits for approvers [{key}]: {page.decision}; they decide it on its page: {page.link}"
            )
        else:  # only its link is listed (a host spoke of it lately)
            terminal.out(f"  waits for a person [{key}]: answer it on its page: {page.link}")
    if task["status"] == "completed" and isinstance(task.get("result"), dict):
        return terminal.result(task["result"], raw=False)
    error = task.get("error")
    if task["status"] == "failed" and isinstance(error, dict):
        terminal.out(f"  error {error.get('code')}: {error.get('message')}")
    return 0


def task_watch(url: str, task_id: str, token: str | None, answers: Sequence[str], terminal: Terminal) -> int:
    terminal.answers = _pairs(answers, "--answer")
    connection = Connection(url, token)
    follower = Follower(answer=terminal.answer_wire, on_update=terminal.on_task, idle=terminal.idle)
    try:
        result = follower.follow(connection, task_id, TASK_CAPS)
    except (KeyboardInterrupt, Interrupted):
        return _interrupted(connection, follower, terminal, url)
    except Unanswered as unanswered:
        return _left_waiting(connection, task_id, unanswered, url, terminal, None)
    except Declined as declined:
        return _declined(connection, task_id, declined, url, terminal)
    except RpcError as exc:
        raise _task_error(exc, task_id) from None
    finally:
        terminal.close()
    return terminal.result(result, raw=False)


def task_answer(
    url: str, task_id: str, token: str | None, pairs: Sequence[str], raw_json: str | None, terminal: Terminal
) -> int:
    pairs, raw_json = _answer_words(pairs, raw_json)
    connection = Connection(url, token)
    task = _get(connection, task_id)
    asked = _asked(task) if task["status"] == "input_required" else {}
    # A person's questions: listed as URL requests, or by their links only (a host spoke lately).
    pages = {} if task["status"] in FINAL else {key: q.link for key, q in page_questions(task).items()}
    if not asked and not pages:
        raise ClientError(f"task {task_id} is {task['status']} and asks nothing")
    if raw_json is not None:
        responses = _json_object(raw_json, "--json")
        unknown = sorted(set(responses) - set(asked) - set(pages))
        if unknown:
            known = ", ".join(sorted({*asked, *pages}))
            raise ClientError(f"task {task_id} does not ask {', '.join(unknown)}; it asks: {known}")
    else:
        terminal.answers = _pairs(pairs, "answer")
        terminal.interactive = False
        forms = {key: request for key, request in asked.items() if key not in pages}
        fields = {name for request in forms.values() for name in _fields(request)}
        unknown = sorted(set(terminal.answers) - fields)
        if pages and (unknown or not forms):
            links = " ".join(pages.values())
            raise ClientError(f"task {task_id} waits for a person to answer on its page: {links}")
        if unknown:
            known = ", ".join(sorted(fields)) or "none"
            raise ClientError(f"task {task_id} asks no field {', '.join(unknown)}; it asks: {known}")
        try:
            responses = {key: terminal.answer_wire(key, request) for key, request in forms.items()}
        except Unanswered as unanswered:
            needed = " ".join(f"{name}=..." for name in unanswered.fields)
            raise ClientError(
                f"task {task_id} asks {unanswered.message!r}; answer it with {needed}"
            ) from None
    try:
        update_task(connection, task_id, responses, TASK_CAPS)
    except RpcError as exc:
        raise ClientError(f"the server refused the answer: {exc.message}") from None
    after = _get(connection, task_id)
    # What is said to a URL request answers nothing: its page takes the person's answer.
    answered = [key for key in sorted(responses) if key not in pages]
    done = [f"answered {', '.join(answered)}"] if answered else []
    for key in sorted(responses.keys() & pages.keys()):
        action = responses[key].get("action") if isinstance(responses[key], dict) else None
        done.append(f"said {action} to {key} (a person answers it on its page: {pages[key]})")
    terminal.out(f"{'; '.join(done)}; task {task_id} is {after['status']}")
    return 0


def task_cancel(url: str, task_id: str, token: str | None, terminal: Terminal) -> int:
    terminal.out(_cancel(Connection(url, token), task_id))
    return 0


def _cancel(connection: Connection, task_id: str) -> str:
    """Cancel a task and say what became of it, from its state after the cancel (waited for, with
    a bound): cancellation is cooperative, and a task may end another way first."""
    before = _get(connection, task_id)
    if before["status"] in FINAL:
        return f"task {task_id}: already {before['status']}; nothing cancelled"
    try:
        cancel_task(connection, task_id, TASK_CAPS)
    except RpcError as exc:
        raise _task_error(exc, task_id) from None
    deadline = time.monotonic() + CANCEL_WAIT_S
    while True:
        after = _get(connection, task_id)
        if after["status"] == "cancelled":
            return f"task {task_id}: cancelled"
        if after["status"] in FINAL:
            return f"task {task_id}: already {after['status']}; nothing cancelled"
        if time.monotonic() >= deadline:
            return f"task {task_id}: cancel requested; the task is still stopping"
        time.sleep(min(poll_seconds(after), 0.25, max(deadline - time.monotonic(), 0)))


def _asked(task: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    asked = task.get("inputRequests")
    if not isinstance(asked, dict):
        return {}
    return {key: value for key, value in asked.items() if isinstance(value, dict)}


def _fields(request: Mapping[str, Any]) -> list[str]:
    params = request.get("params")
    schema = params.get("requestedSchema") if isinstance(params, dict) else None
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return list(properties) if isinstance(properties, dict) else []


def _get(connection: Connection, task_id: str) -> Task:
    try:
        return get_task(connection, task_id, TASK_CAPS)
    except RpcError as exc:
        raise _task_error(exc, task_id) from None


def _task_error(exc: RpcError, task_id: str) -> ClientError:
    if is_not_found(exc):
        return ClientError(f"task {task_id} not found: unknown, expired, or started by someone else")
    if exc.code == -32021:
        return ClientError("the server does not support the tasks extension")
    return ClientError(f"the server refused the request: {exc.message}")


def explain(exc: BaseException) -> str | None:
    """One line for a failure the CLI knows how to name, else None (a bug: shown with --debug)."""
    if isinstance(exc, ClientError):
        return str(exc)
    if isinstance(exc, TaskFailed):
        return f"the task failed: {exc.error.get('message', 'no message')} (error {exc.error.get('code')})"
    if isinstance(exc, TaskCancelled):
        return f"task {exc.task_id} was cancelled"
    if isinstance(exc, RpcError):
        return f"the server refused the call: {exc.message} (error {exc.code})"
    if isinstance(exc, OSError):
        return f"the connection to the server failed: {exc}"
    return None


# Arguments --------------------------------------------------------------------------------------


def _answer_words(words: Sequence[str], raw_json: str | None) -> tuple[list[str], str | None]:
    """``task answer``'s words after the task id: FIELD=VALUE pairs, or ``--json RESPONSES`` (after
    ``--`` every word comes here, options too: ``task answer URL -- ID --json ...``).

    Raises:
        ClientError: an option other than ``--json`` among them, ``--json`` twice or without its
            value, or pairs and ``--json`` together.
    """
    pairs: list[str] = []
    rest = list(words)
    while rest:
        word = rest.pop(0)
        name, sep, value = word.partition("=")
        if name == "--json":
            if raw_json is not None:
                raise ClientError("--json is given twice; give the inputResponses object once")
            if not sep:
                if not rest:
                    raise ClientError("--json needs a value: the inputResponses object, as JSON")
                value = rest.pop(0)
            raw_json = value
        elif word.startswith("--") or (word.startswith("-") and not sep):
            raise ClientError(
                f"{word!r} is not an answer (FIELD=VALUE) and not an option task answer takes after "
                "the task id; put options before the task id"
            )
        else:
            pairs.append(word)
    if pairs and raw_json is not None:
        raise ClientError("give the answer as FIELD=VALUE pairs or as --json, not both")
    return pairs, raw_json


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ClientError(f"{what} {item!r} is not key=value")
        pairs[key] = value
    return pairs


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ClientError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ClientError(f"{what} must be a JSON object")
    return value


def _arguments(schema: Mapping[str, Any], pairs: Sequence[str], json_args: str | None) -> dict[str, Any]:
    """``key=value`` pairs typed by the tool's inputSchema, over the ``--json`` object."""
    arguments = _json_object(json_args, "--json") if json_args is not None else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    for key, value in _pairs(pairs, "argument").items():
        prop = properties.get(key)
        arguments[key] = _typed(key, value, prop if isinstance(prop, dict) else {})
    return arguments


def _typed(key: str, value: str, schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
        if kind == "boolean":
            lowered = value.lower()
            if lowered not in ("true", "false", "yes", "no", "1", "0"):
                raise ValueError(value)
            return lowered in ("true", "yes", "1")
        if kind in ("object", "array"):
            return json.loads(value)
    except ValueError:
        raise ClientError(f"argument {key}={value!r} is not a valid {kind}") from None
    return value
