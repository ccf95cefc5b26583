"""Terminal forms for elicitation (``longtools.client._forms``), driven by a scripted ``ask``."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import pytest
from mcp_types import ElicitResult
from rich.console import Console

from longtools.client._forms import (
    CHOICE_PROMPT,
    PAGE_HINT,
    FormError,
    FormPrompter,
    content_from_pairs,
    missing_required,
    show_link,
)

HELPDESK = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "title": "Reason", "enum": ["Resolved", "Duplicate", "Cancelled"]}
    },
    "required": ["reason"],
}


class Script:
    """Answers prompts from a list, in order, and records each prompt it was shown."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)


class Run:
    """One prompted form: what it returned, the prompts shown, and everything printed."""

    def __init__(self, schema: Mapping[str, Any], *answers: str, message: str = "Close the ticket?") -> None:
        self.out = io.StringIO()
        self.script = Script(*answers)
        prompter = FormPrompter(Console(file=self.out, width=100), self.script)
        self.result = prompter.prompt(message, schema)
        # Each scripted answer was meant for a prompt; leftovers mean the form asked less than expected.
        assert self.script.answers == []

    @property
    def printed(self) -> str:
        return self.out.getvalue()


def form(required: bool = True, **prop: Any) -> dict[str, Any]:
    """A one-field form named ``f``."""
    return {"type": "object", "properties": {"f": prop}, "required": ["f"] if required else []}


def accepted(result: ElicitResult) -> dict[str, Any]:
    assert result.action == "accept"
    assert result.content is not None
    return dict(result.content)


# --- FormPrompter -------------------------------------------------------------------------------


def test_helpdesk_form_picking_2_answers_duplicate() -> None:
    run = Run(HELPDESK, "", "2")
    assert accepted(run.result) == {"reason": "Duplicate"}
    assert run.script.prompts == [CHOICE_PROMPT, "Reason [1-3]: "]
    assert "Close the ticket?" in run.printed
    assert "Press Enter to answer, d to decline, c to cancel." in run.printed
    assert "  1. Resolved\n  2. Duplicate\n  3. Cancelled\n" in run.printed


@pytest.mark.parametrize("typed", ["Cancelled", "cancelled", "3"])
def test_an_enum_is_answered_by_number_or_by_value(typed: str) -> None:
    assert accepted(Run(HELPDESK, "", typed).result) == {"reason": "Cancelled"}


def test_an_enum_answer_outside_the_list_is_refused_and_asked_again() -> None:
    run = Run(HELPDESK, "", "4", "Fixed", "1")
    assert accepted(run.result) == {"reason": "Resolved"}
    assert run.script.prompts == [CHOICE_PROMPT] + ["Reason [1-3]: "] * 3
    assert "! Expected a number from 1 to 3 or one of the choices, got '4'." in run.printed
    assert "got 'Fixed'" in run.printed


def test_a_titled_one_of_shows_titles_and_returns_the_const() -> None:
    schema = form(
        type="string",
        title="Priority",
        oneOf=[{"const": "p1", "title": "Urgent"}, {"const": "p3", "title": "Whenever"}],
    )
    run = Run(schema, "", "2")
    assert accepted(run.result) == {"f": "p3"}
    assert "  1. Urgent\n  2. Whenever\n" in run.printed
    assert "p3" not in run.printed
    assert accepted(Run(schema, "", "urgent").result) == {"f": "p1"}


def test_legacy_enum_names_are_shown_and_the_value_is_returned() -> None:
    schema = form(type="string", enum=["lo", "hi"], enumNames=["Low", "High"])
    run = Run(schema, "", "High")
    assert accepted(run.result) == {"f": "hi"}
    assert "  1. Low\n  2. High\n" in run.printed


@pytest.mark.parametrize(("default", "shown"), [(True, "[Y/n]"), (False, "[y/N]")])
def test_a_boolean_takes_its_default_on_enter(default: bool, shown: str) -> None:
    run = Run(form(type="boolean", title="Notify", default=default), "", "")
    assert accepted(run.result) == {"f": default}
    assert run.script.prompts[1] == f"Notify {shown}: "


@pytest.mark.parametrize(
    ("typed", "value"), [("y", True), ("YES", True), ("true", True), ("n", False), ("No", False)]
)
def test_a_boolean_accepts_yes_no_true_false(typed: str, value: bool) -> None:
    run = Run(form(type="boolean", title="Notify"), "", typed)
    assert accepted(run.result) == {"f": value}
    assert run.script.prompts[1] == "Notify [y/n]: "


