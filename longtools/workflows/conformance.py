"""The official conformance suite's task fixtures, as real long tools (served only with
``--conformance-fixtures``). Names, arguments and results follow the suite's ``tasks-*`` scenarios.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools.workflows._ask import ask, ask_form
    from longtools.workflows._errors import ProtocolError, ToolError
    from longtools.workflows._inputs import elicit


class SlowComputeInput(BaseModel):
    seconds: float = Field(ge=0, le=3600, description="How long the computation takes.")
    label: str | None = Field(None, description="A label echoed in the result.")


class DeleteInput(BaseModel):
    filename: str = Field(description="The file to delete.")


class GreetInput(BaseModel):
    name: str = Field(description="Who to greet.")


class NoInput(BaseModel):
    pass


class Confirm(BaseModel):
    confirm: bool = Field(description="Go ahead?")


class NameAndConfirm(BaseModel):
    name: str | None = Field(None, description="Your name.")
    confirm: bool | None = Field(None, description="Go ahead?")


@workflow.defn(name="conformance.slow_compute")
class SlowCompute:
    """Sleeps (durably) for the given seconds, then reports it is done; cancellable throughout."""

    @workflow.run
    async def run(self, args: SlowComputeInput) -> str:
        if args.seconds > 0:  # a zero timer is still a timer: Temporal fires it about a second later
            await workflow.sleep(timedelta(seconds=args.seconds))
        return f"Computed {args.label or 'result'} in {args.seconds:g}s"


@workflow.defn(name="conformance.failing_job")
class FailingJob:
    """A tool error after about a second: the task completes with isError."""

    @workflow.run
    async def run(self, args: NoInput) -> str:
        await workflow.sleep(timedelta(seconds=1))
        raise ToolError("This job failed on purpose")


@workflow.defn(name="conformance.protocol_error_job")
class ProtocolErrorJob:
    """Ends with a JSON-RPC error: the task is failed."""

    @workflow.run
    async def run(self, args: NoInput) -> str:
        raise ProtocolError(-32603, "The job hit an internal error on purpose")


@workflow.defn(name="conformance.confirm_delete")
class ConfirmDelete:
    """Asks for confirmation mid-task, then "deletes"."""

    @workflow.run
    async def run(self, args: DeleteInput) -> str:
        answer = await ask_form(f"Delete {args.filename}?", Confirm)
        if answer.content is not None and answer.content.confirm:
            return f"Deleted {args.filename}"
        return f"Kept {args.filename}"


@workflow.defn(name="conformance.multi_input")
class MultiInput:
    """Asks two questions at once; partial answers keep the task waiting for the other."""

    @workflow.run
    async def run(self, args: NoInput) -> str:
        answers = await ask(
            {
                "first": elicit("First question", NameAndConfirm),
                "second": elicit("Second question", NameAndConfirm),
            }
        )
        return "Answers: " + ", ".join(f"{key}={answer.model_dump_json()}" for key, answer in answers.items())


@workflow.defn(name="conformance.greet_task")
class GreetTask:
    """Greets the name gathered by the MRTR round that ran before the task started."""

    @workflow.run
    async def run(self, args: GreetInput) -> str:
        return f"Hello, {args.name}!"
