"""Terminal forms for MCP elicitation, as ``longtools call`` asks them. CLI process.

A form-mode elicitation carries a flat ``requestedSchema``: an object whose properties are
primitives (string, number, integer, boolean, single-select enum, multi-select array of enum).
``FormPrompter`` asks for each property in schema order and answers with an ``ElicitResult``;
``content_from_pairs`` builds the same content from ``--answer key=value`` pairs without asking;
``show_link`` shows a URL-mode request, which the person answers on its page, asking nothing.

Everything shown comes from the server, so it is printed as plain text: rich markup in a title is
not interpreted, and control characters (terminal escape sequences, bidi overrides) are removed.
The prompt strings are plain text too, since the integration tests wait for them verbatim.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard
from urllib.parse import urlsplit

from jsonschema.exceptions import SchemaError, best_match
from jsonschema.validators import Draft202012Validator
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from mcp_types import ElicitResult

__all__ = [
    "CHOICE_PROMPT",
    "PAGE_HINT",
    "PAGE_HINT_HELD",
    "FormError",
    "FormPrompter",
    "content_from_pairs",
    "missing_required",
    "show_link",
]

CHOICE_PROMPT: Final = "Answer, decline or cancel? [A/d/c] "
"""Asked once before the fields; Enter answers."""

PAGE_HINT: Final = (
    "Answer it on that page: this follows the task and goes on once the page has your answer. "
    "Press d to decline going to the page, Ctrl-C to stop following."
)
"""Shown under the link of a question a task waits for (a URL request, or a link in ``_meta``)."""
PAGE_HINT_HELD: Final = (
    "Answer it on that page: the call goes on once the page has your answer. Ctrl-C stops waiting."
)
"""Shown under the link of a URL request in an MRTR round (the round is held, no key is read)."""

_HOW_TO_ANSWER: Final = "Press Enter to answer, d to decline, c to cancel."
_TRUE: Final = frozenset({"y", "yes", "true", "1"})
_FALSE: Final = frozenset({"n", "no", "false", "0"})
# C0/C1 controls (ESC starts terminal escape sequences) and the bidi overrides that can make
# text read differently from what it is. Newline and tab stay: a message may have paragraphs.
_UNSAFE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ISO_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")
_SKIP: Final = object()
"""An optional field the user left empty: it is left out of the content, not sent as null."""

Kind = Literal["string", "integer", "number", "boolean", "enum", "multi"]


class FormError(Exception):
    """A form this client cannot ask, or ``--answer`` pairs that do not fit it. One-line message."""


class _Unfit(Exception):
    """One value does not fit its field; the message is a phrase ("must be at most 10")."""


@dataclass(frozen=True)
class _Choice:
    value: Any
    title: str


@dataclass(frozen=True)
class _Field:
    name: str
    label: str
    description: str | None
    required: bool
    kind: Kind
    prop: Mapping[str, Any]
    choices: tuple[_Choice, ...]
    has_default: bool
    default: Any


@dataclass(frozen=True)
class _Form:
    fields: tuple[_Field, ...]
    validator: Draft202012Validator

    def why_not_field(self, field: _Field, value: Any) -> str | None:
        """Why ``value`` does not fit ``field``, or None; nicer words first, the schema as a net."""
        try:
            _check(field, value)
        except _Unfit as unfit:
            return str(unfit)
        # Validating a one-key object against the whole schema keeps whatever the property
        # refers to in scope; errors about other fields (``required``) have no path into it.
        for error in self.validator.iter_errors({field.name: value}):
            if list(error.absolute_path)[:1] == [field.name]:
                return _one_line(error.message)
        return None

    def why_not(self, content: Mapping[str, Any]) -> str | None:
        """Why the whole content does not fit the schema, or None."""
        error = best_match(self.validator.iter_errors(content))
        if error is None:
            return None
        where = ".".join(str(part) for part in error.absolute_path)
        return f"{where}: {_one_line(error.message)}" if where else _one_line(error.message)


def _parse_form(schema: Mapping[str, Any]) -> _Form:
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise FormError("the form's schema is not an object schema")
    # Draft 2020-12 is MCP's default dialect; for the flat primitive subset a form may use, the
    # older drafts a server might name in $schema mean the same thing.
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        raise FormError(f"the form's schema is not valid JSON Schema: {_one_line(error.message)}") from error
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, Mapping):
        raise FormError("the form's properties are not an object")
    for name in required:
        if name not in properties:
            raise FormError(f"the form requires {name!r} but does not describe it")
    fields = tuple(_parse_field(name, prop, name in required) for name, prop in properties.items())
    return _Form(fields, Draft202012Validator(schema))


def _parse_field(name: str, prop: Any, required: bool) -> _Field:
    if not isinstance(prop, Mapping):
        raise FormError(f"the form's field {name!r} is not a schema")
    kind, choices = _kind(name, prop)
    title = prop.get("title")
    description = prop.get("description")
    return _Field(
        name=name,
        label=_one_line(title) if isinstance(title, str) and title.strip() else _one_line(name),
        description=_clean(description) if isinstance(description, str) and description.strip() else None,
        required=required,
        kind=kind,
        prop=prop,
        choices=choices,
        has_default="default" in prop,
        default=prop.get("default"),
    )


def _kind(name: str, prop: Mapping[str, Any]) -> tuple[Kind, tuple[_Choice, ...]]:
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        choices = _choices(items) if isinstance(items, Mapping) else None
        if not choices:
            raise FormError(f"the form's field {name!r} is an array of something other than choices")
        return "multi", choices
    choices = _choices(prop)
    if choices:
        return "enum", choices
    if kind is None:
        # No type and no choices: free text is the one answer a terminal can give, and the
        # schema (checked per field) still says whether it fits.
        return "string", ()
    if kind in ("string", "integer", "number", "boolean"):
        return kind, ()
    raise FormError(f"the form's field {name!r} has type {kind!r}, which a form cannot ask for")


def _choices(schema: Mapping[str, Any]) -> tuple[_Choice, ...] | None:
    """The options of an enum schema (``enum`` + ``enumNames``, or ``oneOf``/``anyOf`` consts)."""
    values = schema.get("enum")
    if isinstance(values, list) and values:
        names = schema.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(values) else values
        return tuple(
            _Choice(value, _one_line(str(title))) for value, title in zip(values, titles, strict=True)
        )
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if (
            isinstance(options, list)
            and options
            and all(isinstance(option, Mapping) and "const" in option for option in options)
        ):
            return tuple(
                _Choice(option["const"], _one_line(str(option.get("title", option["const"]))))
                for option in options
            )
    return None


def _parse(field: _Field, raw: str, *, by_number: bool) -> Any:
    """The value ``raw`` stands for in ``field``; ``by_number`` lets "2" pick the second choice."""
    text = raw.strip()
    if field.kind == "boolean":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise _Unfit(f"expected yes or no, got {text!r}")
    if field.kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise _Unfit(f"expected a whole number, got {text!r}") from None
    if field.kind == "number":
        return _number(text)
    if field.kind == "enum":
        return _pick(field.choices, text, by_number=by_number)
    if field.kind == "multi":
        return _pick_many(field.choices, text, by_number=by_number)
    return raw


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        raise _Unfit(f"expected a number, got {text!r}") from None
    # JSON has no NaN or infinity, so the server could not read them.
    if not math.isfinite(number):
        raise _Unfit(f"expected a number, got {text!r}")
    return number


def _pick(choices: Sequence[_Choice], text: str, *, by_number: bool) -> Any:
    # The numbers are what the list shows, so they win over a value that happens to be a digit.
    if by_number and text.isascii() and text.isdigit():
        index = int(text)
        if 1 <= index <= len(choices):
            return choices[index - 1].value
    for choice in choices:
        if _as_text(choice.value) == text:
            return choice.value
    folded = text.casefold()
    matches = [
        choice
        for choice in choices
        if _as_text(choice.value).casefold() == folded or choice.title.casefold() == folded
    ]
    if len({_as_text(choice.value) for choice in matches}) == 1:
        return matches[0].value
    if by_number:
        raise _Unfit(f"expected a number from 1 to {len(choices)} or one of the choices, got {text!r}")
    raise _Unfit(f"{text!r} is not one of {_allowed(choices)}")


def _pick_many(choices: Sequence[_Choice], text: str, *, by_number: bool) -> list[Any]:
    # A value that itself has a comma can still be given whole.
    for choice in choices:
        if _as_text(choice.value) == text:
            return [choice.value]
    picked: list[Any] = []
    for token in (part.strip() for part in text.split(",")):
        if token:
            value = _pick(choices, token, by_number=by_number)
            if value not in picked:
                picked.append(value)
    return picked


def _check(field: _Field, value: Any) -> None:
    """Raise ``_Unfit`` saying why ``value`` breaks one of the field's MCP constraints."""
    prop = field.prop
    if field.kind == "string" and isinstance(value, str):
        _check_length(prop, value)
        _check_format(prop.get("format"), value)
    elif field.kind in ("integer", "number") and isinstance(value, int | float):
        _check_range(prop, value)
    elif field.kind == "multi" and isinstance(value, list):
        least, most = prop.get("minItems"), prop.get("maxItems")
        if isinstance(least, int) and len(value) < least:
            raise _Unfit(f"choose at least {least}")
        if isinstance(most, int) and len(value) > most:
            raise _Unfit(f"choose at most {most}")


