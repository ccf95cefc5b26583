"""The ``longtools`` command line. Runs in the foreground process it was started in."""

from __future__ import annotations

import base64
import os
import secrets
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer._coercion import RuntimeParam
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    from longtools.client import Terminal

# Only typer at import time: each command imports what it runs (the server side, or the client
# stack), so `longtools call` does not pay for FastAPI and Temporal's worker, nor `serve` for the
# terminal client.


@dataclass(frozen=True)
class _Verbatim(RuntimeParam):
    """A ``str``, ``bool`` or ``list[str]`` value kept as click parsed it."""

    annotation: Any
    parameter_info: Any

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        return list(value) if isinstance(value, tuple | list) else value


def _verbatim(param: Any) -> None:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and descriptor.annotation in (str, bool, list[str]):
        param._runtime_param = _Verbatim(
            annotation=descriptor.annotation, parameter_info=descriptor.parameter_info
        )


class _ClientCommand(TyperCommand):
    """A terminal-client command whose string parameters and flags skip typer's coercion.

    typer 0.29 coerces every value, even ``--help``'s, through a pydantic ``TypeAdapter``: about
    0.35 s of imports and schema building (``python -X importtime``), most of what was left of
    ``longtools task get``'s half-second budget (bench/README.md, "The terminal client's
    start-up"). A string or a flag needs no coercion.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _verbatim(param)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _verbatim(option)
        return option


class _Group(TyperGroup):
    """A group whose ``--help`` flag skips typer's coercion (see ``_ClientCommand``): every command
    line passes through it."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _verbatim(option)
        return option


cli = typer.Typer(
    cls=_Group,
    name="longtools",
    help="An MCP server (2026-07-28, stateless Streamable HTTP) for long-running tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Option help shows "[env LONGTOOLS_..., default ...]"; as rich markup those brackets vanish.
    rich_markup_mode=None,
)


# Options shared by the commands; each is also an environment variable (see Settings).
_HostOpt = Annotated[
    str | None, typer.Option(help="Address to bind [env LONGTOOLS_HOST, default 127.0.0.1].")
]
_PortOpt = Annotated[
    int | None,
    typer.Option(help="Port of the MCP API; 0 picks a free one [env LONGTOOLS_PORT, default 8000]."),
]
_TemporalPortOpt = Annotated[
    int | None,
    typer.Option(
        help="Port of the embedded Temporal dev server's frontend; 0 picks a free one "
        "[env LONGTOOLS_TEMPORAL_PORT, default 7233]. Its HTTP API and metrics take free ports.",
    ),
]
_TemporalUiPortOpt = Annotated[
    int | None,
    typer.Option(
        help="Port of the embedded Temporal's Web UI; 0 picks a free one "
        "[env LONGTOOLS_TEMPORAL_UI_PORT, default: no UI].",
    ),
]
_DataDirOpt = Annotated[
    Path | None, typer.Option(help="Directory for local state [env LONGTOOLS_DATA_DIR, default .longtools].")
]
_FixturesOpt = Annotated[
    bool | None,
    typer.Option(
        "--conformance-fixtures/--no-conformance-fixtures",
        help="Also serve the official conformance suite's fixtures (off by default).",
    ),
]
_ExamplesOpt = Annotated[
    bool | None,
    typer.Option("--examples/--no-examples", help="Serve the helpdesk example tools (on by default)."),
]
_ToolsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        metavar="MODULE",
        help="A module of your own tools to load (repeatable); it defines register(registry, settings) "
        "[env LONGTOOLS_TOOLS, comma-separated].",
    ),
]
_AddressOpt = Annotated[
    str | None,
    typer.Option(help="Temporal frontend host:port [env LONGTOOLS_TEMPORAL_ADDRESS]."),
]
_NoAuthOpt = Annotated[
    bool | None,
    typer.Option(
        "--no-auth",
        help="Serve without authentication (every caller is one principal) [env LONGTOOLS_NO_AUTH]. "
        "The default for `serve` on a loopback address when no token or JWT setting is given.",
        show_default=False,
    ),
]
_KeysDataDirOpt = Annotated[
    Path | None,
    typer.Option(
        help="Data dir of the `longtools serve` whose keys.json to use when LONGTOOLS_PAYLOAD_KEYS is "
        "unset [env LONGTOOLS_DATA_DIR, default .longtools]."
    ),
]
"""For the operator's commands that read what the API and workers stored (codec-server, task show)."""
_NamespaceOpt = Annotated[str | None, typer.Option(help="Temporal namespace [default 'default'].")]
_QueueOpt = Annotated[
    str | None, typer.Option(help="Temporal task queue of the long tools [default 'longtools'].")
]


