"""The Temporal floor's workflow, in a module of its own. Worker (the floor's process).

Temporal's sandbox imports a workflow's module afresh for every new workflow: this one holds the
workflow alone, so the floor pays for nothing else (``temporal_floor`` imports the generator's
modules, which the sandbox would import again for every workflow).
"""

from __future__ import annotations

from temporalio import workflow


@workflow.defn(name="bench.floor.empty")
class Empty:
    """Returns at once."""

    @workflow.run
    async def run(self) -> None:
        return None
