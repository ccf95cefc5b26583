"""The hosts: how each is pointed at the stand-in model and at longtools, in a throwaway HOME.

Every host gets the longtools server as a Streamable HTTP MCP server named ``longtools`` at the
wiretap's URL, with ``Authorization: Bearer <token>``, and its model API's base URL set to the
stand-in. Nothing else is configured beyond what it takes to run unattended (no onboarding, no
update checks, no telemetry, tools allowed without asking).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from tests.hosts.harness import PROMPT, REPO, Context, Host, Launch, Run

HERE = Path(__file__).resolve().parent
_HEAVY = "\u276f"  # the selection / input mark of Claude Code and Copilot
_SINGLE = "\u203a"  # Codex's input mark
_IM_DONE = "I'm done|I\u2019m done"
BIN = HERE / "node_modules" / ".bin"


def _npm_version(package: str) -> str:
    try:
        return str(json.loads((HERE / "node_modules" / package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "?"


def _quiet_env(ctx: Context, **extra: str) -> dict[str, str]:
    return {**ctx.env, **extra}


class _NpmHost(Host):
    """A host from the npm registry (tests/hosts/package.json): its version is its package's."""

    def version(self, ctx: Context) -> str:
        return _npm_version(self.package)


# --- Claude Code ---------------------------------------------------------------------------------


class _Claude(_NpmHost):
    package = "@anthropic-ai/claude-code"

    def _setup(self, ctx: Context) -> tuple[list[str], dict[str, str]]:
        config = ctx.run_dir / "claude-mcp.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "longtools": {
                            "type": "http",
                            "url": ctx.mcp_url,
                            "headers": {"Authorization": f"Bearer {ctx.token}"},
                        }
                    }
                },
                indent=2,
            )
        )
        key = "sk-ant-api03-standin-" + "x" * 40
        # What the first start would ask: theme, onboarding, this API key, trust in the folder.
        (ctx.home / ".claude.json").write_text(
            json.dumps(
                {
                    "hasCompletedOnboarding": True,
                    "theme": "dark",
                    "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                    "projects": {str(ctx.work): {"hasTrustDialogAccepted": True, "allowedTools": []}},
                    "autoUpdates": False,
                    "bypassPermissionsModeAccepted": True,
                }
            )
        )
        env = _quiet_env(
            ctx,
            ANTHROPIC_BASE_URL=ctx.model_url,
            ANTHROPIC_API_KEY=key,
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            IS_SANDBOX="1",
        )
        argv = [
            str(BIN / "claude"),
            "--mcp-config",
            str(config),
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__longtools",
            "--debug-file",
            str(ctx.run_dir / "claude-debug.log"),
        ]
        return argv, env


class ClaudePrint(_Claude):
    id = "claude-p"
    title = "Claude Code, -p"

    def prepare(self, ctx: Context) -> Launch:
        argv, env = self._setup(ctx)
        return Launch([argv[0], "-p", ctx.prompt, *argv[1:]], env)


