"""B7's tool module: a long tool that changes once, at a moment the client chose.

``change_later`` sleeps ``delay_s`` seconds (a durable timer: no worker is busy meanwhile), then
asks one form question whose message carries the moment it was asked, in milliseconds since the
epoch, so the client that sees it can tell how late it saw it. B7 copies this module into its run
directory and loads it by file name, so the same tool runs on every longtools it compares.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # B7's base tree is from before the one `longtools` package, and must be found first: the
    # installed `longtools` is this tree's.
    try:
        from service import Registry, Settings  # type: ignore[import-not-found]
        from workflows import ask_form  # type: ignore[import-not-found]
    except ImportError:
        from longtools import Registry, Settings, ask_form

PREFIX = "asked at "


class ChangeLaterInput(BaseModel):
    delay_s: float = Field(ge=0, le=3600)


class GoOn(BaseModel):
    go: bool = Field(description="Go on?")


@workflow.defn(name="bench.change_later")
class ChangeLater:
    @workflow.run
    async def run(self, args: ChangeLaterInput) -> str:
        await workflow.sleep(timedelta(seconds=args.delay_s))
        asked_ms = int(workflow.now().timestamp() * 1000)
        answer = await ask_form(f"{PREFIX}{asked_ms}", GoOn)
        return "went on" if answer.content is not None and answer.content.go else "stopped"


def register(registry: Registry, settings: Settings) -> None:
    del settings
    registry.long_tool("change_later", workflow=ChangeLater, input=ChangeLaterInput)