def test_a_boolean_refuses_other_words() -> None:
    run = Run(form(type="boolean"), "", "maybe", "y")
    assert accepted(run.result) == {"f": True}
    assert "! Expected yes or no, got 'maybe'." in run.printed


def test_an_integer_out_of_range_is_refused_and_the_field_asked_again() -> None:
    run = Run(form(type="integer", title="Count", minimum=1, maximum=10), "", "11", "0", "7")
    assert accepted(run.result) == {"f": 7}
    assert run.script.prompts == [CHOICE_PROMPT, "Count: ", "Count: ", "Count: "]
    assert "(a whole number from 1 to 10)" in run.printed
    assert "! Must be at most 10.\n" in run.printed
    assert "! Must be at least 1.\n" in run.printed


def test_an_integer_refuses_text_and_fractions() -> None:
    run = Run(form(type="integer"), "", "ten", "2.5", "3")
    assert accepted(run.result) == {"f": 3}
    assert "! Expected a whole number, got 'ten'." in run.printed
    assert "got '2.5'" in run.printed


def test_a_number_takes_fractions_but_not_nan() -> None:
    run = Run(form(type="number", maximum=3), "", "nan", "2.5")
    assert accepted(run.result) == {"f": 2.5}
    assert "! Expected a number, got 'nan'." in run.printed


def test_an_email_field_refuses_what_is_not_an_address() -> None:
    run = Run(
        form(type="string", title="Email", format="email"), "", "alice", "alice@example", "alice@example.com"
    )
    assert accepted(run.result) == {"f": "alice@example.com"}
    assert run.printed.count("! Expected an email address, like name@example.com.") == 2


@pytest.mark.parametrize(
    ("fmt", "bad", "good"),
    [
        ("uri", "example.com", "https://example.com/x"),
        ("date", "28/07/2026", "2026-07-28"),
        ("date", "2026-02-30", "2026-02-28"),
        ("date-time", "2026-07-28", "2026-07-28T09:30:00+02:00"),
    ],
)
def test_other_formats_get_a_light_check(fmt: str, bad: str, good: str) -> None:
    run = Run(form(type="string", format=fmt), "", bad, good)
    assert accepted(run.result) == {"f": good}
    assert run.printed.count("! Expected a") == 1


def test_string_length_limits_are_checked() -> None:
    run = Run(form(type="string", minLength=2, maxLength=3), "", "a", "abcd", "abc")
    assert accepted(run.result) == {"f": "abc"}
    assert "! Must be at least 2 characters." in run.printed
    assert "! Must be at most 3 characters." in run.printed


def test_a_pattern_no_prompt_knows_is_still_checked_by_the_schema() -> None:
    run = Run(form(type="string", pattern="^[0-9]+$"), "", "12a", "12")
    assert accepted(run.result) == {"f": "12"}
    # Refused at the field itself, not later by the whole-form net.
    assert "! '12a' does not match '^[0-9]+$'." in run.printed
    assert "do not fit the form" not in run.printed


def test_an_optional_field_left_empty_is_left_out() -> None:
    schema = {
        "type": "object",
        "properties": {"note": {"type": "string", "title": "Note"}, "n": {"type": "integer"}},
        "required": ["n"],
    }
    run = Run(schema, "", "", "4")
    assert accepted(run.result) == {"n": 4}
    assert run.script.prompts[1] == "Note (optional): "


def test_a_default_is_shown_and_used_on_enter() -> None:
    run = Run(form(required=False, type="string", title="Team", default="ops"), "", "")
    assert accepted(run.result) == {"f": "ops"}
    assert run.script.prompts[1] == "Team (optional) [default: ops]: "


def test_an_enum_default_is_shown_by_its_title() -> None:
    schema = form(type="string", title="Size", oneOf=[{"const": "s", "title": "Small"}], default="s")
    run = Run(schema, "", "")
    assert accepted(run.result) == {"f": "s"}
    assert run.script.prompts[1] == "Size [1] [default: Small]: "


def test_a_required_field_left_empty_is_asked_again() -> None:
    run = Run(form(type="string", title="Name"), "", "", "Ada")
    assert accepted(run.result) == {"f": "Ada"}
    assert run.script.prompts == [CHOICE_PROMPT, "Name: ", "Name: "]
    assert "! An answer is required." in run.printed


