"""Very long tasks complete: thousands of steps, a hundred questions, and continue-as-new.

Temporal ends a workflow whose history passes 51,200 events or 50 MiB. longtools' own bookkeeping
adds one event per ``report`` and two per question (the memo that shows the task); these tests
show a long tool stays well inside, and that a tool which continues as new to keep its history
short is still one task to its client: same id, same creation time, question keys never reused.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from temporalio.client import Client

from tests.conftest import Served, StepsRun, start_server
from tests.wire import TASKS_EXTENSION, post, result, wait_for_task

TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
HISTORY_EVENTS_LIMIT = 51_200  # Temporal's limit.historyCount.error


@pytest.fixture(scope="module")
def long_tasks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = start_server(tmp_path_factory.mktemp("long"), "--tools", "tests.long_tools")
    try:
        yield served
    finally:
        served.stop()


def _start(served: Served, tool: str, arguments: dict[str, Any]) -> str:
    task = result(post(served.url, "tools/call", {"name": tool, "arguments": arguments}, caps=TASK_CAPS))
    return str(task["taskId"])


def _answer(served: Served, task_id: str, key: str, value: int) -> None:
    answers = {key: {"action": "accept", "content": {"value": value}}}
    result(post(served.url, "tasks/update", {"taskId": task_id, "inputResponses": answers}, caps=TASK_CAPS))


def _asked(served: Served, task_id: str, seen: set[str]) -> tuple[str, dict[str, Any]]:
    """The next question's key (one not seen before) and the task as it shows it."""
    task = wait_for_task(served.url, task_id, lambda now: bool(set(now.get("inputRequests", {})) - seen), 60)
    [key] = set(task["inputRequests"]) - seen
    return key, task


def _history(served: Served, task_id: str) -> tuple[int, int, int]:
    """(events in the current run's history, its bytes, runs so far) as Temporal has them."""
    started = next(line for line in served.log_text().splitlines() if '"temporal_started"' in line)

    async def describe() -> tuple[int, int, int]:
        client = await Client.connect(json.loads(started)["address"])
        info = (await client.get_workflow_handle(task_id).describe()).raw_description.workflow_execution_info
        runs = 0
        async for _ in client.list_workflows(f'WorkflowId="{task_id}"'):
            runs += 1
        return info.history_length, info.history_size_bytes, runs

    return asyncio.run(describe())


def test_a_task_that_continues_as_new_is_still_one_task_to_its_client(long_tasks: Served) -> None:
    """Ours: its id, creation time and TTL stay; its keys stay unique; its progress stays shown."""
    task_id = _start(long_tasks, "questions", {"count": 3, "every": 2})
    seen: set[str] = set()
    created: set[str] = set()
    for value in (1, 2, 3):
        key, task = _asked(long_tasks, task_id, seen)
        seen.add(key)
        created.add(task["createdAt"])
        assert task["ttlMs"] == 86_400_000
        if value == 3:  # the first question of the second run
            assert task["statusMessage"] == "2 of 3 answered"
        _answer(long_tasks, task_id, key, value)
    done = wait_for_task(long_tasks.url, task_id, lambda now: now["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "6"
    assert seen == {"input", "input-2", "input-3"}  # not "input" again in the second run
    assert created == {done["createdAt"]}
    assert _history(long_tasks, task_id)[2] == 2


def test_a_long_tool_may_continue_as_new_between_its_steps(long_tasks: Served) -> None:
    task_id = _start(long_tasks, "steps", {"count": 6, "every": 2})
    done = wait_for_task(long_tasks.url, task_id, lambda now: now["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "done 6 steps"
    assert _history(long_tasks, task_id)[2] == 3


@pytest.mark.slow
@pytest.mark.timeout(600)  # 249 s alone on an idle 2-core machine: the suite's 300 s is too close
def test_five_thousand_steps_with_progress_after_each_complete_in_one_run(steps_run: StepsRun | None) -> None:
    """Ours: about 4 minutes on a busy 2-core machine; 7 history events per step (6 are Temporal's
    own for an activity) and the ledger's batches, so the tool's history stays far from Temporal's
    51,200 events.

    The task was started as the session began (conftest's ``steps_run``) and this test runs last:
    the same bound, 1200 s from the task's start, on the same kind of server of its own.
    """
    assert steps_run is not None
    served, task_id = steps_run.served, steps_run.task_id
    within = steps_run.started + 1200 - time.monotonic()
    done = wait_for_task(served.url, task_id, lambda now: now["status"] == "completed", within=within)
    assert done["result"]["content"][0]["text"] == "done 5000 steps"
    took = datetime.fromisoformat(done["lastUpdatedAt"]) - datetime.fromisoformat(done["createdAt"])
    events, size, runs = _history(served, task_id)
    print(f"\n5000 steps: {took.total_seconds():.0f} s, {events} history events, {size} bytes, {runs} run")  # noqa: T201
    # The ledger signs its entries (an effect per step) 64 at a time: a local activity's marker,
    # and at most a workflow task of its own (3 events) when it ends after the step's task did.
    ledger = 4 * (5000 // 64 + 2)
    assert runs == 1 and events <= 7 * 5000 + ledger + 10 < HISTORY_EVENTS_LIMIT


@pytest.mark.slow
def test_a_hundred_questions_in_a_row_complete(long_tasks: Served) -> None:
    started = time.monotonic()
    task_id = _start(long_tasks, "questions", {"count": 100})
    seen: set[str] = set()
    for value in range(1, 101):
        key, _ = _asked(long_tasks, task_id, seen)
        seen.add(key)
        _answer(long_tasks, task_id, key, value)
    done = wait_for_task(long_tasks.url, task_id, lambda now: now["status"] == "completed")
    elapsed = time.monotonic() - started
    assert done["result"]["content"][0]["text"] == str(sum(range(1, 101)))
    assert len(seen) == 100
    events, size, runs = _history(long_tasks, task_id)
    print(f"\n100 questions: {elapsed:.0f} s, {events} history events, {size} bytes, {runs} run")  # noqa: T201
    assert events < 10 * 100
