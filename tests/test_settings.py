"""Configuration is validated when built, and every message names the fix without echoing a secret."""

from __future__ import annotations

import base64

import pytest
from pydantic import ValidationError

from longtools import Settings

KEY_A = base64.urlsafe_b64encode(b"a" * 32).decode()
KEY_B = base64.urlsafe_b64encode(b"b" * 32).decode().rstrip("=")  # padding is optional


def test_the_key_ring_keeps_order_first_seals() -> None:
    settings = Settings(state_keys=f"{KEY_A}, {KEY_B}")
    assert settings.state_key_ring() == [b"a" * 32, b"b" * 32]


def test_no_keys_means_no_ring() -> None:
    assert Settings(state_keys=None).state_key_ring() is None
    assert Settings(state_keys="").state_key_ring() is None


@pytest.mark.parametrize(
    "raw",
    [
        "not base64 at all",
        base64.urlsafe_b64encode(b"short").decode(),
        base64.urlsafe_b64encode(b"x" * 33).decode(),
        ",",
    ],
)
def test_a_bad_key_is_refused_with_the_way_to_make_one(raw: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(state_keys=raw)
    message = str(caught.value)
    assert "longtools keygen" in message
    assert raw not in message or raw == ","


def test_the_same_key_twice_is_refused() -> None:
    with pytest.raises(ValidationError, match="same key twice"):
        Settings(state_keys=f"{KEY_A},{KEY_A}")


def test_host_and_origin_lists_come_comma_separated_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LONGTOOLS_ALLOWED_HOSTS", "mcp.example.com, mcp.example.com:*")
    monkeypatch.setenv("LONGTOOLS_ALLOWED_ORIGINS", "https://app.example.com")
    settings = Settings()
    assert settings.allowed_hosts == ["mcp.example.com", "mcp.example.com:*"]
    assert settings.allowed_origins == ["https://app.example.com"]


def test_the_secret_never_shows_in_repr() -> None:
    assert KEY_A not in repr(Settings(state_keys=KEY_A))


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"webhooks": "https://hooks.example.com/x"}, "needs LONGTOOLS_WEBHOOK_SECRETS"),
        (
            {"webhooks": "http://hooks.example.com/x", "webhook_secrets": "whsec_" + KEY_A},
            "https:// URLs (http:// only on loopback)",
        ),
        ({"webhook_secrets": "whsec_c2hvcnQ="}, "entry 1 is not `whsec_`"),
        (
            {"notify_people": "bob=bob@example.com;dave"},
            "LONGTOOLS_NOTIFY_PEOPLE entry 2 is not `name=address`",
        ),
        ({"notify_people": "bob=bob@example.com"}, "set LONGTOOLS_NOTIFY_EMAIL"),
        ({"notify_groups": "leads"}, "LONGTOOLS_NOTIFY_GROUPS entry 1"),
        ({"notify_email": "smtp://mail.example.com"}, "Apprise mailto:// or mailtos:// URL"),
        ({"notify_remind_s": "3600,0"}, "positive seconds"),
    ],
)
def test_notification_settings_are_checked_at_start_without_echoing_an_address(
    settings: dict[str, str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(f"LONGTOOLS_{name.upper()}", value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert said in str(caught.value)
    assert "bob@example.com" not in str(caught.value)


def test_notification_routes_and_reminders_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGTOOLS_NOTIFY_EMAIL", "mailtos://u:p@smtp.example.com?from=lt@example.com")
    monkeypatch.setenv(
        "LONGTOOLS_NOTIFY_PEOPLE", "bob=bob@example.com ntfy://bob;token:dave=dave@example.com"
    )
    monkeypatch.setenv("LONGTOOLS_NOTIFY_REMIND_S", "600, 3600")
    settings = Settings()
    assert settings.notifying and settings.notify_remind_s == [600.0, 3600.0]
    assert "u:p" not in repr(settings) and "bob@example.com" not in repr(settings)
    assert not Settings(notify_email=None, notify_people=None).notifying