def _check_length(prop: Mapping[str, Any], value: str) -> None:
    least, most = prop.get("minLength"), prop.get("maxLength")
    if isinstance(least, int) and len(value) < least:
        raise _Unfit(f"must be at least {least} characters")
    if isinstance(most, int) and len(value) > most:
        raise _Unfit(f"must be at most {most} characters")


def _check_format(form: Any, value: str) -> None:
    # Light checks, enough to catch a slip of the keyboard; the server decides what it accepts.
    if form == "email":
        local, at, domain = value.rpartition("@")
        if not at or not local or "." not in domain.strip(".") or any(c.isspace() for c in value):
            raise _Unfit("expected an email address, like name@example.com")
    elif form == "uri":
        parts = urlsplit(value)
        if not parts.scheme or not (parts.netloc or parts.path) or any(c.isspace() for c in value):
            raise _Unfit("expected a link with a scheme, like https://example.com")
    elif form == "date" and not (_ISO_DATE.fullmatch(value) and _parses(date.fromisoformat, value)):
        raise _Unfit("expected a date, YYYY-MM-DD")
    # A bare date parses as a datetime too, but a date-time field needs the time.
    elif form == "date-time" and not (
        _ISO_DATE.match(value) and len(value) > 10 and _parses(datetime.fromisoformat, value)
    ):
        raise _Unfit("expected a date and time, YYYY-MM-DDTHH:MM[:SS][+HH:MM]")


