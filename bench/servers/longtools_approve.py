"""``approve``'s workflow (B9): one decision by two approvers, then it returns. Worker.

Nothing runs after the approval but the task's own end (its ledger's last entries, signed), so the
time from the last vote to the task's completion is the decision's own.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from bench.servers.longtools_person_models import APPROVERS, Decided, Note, PersonInput
    from longtools.decisions import Approved, Approvers, Rejected
    from longtools.workflows import ask_form


@workflow.defn(name="bench.approve")
class Approve:
    """Ask ``APPROVERS`` to approve; both must."""

    @workflow.run
    async def run(self, args: PersonInput) -> Decided:
        decision = await ask_form(
            "Go ahead?", Note, by=Approvers(principals=APPROVERS, quorum=len(APPROVERS)), summary="Nothing"
        )
        if isinstance(decision, Approved):
            return Decided(outcome="approved", votes=[vote.name for vote in decision.votes])
        return Decided(outcome="rejected" if isinstance(decision, Rejected) else "expired")
