"""A question's form on a web page: its JSON schema as fields, a POSTed form as the answer's
content, and what is wrong with an answer in words, beside each field. API process.

An elicitation's ``requestedSchema`` is flat: strings (with length and format), enums (single or
several choices), booleans, numbers and integers (with bounds), some required, some with defaults
and descriptions. The answer is checked by the same JSON-schema validation ``tasks/update`` uses
(``longtools.tasks.check_answer``); here every error is collected and said per field, never with
the value that was typed (a secret's error must not repeat it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema

__all__ = [
    "FORM_ERROR",
    "Choice",
    "Field",
    "content_of",
    "fields_of",
    "form_value",
    "form_values",
    "schema_errors",
]

FORM_ERROR = ""
"""The key of an error about the whole form rather than one field."""

Kind = Literal[
    "text",
    "password",
    "email",
    "url",
    "date",
    "datetime",
    "number",
    "integer",
    "boolean",
    "choice",
    "choices",
]
_FORMATS: Mapping[str, Kind] = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime"}
_FORMAT_WORDS = {
    "email": "an email address",
    "uri": "a URL",
    "date": "a date",
    "date-time": "a date and time",
}
_RADIOS = 5
"""Up to this many choices are shown as radio buttons, more as a drop-down list."""


@dataclass(frozen=True)
class Choice:
    value: str
    """What the form posts for it: the option itself for a string, else its JSON (``2``, ``1.5``)."""
    label: str
    data: Any = None
    """The option as the schema has it (a string, a number, a boolean): what the answer carries."""


@dataclass(frozen=True)
class Field:
    """One field of a form as the page shows it."""

    name: str
    label: str
    kind: Kind
    required: bool
    description: str | None = None
    default: Any = None
    choices: tuple[Choice, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None

    @property
    def as_radios(self) -> bool:
        return self.kind == "choice" and len(self.choices) <= _RADIOS

    @property
    def hint(self) -> str | None:
        """The field's bounds in words, shown under its label."""
        if self.kind in ("number", "integer"):
            low, high = _number(self.minimum), _number(self.maximum)
            if low is not None and high is not None:
                return f"From {low} to {high}."
            if low is not None:
                return f"{low} or more."
            if high is not None:
                return f"{high} or less."
        if self.min_length and self.max_length:
            return f"{self.min_length} to {self.max_length} characters."
        if self.min_length:
            return f"At least {self.min_length} characters."
        if self.max_length:
            return f"At most {self.max_length} characters."
        return None


def fields_of(schema: Mapping[str, Any], *, sensitive: bool = False) -> list[Field]:
    """The fields of a form, in the schema's order. ``sensitive``: every free-text field is a
    password field (it is never shown, nor filled in again after an error)."""
    required = set(schema.get("required") or ())
    fields: list[Field] = []
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, Mapping):
            continue
        label = str(prop.get("title") or name.replace("_", " ").capitalize())
        common: dict[str, Any] = {
            "name": name,
            "label": label,
            "required": name in required,
            "description": prop.get("description") if isinstance(prop.get("description"), str) else None,
            "default": prop.get("default"),
        }
        choices = _choices(prop)
        kind = prop.get("type")
        if kind == "array":
            items = prop.get("items")
            options = _choices(items) if isinstance(items, Mapping) else ()
            given = common["default"] if isinstance(common["default"], list) else []
            common["default"] = [form_value(value) for value in given]
            fields.append(Field(kind="choices", choices=options, **common))
        elif choices:
            if common["default"] is not None:  # compared with what the options post
                common["default"] = form_value(common["default"])
            fields.append(Field(kind="choice", choices=choices, **common))
        elif kind == "boolean":
            fields.append(Field(kind="boolean", **common))
        elif kind in ("number", "integer"):
            fields.append(
                Field(
                    kind="integer" if kind == "integer" else "number",
                    minimum=_bound(prop, "minimum", "exclusiveMinimum"),
                    maximum=_bound(prop, "maximum", "exclusiveMaximum"),
                    **common,
                )
            )
        else:
            text: Kind = "password" if sensitive else _FORMATS.get(str(prop.get("format")), "text")
            fields.append(
                Field(
                    kind=text,
                    min_length=_int(prop.get("minLength")),
                    max_length=_int(prop.get("maxLength")),
                    **common,
                )
            )
    return fields