def _launch(options: dict[str, Any], *, listen: bool, worker: bool, embedded: bool) -> NoReturn:
    from longtools.cli._launch import launch  # the server side, imported only by the commands that run it

    launch(options, listen=listen, worker=worker, embedded=embedded)


@cli.command()
def serve(
    host: _HostOpt = None,
    port: _PortOpt = None,
    data_dir: _DataDirOpt = None,
    conformance_fixtures: _FixturesOpt = None,
    examples: _ExamplesOpt = None,
    tools: _ToolsOpt = None,
    temporal_address: _AddressOpt = None,
    temporal_namespace: _NamespaceOpt = None,
    task_queue: _QueueOpt = None,
    no_auth: _NoAuthOpt = None,
    temporal_port: _TemporalPortOpt = None,
    temporal_ui_port: _TemporalUiPortOpt = None,
) -> None:
    """Run everything (Temporal, a worker, the API) until Ctrl-C or SIGTERM; prints the MCP URL when ready.

    Without --temporal-address it starts the embedded Temporal dev server with its data in
    <data-dir>/temporal.db, so tasks survive a restart, and holds <data-dir>/serve.lock: a second
    serve on the same data dir is refused while this one runs. Ports it binds, all on loopback but the
    API's (--host): the API's (--port), Temporal's frontend (--temporal-port), its Web UI when
    asked for (--temporal-ui-port), and two free ones for Temporal's HTTP API and metrics.
    """
    _launch(dict(locals()), listen=True, worker=True, embedded=True)


@cli.command()
def api(
    host: _HostOpt = None,
    port: _PortOpt = None,
    data_dir: _DataDirOpt = None,
    conformance_fixtures: _FixturesOpt = None,
    examples: _ExamplesOpt = None,
    tools: _ToolsOpt = None,
    temporal_address: _AddressOpt = None,
    temporal_namespace: _NamespaceOpt = None,
    task_queue: _QueueOpt = None,
    no_auth: _NoAuthOpt = None,
) -> None:
    """Run only the MCP API (stateless; run as many as you like) against an existing Temporal."""
    _launch(dict(locals()), listen=True, worker=False, embedded=False)


@cli.command()
def worker(
    data_dir: _DataDirOpt = None,
    conformance_fixtures: _FixturesOpt = None,
    examples: _ExamplesOpt = None,
    tools: _ToolsOpt = None,
    temporal_address: _AddressOpt = None,
    temporal_namespace: _NamespaceOpt = None,
    task_queue: _QueueOpt = None,
) -> None:
    """Run only a worker for the long tools (run as many as you like) against an existing Temporal."""
    _launch(dict(locals()), listen=False, worker=True, embedded=False)


@cli.command()
def keygen() -> None:
    """Print a new key (for LONGTOOLS_STATE_KEYS or LONGTOOLS_PAYLOAD_KEYS)."""
    typer.echo(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())


@cli.command("codec-server")
def codec_server(
    # Not LONGTOOLS_HOST/PORT (the MCP server's): named apart so that no setting is read for them.
    listen_host: Annotated[
        str,
        typer.Option("--host", help="Address to bind; anything but loopback needs LONGTOOLS_CODEC_TOKEN."),
    ] = "127.0.0.1",
    listen_port: Annotated[int, typer.Option("--port", help="Port to bind; 0 picks a free one.")] = 8081,
    data_dir: _KeysDataDirOpt = None,
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-origin",
            metavar="ORIGIN",
            help="A Temporal Web UI origin allowed to call it from the browser, e.g. http://localhost:8233 "
            "(repeatable); requests from any other origin are refused.",
        ),
    ] = None,
) -> None:
    """Decrypt (and encrypt) Temporal payloads for `temporal --codec-endpoint` and the Web UI.

    Temporal's remote codec protocol (POST /decode, /encode) over LONGTOOLS_PAYLOAD_KEYS, or the
    keys.json of a `serve` data dir. It shows every stored payload in plain text to whoever reaches
    it: keep it on loopback, or set LONGTOOLS_CODEC_TOKEN (the CLI then passes --codec-auth
    "Bearer <token>"). See docs/operations.md.
    """
    from longtools.cli._codecserver import run  # the server side, imported only here

    run(host=listen_host, port=listen_port, data_dir=data_dir, allowed_origins=allowed_origin or [])


# The terminal client --------------------------------------------------------------------------

_UrlArg = Annotated[str, typer.Argument(help="The server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp.")]
_TaskIdArg = Annotated[
    str, typer.Argument(help="The task's id (printed when it started); put -- before one that starts with -.")
]
# An id is data, not an option: a task command takes an unknown "-..." word as its id.
_TASK_COMMAND = {"ignore_unknown_options": True}
_TokenOpt = Annotated[
    str | None, typer.Option(envvar="LONGTOOLS_TOKEN", help="Bearer token [env LONGTOOLS_TOKEN].")
]
_AnswerOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--answer",
        metavar="FIELD=VALUE",
        help="Answer a form field without a prompt (repeatable); any form naming FIELD takes it.",
    ),
]
_DebugOpt = Annotated[bool, typer.Option("--debug", help="Show a traceback for unexpected errors.")]