class Tui(Host):
    """A TUI in tmux, driven as a person at it would: type the prompt once an input line shows and
    press Enter; once the person has answered on the page, do what they would in the host's URL
    dialog (``dialogs``); the session ends once the stand-in model has spoken and the screen has
    been quiet for 10 s with the tickets closed (20 s if nobody answered), or the time is up."""

    timeout_s = 240.0
    input_line = rf"(?m)^[\s│]*(>|{_HEAVY}|{_SINGLE})\s+(?!\d+\.)"
    marks = (_HEAVY, ">", _SINGLE)
    dialogs: tuple[tuple[str, tuple[str, ...]], ...] = ((_IM_DONE, ("choose", _IM_DONE)),)
    """A host's dialog about a URL request, and what the person does in it once they have answered on
    the page: ("choose", a regex of the option) or ("keys", key, ...)."""
    first_run: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """First-run dialogs before the input line: (a regex of the screen, the keys that get past it)."""

    def __init__(self) -> None:
        self._typed = False
        self._requests_at_typing = 0
        self._typed_at = 0.0
        self._enters = 0
        self._dialog_presses = 0
        self._pressed_at = 0.0

    def before_prompt(self, run: Run, screen: str) -> bool:
        """A first-run dialog to get past before the input line (True: a key was pressed)."""
        for pattern, keys in self.first_run:
            if re.search(pattern, screen):
                if time.monotonic() - getattr(self, "_first_run_at", 0.0) < 1.5:
                    return True  # give the last key time to take effect
                run.notes.append(f"first-run dialog {pattern!r}: pressed {' '.join(keys)}")
                for key in keys:
                    run.tmux_keys(key)
                self._first_run_at = time.monotonic()
                return True
        return False

    def on_screen(self, run: Run, screen: str) -> None:
        prompt = PROMPT
        if not self._typed:
            if self.before_prompt(run, screen):
                return
            if re.search(self.input_line, screen):
                self._requests_at_typing = run.model_requests()
                run.tmux_keys(prompt, literal=True)
                self._typed = True
                self._typed_at = time.monotonic()
            return
        # Enter right after typed text is taken as part of a paste: press it once the text shows,
        # and again until the host has sent its model a request (the prompt went out).
        if run.model_requests() <= self._requests_at_typing:
            if time.monotonic() - self._typed_at > 1.0 and self._enters < 5:
                run.tmux_keys("Enter")
                self._enters += 1
                self._typed_at = time.monotonic()
            return
        answered = run.person is not None and any(entry.get("sent") for entry in run.person.log)
        if not answered or self._dialog_presses >= 3 or time.monotonic() - self._pressed_at < 3:
            return
        # The person is back from the page: do in the host's dialog what they would (again, if the
        # dialog is still there 3 s later: a key can be lost while the TUI redraws).
        for pattern, action in self.dialogs:
            if re.search(pattern, screen):
                lines = [line for line in screen.splitlines() if re.search(pattern, line)]
                run.notes.append(f"dialog line: {lines[-1].strip()[:200]}")
                if action[0] == "choose":
                    self._choose(run, screen, action[1])
                else:
                    run.notes.append(f"pressed {' '.join(action[1:])}")
                    for key in action[1:]:
                        run.tmux_keys(key)
                        time.sleep(0.3)
                self._dialog_presses += 1
                self._pressed_at = time.monotonic()
                break

    def _choose(self, run: Run, screen: str, label: str) -> None:
        """Move a dialog's selection to the option matching ``label`` and press Enter: the options
        side by side on one line (←/→) or one per line (↑/↓)."""
        lines = screen.splitlines()
        row = next((line for line in reversed(lines) if re.search(label, line)), "")
        options = [part.strip() for part in re.split(r"\s{2,}", row.strip()) if part.strip()]
        if len(options) > 1:
            current = next((i for i, o in enumerate(options) if o.startswith(self.marks)), 0)
            target = next(i for i, o in enumerate(options) if re.search(label, o))
            key, steps = ("Right", target - current) if target >= current else ("Left", current - target)
        else:
            listed = [line for line in lines if re.match(rf"\s*(>|{_HEAVY}|{_SINGLE})?\s*\d+\.\s", line)]
            current = next((i for i, line in enumerate(listed) if line.lstrip().startswith(self.marks)), 0)
            target = next((i for i, line in enumerate(listed) if re.search(label, line)), current + 1)
            key, steps = ("Down", target - current) if target >= current else ("Up", current - target)
        run.notes.append(f"pressed {key} x{steps}, Enter")
        for _ in range(steps):
            run.tmux_keys(key)
            time.sleep(0.3)
        run.tmux_keys("Enter")

    def finished(self, run: Run, screen: str) -> bool:
        if "(stand-in model)" not in screen:
            return False
        answered = run.person is not None and any(entry.get("sent") for entry in run.person.log)
        closed = answered and all(t["status"] == "closed" for t in run.tickets())
        if answered and not closed:
            return False
        # Nothing new on the screen for a while: 10 s once the tickets closed, 20 s if nobody answered.
        return time.monotonic() - run.screen_changed_at > (10 if closed else 20)


class ClaudeTui(Tui, _Claude):
    id = "claude-tui"
    title = "Claude Code, TUI (tmux)"

    def prepare(self, ctx: Context) -> Launch:
        argv, env = self._setup(ctx)
        return Launch(argv, env, tmux=True)


# --- GitHub Copilot CLI ------------------------------------------------------------------------


