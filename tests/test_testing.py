"""``longtools.testing`` drives a long tool both ways it offers: in a Temporal of the test's own
(``embedded``) and on a real ``longtools serve`` (``serve``), with the same assertions.

The tools are the expense example of docs/writing-tools.md, taken from the page (``approve_expense``
asks a manager, reports "Paying E-n" during a two-second transfer, returns a model, and raises a
ToolError for an unknown or already-paid claim), and ``questions`` and ``steps`` of tests/long_tools.py
(one question after another, under keys ``input``, ``input-2``; a long run of steps, each
reported).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from longtools.testing import (
    AnswerRejected,
    InvalidArguments,
    NoQuestion,
    NotAsked,
    NotATask,
    ServeFailed,
    Task,
    TaskCancelled,
    TaskEnded,
    TimeSkippingUnavailable,
    UnknownTool,
    embedded,
    replay,
    serve,
)
from tests.test_docs_examples import DOCS, python_block

ROOT = Path(__file__).resolve().parent.parent
Start = Callable[[str, dict[str, Any]], Awaitable[Task]]
Submit = Callable[[str], Awaitable[str]]


@pytest.fixture(scope="module")
def example_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """docs_tools.py from the page, importable (the embedded worker imports it in this process)."""
    where = tmp_path_factory.mktemp("testing_docs_tools")
    (where / "docs_tools.py").write_text(python_block(DOCS / "writing-tools.md", "# docs_tools.py"))
    sys.path.insert(0, str(where))
    try:
        yield where
    finally:
        sys.path.remove(str(where))
        sys.modules.pop("docs_tools", None)


async def _drive_the_example(start: Start, submit: Submit) -> None:
    """One scenario, for either mode: every question, answer, progress and result a test needs."""
    # Asked, answered by key; a wrong answer is refused before it reaches the workflow.
    claim = await submit("Taxi to the airport")
    task = await start("approve_expense", {"expense_id": claim})
    question = await task.question()
    assert (question.key, question.method) == ("input", "elicitation/create")
    assert question.message == f"Approve {claim}: 42.50 for 'Taxi to the airport' (Travel) by ada?"
    assert question.schema is not None and "approve" in question.schema["properties"]
    assert (await task.state()).status == "input_required"
    with pytest.raises(AnswerRejected, match="approve"):
        await task.answer(question.key, {"approve": "yes please"})
    with pytest.raises(NotAsked, match="does not ask 'other'; it asks 'input'"):
        await task.answer("other", {"approve": True})
    await task.answer(question.key, {"approve": True, "note": "Thanks"})

    result = await task.result()
    assert result.is_error is False and result.structured is not None
    assert (result.structured["outcome"], result.structured["note"]) == ("paid", "Thanks")
    assert result.structured["payment"] in result.text
    with pytest.raises(TaskEnded, match="completed"):
        await task.question(within=1)

    # A ToolError is a result with isError, its message the text.
    again = await start("approve_expense", {"expense_id": claim})
    refused = await again.result()
    assert refused.is_error is True and refused.structured is None
    assert refused.text == f"{claim} is already paid ({result.structured['payment']})."

    # Declined: the form's decline, not a field.
    second = await submit("Laptop")
    declined = await start("approve_expense", {"expense_id": second})
    await declined.decline((await declined.question()).key)
    assert (await declined.result()).structured == {
        "expense_id": second,
        "outcome": "declined",
        "payment": None,
        "note": None,
    }

    # Cancelled while it waits: result() says so, and the task shows it.
    cancelled = await start("approve_expense", {"expense_id": second})
    await cancelled.question()
    await cancelled.cancel()
    with pytest.raises(TaskCancelled, match=cancelled.task_id):
        await cancelled.result()
    assert (await cancelled.ended()).status == "cancelled"


async def _drive_the_long_tools(start: Start) -> None:
    """tests/long_tools.py, for either mode: keys of questions asked one after another, progress
    shown while a task waits or works, and a wait for a question that never comes."""
    task = await start("questions", {"count": 2})
    first = await task.question()
    assert (first.key, first.message) == ("input", "Number 1 of 2?")
    await task.answer(first.key, {"value": 3})
    second = await task.question()
    assert (second.key, second.message) == ("input-2", "Number 2 of 2?")
    assert (await task.state()).message == "1 of 2 answered"
    await task.answer(second.key, {"value": 4})
    assert (await task.result()).text == "7"

    busy = await start("steps", {"count": 1_000_000})
    working = await busy.wait_for(lambda state: (state.message or "").startswith("Step "), what="a step")
    assert working.status == "working" and working.message is not None
    assert working.message.endswith(" of 1000000")
    with pytest.raises(NoQuestion) as waited:
        await busy.question(within=0.5)
    said = str(waited.value)
    assert busy.task_id in said and "steps" in said and "working" in said and "Step " in said
    await busy.cancel()
    with pytest.raises(TaskCancelled):
        await busy.result()


async def _drive_progress(start: Start, gate: Path) -> None:
    """tests/progress_tools.py, for either mode: numbers reported by the workflow, then by an
    activity's heartbeat, each seen in turn (the activity waits for the test between them)."""
    task = await start("counts", {"gate": str(gate)})
    building = await task.wait_for(lambda state: state.message == "Building", what="the build")
    assert (building.progress, building.total) == (1, 2)
    gate.touch()  # noqa: ASYNC240 - a file the tool waits for
    built = await task.wait_for(lambda state: state.progress == 2, what="the second step")
    assert (built.message, built.total) == ("Building", 2)
    Path(f"{gate}.2").touch()  # noqa: ASYNC240
    assert (await task.result()).text == "counted"