def _parses(parse: Callable[[str], object], value: str) -> bool:
    try:
        parse(value)
    except ValueError:
        return False
    return True


def _check_range(prop: Mapping[str, Any], value: float) -> None:
    low, high = prop.get("minimum"), prop.get("maximum")
    above, below = prop.get("exclusiveMinimum"), prop.get("exclusiveMaximum")
    if _is_number(low) and value < low:
        raise _Unfit(f"must be at least {low}")
    if _is_number(high) and value > high:
        raise _Unfit(f"must be at most {high}")
    if _is_number(above) and value <= above:
        raise _Unfit(f"must be more than {above}")
    if _is_number(below) and value >= below:
        raise _Unfit(f"must be less than {below}")


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _hint(field: _Field) -> str | None:
    """What kind of answer the field takes, in words, shown under its description."""
    prop = field.prop
    if field.kind in ("integer", "number"):
        what = "a whole number" if field.kind == "integer" else "a number"
        low, high = prop.get("minimum"), prop.get("maximum")
        if _is_number(low) and _is_number(high):
            return f"{what} from {low} to {high}"
        if _is_number(low):
            return f"{what}, at least {low}"
        if _is_number(high):
            return f"{what}, at most {high}"
        return what
    if field.kind == "string":
        formats = {
            "email": "an email address",
            "uri": "a link, like https://example.com",
            "date": "a date, YYYY-MM-DD",
            "date-time": "a date and time, YYYY-MM-DDTHH:MM",
        }
        parts = [formats[prop["format"]]] if prop.get("format") in formats else []
        least, most = prop.get("minLength"), prop.get("maxLength")
        if isinstance(least, int) and isinstance(most, int):
            parts.append(f"{least} to {most} characters")
        elif isinstance(least, int) and least > 0:
            parts.append(f"at least {least} characters")
        elif isinstance(most, int):
            parts.append(f"at most {most} characters")
        return ", ".join(parts) or None
    if field.kind == "multi":
        hint = "numbers or values, separated by commas"
        least, most = prop.get("minItems"), prop.get("maxItems")
        if isinstance(least, int) and least > 0:
            hint += f"; at least {least}"
        if isinstance(most, int):
            hint += f"; at most {most}"
        return hint
    return None