class _Copilot(_NpmHost):
    package = "@github/copilot"

    def _setup(self, ctx: Context) -> tuple[list[str], dict[str, str]]:
        config_dir = ctx.home / ".copilot"
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "mcp-config.json").write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "longtools": {
                            "type": "http",
                            "url": ctx.mcp_url,
                            "headers": {"Authorization": f"Bearer {ctx.token}"},
                            "tools": ["*"],
                        }
                    }
                },
                indent=2,
            )
        )
        env = _quiet_env(
            ctx,
            COPILOT_PROVIDER_BASE_URL=ctx.model_url + "/v1",
            COPILOT_PROVIDER_TYPE="openai",
            COPILOT_PROVIDER_API_KEY="sk-standin",
            COPILOT_PROVIDER_WIRE_API="completions",
            COPILOT_MODEL="gpt-4.1",
            COPILOT_OFFLINE="true",
        )
        argv = [
            str(BIN / "copilot"),
            "--no-auto-update",
            "--disable-builtin-mcps",
            "--allow-all-tools",
            "--no-custom-instructions",
            "--disable-client-telemetry",
            "--log-dir",
            str(ctx.run_dir / "copilot-logs"),
            "--log-level",
            "debug",
        ]
        return argv, env


class CopilotPrompt(_Copilot):
    id = "copilot-p"
    title = "GitHub Copilot CLI, -p"

    def prepare(self, ctx: Context) -> Launch:
        argv, env = self._setup(ctx)
        return Launch([argv[0], "-p", ctx.prompt, *argv[1:]], env)


# --- Codex CLI ---------------------------------------------------------------------------------


class _Codex(_NpmHost):
    package = "@openai/codex"

    def _setup(self, ctx: Context) -> tuple[list[str], dict[str, str]]:
        codex_home = ctx.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            "\n".join(
                [
                    'model = "gpt-5.1-codex"',
                    'model_provider = "standin"',
                    'approval_policy = "never"',
                    'sandbox_mode = "read-only"',
                    "check_for_update_on_startup = false",
                    "",
                    "[model_providers.standin]",
                    'name = "stand-in"',
                    f'base_url = "{ctx.model_url}/v1"',
                    'wire_api = "responses"',
                    'env_key = "STANDIN_API_KEY"',
                    "request_max_retries = 0",
                    "stream_max_retries = 0",
                    "",
                    "[mcp_servers.longtools]",
                    f'url = "{ctx.mcp_url}"',
                    'bearer_token_env_var = "LONGTOOLS_HOST_TOKEN"',
                    'default_tools_approval_mode = "approve"',
                    "",
                    "[analytics]",
                    "enabled = false",
                    "",
                ]
            )
        )
        env = _quiet_env(
            ctx,
            CODEX_HOME=str(codex_home),
            STANDIN_API_KEY="sk-standin",
            LONGTOOLS_HOST_TOKEN=ctx.token,
        )
        return [str(BIN / "codex")], env


class CodexExec(_Codex):
    id = "codex-exec"
    title = "Codex CLI, exec"

    def prepare(self, ctx: Context) -> Launch:
        argv, env = self._setup(ctx)
        return Launch([*argv, "exec", "--skip-git-repo-check", ctx.prompt], env)


# --- Gemini CLI ----------------------------------------------------------------------------------


class _Gemini(_NpmHost):
    package = "@google/gemini-cli"

    def _setup(self, ctx: Context) -> tuple[list[str], dict[str, str]]:
        settings_dir = ctx.home / ".gemini"
        settings_dir.mkdir(parents=True, exist_ok=True)
        (settings_dir / "settings.json").write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "longtools": {
                            "httpUrl": ctx.mcp_url,
                            "headers": {"Authorization": f"Bearer {ctx.token}"},
                            "trust": True,
                        }
                    },
                    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                    "privacy": {"usageStatisticsEnabled": False},
                    "telemetry": {"enabled": False},
                    "ide": {"enabled": False},
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                },
                indent=2,
            )
        )
        # Trust the working folder, or -p runs with tool approval "default" (it cannot ask in -p).
        (settings_dir / "trustedFolders.json").write_text(json.dumps({str(ctx.work): "TRUST_FOLDER"}))
        env = _quiet_env(ctx, GEMINI_API_KEY="standin-key", GOOGLE_GEMINI_BASE_URL=ctx.model_url)
        return [str(ctx.node22), str(HERE / "node_modules/@google/gemini-cli/bundle/gemini.js")], env