def content_of(
    fields: Sequence[Field], form: Mapping[str, Sequence[str]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The answer's content from a POSTed form (each name's values), typed as the fields say, and
    the fields whose input could not be read as their type (a number that is not one), in words.

    An empty input is an absent field (its default applies; a required one is said to be missing);
    an unticked box is ``false``.
    """
    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in fields:
        values = list(form.get(field.name, ()))
        if field.kind == "boolean":
            content[field.name] = "true" in values
            continue
        if field.kind == "choices":
            if values or field.required:
                content[field.name] = [_chosen(field, value) for value in values]
            continue
        raw = values[-1].strip() if values else ""
        if not raw:
            continue
        if field.kind == "choice":
            # The option as the schema has it: a number's option posts "2", its answer is 2.
            content[field.name] = _chosen(field, values[-1])
        elif field.kind == "integer":
            try:
                content[field.name] = int(raw)
            except ValueError:
                errors[field.name] = "Enter a whole number."
        elif field.kind == "number":
            try:
                number = float(raw)
            except ValueError:
                number = math.nan
            if math.isfinite(number):
                content[field.name] = int(number) if number.is_integer() else number
            else:
                errors[field.name] = "Enter a number."
        else:
            # Text is taken as typed (a password's spaces are its own); only emptiness is trimmed.
            content[field.name] = values[-1]
    return content, errors


def schema_errors(schema: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, str]:
    """What is wrong with ``content`` by the form's JSON schema, in words: the first error of each
    field, and of the form as a whole under ``FORM_ERROR``. Empty when it fits (then
    ``check_answer``, the check ``tasks/update`` makes, accepts it too)."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors: dict[str, str] = {}
    for error in validator.iter_errors(dict(content)):
        if error.validator == "required" and not error.absolute_path:
            names = error.validator_value if isinstance(error.validator_value, list) else []
            for name in names:
                if isinstance(error.instance, Mapping) and name not in error.instance:
                    errors.setdefault(str(name), "Required: fill this in.")
            continue
        field = str(error.absolute_path[0]) if error.absolute_path else FORM_ERROR
        errors.setdefault(field, _in_words(error))
    return errors


def _in_words(error: jsonschema.ValidationError) -> str:
    """One schema error as a person reads it, without the value that was given."""
    rule, bound = error.validator, error.validator_value
    if rule == "type":
        wanted = bound if isinstance(bound, str) else "value"
        return {
            "integer": "Enter a whole number.",
            "number": "Enter a number.",
            "boolean": "Choose yes or no.",
            "string": "Enter text.",
            "array": "Choose from the list.",
        }.get(wanted, "This is not the kind of value asked for.")
    if rule in ("enum", "const", "oneOf", "anyOf"):
        return "Choose one of the options given."
    if rule == "minLength":
        return f"Use at least {bound} character{'s' if bound != 1 else ''}."
    if rule == "maxLength":
        return f"Use at most {bound} character{'s' if bound != 1 else ''}."
    if rule == "minimum":
        return f"Enter {_number(bound)} or more."
    if rule == "maximum":
        return f"Enter {_number(bound)} or less."
    if rule == "exclusiveMinimum":
        return f"Enter more than {_number(bound)}."
    if rule == "exclusiveMaximum":
        return f"Enter less than {_number(bound)}."
    if rule == "multipleOf":
        return f"Enter a multiple of {_number(bound)}."
    if rule == "pattern":
        return f"This does not have the form asked for (the pattern {bound})."
    if rule == "format":
        return f"Enter {_FORMAT_WORDS.get(str(bound), 'a value of the form asked for')}."
    if rule == "minItems":
        return f"Choose at least {bound}."
    if rule == "maxItems":
        return f"Choose at most {bound}."
    if rule == "uniqueItems":
        return "Choose each option once."
    if rule == "additionalProperties":
        return "The form has fields the question does not ask for."
    return "This value is not accepted here."


def form_value(value: Any) -> str:
    """How a form posts ``value``: a string as it is, anything else (a number, a boolean) as its
    JSON, so that an option of ``2`` and one of ``"2"`` stay apart."""
    return value if isinstance(value, str) else json.dumps(value)


def form_values(fields: Sequence[Field], content: Mapping[str, Any]) -> dict[str, list[str]]:
    """An answer's ``content`` as the values its form posts, to fill the form in again: each
    field's value(s) as strings; a ticked box is ``"true"``, an unticked one nothing."""
    values: dict[str, list[str]] = {}
    for field in fields:
        if field.name not in content:
            continue
        value = content[field.name]
        if field.kind == "boolean":
            values[field.name] = ["true"] if value is True else []
        elif isinstance(value, list):
            values[field.name] = [form_value(item) for item in value]
        elif value is not None:
            values[field.name] = [form_value(value)]
    return values


def _chosen(field: Field, posted: str) -> Any:
    """The option ``posted`` names, as the schema has it; an unknown one as posted (the schema
    then says to choose one of the options)."""
    return next((choice.data for choice in field.choices if choice.value == posted), posted)


def _choices(prop: Mapping[str, Any]) -> tuple[Choice, ...]:
    """An enum's options with their labels: ``enum`` (with the legacy ``enumNames``), or titled
    ``oneOf``/``anyOf`` of ``const`` values (the 2025-11-25 form)."""
    titled = prop.get("oneOf") or prop.get("anyOf")
    if isinstance(titled, list) and titled and all(isinstance(o, Mapping) and "const" in o for o in titled):
        return tuple(
            Choice(form_value(o["const"]), str(o.get("title") or o["const"]), o["const"]) for o in titled
        )
    values = prop.get("enum")
    if not isinstance(values, list):
        return ()
    names = prop.get("enumNames")
    labels = names if isinstance(names, list) and len(names) == len(values) else values
    return tuple(
        Choice(form_value(value), str(label), value) for value, label in zip(values, labels, strict=True)
    )


def _bound(prop: Mapping[str, Any], inclusive: str, exclusive: str) -> float | None:
    value = prop.get(inclusive, prop.get(exclusive))
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> str | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return f"{value:g}"
