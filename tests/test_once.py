"""``RunOnce``, the run-once record behind replayed rounds and idempotency keys, on a real Temporal.

No worker runs here on purpose: a claim and its record are a workflow start and a signal, read
back from the history, so they hold while every worker is down.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp.shared.exceptions import MCPError
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from longtools._settings import Settings
from longtools.tasks import KeyReused, RunOnce
from tests.conftest import NO_VERSION_CHECK, TEMPORAL


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def once(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunOnce]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=NO_VERSION_CHECK,
    )
    client: Client = env.client
    try:
        yield RunOnce(Settings(data_dir=Path(tmp_path_factory.mktemp("once"))), lambda: client)
    finally:
        await env.shutdown()


async def _claimed(once: RunOnce, claim: str) -> None:
    """Wait (bounded) until Temporal holds the claim."""
    handle = once.connection().get_workflow_handle(f"longtools-once-{claim}")
    async with asyncio.timeout(10):
        while True:
            try:
                await handle.describe()
                return
            except RPCError:
                await asyncio.sleep(0.02)


async def test_twenty_concurrent_claims_run_the_work_once_and_all_get_its_outcome(once: RunOnce) -> None:
    runs: list[int] = []

    async def work() -> dict[str, Any]:
        runs.append(1)
        await asyncio.sleep(0.2)  # the others arrive while this one is still working
        return {"content": [{"type": "text", "text": f"run {len(runs)}"}]}

    claim = uuid.uuid4().hex
    outcomes = await asyncio.gather(*(once.run(claim, "args", work, ttl_s=60, wait_s=10) for _ in range(20)))
    assert len(runs) == 1
    assert all(outcome == {"content": [{"type": "text", "text": "run 1"}]} for outcome in outcomes)


async def test_a_first_error_is_the_recorded_outcome_too(once: RunOnce) -> None:
    async def fail() -> dict[str, Any]:
        raise MCPError(code=-32602, message="no such ticket")

    claim = uuid.uuid4().hex
    for _ in range(2):
        with pytest.raises(MCPError) as raised:
            await once.run(claim, "args", fail, ttl_s=60, wait_s=5)
        assert (raised.value.error.code, raised.value.error.message) == (-32602, "no such ticket")


async def test_a_claim_made_for_other_arguments_is_refused(once: RunOnce) -> None:
    async def work() -> dict[str, Any]:
        return {}

    claim = uuid.uuid4().hex
    await once.run(claim, "these", work, ttl_s=60, wait_s=5)
    with pytest.raises(KeyReused):
        await once.run(claim, "others", work, ttl_s=60, wait_s=5)


async def test_a_claim_whose_holder_never_recorded_is_a_clear_error_not_a_second_run(once: RunOnce) -> None:
    hold = asyncio.Event()

    async def stuck() -> dict[str, Any]:
        await hold.wait()
        return {}

    claim = uuid.uuid4().hex
    first = asyncio.create_task(once.run(claim, "args", stuck, ttl_s=60, wait_s=5))
    await _claimed(once, claim)

    async def never() -> dict[str, Any]:
        raise AssertionError("a duplicate must not run the work")

    with pytest.raises(MCPError) as raised:
        await once.run(claim, "args", never, ttl_s=60, wait_s=0.3)
    assert "still in progress" in raised.value.error.message
    hold.set()
    assert await first == {}
