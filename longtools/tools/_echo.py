"""``echo``: the smallest quick tool (a health probe for clients, the subject of benchmark B1)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from longtools.tools._registry import Registry
from longtools.tools._round import Round


class EchoInput(BaseModel):
    text: str = Field(max_length=65_536, description="Text to send back.")


class EchoOutput(BaseModel):
    text: str


def register_echo(registry: Registry) -> None:
    @registry.tool("echo", input=EchoInput, output=EchoOutput)
    async def echo(args: EchoInput, rnd: Round) -> EchoOutput:
        """Return the text unchanged."""
        return EchoOutput(text=args.text)
