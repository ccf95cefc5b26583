"""``noop``'s workflow (B3, B6): it returns at once. Worker.

Workflow code only, one workflow per module: Temporal's sandbox imports this module afresh for
every new task, and builds every workflow class (and model) defined in it each time.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from bench.servers.longtools_activities import NoopInput, NoopOutput


@workflow.defn(name="bench.noop")
class Noop:
    """A long tool that does nothing and finishes at once."""

    @workflow.run
    async def run(self, args: NoopInput) -> NoopOutput:
        return NoopOutput(done=True)