def _prompt_text(field: _Field) -> str:
    parts = [field.label]
    if not field.required:
        parts.append("(optional)")
    if field.kind == "boolean":
        default = field.default if field.has_default else None
        parts.append("[Y/n]" if default is True else "[y/N]" if default is False else "[y/n]")
    elif field.kind == "enum":
        parts.append(f"[1-{len(field.choices)}]" if len(field.choices) > 1 else "[1]")
    elif field.kind == "multi":
        parts.append(f"[1-{len(field.choices)}, comma-separated]")
    if field.has_default and field.kind != "boolean":
        parts.append(f"[default: {_shown(field, field.default)}]")
    return " ".join(parts) + ": "


def _shown(field: _Field, value: Any) -> str:
    """A value as the user knows it: by its title when it is one of the choices."""
    titles = {_as_text(choice.value): choice.title for choice in field.choices}
    if isinstance(value, list):
        return ", ".join(titles.get(_as_text(item), _one_line(_as_text(item))) for item in value)
    return titles.get(_as_text(value), _one_line(_as_text(value)))


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _allowed(choices: Iterable[_Choice]) -> str:
    return ", ".join(
        _as_text(c.value) if c.title == _as_text(c.value) else f"{_as_text(c.value)} ({c.title})"
        for c in choices
    )


def _clean(text: str) -> str:
    return _UNSAFE.sub("", text)


def _one_line(text: str) -> str:
    return " ".join(_clean(text).split())


def _sentence(phrase: str) -> str:
    return phrase[:1].upper() + phrase[1:] + ("" if phrase.endswith((".", "?", "!")) else ".")


class FormPrompter:
    """Asks a form-mode elicitation in the terminal, one prompt per field.

    ``ask`` shows a prompt and returns the line typed (without the newline), raising
    ``EOFError`` when input ends; tests pass a scripted one. The default is ``console.input``
    with the prompt as plain ``Text``, so "[y/n]" is neither markup nor highlighted.
    """

    def __init__(self, console: Console, ask: Callable[[str], str] | None = None) -> None:
        self._console = console
        self._ask = ask if ask is not None else _terminal_ask(console)

    def prompt(self, message: str, schema: Mapping[str, Any]) -> ElicitResult:
        """Show ``message``, ask for each field, and return the user's answer.

        Raises:
            FormError: the schema is not a form this client can ask (nothing has been shown).
        """
        form = _parse_form(schema)
        _heading(self._console, message)
        self._say(_HOW_TO_ANSWER, "dim")
        try:
            action = self._choose()
            if action != "accept":
                return _elicit_result(action=action)
            while True:
                content: dict[str, Any] = {}
                for field in form.fields:
                    value = self._ask_field(form, field)
                    if value is not _SKIP:
                        content[field.name] = value
                why = form.why_not(content)
                if why is None:
                    return _elicit_result(action="accept", content=content)
                # Only reachable through a schema rule no field owns; asking again lets the
                # user change the answers, and Ctrl-D still cancels.
                self._error(f"The answers do not fit the form ({why}); starting again")
        except EOFError:
            # input() leaves the cursor after the prompt; end the line before anything else prints.
            self._console.print()
            return _elicit_result(action="cancel")

    def _choose(self) -> Literal["accept", "decline", "cancel"]:
        while True:
            answer = self._ask(CHOICE_PROMPT).strip().lower()
            if answer in ("", "a", "answer"):
                return "accept"
            if answer in ("d", "decline"):
                return "decline"
            if answer in ("c", "cancel"):
                return "cancel"
            self._error("Type a (or just Enter) to answer, d to decline, c to cancel")

    def _ask_field(self, form: _Form, field: _Field) -> Any:
        if field.description:
            self._say(f"  {field.description}", "dim")
        hint = _hint(field)
        if hint:
            self._say(f"  ({hint})", "dim")
        for number, choice in enumerate(field.choices, start=1):
            self._say(f"  {number}. {choice.title}", None)
        prompt = _prompt_text(field)
        while True:
            raw = self._ask(prompt).strip()
            if raw:
                try:
                    value = _parse(field, raw, by_number=True)
                except _Unfit as unfit:
                    self._error(str(unfit))
                    continue
            elif field.has_default:
                value = field.default
            elif not field.required:
                return _SKIP
            elif field.kind == "multi":
                value = []  # choosing none is an answer; minItems says whether it is allowed
            else:
                self._error("An answer is required")
                continue
            why = form.why_not_field(field, value)
            if why is None:
                return value
            self._error(why)

    def _say(self, text: str, style: str | None) -> None:
        self._console.print(Text(_clean(text), style=style or ""), soft_wrap=True)

    def _error(self, why: str) -> None:
        self._say(f"! {_sentence(why)}", "red")


