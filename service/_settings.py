"""Configuration, read once from the environment (``LONGTOOLS_*``) and CLI flags. API process."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

KEYGEN_HINT = (
    'python -c "import base64, secrets; print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"'
    " (or: longtools keygen)"
)


def _split_commas(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """Every setting longtools reads; each field is also the env var ``LONGTOOLS_<NAME>``."""

    # Errors never echo what was given: a bad key must not end up in a log or a terminal.
    model_config = SettingsConfigDict(env_prefix="LONGTOOLS_", extra="ignore", hide_input_in_errors=True)

    host: str = Field("127.0.0.1", description="Address the HTTP server binds to.")
    port: int = Field(8000, ge=0, le=65535, description="Port the HTTP server binds to (0 picks a free one).")
    data_dir: Path = Field(Path(".longtools"), description="Directory for local state (created if missing).")
    conformance_fixtures: bool = Field(
        False, description="Serve the official conformance suite's fixture tools, prompts and resources."
    )
    server_name: str = Field(
        "longtools",
        description="Server name in serverInfo, and the audience sealed into every requestState.",
    )
    state_keys: SecretStr | None = Field(
        None,
        description="Comma-separated requestState keys, each the URL-safe base64 of 32 random bytes. "
        "The first seals, all open. Unset: an ephemeral per-process key (single replica only).",
    )
    state_ttl_s: float = Field(
        600.0, gt=0, description="Seconds a requestState stays valid after it is minted."
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Extra Host header values accepted (DNS-rebinding guard), comma-separated, e.g. "
        "'mcp.example.com,mcp.example.com:*'. Loopback names are always accepted.",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Extra Origin header values accepted, comma-separated, e.g. 'https://app.example.com'. "
        "Requests without an Origin header are always accepted.",
    )
    max_body_bytes: int = Field(1_048_576, gt=0, description="Largest accepted HTTP request body, in bytes.")
    max_request_state_bytes: int = Field(16_384, gt=0, description="Largest accepted requestState, in bytes.")
    temporal_address: str | None = Field(
        None,
        description="Temporal frontend host:port. Unset: `serve` starts the embedded Temporal dev server "
        "(SQLite in the data dir); `api` and `worker` use 127.0.0.1:7233.",
    )
    temporal_namespace: str = Field("default", min_length=1, description="Temporal namespace for tasks.")
    temporal_port: int = Field(
        7233, ge=0, le=65535, description="Port of the embedded Temporal dev server `serve` starts (0: free)."
    )
    task_queue: str = Field("longtools", min_length=1, description="Temporal task queue of the long tools.")
    tools: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Extra tool modules to load, comma-separated; each has `register(registry, settings)`.",
    )
    examples: bool = Field(True, description="Serve the built-in helpdesk example tools.")
    task_ttl_s: float = Field(
        86_400.0, gt=0, description="Seconds a task lives from its creation (its ttlMs), answered or not."
    )
    task_poll_interval_ms: int = Field(500, ge=10, description="pollIntervalMs suggested to task clients.")
    mrtr_wait_s: float = Field(
        30.0,
        ge=0,
        description="Seconds one MRTR round of a long tool holds the request open while the work runs.",
    )
    answer_settle_s: float = Field(
        2.0,
        ge=0,
        description="Seconds tasks/update waits for the workflow to take the answers before it acks "
        "(the answers are durable either way; this only makes a tasks/get right after the ack current).",
    )
    helpdesk_work_s: float = Field(
        1.0, ge=0, description="Seconds of (simulated) backend work per ticket in bulk_close_tickets."
    )
    log_format: Literal["auto", "json", "console"] = Field(
        "auto", description="'json' lines, 'console' for people, 'auto' picks console on a terminal."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Lowest level logged."
    )

    @field_validator("allowed_hosts", "allowed_origins", "tools", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        return _split_commas(value)

    @field_validator("state_keys", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("state_keys")
    @classmethod
    def _check_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            decode_state_keys(value.get_secret_value())
        return value

    def state_key_ring(self) -> list[bytes] | None:
        """The decoded key ring, or None when no keys are configured."""
        if self.state_keys is None:
            return None
        return decode_state_keys(self.state_keys.get_secret_value())


def decode_state_keys(raw: str) -> list[bytes]:
    """Decode ``LONGTOOLS_STATE_KEYS``; a ValueError names the fix, never the key."""
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    if not parts:
        raise ValueError(f"LONGTOOLS_STATE_KEYS is set but empty; generate a key with: {KEYGEN_HINT}")
    keys: list[bytes] = []
    for index, part in enumerate(parts):
        try:
            key = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != 32:
            raise ValueError(
                f"LONGTOOLS_STATE_KEYS entry {index} is not the URL-safe base64 of 32 bytes; "
                f"generate one with: {KEYGEN_HINT}"
            )
        keys.append(key)
    if len(set(keys)) != len(keys):
        raise ValueError("LONGTOOLS_STATE_KEYS lists the same key twice")
    return keys
