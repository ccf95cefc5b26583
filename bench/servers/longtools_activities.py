"""The models and the activity of longtools' benchmark tools (``longtools_tools``). Worker and API.

Kept apart from the workflows (``longtools_noop``, ``longtools_questions``), which pass this
module through: Temporal's sandbox imports a workflow's module afresh for every new task, and
every pydantic model and activity defined there would be built again each time (docs/writing-
tools.md).
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field
from temporalio import activity

WORK_S = 2.0  # the work before each question; the fastmcp-tasks tool does the same (asyncio.sleep)
QUESTIONS = 3


class TextInput(BaseModel):
    text: str = Field(max_length=65_536, description="Text to send back.")


class TextOutput(BaseModel):
    result: str


class ConfirmForm(BaseModel):
    confirm: bool = Field(description="Send it back?")


class NoopInput(BaseModel):
    pass


class NoopOutput(BaseModel):
    done: bool


class QuestionsInput(BaseModel):
    pass


class QuestionsOutput(BaseModel):
    confirmed: int


@activity.defn(name="bench.work")
async def work(seconds: float) -> None:
    """Work that takes ``seconds`` and holds no CPU, as the fastmcp-tasks tool's does."""
    await asyncio.sleep(seconds)
