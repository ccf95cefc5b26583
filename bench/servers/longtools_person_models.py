"""The models of the benchmark's tools that ask people (``longtools_person_tools``): B9's decision,
B10's person's question. Worker and API.

Kept apart from the workflows (``longtools_approve``, ``longtools_ask_person``), which pass this
module through: Temporal's sandbox imports a workflow's module afresh for every new task.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

APPROVERS = ("bob", "dave")
"""B9's approvers, by the names their static tokens give them; the quorum is both."""


class Note(BaseModel):
    note: str = Field("", max_length=100, description="A note for the record, if any.")


class GoOn(BaseModel):
    go: bool = Field(description="Go on?")


class PersonInput(BaseModel):
    pass


class Decided(BaseModel):
    outcome: str
    votes: list[str] = []


class Answered(BaseModel):
    answered: bool