MULTI = form(
    type="array",
    title="Tags",
    items={
        "anyOf": [
            {"const": "a", "title": "Alpha"},
            {"const": "b", "title": "Beta"},
            {"const": "c", "title": "Gamma"},
        ]
    },
    minItems=1,
    maxItems=2,
)


def test_a_multi_select_takes_numbers_or_values_comma_separated() -> None:
    run = Run(MULTI, "", "3, 1")
    assert accepted(run.result) == {"f": ["c", "a"]}
    assert run.script.prompts[1] == "Tags [1-3, comma-separated]: "
    assert "  1. Alpha\n  2. Beta\n  3. Gamma\n" in run.printed
    assert accepted(Run(MULTI, "", "b,beta,ALPHA").result) == {"f": ["b", "a"]}


def test_a_multi_select_checks_how_many_are_chosen() -> None:
    run = Run(MULTI, "", "1,2,3", "", "x", "2")
    assert accepted(run.result) == {"f": ["b"]}
    assert "! Choose at most 2." in run.printed
    assert "! Choose at least 1." in run.printed
    assert "got 'x'" in run.printed


def test_an_untitled_multi_select_by_value() -> None:
    schema = form(type="array", items={"type": "string", "enum": ["x", "y"]})
    assert accepted(Run(schema, "", "y").result) == {"f": ["y"]}


@pytest.mark.parametrize(
    ("typed", "action"), [("d", "decline"), ("decline", "decline"), ("c", "cancel"), ("C", "cancel")]
)
def test_decline_and_cancel_ask_no_fields_and_send_no_content(typed: str, action: str) -> None:
    run = Run(HELPDESK, typed)
    assert run.result == ElicitResult(action=action)
    assert run.result.content is None
    assert run.script.prompts == [CHOICE_PROMPT]


def test_an_unknown_first_answer_is_asked_again() -> None:
    run = Run(HELPDESK, "maybe", "a", "1")
    assert accepted(run.result) == {"reason": "Resolved"}
    assert run.script.prompts[:2] == [CHOICE_PROMPT, CHOICE_PROMPT]
    assert "! Type a (or just Enter) to answer, d to decline, c to cancel." in run.printed


def test_end_of_input_cancels_at_the_first_question() -> None:
    run = Run(HELPDESK)
    assert run.result.action == "cancel"
    assert run.result.content is None


def test_end_of_input_in_the_middle_of_a_form_cancels() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    run = Run(schema, "", "first")
    assert run.result.action == "cancel"
    assert run.result.content is None
    assert run.script.prompts == [CHOICE_PROMPT, "a (optional): ", "b (optional): "]


def test_answers_that_break_a_whole_form_rule_start_the_fields_again() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "dependentRequired": {"a": ["b"]},
    }
    run = Run(schema, "", "x", "", "x", "y")
    assert accepted(run.result) == {"a": "x", "b": "y"}
    assert run.script.prompts[1:] == ["a (optional): ", "b (optional): "] * 2
    assert "! The answers do not fit the form (" in run.printed
    assert "starting again." in run.printed


def test_a_form_with_no_fields_is_accepted_empty() -> None:
    assert accepted(Run({"type": "object", "properties": {}}, "").result) == {}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array"},
        form(type="object"),
        form(type="array", items={"type": "string"}),
        form(type="string", minLength="two"),
        {"type": "object", "properties": {}, "required": ["ghost"]},
    ],
)
def test_a_schema_that_is_not_a_form_raises_before_anything_is_shown(schema: dict[str, Any]) -> None:
    out = io.StringIO()
    script = Script("")
    with pytest.raises(FormError):
        FormPrompter(Console(file=out, width=100), script).prompt("m", schema)
    assert out.getvalue() == ""
    assert script.prompts == []


def test_server_text_is_printed_as_plain_text() -> None:
    schema = form(type="string", title="Na\x1b[2Jme", description="[bold]not markup[/bold]")
    run = Run(schema, "", "x", message="Hello\x1b]8;;http://evil\x07 [red]you[/red]")
    assert accepted(run.result) == {"f": "x"}
    assert "\x1b" not in run.printed
    assert "[bold]not markup[/bold]" in run.printed
    assert "[red]you[/red]" in run.printed
    assert run.script.prompts[1] == "Na[2Jme: "


# --- content_from_pairs ---------------------------------------------------------------------------

