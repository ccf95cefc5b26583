"""What a tool can ask the client for: form elicitation, sampling, roots. Shared by both processes.

Pure data builders over the official ``mcp_types`` models, with no I/O, so quick tools (API) and
long tools (workflow code, inside Temporal's sandbox) ask in exactly the same words.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

# pydantic finishes SamplingMessage lazily, on its first use, by resolving a forward reference.
# Inside Temporal's workflow sandbox that resolution fails ("not fully defined"), so finish it
# here, when the worker imports this module normally; in the sandbox it is then already complete.
SamplingMessage.model_rebuild()

InputRequest = ElicitRequest | CreateMessageRequest | ListRootsRequest
"""What a handler may ask the client for in one round (spec: exactly these three kinds)."""

M = TypeVar("M", bound=BaseModel)


ANSWER_META = "longtools.dev/answer"
"""``_meta`` key of a form elicitation that says who must answer it: ``{"by": "person"}``, and
``"sensitive": true`` for a secret (see :func:`elicit`)."""

AnsweredBy = Literal["client", "person"]

REASK_META = "longtools.dev/reask"
"""``_meta`` key of a form asked again because its last answer broke a rule of the tool's model that
the JSON schema could not express: :class:`Reask` as ``{"errors": [{"field", "kind", "message"}],
"values": {...}}``. The answer page shows each reason beside its field and fills in ``values``; a
client is never shown a person's question raw, so a reason that quotes a secret stays on the page."""


@dataclass(frozen=True)
class Marking:
    """Who may answer a question: anyone the client lets (unmarked), a person, or a person only on
    the answer page (a secret, which must never pass through the client or a model)."""

    person: bool = False
    sensitive: bool = False

    @property
    def marked(self) -> bool:
        return self.person or self.sensitive


def marking_of(question: Mapping[str, Any]) -> Marking:
    """The marking of a question as wire JSON (``{"method": ..., "params": ...}``)."""
    params = question.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    marked = meta.get(ANSWER_META) if isinstance(meta, Mapping) else None
    if not isinstance(marked, Mapping):
        return Marking()
    sensitive = marked.get("sensitive") is True
    return Marking(person=sensitive or marked.get("by") == "person", sensitive=sensitive)


@dataclass(frozen=True)
class FieldError:
    field: str
    """The field the error is about; "" for the whole form."""
    kind: str
    """What kind of error (pydantic's type, e.g. ``value_error``, ``greater_than``): safe to show anyone."""
    message: str
    """Why, in words: may quote the answer, so only the answer page shows a person's question's."""


@dataclass(frozen=True)
class Reask:
    """Why a question is asked again, and what its last answer was (see :data:`REASK_META`)."""

    message: str
    """The question as it was first asked (its ``message`` now starts with why it is asked again)."""
    errors: tuple[FieldError, ...]
    values: Mapping[str, Any]
    """The last answer's values a person may see again: never a secret's free text."""

    def wire(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "errors": [{"field": e.field, "kind": e.kind, "message": e.message} for e in self.errors],
            "values": dict(self.values),
        }


def reask_of(question: Mapping[str, Any]) -> Reask | None:
    """The :class:`Reask` of a question as wire JSON, if it is asked again."""
    params = question.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    found = meta.get(REASK_META) if isinstance(meta, Mapping) else None
    if not isinstance(found, Mapping):
        return None
    errors = tuple(
        FieldError(str(e.get("field", "")), str(e.get("kind", "")), str(e.get("message", "")))
        for e in found.get("errors") or ()
        if isinstance(e, Mapping)
    )
    values = found.get("values")
    return Reask(
        message=str(found.get("message", "")),
        errors=errors,
        values=dict(values) if isinstance(values, Mapping) else {},
    )


def free_text(prop: Mapping[str, Any]) -> bool:
    """Whether a form field takes free text (of a secret's form: the secret itself, which the page
    hides and never fills in again), rather than a choice, a flag or a number."""
    if prop.get("type") in ("array", "boolean", "number", "integer"):
        return False
    return not (prop.get("enum") or prop.get("oneOf") or prop.get("anyOf"))


def elicit(
    message: str,
    schema: type[BaseModel] | Mapping[str, Any],
    *,
    by: AnsweredBy = "client",
    sensitive: bool = False,
) -> ElicitRequest:
    """A form elicitation; ``schema`` is a flat pydantic model or a JSON schema object.

    ``by="person"`` marks a question a person must answer (an approval): it is answered on its
    answer page and only there. No client answers it, neither a model nor a library that would fill
    in the form for its person; a client is shown how to reach the page (a URL-mode request where
    it takes one, else the link). ``sensitive=True`` marks a secret (implies ``by="person"``): the
    same, and its answer never passes through the client, the model or ``tasks/get``.
    """
    requested = copy.deepcopy(_form(schema)) if isinstance(schema, type) else dict(schema)
    requested.pop("title", None)
    return _elicitation(message, requested, by=by, sensitive=sensitive)