async def test_embedded_drives_a_long_tool_and_replays_it(example_dir: Path, tmp_path: Path) -> None:
    import docs_tools  # type: ignore[import-not-found]  # written by the fixture, from the page

    store = docs_tools.ExpenseStore(tmp_path / "expenses.sqlite3")

    async def submit(description: str) -> str:
        expense_id: str = store.submit("ada", description, 4250, docs_tools.Budget.travel).expense_id
        return expense_id

    async with embedded(["docs_tools", "tests.long_tools", "tests.progress_tools"], data_dir=tmp_path) as env:
        started: list[Task] = []

        async def start(tool: str, arguments: dict[str, Any]) -> Task:
            task = await env.start(tool, arguments)
            started.append(task)
            return task

        await _drive_the_example(start, submit)
        await _drive_the_long_tools(start)
        await _drive_progress(start, tmp_path / "gate")

        # Its progress while the two-second transfer runs (each read here is one describe).
        claim = await submit("Train")
        paying = await env.start("approve_expense", {"expense_id": claim})
        await paying.answer((await paying.question()).key, {"approve": True})
        seen = await paying.wait_for(lambda state: state.message == f"Paying {claim}", what="the payment")
        assert seen.status == "working" and seen.questions == {}
        assert (await paying.result()).structured is not None
        with pytest.raises(InvalidArguments, match="expense_id"):
            await env.start("approve_expense", {"expense_id": "X-1"})
        with pytest.raises(UnknownTool, match="approve_expense"):
            await env.start("approve_expenses", {})
        with pytest.raises(TimeSkippingUnavailable, match="dev server"):
            await env.skip(60)
        assert not env.time_skipping
        first = env.task(started[0].task_id, "approve_expense")
        await replay(await first.history(), env.registry)
        await replay(await first.history(), [docs_tools.ApproveExpense])


async def test_a_real_server_drives_the_same_long_tool(example_dir: Path, tmp_path: Path) -> None:
    tools = ["--tools", "docs_tools", "--tools", "tests.long_tools", "--tools", "tests.progress_tools"]
    tools += ["--tools", "tests.person_tools", "--no-examples"]
    async with serve(*tools, pythonpath=[example_dir, ROOT], data_dir=tmp_path) as served:

        async def submit(description: str) -> str:
            arguments = {"employee": "ada", "description": description, "amount_cents": 4250}
            filed = await served.call("submit_expense", arguments, {"budget": {"budget": "Travel"}})
            assert filed.structured is not None, filed
            return str(filed.structured["expense_id"])

        async def start(tool: str, arguments: dict[str, Any]) -> Task:
            return await served.start(tool, arguments)

        await _drive_the_example(start, submit)
        await _drive_the_long_tools(start)
        await _drive_progress(start, tmp_path / "gate")
        with pytest.raises(NotAsked, match="Which budget pays for 'Fax'"):
            await served.call("submit_expense", {"employee": "ada", "description": "Fax", "amount_cents": 1})
        with pytest.raises(NotATask, match="Invalid arguments"):
            await served.start("approve_expense", {"expense_id": "X-1"})
        # A secret is asked of no client: the served task answers it on its page, as its person.
        secret = await served.start("keep_a_secret")
        question = await secret.question()
        assert question.page is not None and question.page.startswith(served.base + "/answer/")
        with pytest.raises(AnswerRejected, match="secret: Use at least 8 characters"):
            await secret.answer(question.key, {"secret": "short"})
        await secret.answer(question.key, {"secret": "correct horse"})
        kept = await secret.result()
        assert kept.structured == {"fingerprint": hashlib.sha256(b"correct horse").hexdigest()[:12]}
    # The data dir given: the example's store, and the server's log.
    assert (tmp_path / "expenses.sqlite3").exists() and (tmp_path / "serve.log").exists()


async def test_a_server_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    with pytest.raises(ServeFailed, match="no_such_tools_module"):
        async with serve("--tools", "no_such_tools_module", data_dir=tmp_path, within=60):
            pass


def test_importing_it_loads_neither_temporal_nor_http_and_the_server_side_no_temporal() -> None:
    code = (
        "import sys, longtools.testing as t;"
        " before = [m for m in ('temporalio', 'httpx') if m in sys.modules]; t.serve;"
        " print(before, [m for m in ('temporalio', 'longtools.server') if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[] []"
