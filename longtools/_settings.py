"""Configuration, read once from the environment (``LONGTOOLS_*``) and CLI flags. Every process."""

from __future__ import annotations

import base64
import binascii
import ipaddress
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlparse, urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

KEYGEN_HINT = (
    'python -c "import base64, secrets; print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"'
    " (or: longtools keygen)"
)

STATE_KEYS_VAR = "LONGTOOLS_STATE_KEYS"
PAYLOAD_KEYS_VAR = "LONGTOOLS_PAYLOAD_KEYS"


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
        "The first seals, all open. Unset: `serve` keeps a generated ring in <data-dir>/keys.json; "
        "`api` refuses to start.",
    )
    payload_keys: SecretStr | None = Field(
        None,
        description="Comma-separated keys that encrypt what longtools stores in Temporal (arguments, "
        "answers, results, memos), each the URL-safe base64 of 32 random bytes. The first encrypts, all "
        "decrypt. Unset: `serve` keeps a generated ring in <data-dir>/keys.json; `api` and `worker` refuse "
        "to start.",
    )
    ledger_keys: SecretStr | None = Field(
        None,
        description="Comma-separated keys that sign every task's ledger, each the URL-safe base64 of 32 "
        "random bytes (an Ed25519 seed). The first signs; all stay listed so `longtools audit keys` "
        "names them for verifying older entries. Unset: derived from each payload key.",
    )
    codec_token: SecretStr | None = Field(
        None,
        description="Bearer token `longtools codec-server` requires (at least 16 characters); needed to "
        "bind it anywhere but loopback, since it decrypts every stored payload for whoever reaches it.",
    )
    state_ttl_s: float = Field(
        600.0, gt=0, description="Seconds a requestState stays valid after it is minted."
    )
    session_ttl_s: float = Field(
        86_400.0,
        gt=0,
        description="Seconds a 2025-era session (its Mcp-Session-Id) stays valid after `initialize`; the "
        "client then gets 404 and initializes again. Sessions are sealed tokens: no replica stores them.",
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
    temporal_ui_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Port of the embedded Temporal dev server's Web UI (0: free; unset: no UI). The server "
        "also binds its HTTP API and metrics on free ports, on loopback.",
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
    task_poll_interval_ms: int = Field(
        500,
        ge=10,
        description="pollIntervalMs suggested to task clients while a task works; a task that has worked "
        "longer gets a twentieth of its age, up to ten times this.",
    )
    task_input_poll_interval_ms: int = Field(
        2000,
        ge=10,
        description="pollIntervalMs suggested while a task waits for input: a person takes longer than "
        "that to answer, and a client that has just answered need not wait for it (it may read at once).",
    )
    task_inline_ms: int = Field(
        0,
        ge=0,
        le=10_000,
        description="Milliseconds `tools/call` waits for a long tool it started as a task to finish; "
        "one that completes within them is answered with its result, not the task (0: always the task).",
    )
    task_list_page_size: int = Field(
        50, ge=1, le=1000, description="Most tasks one 2025-era `tasks/list` page shows."
    )
    task_tool_wait_s: float = Field(
        10.0,
        ge=0,
        le=60,
        description="Seconds a long tool's call, and `task_status`/`task_answer`, wait for the task to end "
        "or ask before answering where it stands, for a client with neither tasks nor elicitation "
        "(which follows its tasks through the task tools).",
    )
    task_tools: Literal["when_needed", "always"] = Field(
        "when_needed",
        description="Whom `tools/list` shows `task_status`, `task_answer` and `task_cancel`: 'when_needed' "
        "to clients that declared neither tasks nor elicitation, 'always' to every client. Anyone may "
        "call them.",
    )
    max_listen_task_ids: int = Field(
        100, ge=1, description="Most task ids one `subscriptions/listen` stream may follow."
    )
    max_listens_per_principal: int = Field(
        20,
        ge=1,
        description="Most `subscriptions/listen` streams one principal may hold open on an API process.",
    )
    max_listen_opens_per_minute: int = Field(
        120,
        ge=1,
        description="Most `subscriptions/listen` requests one principal may open on an API process in a "
        "minute, whether they stay open or close at once (each costs a read of the tasks it follows).",
    )
    mrtr_wait_s: float = Field(
        30.0,
        ge=0,
        le=300,
        description="Seconds one MRTR round of a long tool holds the request open while the work runs "
        "(at most 300: proxies and clients give up on a silent request long before that).",
    )
    mrtr_abandon_s: float = Field(
        600.0,
        ge=0,
        description="Seconds a client without the tasks extension may take to come back with a long "
        "tool's requestState (a retry, or the answers to its questions) before the exchange counts as "
        "abandoned and its task is cancelled, within one and a half times that (0: never). A host that "
        "keeps a question open longer should use tasks.",
    )
    max_active_tasks_per_principal: int = Field(
        1000,
        ge=1,
        description="Most tasks one principal may have running at once; a start beyond it is refused. "
        "Concurrent starts on one API process never pass it; with several replicas, a burst may pass it "
        "by the starts other replicas made in the same 2 seconds (Temporal's visibility shows a start "
        "only after a moment).",
    )
    max_held_rounds_per_principal: int = Field(
        100,
        ge=1,
        description="Most requests of one principal an API process holds open at once while a task "
        "works or waits for an answer (MRTR rounds, pushed questions, tasks/result, task tool waits).",
    )
    max_held_rounds: int = Field(
        5000, ge=1, description="Most such requests an API process holds open at once, for everyone."
    )
    max_task_answer_bytes: int = Field(
        1_048_576,
        gt=0,
        description="Most bytes of answers (as JSON) one task accepts over its life; each answer is "
        "written to the task's history, which Temporal limits.",
    )
    cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Most bytes of task results and published task state one API process keeps to answer "
        "polls and waits without reading Temporal (half for the tasks it has read, half for the changes "
        "its watches have seen); past it the oldest are dropped, and read again when asked for.",
    )
    temporal_rpc_timeout_s: float = Field(
        5.0,
        gt=0,
        le=60,
        description="Seconds the API waits for one Temporal call before it answers that the task "
        "service is unavailable.",
    )
    worker_shutdown_s: float = Field(
        30.0,
        ge=0,
        description="Seconds a stopping worker lets its running activities finish before it cancels "
        "them (they are retried on another worker).",
    )
    answer_settle_s: float = Field(
        2.0,
        ge=0,
        description="Seconds tasks/update waits for the workflow to take the answers before it acks "
        "(the answers are durable either way; this only makes a tasks/get right after the ack current).",
    )
    cancel_grace_s: float = Field(
        30.0,
        gt=0,
        description="Seconds a cancelled task has to stop before its workflow is terminated (it then "
        "reads cancelled): a workflow whose code keeps failing never runs to see a cancel. A tool's "
        "clean-up after a cancel must fit in it.",
    )
    helpdesk_work_s: float = Field(
        1.0, ge=0, description="Seconds of (simulated) backend work per ticket in bulk_close_tickets."
    )
    helpdesk_approval_s: float = Field(
        86_400.0, gt=0, description="Seconds delete_customer waits for its two approvals before it expires."
    )
    auth_tokens: SecretStr | None = Field(
        None,
        description="Static bearer tokens, comma-separated `token=principal` entries (small deployments "
        "and tests). Setting this or any jwt_* setting turns authentication on.",
    )
    jwt_issuer: str | None = Field(None, description="Required `iss` of JWT bearer tokens.")
    jwt_audience: str | None = Field(
        None,
        description="The `aud` a JWT bearer token must carry, when it is not resource_url (the default); "
        "a token issued for another resource is refused (RFC 8707).",
    )
    jwt_secret: SecretStr | None = Field(None, description="HS256 secret for JWT bearer tokens.")
    jwt_jwks: str | None = Field(
        None,
        description="RS256/ES256 public keys for JWT bearer tokens: a JWKS file path or an https:// URL "
        "(fetched when a token names an unknown key, at most once a minute).",
    )
    no_auth: bool = Field(
        False,
        description="Serve without authentication: every caller is one principal. `serve` on a loopback "
        "address does this by default (with a warning); anything else must ask for it.",
    )
    resource_url: str | None = Field(
        None,
        description="Public URL of the MCP endpoint (e.g. https://mcp.example.com/mcp; http:// only on "
        "loopback): the `resource` of the OAuth Protected Resource Metadata and the `aud` JWTs must carry. "
        "Required with any jwt_* setting; unset with static tokens: no metadata is served.",
    )
    authorization_servers: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Authorization server issuer URLs listed in the Protected Resource Metadata, "
        "comma-separated (default: jwt_issuer); the metadata is served only with resource_url.",
    )
    public_url: str | None = Field(
        None,
        description="Public address of this server as a person's browser reaches it (e.g. "
        "https://mcp.example.com; http:// only on loopback): where answer links and the sign-in's "
        "redirect point. Default: resource_url's origin, else the address the request came to.",
    )
    answer_link_ttl_s: float | None = Field(
        None,
        gt=0,
        description="Seconds an answer link stays valid after it is made. Default: as long as its task.",
    )
    page_session_ttl_s: float = Field(
        28_800.0,
        gt=0,
        description="Seconds a sign-in to the answer page lasts before the person signs in again.",
    )
    oidc_issuer: str | None = Field(
        None,
        description="OpenID Connect issuer the answer page signs people in with (authorization code "
        "with PKCE). Default: jwt_issuer. Its `sub` must be the one in the person's bearer tokens.",
    )
    oidc_client_id: str | None = Field(
        None,
        description="The answer page's OAuth client id at the OIDC issuer; setting it turns OIDC "
        "sign-in on (without it, a person signs in by pasting a token).",
    )
    oidc_client_secret: SecretStr | None = Field(
        None, description="The answer page's client secret, for an issuer that wants a confidential client."
    )
    oidc_scopes: str = Field("openid", description="Scopes the answer page's sign-in asks for.")
    groups: str | None = Field(
        None,
        description="Groups approver rules name, `group=name,name;group=name` (e.g. "
        "`leads=alice,bob;ops=carol`), with names as in auth_tokens or JWT subjects, or whole principals.",
    )
    groups_claim: str | None = Field(
        None,
        description="A JWT (and OIDC ID token) claim whose values add groups to its person, e.g. "
        "`groups` or `roles`: a list of names, or one name.",
    )
    notify_email: SecretStr | None = Field(
        None,
        description="The SMTP server notifications are mailed through, as an Apprise `mailto://` or "
        "`mailtos://` URL with a `from=` (e.g. "
        "`mailtos://user:pass@smtp.example.com?from=longtools@example.com`); each recipient is added as "
        "its `to=`.",
    )
    notify_people: SecretStr | None = Field(
        None,
        description="Where people hear that a question waits for them, `name=address;name=address`: a name "
        "as in groups (or a whole principal), an address an email (mailed through notify_email) or any "
        "Apprise URL (Slack, Teams, ntfy, ...); several separated by spaces. A person given no address here "
        "who signed in to the pages with OIDC is mailed at the verified `email` claim of their latest "
        "sign-in (oidc_scopes must ask for `email`).",
    )
    notify_groups: SecretStr | None = Field(
        None,
        description="A group's own channel, `group=apprise-url;group=apprise-url` (e.g. a Slack channel of "
        "`leads`): told of each question the group may decide, with the link all its approvers share.",
    )
    webhooks: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated URLs that receive every task event as a signed Standard Webhooks POST "
        "(needs webhook_secrets).",
    )
    webhook_secrets: SecretStr | None = Field(
        None,
        description="Comma-separated Standard Webhooks secrets (`whsec_` + base64); each signs every event, "
        "so a rotation adds the new one first and drops the old once receivers have the new one.",
    )
    notify_remind_s: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: [14_400.0, 86_400.0],
        description="Reminders while a question waits: seconds after it started waiting, each after the "
        "last; the last interval repeats (at most 20 reminders).",
    )
    notify_retry_max_s: float = Field(
        300.0, gt=0, description="Longest wait between two tries of a notification that failed to go out."
    )
    notify_give_up_s: float = Field(
        86_400.0,
        gt=0,
        description="How long a notification is tried before it is given up and counted as failed.",
    )
    passkey_rp_id: str | None = Field(
        None,
        description="The WebAuthn relying party id passkeys are registered for: a domain (e.g. "
        "`example.com`), the host of the pages or a parent of it. Unset: the host of public_url, else of "
        "each request. Passkeys registered under one id work under that id only.",
    )
    step_up_max_age_s: float = Field(
        300.0,
        gt=0,
        description='How recent a sign-in a `step_up="recent"` approval needs, in seconds; an older one '
        "is sent to sign in again (OIDC: with `max_age`), then brought back to the question.",
    )
    idempotency_ttl_s: float = Field(
        86_400.0,
        gt=0,
        description="Seconds a quick tool's idempotency key stays claimed by a call that never "
        "finished; a finished call's outcome, and a long tool's task, are remembered until Temporal's "
        "retention drops them.",
    )
    max_rounds: int = Field(20, ge=1, description="Most MRTR rounds one exchange may take.")
    max_input_responses: int = Field(32, ge=1, description="Most answers one request may carry.")
    worker_cached_tasks: int = Field(
        1000,
        ge=0,
        description="Tasks a worker keeps in memory between steps (Temporal's workflow cache, about "
        "0.1 MiB each); one that is not replays its history when it next runs. Parked tasks beyond it cost "
        "the worker no memory.",
    )
    worker_metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Port on which a standalone `worker` serves Prometheus /metrics (unset: none; the "
        "API serves /metrics on its own port).",
    )
    traces: str = Field(
        "off",
        pattern=r"^(off|otlp|file:.+)$",
        description="OpenTelemetry traces: 'off', 'otlp' (to OTEL_EXPORTER_OTLP_ENDPOINT) or 'file:PATH' "
        "(JSON lines); needs the longtools[otel] extra.",
    )
    log_format: Literal["auto", "json", "console"] = Field(
        "auto", description="'json' lines, 'console' for people, 'auto' picks console on a terminal."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Lowest level logged."
    )
    log_exception_messages: bool = Field(
        False,
        description="For development only: log exceptions with their messages (a tool's failures, a "
        "failed activity's reason). Off by default because a message may quote a tool's arguments, "
        "answers or results, which the logs otherwise never hold.",
    )

    @field_validator(
        "allowed_hosts",
        "allowed_origins",
        "tools",
        "authorization_servers",
        "webhooks",
        "notify_remind_s",
        mode="before",
    )
    @classmethod
    def _comma_list(cls, value: object) -> object:
        return _split_commas(value)

    @field_validator(
        "state_keys",
        "payload_keys",
        "codec_token",
        "auth_tokens",
        "jwt_secret",
        "jwt_jwks",
        "jwt_issuer",
        "jwt_audience",
        "resource_url",
        "temporal_ui_port",
        "public_url",
        "answer_link_ttl_s",
        "oidc_issuer",
        "oidc_client_id",
        "oidc_client_secret",
        "ledger_keys",
        "groups",
        "groups_claim",
        "notify_email",
        "notify_people",
        "notify_groups",
        "webhook_secrets",
        "passkey_rp_id",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # `LONGTOOLS_X=` in an env file (compose passes an unset variable so) means unset, not "".
        return None if value == "" else value

    @field_validator("state_keys", "payload_keys", "ledger_keys")
    @classmethod
    def _check_key_ring(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None:
            decode_key_ring(value.get_secret_value(), f"LONGTOOLS_{str(info.field_name).upper()}")
        return value

    @field_validator("groups")
    @classmethod
    def _check_groups(cls, value: str | None) -> str | None:
        if value is not None:
            parse_groups(value)
        return value

    @field_validator("notify_people", "notify_groups")
    @classmethod
    def _check_routes(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None:
            parse_routes(value.get_secret_value(), f"LONGTOOLS_{str(info.field_name).upper()}")
        return value

    @field_validator("notify_email")
    @classmethod
    def _check_email(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("mailto://", "mailtos://")):
            raise ValueError("LONGTOOLS_NOTIFY_EMAIL must be an Apprise mailto:// or mailtos:// URL")
        return value

    @field_validator("webhooks")
    @classmethod
    def _check_webhooks(cls, value: list[str]) -> list[str]:
        for url in value:
            if not url.startswith("https://") and not (url.startswith("http://") and is_loopback_url(url)):
                raise ValueError("LONGTOOLS_WEBHOOKS must be https:// URLs (http:// only on loopback)")
        return value

    @field_validator("webhook_secrets")
    @classmethod
    def _check_webhook_secrets(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_webhook_secrets(value.get_secret_value())
        return value

    @field_validator("notify_remind_s")
    @classmethod
    def _check_reminders(cls, value: list[float]) -> list[float]:
        if any(seconds <= 0 for seconds in value):
            raise ValueError("LONGTOOLS_NOTIFY_REMIND_S must be positive seconds")
        return value

    @field_validator("auth_tokens")
    @classmethod
    def _check_tokens(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_static_tokens(value.get_secret_value())
        return value

    @field_validator("jwt_jwks")
    @classmethod
    def _check_jwks(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("http://") and not is_loopback_url(value):
            raise ValueError(
                "LONGTOOLS_JWT_JWKS must be an https:// URL or a file path (http:// only on loopback)"
            )
        return value

    @field_validator("public_url", "oidc_issuer")
    @classmethod
    def _check_public_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        # People's browsers go there with their sign-in: https, but on loopback.
        if value is None:
            return None
        parts = urlsplit(value)
        secure = parts.scheme == "https" or (parts.scheme == "http" and is_loopback_url(value))
        if not secure or not parts.hostname or parts.query or parts.fragment:
            name = f"LONGTOOLS_{(info.field_name or '').upper()}"
            raise ValueError(
                f"{name} must be an https:// URL without query or fragment, e.g. "
                "https://mcp.example.com (http:// only on loopback)"
            )
        # An issuer is compared exactly (some end in "/"); a public URL is a base paths are added to.
        return value.rstrip("/") if info.field_name == "public_url" else value

    @field_validator("resource_url")
    @classmethod
    def _check_resource_url(cls, value: str | None) -> str | None:
        # RFC 8707 section 2 and RFC 9728 section 1.2: an absolute URL without a fragment; https,
        # since clients send their tokens there (http:// on loopback, for trying things locally).
        if value is None:
            return None
        parts = urlsplit(value)
        secure = parts.scheme == "https" or (parts.scheme == "http" and is_loopback_url(value))
        if not secure or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(
                "LONGTOOLS_RESOURCE_URL must be the public https:// URL of the MCP endpoint, without "
                "query or fragment, e.g. https://mcp.example.com/mcp (http:// only on loopback)"
            )
        return value

    @property
    def auth_configured(self) -> bool:
        """Whether any token or JWT setting is given (authentication is then on)."""
        return any(
            value is not None for value in (self.auth_tokens, self.jwt_issuer, self.jwt_secret, self.jwt_jwks)
        )

    def state_key_ring(self) -> list[bytes] | None:
        """The decoded key ring, or None when no keys are configured."""
        if self.state_keys is None:
            return None
        return decode_key_ring(self.state_keys.get_secret_value(), STATE_KEYS_VAR)

    def payload_key_ring(self) -> list[bytes] | None:
        """The decoded payload key ring (first encrypts), or None when none is configured."""
        if self.payload_keys is None:
            return None
        return decode_key_ring(self.payload_keys.get_secret_value(), PAYLOAD_KEYS_VAR)

    def ledger_key_ring(self) -> list[bytes] | None:
        """The ledger's own key ring, or None when it is derived from the payload keys."""
        if self.ledger_keys is None:
            return None
        return decode_key_ring(self.ledger_keys.get_secret_value(), "LONGTOOLS_LEDGER_KEYS")

    @model_validator(mode="after")
    def _webhooks_are_signed(self) -> Settings:
        if self.webhooks and self.webhook_secrets is None:
            raise ValueError("LONGTOOLS_WEBHOOKS needs LONGTOOLS_WEBHOOK_SECRETS: every event is signed")
        if self.notify_email is None and self.notify_people is not None:
            people = parse_routes(self.notify_people.get_secret_value(), "LONGTOOLS_NOTIFY_PEOPLE")
            if any("://" not in address for addresses in people.values() for address in addresses):
                raise ValueError(
                    "LONGTOOLS_NOTIFY_PEOPLE gives email addresses: set LONGTOOLS_NOTIFY_EMAIL, the SMTP "
                    "server to mail them through"
                )
        return self

    @property
    def notifying(self) -> bool:
        """Whether anyone is told anything: an email server, a channel or a webhook is configured."""
        return bool(self.notify_email or self.notify_people or self.notify_groups or self.webhooks)

    def require_state_keys(self) -> list[bytes]:
        """The state key ring; raises MissingKeyRing when none is configured."""
        keys = self.state_key_ring()
        if keys is None:
            raise MissingKeyRing(STATE_KEYS_VAR)
        return keys

    def require_payload_keys(self) -> list[bytes]:
        """The payload key ring; raises MissingKeyRing when none is configured."""
        keys = self.payload_key_ring()
        if keys is None:
            raise MissingKeyRing(PAYLOAD_KEYS_VAR)
        return keys


class MissingKeyRing(Exception):
    """A key ring this process needs is not configured (the message names the variable and the fix)."""

    def __init__(self, variable: str) -> None:
        super().__init__(
            f"{variable} is not set: give every process of the deployment the same key ring "
            f"(the comma-separated URL-safe base64 of 32 random bytes each); generate a key with: "
            f"{KEYGEN_HINT}"
        )
        self.variable = variable


def encode_key(key: bytes) -> str:
    """One key as it is written in a ring: URL-safe base64 of its 32 bytes."""
    return base64.urlsafe_b64encode(key).decode()


def decode_key_ring(raw: str, variable: str) -> list[bytes]:
    """Decode a comma-separated ring of keys named ``variable`` in messages; a ValueError names the
    fix, never a key."""
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    if not parts:
        raise ValueError(f"{variable} is set but empty; generate a key with: {KEYGEN_HINT}")
    keys: list[bytes] = []
    for index, part in enumerate(parts):
        try:
            key = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != 32:
            raise ValueError(
                f"{variable} entry {index} is not the URL-safe base64 of 32 bytes; "
                f"generate one with: {KEYGEN_HINT}"
            )
        keys.append(key)
    if len(set(keys)) != len(keys):
        raise ValueError(f"{variable} lists the same key twice")
    return keys


def parse_groups(raw: str) -> dict[str, frozenset[str]]:
    """``LONGTOOLS_GROUPS`` as ``{group: names}``: ``leads=alice,bob;ops=carol``.

    Raises:
        ValueError: an entry is not ``name=member,member`` (the message names the entry, by position).
    """
    groups: dict[str, set[str]] = {}
    for index, entry in enumerate(part.strip() for part in raw.split(";")):
        if not entry:
            continue
        group, sep, members = entry.partition("=")
        group = group.strip()
        names = {member.strip() for member in members.split(",") if member.strip()}
        if not sep or not group or not names:
            raise ValueError(f"LONGTOOLS_GROUPS entry {index + 1} is not `group=name,name`")
        groups.setdefault(group, set()).update(names)
    return {group: frozenset(names) for group, names in groups.items()}


def parse_routes(raw: str, variable: str) -> dict[str, tuple[str, ...]]:
    """``LONGTOOLS_NOTIFY_PEOPLE`` or ``_GROUPS`` as ``{name: addresses}``: ``bob=bob@example.com;
    leads=slack://...``, several addresses separated by spaces. An address holds no ``;``.

    Raises:
        ValueError: an entry is not ``name=address`` (the message names it by position, never its
            address, which may hold a token).
    """
    routes: dict[str, tuple[str, ...]] = {}
    for index, entry in enumerate(part.strip() for part in raw.split(";")):
        if not entry:
            continue
        name, sep, addresses = entry.partition("=")
        found = tuple(address for address in addresses.split() if address)
        if not sep or not name.strip() or not found:
            raise ValueError(f"{variable} entry {index + 1} is not `name=address`")
        routes[name.strip()] = routes.get(name.strip(), ()) + found
    return routes


def parse_webhook_secrets(raw: str) -> list[bytes]:
    """``LONGTOOLS_WEBHOOK_SECRETS``: Standard Webhooks secrets, ``whsec_`` and base64 each.

    Raises:
        ValueError: one is not such a secret (named by position, never by value).
    """
    secrets: list[bytes] = []
    for index, secret in enumerate(part.strip() for part in raw.split(",") if part.strip()):
        try:
            key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if len(key) < 24:
            raise ValueError(
                f"LONGTOOLS_WEBHOOK_SECRETS entry {index + 1} is not `whsec_` and 24 or more bytes in base64"
            )
        secrets.append(key)
    if not secrets:
        raise ValueError("LONGTOOLS_WEBHOOK_SECRETS is set but empty")
    return secrets


def parse_static_tokens(raw: str) -> dict[str, str]:
    """Decode ``LONGTOOLS_AUTH_TOKENS`` into {token: principal}; a ValueError never names a token."""
    tokens: dict[str, str] = {}
    for index, entry in enumerate(part.strip() for part in raw.split(",") if part.strip()):
        token, sep, principal = entry.partition("=")
        token, principal = token.strip(), principal.strip()
        if not sep or not token or not principal:
            raise ValueError(f"LONGTOOLS_AUTH_TOKENS entry {index} is not `token=principal`")
        if len(token) < 16:
            raise ValueError(f"LONGTOOLS_AUTH_TOKENS entry {index}: a token needs at least 16 characters")
        if token in tokens:
            raise ValueError(f"LONGTOOLS_AUTH_TOKENS entry {index} repeats a token")
        tokens[token] = principal
    if not tokens:
        raise ValueError("LONGTOOLS_AUTH_TOKENS is set but empty")
    return tokens


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine only.

    The one loopback rule: where the service listens without auth by default, which http:// URLs
    it accepts (JWKS, resource URL), and which Host headers the codec server serves.
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    return is_loopback(urlparse(url).hostname or "")
