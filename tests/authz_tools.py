"""Tools with their own checks, loaded by the ownership tests (``--tools``).

``guarded_note`` asks for a confirmation, then writes a note for its caller. Its check refuses any
principal listed in ``<data-dir>/revoked.txt``, a file the test edits between rounds: a grant from
round 1 must not carry over to round 2. ``broken_check`` has a check that crashes (it must refuse),
and ``careful_start`` is a long tool whose pre-phase refuses an empty note with a tool error.

``guarded_long_note`` and ``guarded_approval`` are long tools under the same check, whose workflows
ask a form question any client may answer, and a person's question (answered on its page only):
the check runs again on every answer to their tasks (tests/test_answer_authz.py).
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

# The worker re-imports this module in its workflow sandbox: the service package is passed through.
with workflow.unsafe.imports_passed_through():
    from longtools import Caller, Registry, Round, Settings, ToolError, ToolReturn, ask_form, elicit


class NoteInput(BaseModel):
    text: str


class Confirm(BaseModel):
    confirm: bool


@workflow.defn(name="tests.echo_note")
class EchoNote:
    @workflow.run
    async def run(self, args: NoteInput) -> str:
        return args.text


def _written(args: NoteInput, answer: Confirm | None) -> str:
    return f"Wrote {args.text}" if answer is not None and answer.confirm else "Not written"


@workflow.defn(name="tests.confirm_note")
class ConfirmNote:
    """Asks its caller's client to confirm the note (a form any client may answer), then writes it."""

    @workflow.run
    async def run(self, args: NoteInput) -> str:
        answer = await ask_form(f"Write {args.text!r}?", Confirm)
        return _written(args, answer.content)


@workflow.defn(name="tests.approve_note")
class ApproveNote:
    """Asks a person to approve the note (on its answer page only), then writes it."""

    @workflow.run
    async def run(self, args: NoteInput) -> str:
        answer = await ask_form(f"Approve {args.text!r}?", Confirm, by="person")
        return _written(args, answer.content)


async def _refuse_empty(args: NoteInput, rnd: Round) -> NoteInput:
    if not args.text.strip():
        raise ToolError("Say something first")
    return args


def register(registry: Registry, settings: Settings) -> None:
    revoked = settings.data_dir / "revoked.txt"

    async def allowed(caller: Caller, args: NoteInput) -> bool:
        listed = revoked.read_text().split() if revoked.exists() else []
        return caller.subject not in listed

    async def crashes(caller: Caller, args: NoteInput) -> bool:
        raise RuntimeError("the permission service is down")

    @registry.tool("guarded_note", input=NoteInput, authorize=allowed)
    async def guarded_note(args: NoteInput, rnd: Round) -> ToolReturn:
        """Writes a note after a confirmation."""
        answer = rnd.elicited("confirm", Confirm)
        if answer is None:
            return rnd.ask({"confirm": elicit(f"Write {args.text!r}?", Confirm)})
        return f"Wrote {args.text} for {rnd.caller.subject}"

    @registry.tool("broken_check", input=NoteInput, authorize=crashes)
    async def broken_check(args: NoteInput, rnd: Round) -> ToolReturn:
        """Never runs: its check fails."""
        return "ran anyway"

    registry.long_tool("careful_start", workflow=EchoNote, input=NoteInput, before=_refuse_empty)
    registry.long_tool("guarded_long_note", workflow=ConfirmNote, input=NoteInput, authorize=allowed)
    registry.long_tool(
        "guarded_approval", workflow=ApproveNote, input=NoteInput, authorize=allowed, asks_person=True
    )
