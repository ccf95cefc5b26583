"""A tool with its own authorization check, loaded by the ownership tests (``--tools``).

``guarded_note`` asks for a confirmation, then writes a note. Its check refuses any principal listed
in ``<data-dir>/revoked.txt``, a file the test edits between rounds: a grant from round 1 must not
carry over to round 2.
"""

from __future__ import annotations

from pydantic import BaseModel

from service import Caller, Registry, Round, Settings, ToolReturn, elicit


class NoteInput(BaseModel):
    text: str


class Confirm(BaseModel):
    confirm: bool


def register(registry: Registry, settings: Settings) -> None:
    revoked = settings.data_dir / "revoked.txt"

    async def allowed(caller: Caller, args: NoteInput) -> bool:
        listed = revoked.read_text().split() if revoked.exists() else []
        return caller.subject not in listed

    @registry.tool("guarded_note", input=NoteInput, authorize=allowed)
    async def guarded_note(args: NoteInput, rnd: Round) -> ToolReturn:
        """Writes a note after a confirmation."""
        answer = rnd.elicited("confirm", Confirm)
        if answer is None:
            return rnd.ask({"confirm": elicit(f"Write {args.text!r}?", Confirm)})
        return f"Wrote {args.text}"
