"""The tool module of B9 and B10 (``--tools bench.servers.longtools_person_tools``): long tools that
ask people, told as docs/writing-tools.md advises (each workflow in a module of its own, the models
in ``longtools_person_models``, their registration here).

- ``approve`` (B9): a decision that two approvers must both approve on the answer page;
- ``ask_person`` (B10): a question for the person who asked (``by="person"``), of which a deployment
  that notifies people mails them.
"""

from __future__ import annotations

from bench.servers.longtools_approve import Approve
from bench.servers.longtools_ask_person import AskPerson
from bench.servers.longtools_person_models import Answered, Decided, PersonInput
from longtools import Registry, Settings


def register(registry: Registry, settings: Settings) -> None:
    del settings
    registry.long_tool(
        "approve", workflow=Approve, input=PersonInput, output=Decided, task_support="required"
    )
    registry.long_tool(
        "ask_person", workflow=AskPerson, input=PersonInput, output=Answered, task_support="required"
    )