KINDS = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "enum": ["Resolved", "Duplicate"]},
        "priority": {
            "type": "string",
            "oneOf": [{"const": "p1", "title": "Urgent"}, {"const": "p3", "title": "Low"}],
        },
        "confirm": {"type": "boolean"},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
        "note": {"type": "string"},
        "team": {"type": "string", "default": "ops"},
        "silent": {"type": "boolean"},
    },
    "required": ["reason", "confirm"],
}


def test_pairs_are_coerced_to_each_field_type() -> None:
    content = content_from_pairs(
        KINDS,
        {
            "reason": "duplicate",
            "priority": "URGENT",
            "confirm": "yes",
            "count": "3",
            "ratio": "0.5",
            "tags": "c, a",
            "note": " kept as typed ",
            "silent": "0",
        },
    )
    assert content == {
        "reason": "Duplicate",
        "priority": "p1",
        "confirm": True,
        "count": 3,
        "ratio": 0.5,
        "tags": ["c", "a"],
        "note": " kept as typed ",
        "team": "ops",
        "silent": False,
    }


def test_pairs_leave_out_optional_fields_without_a_default() -> None:
    assert content_from_pairs(KINDS, {"reason": "Resolved", "confirm": "1"}) == {
        "reason": "Resolved",
        "confirm": True,
        "team": "ops",
    }


def test_an_unknown_key_is_refused_with_the_field_names() -> None:
    with pytest.raises(FormError) as caught:
        content_from_pairs(HELPDESK, {"reason": "Resolved", "resaon": "x"})
    assert str(caught.value) == "the form has no field 'resaon' (its fields: reason)"


def test_a_missing_required_field_is_refused() -> None:
    with pytest.raises(FormError) as caught:
        content_from_pairs(KINDS, {"reason": "Resolved"})
    assert str(caught.value) == "missing required field: confirm"


def test_a_bad_enum_value_lists_the_allowed_values() -> None:
    with pytest.raises(FormError) as caught:
        content_from_pairs(HELPDESK, {"reason": "Fixed"})
    assert str(caught.value) == "reason: 'Fixed' is not one of Resolved, Duplicate, Cancelled"
    with pytest.raises(FormError) as titled:
        content_from_pairs(KINDS, {"reason": "Resolved", "confirm": "y", "priority": "2"})
    assert str(titled.value) == "priority: '2' is not one of p1 (Urgent), p3 (Low)"


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ({"count": "three"}, "count: expected a whole number, got 'three'"),
        ({"count": "11"}, "count: must be at most 10"),
        ({"ratio": "inf"}, "ratio: expected a number, got 'inf'"),
        ({"confirm": "sure"}, "confirm: expected yes or no, got 'sure'"),
        ({"tags": "a,d"}, "tags: 'd' is not one of a, b, c"),
    ],
)
def test_a_value_that_does_not_fit_names_the_field(pairs: dict[str, str], message: str) -> None:
    with pytest.raises(FormError) as caught:
        content_from_pairs(KINDS, {"reason": "Resolved", "confirm": "yes", **pairs})
    assert str(caught.value) == message


def test_missing_required_names_required_fields_without_a_default() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string", "default": "x"},
            "c": {"type": "string"},
        },
        "required": ["c", "b", "a"],
    }
    assert missing_required(schema, {}) == ["a", "c"]
    assert missing_required(schema, {"c": "1"}) == ["a"]
    assert missing_required(schema, {"a": "1", "c": "2"}) == []


# --- show_link ------------------------------------------------------------------------------------


def test_a_link_is_shown_with_its_site_and_nothing_is_asked() -> None:
    """A URL request is answered on its page: the link is shown in full, with its site, and no
    prompt waits for a key that could answer it."""
    out = io.StringIO()
    console = Console(file=out, width=100)
    show_link(console, "Connect your account", "https://auth.example.com/x?y=1", PAGE_HINT)
    shown = out.getvalue()
    assert "Connect your account" in shown
    assert "Link: https://auth.example.com/x?y=1" in shown
    assert "Site: auth.example.com" in shown
    assert PAGE_HINT in shown.replace("\n", " ")
    assert "not https" not in shown


def test_a_plain_http_link_is_flagged_and_control_characters_are_removed() -> None:
    out = io.StringIO()
    show_link(Console(file=out, width=100), "Sign \x1b[31min", "http://example.com/\x1b[0m", "hint")
    shown = out.getvalue()
    assert "\x1b" not in shown
    assert "Link: http://example.com/[0m" in shown
    assert "Note: this link is not https." in shown
