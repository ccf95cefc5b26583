"""Workflows that end a task each way it can end; for tests/test_metrics_unit.py only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools.workflows import ProtocolError, ToolError, ask, elicit


class FlowInput(BaseModel):
    ending: Literal["complete", "tool_error", "protocol_error", "wait", "bug"]


class AskInput(BaseModel):
    question: str = "Go on?"


class Go(BaseModel):
    go: bool


@workflow.defn(name="tests.metric_flow")
class MetricFlow:
    """Ends as ``args.ending`` says; ``wait`` waits for a cancel, ``bug`` fails every workflow task."""

    @workflow.run
    async def run(self, args: FlowInput) -> str:
        if args.ending == "tool_error":
            raise ToolError("no luck")  # a completed task whose result has isError
        if args.ending == "protocol_error":
            raise ProtocolError(-32602, "bad arguments")  # a failed task
        if args.ending == "wait":
            await workflow.wait_condition(lambda: False)
        if args.ending == "bug":
            raise RuntimeError("a bug in workflow code")  # fails the workflow task; Temporal retries
        return "done"


@workflow.defn(name="tests.metric_ask")
class MetricAsk:
    """Asks one question, then completes with the answer's action."""

    @workflow.run
    async def run(self, args: AskInput) -> str:
        answer = await ask(elicit(args.question, Go))
        return answer.action