def _elicitation(
    message: str,
    requested: Mapping[str, Any],
    *,
    by: AnsweredBy,
    sensitive: bool,
    reask: Reask | None = None,
    kept: Mapping[str, Any] | None = None,
) -> ElicitRequest:
    meta: dict[str, Any] = dict(kept or {})
    if by == "person" or sensitive:
        meta[ANSWER_META] = {"by": "person", **({"sensitive": True} if sensitive else {})}
    if reask is not None:
        meta[REASK_META] = reask.wire()
    wire: dict[str, Any] = {"message": message, "requestedSchema": requested}
    if meta:
        wire["_meta"] = meta
    return ElicitRequest(params=ElicitRequestFormParams.model_validate(wire))


def reasked(request: ElicitRequest, reask: Reask, message: str) -> ElicitRequest:
    """``request`` asked again with ``message``, saying why by :class:`Reask` (``ask_form``)."""
    params = request.params
    assert isinstance(params, ElicitRequestFormParams)
    marking = marking_of({"params": params.model_dump(by_alias=True)})
    by: AnsweredBy = "person" if marking.person else "client"
    # What else the question carries (its proposal, longtools.decisions) is asked again with it.
    kept = {
        name: value for name, value in (params.meta or {}).items() if name not in (ANSWER_META, REASK_META)
    }
    return _elicitation(
        message, params.requested_schema, by=by, sensitive=marking.sensitive, reask=reask, kept=kept
    )


_FORMS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()


def _form(model: type[BaseModel]) -> dict[str, Any]:
    # Made once per model: pydantic's model_json_schema was 15% of a 2-round MRTR exchange's CPU.
    # Weakly held: Temporal's sandbox imports a tool module afresh for every workflow run, so each
    # run brings new model classes, which must not outlive the run (a plain cache grew by one
    # class per parked task).
    form = _FORMS.get(model)
    if form is None:
        form = _FORMS[model] = _flatten(model.model_json_schema())
    return form


_PRIMITIVES = {"string", "number", "integer", "boolean"}


def _flatten(schema: dict[str, Any]) -> dict[str, Any]:
    """Make pydantic's schema an elicitation form: flat primitive fields, no references.

    Enums in ``$defs`` are inlined and ``X | None`` becomes an optional ``X``. Anything else that
    a form cannot hold (nested objects, free arrays) is a mistake in the tool, caught here.
    """
    defs: dict[str, Any] = schema.pop("$defs", {})
    properties: dict[str, Any] = schema.get("properties", {})
    for name, prop in properties.items():
        ref = prop.pop("$ref", None)
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = dict(defs[ref.removeprefix("#/$defs/")])
            target.pop("title", None)
            prop = {**target, **prop}
        branches = [branch for branch in prop.pop("anyOf", []) if branch.get("type") != "null"]
        if len(branches) == 1:
            prop = {**branches[0], **prop}
            if prop.get("default", "") is None:
                del prop["default"]
        kind = prop.get("type")
        multi_select = kind == "array" and "enum" in prop.get("items", {})
        if kind not in _PRIMITIVES and not multi_select:
            raise ValueError(
                f"elicitation field {name!r} must be a string, number, integer, boolean or enum, not {prop}"
            )
        properties[name] = prop
    return schema


def sample(prompt: str, *, max_tokens: int = 256, system_prompt: str | None = None) -> CreateMessageRequest:
    """A sampling request with one user message (sampling is deprecated in 2026-07-28, still valid)."""
    return CreateMessageRequest(
        params=CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
            max_tokens=max_tokens,
            system_prompt=system_prompt,
        )
    )


def list_roots() -> ListRootsRequest:
    """A roots request (deprecated in 2026-07-28, still valid)."""
    return ListRootsRequest()


@dataclass(frozen=True)
class Elicited(Generic[M]):
    """A validated answer to an elicitation: ``content`` is set only when ``action == "accept"``."""

    action: Literal["accept", "decline", "cancel"]
    content: M | None


InputResponse = ElicitResult | CreateMessageResult | ListRootsResult
"""What the client answers to each kind, in the same order."""


def parse_answer(method: str | None, response: Any) -> InputResponse:
    """``response`` read as the answer to a request of ``method``: the one parser of answers, used
    by the API (which checks an answer before a workflow gets it) and by ``ask`` (which checks it
    again on arrival).

    Raises:
        pydantic.ValidationError: ``response`` is not an answer of that kind.
    """
    if method == "elicitation/create":
        return ElicitResult.model_validate(response)
    if method == "sampling/createMessage":
        return CreateMessageResult.model_validate(response)
    return ListRootsResult.model_validate(response)
