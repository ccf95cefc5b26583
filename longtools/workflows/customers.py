"""``delete_customer``: delete every ticket of a customer, once two leads have approved. Workflow code.

The example of a decision (``longtools.decisions``): a destructive call that waits, durably, for
two people of group ``leads``, never the one who asked, to approve exactly what will happen (the
proposal lists the tickets). One refusal rejects; past the deadline it expires; either way nothing
is deleted. Only an approval deletes, each ticket in its own activity, once (``TicketStore.delete``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools.activities.helpdesk import (
        APPROVALS,
        APPROVERS_GROUP,
        ApprovalPolicyInput,
        CustomerInput,
        DeleteTicketRequest,
        HelpdeskActivities,
    )
    from longtools.decisions import Approved, Approvers, Rejected, name_of
    from longtools.workflows._ask import ask_form, report
    from longtools.workflows._ledger import requester

_CALL = timedelta(seconds=30)


class DeleteCustomerInput(BaseModel):
    customer: str = Field(min_length=1, max_length=200, description="The customer whose tickets are deleted.")


class DeleteCustomerForm(BaseModel):
    note: str = Field("", max_length=200, description="A note for the record, if any.")


class DeleteCustomerOutput(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)

    customer: str
    outcome: Literal["deleted", "nothing_to_delete", "rejected", "expired", "cannot_be_approved"]
    message: str
    deleted: list[str] = []
    approved_by: list[str] = []
    rejected_by: str | None = None


@workflow.defn(name="delete_customer")
class DeleteCustomer:
    """Delete all tickets of a customer after two leads (not the requester) approve the list."""

    @workflow.run
    async def run(self, args: DeleteCustomerInput) -> DeleteCustomerOutput:
        policy = await workflow.execute_activity_method(
            HelpdeskActivities.approval_policy,
            ApprovalPolicyInput(requester=requester()),
            start_to_close_timeout=_CALL,
        )
        if policy.cannot is not None:
            return DeleteCustomerOutput(
                customer=args.customer, outcome="cannot_be_approved", message=policy.cannot
            )
        found = await workflow.execute_activity_method(
            HelpdeskActivities.customer_tickets,
            CustomerInput(customer=args.customer),
            start_to_close_timeout=_CALL,
        )
        ids = found.ticket_ids
        if not ids:
            said = f"{args.customer} has no tickets: nothing to delete."
            return DeleteCustomerOutput(customer=args.customer, outcome="nothing_to_delete", message=said)
        decision = await ask_form(
            f"Delete {len(ids)} ticket{'s' if len(ids) != 1 else ''} of {args.customer}?",
            DeleteCustomerForm,
            by=Approvers(groups=(APPROVERS_GROUP,), quorum=APPROVALS, exclude_requester=True),
            timeout=timedelta(seconds=policy.deadline_s),
            summary=f"Deletes these tickets of {args.customer}, for good: {', '.join(ids)}",
        )
        if isinstance(decision, Rejected):
            by = name_of(decision.by)
            said = f"Rejected by {by}: nothing was deleted."
            return DeleteCustomerOutput(
                customer=args.customer, outcome="rejected", message=said, rejected_by=by
            )
        if not isinstance(decision, Approved):  # expired: there is no default approval
            said = "No decision before the deadline: nothing was deleted."
            return DeleteCustomerOutput(customer=args.customer, outcome="expired", message=said)
        result = DeleteCustomerOutput(
            customer=args.customer,
            outcome="deleted",
            message="",
            approved_by=[vote.name for vote in decision.votes],
        )
        operation = workflow.info().workflow_id
        for done, ticket_id in enumerate(ids, start=1):
            outcome = await workflow.execute_activity_method(
                HelpdeskActivities.delete_ticket,
                DeleteTicketRequest(ticket_id=ticket_id, operation=operation),
                start_to_close_timeout=_CALL,
            )
            if outcome.result == "deleted":
                result.deleted.append(ticket_id)
            report(f"Deleted {done} of {len(ids)}", progress=done, total=len(ids))
        approvers = ", ".join(result.approved_by)
        result.message = f"Deleted {len(result.deleted)} of {len(ids)} tickets, approved by {approvers}."
        return result
