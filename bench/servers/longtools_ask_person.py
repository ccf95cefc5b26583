"""``ask_person``'s workflow (B10): one question only the person who asked may answer. Worker.

``by="person"`` makes it a person's question, which a deployment that notifies people tells them
of: the task starts a notice (a child workflow) that mails the requester their answer link.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from bench.servers.longtools_person_models import Answered, GoOn, PersonInput
    from longtools.workflows import ask_form


@workflow.defn(name="bench.ask_person")
class AskPerson:
    """Ask the requester one form question on the answer page, and wait for it."""

    @workflow.run
    async def run(self, args: PersonInput) -> Answered:
        answer = await ask_form("Go on?", GoOn, by="person")
        return Answered(answered=answer.content is not None and answer.content.go)
