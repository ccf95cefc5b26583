"""Extra tools for ``tests/hosts/run --call TOOL`` (loaded with ``serve --tools probe_tools``, with
``tests/hosts`` on ``PYTHONPATH``):
shapes of a question or a result other than the helpdesk's, through the real server.

- ``probe_form``: a long tool that asks a plain form (not a person's question): a 2025-era client
  that declared form elicitation is pushed ``elicitation/create`` (below 2025-11-25: no ``mode``);
- ``probe_link``: a quick tool whose result text carries an answer link (``isError: false``);
- ``probe_link_error``: the same as a tool error (``isError: true``).

The link is the page of nothing (``/answer/probe-...``): it is only there to be looked for.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Round, Settings, ToolError, ask_form


class ProbeArgs(BaseModel):
    customer: str = Field("acme", description="Anything.")


class Colour(BaseModel):
    colour: str = Field(description="Your favourite colour.")


class ProbeOut(BaseModel):
    answer: str


@workflow.defn(name="probe_form")
class ProbeForm:
    @workflow.run
    async def run(self, args: ProbeArgs) -> ProbeOut:
        answer = await ask_form("Which colour? (a plain form, not a person's question)", Colour)
        if answer.content is None:
            return ProbeOut(answer=f"no answer: {answer.action}")
        return ProbeOut(answer=f"accepted: {answer.content.colour}")


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool(
        "probe_form", workflow=ProbeForm, input=ProbeArgs, output=ProbeOut, task_support="optional"
    )

    def link() -> str:
        return "http://127.0.0.1:1/answer/probe-link-0123456789abcdefghijklmnopqrstuvwxyz"

    @registry.tool("probe_link", input=ProbeArgs, title="Probe: a link in a result")
    async def probe_link(args: ProbeArgs, rnd: Round) -> str:
        """Returns a text with an answer link in it."""
        return f"Only the person may approve this, on its page: {link()} (then say when done)"

    @registry.tool("probe_link_error", input=ProbeArgs, title="Probe: a link in a tool error")
    async def probe_link_error(args: ProbeArgs, rnd: Round) -> str:
        """Fails with a text with an answer link in it."""
        raise ToolError(f"Not done: only the person may approve this, on its page: {link()}")
