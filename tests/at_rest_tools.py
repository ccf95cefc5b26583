"""Tools that carry a caller's words into every kind of payload, for the at-rest tests (``--tools``).

``keep_secret`` (long) puts its argument into the question (the task memo), takes the answer as a
signal, runs an activity on both (activity input and result) and returns it upper-cased (the
workflow result); with ``refuse`` it fails with a tool error quoting the answer instead (a failure
message). ``note_secret`` (quick, not replay-safe) asks for a note, carries it in its
``requestState`` (reversed) to a second question, then returns it: each continuation round's
outcome, the unsealed state of the next round included, is kept in a run-once record.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow

# The worker re-imports this module in its workflow sandbox: the service package is passed through.
with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Round, Settings, ToolReturn, elicit
    from longtools.workflows import ToolError, ask_form


class SecretInput(BaseModel):
    text: str
    refuse: bool = False


class SecretAnswer(BaseModel):
    answer: str


class Sure(BaseModel):
    sure: bool


class SecretOutput(BaseModel):
    echo: str


@activity.defn(name="tests.at_rest.shout")
async def shout(text: str) -> str:
    return text.upper()


@workflow.defn(name="tests.keep_secret")
class KeepSecret:
    @workflow.run
    async def run(self, args: SecretInput) -> SecretOutput:
        answered = await ask_form(f"What goes with {args.text}?", SecretAnswer)
        said = answered.content.answer if answered.content is not None else ""
        if args.refuse:
            raise ToolError(f"Refused: {said.upper()}")
        shouted = await workflow.execute_activity(
            shout, f"{args.text} {said}", start_to_close_timeout=timedelta(seconds=30)
        )
        return SecretOutput(echo=shouted)


def register(registry: Registry, settings: Settings) -> None:
    @registry.tool("note_secret", input=SecretInput)
    async def note_secret(args: SecretInput, rnd: Round) -> ToolReturn:
        """Notes what the person says about the text, after a confirmation."""
        if rnd.request_state is None:
            answer = rnd.elicited("note", SecretAnswer)
            if answer is None:
                return rnd.ask({"note": elicit(f"A note on {args.text}?", SecretAnswer)})
            said = answer.content.answer if answer.content is not None else ""
            # Carried to the last round in the state, reversed so that it is a string of its own.
            return rnd.ask({"sure": elicit("Keep it?", Sure)}, state=said[::-1])
        sure = rnd.elicited("sure", Sure)
        if sure is None:
            return rnd.ask({"sure": elicit("Keep it?", Sure)}, state=rnd.request_state)
        return f"noted {rnd.request_state[::-1]}"

    registry.long_tool("keep_secret", workflow=KeepSecret, input=SecretInput, output=SecretOutput)
    registry.add_activities(shout)