class GeminiPrompt(_Gemini):
    id = "gemini-p"
    title = "Gemini CLI, -p"

    def prepare(self, ctx: Context) -> Launch:
        argv, env = self._setup(ctx)
        return Launch([*argv, "-p", ctx.prompt, "--approval-mode", "yolo"], env)


# --- MCP Inspector CLI (no model: the person reads what it prints) ---------------------------------


class _Inspector(Host):
    """``tests/clients/inspector.sh`` (pinned in conformance/): ``tools/call bulk_close_tickets``, as
    a person at a terminal would run it. It has no model: what reaches the person is what it prints.
    After the person answered (if a link was printed) the same CLI calls ``task_status`` once, when
    the first result named a task, and prints that too."""

    package = "@modelcontextprotocol/inspector"
    uses_model = False
    era: str | None = None
    timeout_s = 150.0

    def version(self, ctx: Context) -> str:
        try:
            path = REPO / "conformance/node_modules/@modelcontextprotocol/inspector/package.json"
            return str(json.loads(path.read_text())["version"])
        except (OSError, ValueError, KeyError):
            return "?"

    def _argv(self, ctx: Context, tool: str, args: dict[str, str]) -> list[str]:
        argv = [
            str(REPO / "tests/clients/inspector.sh"),
            ctx.mcp_url,
            "--transport",
            "http",
            "--header",
            f"Authorization: Bearer {ctx.token}",
            "--method",
            "tools/call",
            "--tool-name",
            tool,
            "--tool-args-json",
            json.dumps(args),
        ]
        if self.era:
            argv += ["--protocol-era", self.era]
        return argv

    def prepare(self, ctx: Context) -> Launch:
        self._ctx = ctx
        return Launch(self._argv(ctx, "bulk_close_tickets", {"customer": "acme"}), dict(ctx.env))

    def after(self, run: Run) -> None:
        found = re.search(r'taskId "([0-9a-f]{16,})"', run.screen) or re.search(
            r'"taskId":\s*"([0-9a-f]{16,})"', run.screen
        )
        if not found or run.person is None or not any(entry.get("sent") for entry in run.person.log):
            return
        time.sleep(3)
        done = subprocess.run(
            self._argv(self._ctx, "task_status", {"taskId": found.group(1)}),
            env=self._ctx.env,
            cwd=self._ctx.work,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        more = f"\n$ inspector tools/call task_status (exit {done.returncode})\n{done.stdout}{done.stderr}"
        with (run.dir / "screen.txt").open("a") as screen:
            screen.write(more)
        run.notes.append(f"follow-up task_status: exit {done.returncode}")


class InspectorDefault(_Inspector):
    id = "inspector"
    title = "MCP Inspector CLI (default era)"


class InspectorModern(_Inspector):
    id = "inspector-modern"
    title = "MCP Inspector CLI, --protocol-era modern"
    era = "modern"
    timeout_s = 60.0


class CopilotTui(Tui, _Copilot):
    id = "copilot-tui"
    title = "GitHub Copilot CLI, TUI (tmux)"
    # Its URL dialog (seen with an elicitationId): "<server> wants you to visit / message / URL /
    # enter open · esc cancel". A person opens the link with Enter.
    dialogs = ((r"wants you to visit", ("keys", "Enter")),)
    first_run = ((r"Do you trust the files in this folder\?", ("Enter",)),)

    def prepare(self, ctx: Context) -> Launch:
        argv, env = self._setup(ctx)
        return Launch(argv, env, tmux=True)


class CodexTui(Tui, _Codex):
    id = "codex-tui"
    title = "Codex CLI, TUI (tmux)"
    first_run = (
        (r"(?i)do you trust the contents of this directory|trust this (folder|directory)", ("Enter",)),
    )

    def prepare(self, ctx: Context) -> Launch:
        argv, env = self._setup(ctx)
        return Launch(argv, env, tmux=True)


HOSTS: list[type[Host]] = [
    ClaudePrint,
    ClaudeTui,
    CodexExec,
    CodexTui,
    CopilotPrompt,
    CopilotTui,
    GeminiPrompt,
    InspectorDefault,
    InspectorModern,
]
