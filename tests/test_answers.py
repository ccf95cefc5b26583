"""``tasks/update`` checks each answer against the question it answers, before Temporal sees it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from longtools.tasks import AnswerRejected, check_answer
from longtools.workflows import elicit, list_roots, sample


class Form(BaseModel):
    count: int
    note: str | None = None


def _wire(request: BaseModel) -> dict[str, Any]:
    return request.model_dump(mode="json", by_alias=True, exclude_none=True)


FORM = _wire(elicit("How many?", Form))
SAMPLING = _wire(sample("A poem"))
ROOTS = _wire(list_roots())


@pytest.mark.parametrize(
    ("request_", "answer"),
    [
        (FORM, {"action": "accept", "content": {"count": 3}}),
        (FORM, {"action": "accept", "content": {"count": 3, "note": "fine"}}),
        (FORM, {"action": "decline"}),
        (FORM, {"action": "cancel"}),
        (SAMPLING, {"role": "assistant", "content": {"type": "text", "text": "Roses"}, "model": "m"}),
        (ROOTS, {"roots": [{"uri": "file:///home/ada/project", "name": "project"}]}),
    ],
)
def test_answers_that_fit_are_taken_as_wire_json(request_: dict[str, Any], answer: dict[str, Any]) -> None:
    assert check_answer("k", request_, answer) == answer


@pytest.mark.parametrize(
    ("request_", "answer", "why"),
    [
        (FORM, {"action": "accept", "content": {"count": "three"}}, "does not fit the requested form"),
        (FORM, {"action": "accept", "content": {}}, "does not fit the requested form"),
        (FORM, {"action": "maybe"}, "is not an answer to elicitation/create"),
        (FORM, {"roots": []}, "is not an answer to elicitation/create"),
        (SAMPLING, {"role": "assistant", "content": {"type": "text", "text": "x"}}, "sampling/createMessage"),
        (ROOTS, {"roots": [{"name": "no uri"}]}, "roots/list"),
    ],
)
def test_answers_that_do_not_fit_are_refused_naming_the_key(
    request_: dict[str, Any], answer: dict[str, Any], why: str
) -> None:
    with pytest.raises(AnswerRejected) as refused:
        check_answer("the-key", request_, answer)
    assert "inputResponses['the-key']" in str(refused.value) and why in str(refused.value)