def content_from_pairs(schema: Mapping[str, Any], pairs: Mapping[str, str]) -> dict[str, Any]:
    """The content ``--answer key=value`` pairs give a form, checked as the prompts would check it.

    Values are read as the field's type: booleans from yes/no/true/false/1/0, numbers, a choice
    by value or by title (case-insensitive), several choices comma-separated. An optional field
    left out gets its default, if it has one.

    Raises:
        FormError: the schema is not a form, a key is not a field, a required field is missing,
            or a value does not fit its field (the message names it and what is allowed).
    """
    form = _parse_form(schema)
    by_name = {field.name: field for field in form.fields}
    for key in pairs:
        if key not in by_name:
            known = ", ".join(by_name) if by_name else "none"
            raise FormError(f"the form has no field {key!r} (its fields: {known})")
    missing = _missing(form, pairs)
    if missing:
        raise FormError(f"missing required field{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
    content: dict[str, Any] = {}
    for field in form.fields:
        if field.name in pairs:
            try:
                value = _parse(field, pairs[field.name], by_number=False)
            except _Unfit as unfit:
                raise FormError(f"{field.name}: {unfit}") from None
        elif field.has_default:
            value = field.default
        else:
            continue
        why = form.why_not_field(field, value)
        if why is not None:
            raise FormError(f"{field.name}: {why}")
        content[field.name] = value
    why = form.why_not(content)
    if why is not None:
        raise FormError(f"the answers do not fit the form: {why}")
    return content


def missing_required(schema: Mapping[str, Any], pairs: Mapping[str, str]) -> list[str]:
    """Required fields, in schema order, that ``pairs`` leaves out and that have no default.

    Raises:
        FormError: the schema is not a form this client can ask.
    """
    return _missing(_parse_form(schema), pairs)


def _missing(form: _Form, pairs: Mapping[str, str]) -> list[str]:
    return [f.name for f in form.fields if f.required and not f.has_default and f.name not in pairs]


def show_link(console: Console, message: str, url: str, hint: str) -> None:
    """Show a question a person answers on its page: what it asks, its link in full with its site
    (for the person to judge before opening it; nothing is opened or fetched here), and ``hint``,
    what happens meanwhile. Nothing is asked: the page takes the answer."""
    _heading(console, message or "A question waits for you on its page")
    console.print(Text(f"Link: {_one_line(url)}"), soft_wrap=True)
    parts = urlsplit(_one_line(url))
    console.print(Text(f"Site: {parts.hostname or '(none)'}", style="bold"), soft_wrap=True)
    if parts.scheme != "https":
        console.print(Text("Note: this link is not https.", style="yellow"), soft_wrap=True)
    console.print(Text(hint, style="dim"), soft_wrap=True)


def _elicit_result(action: Literal["accept", "decline", "cancel"], content: Any = None) -> ElicitResult:
    # Imported here, not above: mcp_types' models take 0.3 s to import, and `longtools call` with
    # --answer pairs (content_from_pairs) builds its answer without them.
    from mcp_types import ElicitResult

    return ElicitResult(action=action, content=content)


def _heading(console: Console, message: str) -> None:
    console.print()
    console.print(Text(_clean(message), style="bold"), soft_wrap=True)


def _terminal_ask(console: Console) -> Callable[[str], str]:
    def ask(prompt: str) -> str:
        return console.input(Text(prompt))

    return ask
