"""One run: a fresh `longtools serve`, the wiretap in front of it, the stand-in model, one host, and a
person who answers on the page once the link reaches them. Then what happened, read back from the
logs (``analyse.py``).

Layout of a run's directory (``<out>/<host-id>/``): ``data/`` (serve's data dir: the tickets are
in ``helpdesk.sqlite3``), ``home/`` (the host's throwaway HOME), ``serve.log``, ``wire.jsonl``
(host <-> serve), ``model.jsonl`` (host <-> stand-in model), ``screen.txt`` (the host's stdout and
stderr, or the last tmux pane), ``screens/`` (every change of a tmux pane), ``command.json`` (how
the host was started), ``tickets.json`` (the tickets afterwards), ``result.json`` (the run: exit,
timings, what the person saw and did, notes), ``analysis.json`` (the row of the table).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.hosts.standin import LINK, Script, StandIn
from tests.hosts.wiretap import WireTap
from tests.pages import PageClient

REPO = Path(__file__).resolve().parents[2]
TOKEN = "harness-person-token-0123456789"
PRINCIPAL = "person"
CUSTOMER = "acme"
TICKETS = ("Printer on fire", "VPN drops")
PERSON_REASON = "Duplicate"  # not the form's default (Resolved): a close with it is the person's
PERSON_NOTE = "answered on the page by the harness's person"
PROMPT = (
    f"Close all open helpdesk tickets of the customer {CUSTOMER} with the bulk_close_tickets tool, "
    "and tell me what it says."
)


@dataclass
class Context:
    """What a host adapter needs to set a run up."""

    run_dir: Path
    home: Path
    work: Path
    mcp_url: str
    model_url: str
    token: str
    prompt: str
    env: dict[str, str]
    node22: Path


@dataclass
class Launch:
    """How to start a host: a command with its env, piped (stdout/stderr to the screen file), or in
    tmux (a TUI: the pane is the screen)."""

    argv: list[str]
    env: dict[str, str]
    tmux: bool = False
    cwd: Path | None = None
    stdin: str | None = None
    keys_after_prompt: list[str] = field(default_factory=list)


class Host:
    """A host adapter; see hosts.py."""

    id = ""
    title = ""
    package = ""
    timeout_s = 240.0
    uses_model = True

    def version(self, ctx: Context) -> str:
        return "?"

    def prepare(self, ctx: Context) -> Launch:
        raise NotImplementedError

    def on_screen(self, run: Run, screen: str) -> None:
        """Called with each new screen (a TUI host: press what a person would press)."""

    def finished(self, run: Run, screen: str) -> bool:
        """A TUI host: whether the session has nothing more to show (then it is closed)."""
        return False

    def after(self, run: Run) -> None:
        """After the host ended and the person answered: a follow-up (e.g. a second call)."""


@dataclass
class Person:
    """The person at the screen: answers on the page when a full answer link reaches them."""

    base: str
    log: list[dict[str, Any]] = field(default_factory=list)
    answered: str | None = None
    answered_at: float | None = None
    first_seen: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    act: bool = True
    tried: set[str] = field(default_factory=set)

    def saw(self, where: str, text: str, t: float) -> None:
        """``text`` is what reached the person so far; a link counts once it is whole (something
        follows it: a host may still be writing it out)."""
        for found in LINK.finditer(text):
            link = found.group(0)
            if found.end() >= len(text.rstrip("\n")) and not text.endswith("\n"):
                continue  # possibly cut off mid-write
            if not link.startswith(self.base):
                continue
            with self._lock:
                self.first_seen.setdefault(where, t)
                if not self.act or link in self.tried or any(entry.get("sent") for entry in self.log):
                    continue
                self.tried.add(link)
                self.answered = link
            self._answer(link, where, t)

    def _answer(self, link: str, where: str, t: float) -> None:
        entry: dict[str, Any] = {"t": t, "link": link, "seen_in": where}
        try:
            with PageClient(self.base) as browser:
                signed = browser.sign_in(TOKEN)
                entry["signed_in"] = signed.status
                opened = browser.get(link)
                entry["page_status"] = opened.status
                entry["page_heading"] = opened.heading
                if opened.status == 200 and "confirm" in opened.forms().names:
                    sent = browser.send(
                        link, opened, {"confirm": True, "reason": PERSON_REASON, "note": PERSON_NOTE}
                    )
                    entry["sent_status"] = sent.status
                    entry["sent"] = "Your answer was sent" in sent.text
                    entry["after_heading"] = sent.heading
                else:
                    entry["sent"] = False
                    entry["page_text"] = re.sub(r"<[^>]+>", " ", opened.text)[:600]
        except Exception as exc:
            entry["error"] = repr(exc)
        self.answered_at = time.monotonic()
        self.log.append(entry)


class Run:
    def __init__(
        self,
        host: Host,
        out: Path,
        node22: Path,
        *,
        max_follow: int,
        follow_delay: float,
        probe: str | None = None,
        person_reads_wire: bool = False,
        call: str = "bulk_close_tickets",
        source: Path | None = None,
    ) -> None:
        self.host = host
        self.source = source
        self.call = call
        self.person_reads_wire = person_reads_wire
        self.probe = probe
        name = host.id if probe is None else f"{host.id}--probe-{probe}"
        if call != "bulk_close_tickets":
            name += f"--call-{call}"
        self.dir = out / name
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        (self.dir / "screens").mkdir()
        self.node22 = node22
        self.max_follow = max_follow
        self.follow_delay = follow_delay
        self.t0 = time.monotonic()
        self.serve: subprocess.Popen[bytes] | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.tmux_name = f"lthosts-{host.id}-{os.getpid()}"
        self.screen = ""
        self.notes: list[str] = []
        self.person: Person | None = None
        self.mcp_base = ""
        self._wire_link_at: float | None = None
        self.screen_changed_at = time.monotonic()

    def elapsed(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    # --- serve -----------------------------------------------------------------------------------

    def start_serve(self) -> str:
        data = self.dir / "data"
        env = {**os.environ, "LONGTOOLS_AUTH_TOKENS": f"{TOKEN}={PRINCIPAL}"}
        for key in list(env):
            if key.startswith("LONGTOOLS_") and key != "LONGTOOLS_AUTH_TOKENS":
                del env[key]
        extra: list[str] = []
        paths = []
        if self.source is not None:  # another checkout's longtools, with this venv
            paths.append(str(self.source))
        if self.call != "bulk_close_tickets":
            extra = ["--tools", "probe_tools"]
            paths.append(str(REPO / "tests" / "hosts"))
        if paths:
            env["PYTHONPATH"] = ":".join(paths)
        command = [str(REPO / ".venv/bin/longtools")]
        if self.source is not None:
            command = [
                str(REPO / ".venv/bin/python"),
                "-c",
                "import sys; from longtools.cli import main; sys.argv[0] = 'longtools'; sys.exit(main())",
            ]
        log = (self.dir / "serve.log").open("wb")
        self.serve = subprocess.Popen(
            [*command, "serve", "--data-dir", str(data), "--port", "0", "--temporal-port", "0", *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.source or REPO,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            text = (self.dir / "serve.log").read_text(errors="replace")
            found = re.search(r"longtools serving MCP at (\S+)", text)
            if found:
                return found.group(1)
            if self.serve.poll() is not None:
                raise RuntimeError(f"serve exited: {text[-2000:]}")
            time.sleep(0.2)
        raise RuntimeError("serve did not start in 90 s")

    def stop_serve(self) -> None:
        if self.serve is not None and self.serve.poll() is None:
            os.killpg(self.serve.pid, signal.SIGTERM)
            try:
                self.serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.serve.pid, signal.SIGKILL)

    def seed_tickets(self) -> list[str]:
        from longtools.activities.helpdesk import TicketStore

        store = TicketStore(self.dir / "data" / "helpdesk.sqlite3")
        return [store.create(title, CUSTOMER).id for title in TICKETS]

    def tickets(self) -> list[dict[str, Any]]:
        db = sqlite3.connect(self.dir / "data" / "helpdesk.sqlite3")
        try:
            rows = db.execute(
                "SELECT id, customer, status, close_reason, closed_by FROM tickets ORDER BY id"
            ).fetchall()
            out = []
            for number, customer, status, reason, closed_by in rows:
                closes = db.execute(
                    "SELECT COUNT(*) FROM ticket_history WHERE ticket_id = ? AND event = 'closed'", (number,)
                ).fetchone()[0]
                out.append(
                    {
                        "id": f"T-{number}",
                        "customer": customer,
                        "status": status,
                        "reason": reason,
                        "closed_by": closed_by,
                        "closed_events": closes,
                    }
                )
            return out
        finally:
            db.close()

    # --- the host --------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        result: dict[str, Any] = {"host": self.host.id, "title": self.host.title}
        result["probe"] = self.probe
        result["call"] = self.call
        result["source"] = str(self.source or REPO)
        result["person_reads_wire"] = self.person_reads_wire
        tap = standin = probe = None
        try:
            if self.probe is None:
                upstream = self.start_serve()
                result["serve_started_s"] = self.elapsed()
                result["tickets_before"] = self.seed_tickets()
            else:
                from tests.hosts.probe import Probe

                probe = Probe(self.probe).start()
                upstream = probe.url
            self.mcp_base = upstream.rsplit("/mcp", 1)[0]
            tap = WireTap(upstream, self.dir / "wire.jsonl").start()
            script = Script(CUSTOMER, self.max_follow, self.follow_delay, tool=self.call)
            standin = StandIn(script, self.dir / "model.jsonl").start()
            home = self.dir / "home"
            work = self.dir / "work"
            home.mkdir()
            work.mkdir()
            env = {
                "HOME": str(home),
                "PATH": f"{self.node22.parent}:/usr/local/bin:/usr/bin:/bin",
                "LANG": "C.UTF-8",
                "TERM": "xterm-256color",
                "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_CACHE_HOME": str(home / ".cache"),
                "XDG_DATA_HOME": str(home / ".local/share"),
                "XDG_STATE_HOME": str(home / ".local/state"),
                "NO_COLOR": "1",
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
            }
            ctx = Context(self.dir, home, work, tap.url, standin.url, TOKEN, PROMPT, env, self.node22)
            self.person = Person(self.mcp_base, act=self.probe is None)
            result["version"] = self.host.version(ctx)
            launch = self.host.prepare(ctx)
            result["command"] = launch.argv
            (self.dir / "command.json").write_text(
                json.dumps({"argv": launch.argv, "env": launch.env}, indent=2)
            )
            result["exit"] = self._drive(launch, tap, standin)
            result["host_ended_s"] = self.elapsed()
            if self.probe is None:
                self.host.after(self)
                result["tickets"] = self._settle()
        except Exception as exc:
            result["harness_error"] = repr(exc)
            self.notes.append(f"harness error: {exc!r}")
        finally:
            self._stop_host()
            if tap is not None:
                tap.close()
            if standin is not None:
                standin.close()
            if probe is not None:
                probe.close()
            self.stop_serve()
        result["person"] = self.person.log if self.person else []
        result["link_first_seen"] = self.person.first_seen if self.person else {}
        result["notes"] = self.notes
        result["elapsed_s"] = self.elapsed()
        return result

    def _drive(self, launch: Launch, tap: WireTap, standin: StandIn) -> Any:
        screen_file = self.dir / "screen.txt"
        deadline = time.monotonic() + self.host.timeout_s
        if launch.tmux:
            self._start_tmux(launch)
        else:
            out = screen_file.open("wb")
            self.proc = subprocess.Popen(
                launch.argv,
                env=launch.env,
                cwd=launch.cwd or self.dir / "work",
                stdin=subprocess.PIPE if launch.stdin is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            if launch.stdin is not None and self.proc.stdin is not None:
                self.proc.stdin.write(launch.stdin.encode())
                self.proc.stdin.close()
        last_screen = ""
        snap = 0
        exit_code: Any = None
        while time.monotonic() < deadline:
            if launch.tmux:
                screen = self._pane()
                if screen != last_screen:
                    snap += 1
                    (self.dir / "screens" / f"{snap:03d}-{self.elapsed():07.2f}s.txt").write_text(screen)
                    self.screen_changed_at = time.monotonic()
                self.host.on_screen(self, screen)
                last_screen = screen
                self.screen = screen
                screen_file.write_text(screen)
                alive = self._tmux_alive()
            else:
                self.screen = screen_file.read_text(errors="replace")
                alive = self.proc is not None and self.proc.poll() is None
            assert self.person is not None
            self.person.saw("screen", self.screen, self.elapsed())
            if self.person_reads_wire:
                self._wire_to_person(tap)
            if not alive:
                exit_code = self.proc.returncode if self.proc is not None else "tmux ended"
                break
            if launch.tmux and self.host.finished(self, self.screen):
                exit_code = "finished (closed by the harness)"
                break
            time.sleep(0.5)
        else:
            exit_code = f"timeout after {self.host.timeout_s:.0f} s (stopped by the harness)"
            self.notes.append(exit_code)
        # One last look at the screen (a -p host prints its answer as it exits).
        if not launch.tmux:
            self.screen = screen_file.read_text(errors="replace")
        assert self.person is not None
        self.person.saw("screen", self.screen, self.elapsed())
        return exit_code

    def model_requests(self) -> int:
        """How many requests the stand-in model has had so far."""
        log = self.dir / "model.jsonl"
        return len(log.read_text().splitlines()) if log.exists() else 0

    def _wire_to_person(self, tap: WireTap) -> None:
        """Diagnostic (``--person-reads-wire``): a link the server sent the host reaches the person
        5 s after it first passed on the wire, whether or not the host showed it."""
        assert self.person is not None
        text = "\n".join(json.dumps(e) for e in tap.entries() if e.get("dir") == "s2c") + "\n"
        if not LINK.search(text):
            return
        if self._wire_link_at is None:
            self._wire_link_at = time.monotonic()
        elif time.monotonic() - self._wire_link_at >= 5:
            self.person.saw("wire (--person-reads-wire)", text, self.elapsed())

    def _settle(self) -> list[dict[str, Any]]:
        """Wait for the tickets to close, if the person answered (at most 60 s)."""
        assert self.person is not None
        sent = any(entry.get("sent") for entry in self.person.log)
        deadline = time.monotonic() + (60 if sent else 3)
        tickets = self.tickets()
        while time.monotonic() < deadline:
            tickets = self.tickets()
            if all(t["status"] == "closed" for t in tickets):
                break
            time.sleep(1)
        (self.dir / "tickets.json").write_text(json.dumps(tickets, indent=2))
        return tickets

    # --- tmux --------------------------------------------------------------------------------------

    def _start_tmux(self, launch: Launch) -> None:
        env_args: list[str] = []
        for key, value in launch.env.items():
            env_args += ["-e", f"{key}={value}"]
        subprocess.run(
            [
                "tmux",
                "-L",
                self.tmux_name,
                "new-session",
                "-d",
                "-s",
                "host",
                "-x",
                "200",
                "-y",
                "50",
                *env_args,
                "-c",
                str(launch.cwd or self.dir / "work"),
                *launch.argv,
            ],
            check=True,
            env={**os.environ, "TMUX": ""},
        )
        subprocess.run(
            ["tmux", "-L", self.tmux_name, "set-option", "-t", "host", "remain-on-exit", "on"], check=False
        )

    def tmux_keys(self, *keys: str, literal: bool = False) -> None:
        argv = ["tmux", "-L", self.tmux_name, "send-keys", "-t", "host"]
        if literal:
            argv.append("-l")
        subprocess.run([*argv, *keys], check=False)

    def _pane(self) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.tmux_name, "capture-pane", "-p", "-J", "-t", "host", "-S", "-200"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout

    def _tmux_alive(self) -> bool:
        done = subprocess.run(
            ["tmux", "-L", self.tmux_name, "list-panes", "-t", "host", "-F", "#{pane_dead}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.returncode == 0 and done.stdout.strip() == "0"

    def _stop_host(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
        subprocess.run(["tmux", "-L", self.tmux_name, "kill-server"], check=False, capture_output=True)
        self._reap()

    def _reap(self) -> None:
        """Stop what a host left running from this run's own directory (Codex's TUI starts an
        ``app-server`` daemon from its HOME that outlives it), by process id."""
        mine = str(self.dir) + "/"
        left: list[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if command.startswith(mine):  # a program the host installed into its throwaway HOME
                left.append(int(entry.name))
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if left:
            self.notes.append(f"stopped {len(left)} process(es) the host left running: {left}")
            time.sleep(1)
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def wait_until(check: Callable[[], bool], timeout: float, every: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(every)
    return False