task_cli = typer.Typer(
    cls=_Group,
    name="task",
    help="Look at, follow, answer, cancel or audit a task on an MCP server (Tasks extension).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
cli.add_typer(task_cli)


@task_cli.command("show")
def task_show(
    task_id: Annotated[str, typer.Argument(help="The task's id (its Temporal workflow id).")],
    temporal_address: Annotated[
        str | None,
        typer.Option(
            help="Temporal frontend host:port [env LONGTOOLS_TEMPORAL_ADDRESS, default 127.0.0.1:7233]."
        ),
    ] = None,
    temporal_namespace: _NamespaceOpt = None,
    data_dir: _KeysDataDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON.")] = False,
) -> None:
    """Print a task's history from Temporal, event by event, every payload decrypted (operators).

    Its status, memo, activities still retrying with their last failure, each event (arguments,
    answers, activity failures with their messages) and the task's failure with its stack trace.
    Reads Temporal directly, not the MCP server; needs the payload key ring (LONGTOOLS_PAYLOAD_KEYS
    or the keys.json of --data-dir, as codec-server finds them).
    """
    from longtools.cli._show import show  # Temporal's SDK, imported only here

    show(
        {
            "temporal_address": temporal_address,
            "temporal_namespace": temporal_namespace,
            "data_dir": data_dir,
        },
        task_id,
        as_json=as_json,
    )


@cli.command(cls=_ClientCommand)
def call(
    url: _UrlArg,
    tool: Annotated[str, typer.Argument(help="The tool to call.")],
    arguments: Annotated[
        list[str] | None,
        typer.Argument(metavar="[KEY=VALUE]...", help="Tool arguments, typed by the tool's input schema."),
    ] = None,
    json_args: Annotated[
        str | None, typer.Option("--json", metavar="ARGS", help="Tool arguments as a JSON object.")
    ] = None,
    answer: _AnswerOpt = None,
    no_task: Annotated[
        bool, typer.Option("--no-task", help="Do not declare the tasks extension (MRTR rounds only).")
    ] = False,
    detach: Annotated[
        bool, typer.Option("--detach", help="If the tool starts a task, print its id and leave it running.")
    ] = False,
    cancel_on_question: Annotated[
        bool,
        typer.Option(
            "--cancel-on-question",
            help="Without a terminal, cancel a task that asks what no --answer gives (else it waits).",
        ),
    ] = False,
    raw: Annotated[bool, typer.Option("--raw", help="Print the result as raw JSON.")] = False,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """Call a tool on any MCP 2026-07-28 server, answering its questions at the prompt.

    A long tool runs as a task: a status line (or a progress bar) shows it working; Ctrl-C offers
    to cancel it or to leave it running and print its id. Without a terminal, a task that asks
    what no --answer gives is left waiting: its id is printed, with the commands that answer or
    cancel it, and the exit status is 3.
    """
    from longtools import client as _client

    request = _client.CallRequest(
        url=url,
        tool=tool,
        pairs=arguments or [],
        json_args=json_args,
        answers=answer or [],
        task=not no_task,
        token=token,
        raw=raw,
        detach=detach,
        cancel_on_question=cancel_on_question,
    )
    _run_client(lambda terminal: _client.call(request, terminal), debug)


@cli.command("tools", cls=_ClientCommand)
def tools_(
    url: _UrlArg,
    raw: Annotated[bool, typer.Option("--raw", help="Print the tools as raw JSON.")] = False,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """List a server's tools: name, whether a call may run as a task, title or description.

    TASK is "may" when the server advertises the Tasks extension (it then decides per call), "no"
    when it does not, and "-" when it does not say.
    """
    from longtools import client as _client

    _run_client(lambda terminal: _client.tools(url, token, raw, terminal), debug)


@task_cli.command("get", context_settings=_TASK_COMMAND, cls=_ClientCommand)
def task_get(
    url: _UrlArg,
    task_id: _TaskIdArg,
    raw: Annotated[bool, typer.Option("--raw", help="Print the task as raw JSON.")] = False,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """Show a task: its status, what it asks, its result."""
    from longtools import client as _client

    _run_client(lambda terminal: _client.task_get(url, task_id, token, raw, terminal), debug)


@task_cli.command("watch", context_settings=_TASK_COMMAND, cls=_ClientCommand)
def task_watch(
    url: _UrlArg,
    task_id: _TaskIdArg,
    answer: _AnswerOpt = None,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """Follow a task to its end, answering what it asks at the prompt."""
    from longtools import client as _client

    _run_client(lambda terminal: _client.task_watch(url, task_id, token, answer or [], terminal), debug)


@task_cli.command("answer", context_settings=_TASK_COMMAND, cls=_ClientCommand)
def task_answer(
    url: _UrlArg,
    task_id: _TaskIdArg,
    fields: Annotated[
        list[str] | None, typer.Argument(metavar="[FIELD=VALUE]...", help="Form fields of the answer.")
    ] = None,
    json_responses: Annotated[
        str | None,
        typer.Option("--json", metavar="RESPONSES", help="The inputResponses object as JSON, sent as is."),
    ] = None,
    token: _TokenOpt = None,
    debug: _DebugOpt = False,
) -> None:
    """Answer what a task asks, without prompts."""
    from longtools import client as _client

    _run_client(
        lambda terminal: _client.task_answer(url, task_id, token, fields or [], json_responses, terminal),
        debug,
    )


@task_cli.command("cancel", context_settings=_TASK_COMMAND, cls=_ClientCommand)
def task_cancel(url: _UrlArg, task_id: _TaskIdArg, token: _TokenOpt = None, debug: _DebugOpt = False) -> None:
    """Cancel a task, and say whether it was cancelled, had already ended, or is still stopping."""
    from longtools import client as _client

    _run_client(lambda terminal: _client.task_cancel(url, task_id, token, terminal), debug)


@task_cli.command("audit", context_settings=_TASK_COMMAND, cls=_ClientCommand)
def task_audit(url: _UrlArg, task_id: _TaskIdArg, token: _TokenOpt = None, debug: _DebugOpt = False) -> None:
    """Print a task's ledger, one signed entry a JSON line, oldest first (save it, then check it
    offline with `longtools audit verify`).

    For the task's owner, and for an approver while its question waits for them.
    """
    from longtools import client as _client

    _run_client(lambda terminal: _client.task_audit(url, task_id, token, terminal), debug)


audit_cli = typer.Typer(
    cls=_Group,
    name="audit",
    help="Check a saved task ledger offline, and print the keys that sign ledgers.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
cli.add_typer(audit_cli)


@audit_cli.command("verify")
def audit_verify(
    file: Annotated[
        str,
        typer.Argument(help="A ledger as `longtools task audit` printed it (JSON lines); - reads stdin."),
    ],
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key",
            metavar="PUBLIC",
            help="Trust only this public key's signatures (repeatable; `longtools audit keys` prints them).",
        ),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option("--task", metavar="ID", help="Require every entry to be of this task."),
    ] = None,
    passkey: Annotated[
        list[str] | None,
        typer.Option(
            "--passkey",
            metavar="PUBLIC",
            help="Trust only this passkey for approvals signed with one (repeatable; each person's "
            "/passkeys page shows theirs).",
        ),
    ] = None,
) -> None:
    """Check a ledger offline: every entry unchanged, none removed or moved, each signed.

    Prints "OK: ..." and exits 0, or "FAILED: entry at line L (seq S): ..." naming the first entry
    that does not hold, and exits 1. Without --key, any key the file names is taken: pin the
    deployment's. Without --task, a whole ledger of another task holds too: pin the task.
    """
    from longtools.cli._audit import verify

    raise typer.Exit(verify(file, key or [], task, passkey or []))


@audit_cli.command("keys")
def audit_keys(data_dir: _KeysDataDirOpt = None) -> None:
    """Print the deployment's ledger public keys, one a line, the signing one first.

    From LONGTOOLS_LEDGER_KEYS, or derived from the payload keys (LONGTOOLS_PAYLOAD_KEYS, or the
    keys.json of --data-dir) as the workers derive them. Public halves only: safe to hand to an
    auditor, for `longtools audit verify --key`.
    """
    from longtools.cli._audit import keys

    raise typer.Exit(keys(data_dir))


def _run_client(command: Callable[[Terminal], int], debug: bool) -> NoReturn:
    from longtools import client as _client

    terminal = _client.Terminal()
    try:
        code = command(terminal)
    except KeyboardInterrupt:
        terminal.pause()
        code = 130
    except Exception as exc:
        terminal.pause()
        message = _client.explain(exc)
        if debug:
            traceback.print_exception(exc)
        if message is None:
            message = f"unexpected error ({type(exc).__name__}: {exc}); run with --debug for details"
        typer.echo(f"longtools: {message}", err=True)
        code = 1
    raise typer.Exit(code)


def main() -> None:
    code = 0
    try:
        cli()
    except KeyboardInterrupt:
        code = 130
    except SystemExit as exc:  # typer ends every command this way, success included
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without interpreter teardown: a process that used Temporal's Rust core can abort while
    # finalizing (temporalio/sdk-python#300, exit 134) after all its work is done.
    os._exit(code)
