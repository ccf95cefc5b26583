"""fastmcp-tasks 4.1.4 (the ``fastmcp[tasks]`` extra): SEP-2663 tasks on Docket, ``memory://`` or Redis.

``python -m bench.servers.fastmcp_tasks --docket-url URL`` serves two task tools, with the same
HTTP shape and uvicorn settings as the other peers (stateless, JSON responses):

- ``noop()`` returns ``{"done": true}`` at once (B3, B6), as longtools' ``noop`` does;
- ``three_questions()`` (B4) does 2 s of work before each of 3 form questions, then returns how
  many were confirmed.

Both are ``task=True`` (fastmcp's ``optional`` mode): a client that declares the tasks extension
on its ``tools/call`` gets a task. ``TasksExtension(url=...)`` runs Docket and one Docket worker
inside this process (the extension's lifespan), so the server is also the one worker.
``memory://`` keeps Docket's state in the process; ``redis://`` in the Redis the harness started.

fastmcp-tasks asks for input with the guard pattern: the tool *returns* an
``InputRequiredResult``, the leg ends, and after ``tasks/update`` Docket runs the tool again from
its start, with that leg's answers in ``ctx.input_responses``. Only the latest leg's answers are
there, so the tool carries earlier answers forward in ``requestState`` (the MRTR idiom for state
across rounds). It keeps no record of which work was done: written plainly, every leg redoes the
work before the questions already answered, which is what fastmcp-tasks' model costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from pydantic import BaseModel

from bench.servers._uvicorn import serve

WORK_S = 2.0  # the work before each question; longtools' tool does the same (asyncio.sleep)
QUESTIONS = 3
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


class NoopOutput(BaseModel):
    done: bool


class QuestionsOutput(BaseModel):
    confirmed: int


async def work() -> None:
    """2 s of work that holds no CPU, as longtools' ``bench.work`` activity does."""
    await asyncio.sleep(WORK_S)


def build(docket_url: str) -> FastMCP:
    server = FastMCP("bench-fastmcp-tasks")
    server.add_extension(TasksExtension(url=docket_url))

    @server.tool(task=True)
    async def noop() -> NoopOutput:
        """Do nothing and finish at once."""
        return NoopOutput(done=True)

    @server.tool(task=True)
    async def three_questions(ctx: Context) -> QuestionsOutput | InputRequiredResult:
        """Do 2 s of work before each of three questions; return how many were confirmed."""
        # Answers of earlier legs travel in requestState; this leg's answer in input_responses.
        answers: dict[str, bool] = json.loads(ctx.request_state or "{}")
        for key, answer in (ctx.input_responses or {}).items():
            if isinstance(answer, ElicitResult):
                answers[key] = answer.action == "accept" and bool((answer.content or {}).get("confirm"))
        for number in range(1, QUESTIONS + 1):
            await work()
            key = f"q{number}"
            if key not in answers:
                params = ElicitRequestFormParams(
                    message=f"Go on after step {number}?", requested_schema=CONFIRM_SCHEMA
                )
                return InputRequiredResult(
                    input_requests={key: ElicitRequest(params=params)}, request_state=json.dumps(answers)
                )
        return QuestionsOutput(confirmed=sum(answers.values()))

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--docket-url", default="memory://", help="memory:// or redis://host:port/db")
    url = parser.parse_args().docket_url
    label = "fastmcp-tasks (redis)" if url.startswith("redis") else "fastmcp-tasks (memory)"
    serve(build(url).http_app(path="/mcp", json_response=True, stateless_http=True), label)
