"""What a ``subscriptions/listen`` stream keeps alive in the API: ``tracemalloc`` and object counts.

B8 (``bench/_listening.py``) gives the RSS a stream costs; this probe says which Python objects
make it up and where they were allocated. It starts B8's stack with a ``sitecustomize`` on the
processes' path (so the committed service code is measured unchanged) that, on ``SIGUSR1``,
starts ``tracemalloc`` the first time and from then on writes a snapshot and a count of live
objects by type (after a full collection) to the directory it was told. The probe then:

1. starts ``streams`` idle tasks (B8's ``change_later`` on an hour's timer) and waits for quiet;
2. starts tracing (``--before-tasks``: before step 1, so what the tasks left in the API, such as
   their watches, is traced too, and a stream that reuses it is not credited with it) and takes
   the baseline snapshot;
3. opens one stream per task (B8's ``_Stream``; all at once as B8 does, or ``--batch`` at a time),
   lets the API settle, and takes a second;
4. closes them all, waits for the gauge to drop to 0, settles, and takes a third;

and prints the difference per stream: the peak while opening, KiB by allocation site (innermost
frame), by a short traceback and by layer (ours, the SDK's parts, uvicorn, temporalio), the
objects by type and the suspended coroutines that are new per stream.

``--untraced`` runs the same steps with no ``tracemalloc`` (which costs memory of its own) and
says instead where the RSS went, per stream: glibc's heap in use and free (``mallinfo2``: the
Python objects above 512 bytes, and everything outside Python, such as the Temporal client's
in-flight long polls and protobuf messages), pymalloc's blocks in use and its arenas (the Python
objects up to 512 bytes), and the process's threads (the Temporal client's runtime adds some while
many of its calls are in flight). Run it alone: ``python -m bench._listen_memory [--streams N]
[--batch N] [--before-tasks] [--untraced] [--code TREE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Final

from bench import _listening, _waiting
from bench._parked import rss_mib
from bench._procs import ROOT, longtools_python, wait_idle
from bench.load import Failed

STREAMS: Final = 200
FRAMES: Final = 12
_DUMP_TIMEOUT_S: Final = 120.0

_SITECUSTOMIZE: Final = '''\
"""The probe's hook, on the benchmark processes' path only (bench/_listen_memory.py)."""
import os as _os
import signal as _signal

_DIR = _os.environ.get("LONGTOOLS_PROBE_DIR")


def _allocator():
    """Where the process's memory is, as its allocators see it (no tracing)."""
    import ctypes
    import gc
    import json
    import re
    import sys

    gc.collect()
    out = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "Threads"):
                out[key] = int(value.split()[0])
    fields = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks")
    fields += ("uordblks", "fordblks", "keepcost")  # glibc's struct mallinfo2, in order

    class _Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in fields]

    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):  # not glibc 2.33 or later
        mallinfo2 = None
    if mallinfo2 is not None:
        mallinfo2.restype = _Info
        info = mallinfo2()
        out["malloc_in_use"] = info.uordblks + info.hblkhd
        out["malloc_free"] = info.fordblks
    path = _os.path.join(_DIR, "mallocstats.txt")
    saved = _os.dup(2)
    target = _os.open(path, _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC)
    _os.dup2(target, 2)  # sys._debugmallocstats writes to the C stderr
    try:
        sys._debugmallocstats()
    finally:
        _os.dup2(saved, 2)
        _os.close(saved)
        _os.close(target)
    with open(path) as stats:
        text = stats.read()
    for key, label in (
        ("pymalloc_in_use", "# bytes in allocated blocks"),
        ("pymalloc_arenas", "# arenas allocated current"),
    ):
        found = re.search(re.escape(label) + r"\\s*=\\s*([\\d,]+)", text)
        if found:
            out[key] = int(found.group(1).replace(",", ""))
    index = len([name for name in _os.listdir(_DIR) if name.endswith(".alloc.json")])
    with open(_os.path.join(_DIR, f"{index}.alloc.tmp"), "w") as written:
        json.dump(out, written)
    _os.rename(_os.path.join(_DIR, f"{index}.alloc.tmp"), _os.path.join(_DIR, f"{index}.alloc.json"))


def _dump(signum, frame):
    import gc
    import json
    import tracemalloc
    import types

    if _os.environ.get("LONGTOOLS_PROBE_UNTRACED"):
        _allocator()
        return
    if not tracemalloc.is_tracing():
        tracemalloc.start(int(_os.environ.get("LONGTOOLS_PROBE_FRAMES", "12")))
        open(_os.path.join(_DIR, "started"), "w").close()
        return
    current, peak = tracemalloc.get_traced_memory()  # before this hook allocates anything
    gc.collect()
    index = len([name for name in _os.listdir(_DIR) if name.endswith(".snap")])
    counts = {}
    for obj in gc.get_objects():
        kind = type(obj)
        name = f"{kind.__module__}.{kind.__qualname__}"
        counts[name] = counts.get(name, 0) + 1
    # Every suspended coroutine, by what it runs, with one sample's locals: which frames a stream
    # keeps alive, and what each of them holds.
    frames = {}
    for obj in gc.get_objects():
        if not isinstance(obj, types.CoroutineType) or obj.cr_frame is None:
            continue
        code = obj.cr_code
        name = f"{code.co_filename}:{code.co_firstlineno} {code.co_qualname}"
        entry = frames.setdefault(name, {"count": 0, "locals": {}})
        entry["count"] += 1
        if entry["count"] == 1:
            entry["locals"] = {key: type(value).__qualname__ for key, value in obj.cr_frame.f_locals.items()}
    snapshot = tracemalloc.take_snapshot()
    with open(_os.path.join(_DIR, f"{index}.types.json"), "w") as out:
        json.dump(counts, out)
    with open(_os.path.join(_DIR, f"{index}.frames.json"), "w") as out:
        json.dump(frames, out)
    with open(_os.path.join(_DIR, f"{index}.traced.json"), "w") as out:
        json.dump({"current": current, "peak": peak}, out)
    snapshot.dump(_os.path.join(_DIR, f"{index}.snap.tmp"))
    _os.rename(_os.path.join(_DIR, f"{index}.snap.tmp"), _os.path.join(_DIR, f"{index}.snap"))
    tracemalloc.reset_peak()  # the next snapshot's peak is of what happened since this one


if _DIR:
    _signal.signal(_signal.SIGUSR1, _dump)
'''


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # noqa: T201


class _ProbedStack(_waiting._Stack):
    """B8's stack of the tree ``code``, with the probe's ``sitecustomize`` ahead on every
    process's path."""

    def __init__(
        self, python: Path, code: Path, work: Path, probe: Path, frames: int, untraced: bool
    ) -> None:
        super().__init__(python, code, work, None)
        hooks = work / "hooks"
        hooks.mkdir(parents=True, exist_ok=True)
        (hooks / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        self._env = {
            **self._env,
            "PYTHONPATH": f"{hooks}{os.pathsep}{self._env['PYTHONPATH']}",
            "LONGTOOLS_PROBE_DIR": str(probe),
            "LONGTOOLS_PROBE_FRAMES": str(frames),
            "LONGTOOLS_MAX_LISTENS_PER_PRINCIPAL": _listening.LISTEN_LIMIT,
            **({"LONGTOOLS_PROBE_UNTRACED": "1"} if untraced else {}),
        }


def _signal_and_wait(pid: int, path: Path) -> None:
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + _DUMP_TIMEOUT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise Failed(f"the API wrote no {path.name} within {_DUMP_TIMEOUT_S:g} s")
        time.sleep(0.2)


async def _open_and_close(
    port: int, pid: int, probe: Path, task_ids: list[str], roots: dict[str, list[int]], batch: int, dump: str
) -> dict[str, float]:
    streams = [_listening._Stream(port, n, task_id) for n, task_id in enumerate(task_ids)]
    tally = _listening._Tally()
    pumps: list[asyncio.Task[None]] = []
    rss: dict[str, float] = {"before": rss_mib(roots["api"])}
    try:
        # All at once as in B8, or ``batch`` at a time: what a burst adds to the RSS, beside what
        # the open streams hold.
        opened: list[BaseException | None] = []
        for first in range(0, len(streams), batch or len(streams)):
            group = streams[first : first + (batch or len(streams))]
            opened += await asyncio.gather(*(stream.open() for stream in group), return_exceptions=True)
        failed = [exc for exc in opened if isinstance(exc, BaseException)]
        if failed:
            raise Failed(f"{len(failed)} streams did not open; first: {failed[0]!r}")
        pumps = [asyncio.create_task(stream.pump(tally)) for stream in streams]
        held = await _listening._gauge(port, "longtools_listen_streams")
        if held != len(streams):
            raise Failed(f"the API holds {held:.0f} streams, not {len(streams)}")
        await _listening._settle(roots)
        rss["open"] = rss_mib(roots["api"])
        await asyncio.to_thread(_signal_and_wait, pid, probe / f"1.{dump}")
    finally:
        for stream in streams:
            stream.close()
        await asyncio.gather(*pumps, return_exceptions=True)
    while await _listening._gauge(port, "longtools_listen_streams") > 0:  # noqa: ASYNC110 (another process)
        await asyncio.sleep(0.1)
    await _listening._settle(roots)
    rss["closed"] = rss_mib(roots["api"])
    await asyncio.to_thread(_signal_and_wait, pid, probe / f"2.{dump}")
    return rss


def _short(frame: tracemalloc.Frame) -> str:
    return f"{_short_path(frame.filename)}:{frame.lineno}"


def _short_path(name: str) -> str:
    for marker in ("site-packages/", "/lib/python3.11/", "/work/main/"):
        if marker in name:
            return name.split(marker, 1)[1]
    return name


_LAYERS: Final = (
    "longtools/server/_listen.py",
    "longtools/tasks/",
    "longtools/server/_handlers.py",
    "mcp/server/_otel.py",
    "mcp/server/runner.py",
    "mcp/server/connection.py",
    "mcp/server/_streamable_http_modern.py",
    "mcp/server/transport_security.py",
    "mcp/server/streamable_http_manager.py",
    "longtools/server/_gate.py",
    "longtools/server/_app.py",
    "uvicorn/",
    "temporalio/",
)
"""Who allocated a block, as far as a stream goes: ours, the SDK's parts, uvicorn, temporalio."""


def _layer(innermost_first: list[tracemalloc.Frame]) -> str:
    for frame in innermost_first:
        for layer in _LAYERS:
            if layer in frame.filename:
                return layer
    return "other (asyncio, the event loop)"


def _filtered(snapshot: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    return snapshot.filter_traces(
        [
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
            tracemalloc.Filter(False, "*/sitecustomize.py"),  # the probe's own counts
        ]
    )


def report(probe: Path, streams: int, top: int, depth: int) -> str:
    """The differences between the probe's snapshots, per stream, as Markdown."""
    snaps = [_filtered(tracemalloc.Snapshot.load(str(probe / f"{i}.snap"))) for i in range(3)]
    types = [Counter(json.loads((probe / f"{i}.types.json").read_text())) for i in range(3)]
    frames = [json.loads((probe / f"{i}.frames.json").read_text()) for i in range(3)]
    traced = [json.loads((probe / f"{i}.traced.json").read_text()) for i in range(3)]
    peak = (traced[1]["peak"] - traced[0]["current"]) / 1024 / streams
    lines: list[str] = [
        f"Traced memory at its peak while the streams opened: {peak:+.2f} KiB per stream above the baseline",
        "",
    ]
    for label, later in (("open", 1), ("closed", 2)):
        total = sum(stat.size_diff for stat in snaps[later].compare_to(snaps[0], "filename"))
        lines += [f"## {label}: {total / 1024 / streams:+.2f} KiB of traced memory per stream", ""]
        lines += ["| KiB per stream | blocks per stream | innermost frame |", "|---:|---:|---|"]
        for stat in snaps[later].compare_to(snaps[0], "lineno")[:top]:
            frame = stat.traceback[0]
            size, count = stat.size_diff / 1024 / streams, stat.count_diff / streams
            lines.append(f"| {size:+.3f} | {count:+.1f} | {_short(frame)} |")
        lines += ["", f"By traceback ({depth} frames, innermost first):", ""]
        grouped: Counter[tuple[str, ...]] = Counter()
        counts: Counter[tuple[str, ...]] = Counter()
        layers: Counter[str] = Counter()
        for stat in snaps[later].compare_to(snaps[0], "traceback"):
            innermost_first = list(stat.traceback)[::-1]
            key = tuple(_short(frame) for frame in innermost_first[:depth])
            grouped[key] += stat.size_diff
            counts[key] += stat.count_diff
            layers[_layer(innermost_first)] += stat.size_diff
        for key, total_size in grouped.most_common(top):
            size, count = total_size / 1024 / streams, counts[key] / streams
            lines.append(f"- {size:+.3f} KiB, {count:+.1f} blocks: {' < '.join(key)}")
        lines += ["", "By layer (the innermost frame of one of these in the block's traceback):", ""]
        lines += [f"- {size / 1024 / streams:+.2f} KiB {layer}" for layer, size in layers.most_common()]
        lines += ["", "New objects per stream by type:", ""]
        diff = Counter({name: types[later][name] - types[0][name] for name in types[later] | types[0]})
        for name, count in diff.most_common(top):
            if count / streams < 0.5:
                break
            lines.append(f"- {count / streams:+.1f} {name}")
        lines += ["", "Suspended coroutines per stream (with one's locals):", ""]
        before, after = frames[0], frames[later]
        for name, entry in sorted(after.items(), key=lambda item: -item[1]["count"]):
            count = entry["count"] - before.get(name, {"count": 0})["count"]
            if count / streams < 0.5:
                continue
            held = ", ".join(f"{key}: {kind}" for key, kind in entry["locals"].items())
            lines.append(f"- {count / streams:+.1f} `{_short_path(name)}` ({held})")
        lines.append("")
    return "\n".join(lines)


def allocator_report(probe: Path, streams: int) -> str:
    """The differences between the untraced probe's allocator readings, per stream, as Markdown."""
    readings = [json.loads((probe / f"{i}.alloc.json").read_text()) for i in range(3)]
    rows = (
        ("VmRSS", "RSS"),
        ("RssAnon", "anonymous RSS"),
        ("malloc_in_use", "glibc heap in use"),
        ("malloc_free", "glibc heap free"),
        ("pymalloc_in_use", "pymalloc blocks in use"),
        ("pymalloc_arenas", "pymalloc arenas (1 MiB each)"),
    )
    lines = [
        "| KiB per stream | with the streams open | once closed |",
        "|---|---:|---:|",
    ]
    for key, label in rows:
        if key not in readings[0]:
            continue
        # /proc gives kB, the allocators bytes; an arena is 1 MiB.
        scale = 1.0 if key in ("VmRSS", "RssAnon") else 1024 if key == "pymalloc_arenas" else 1 / 1024
        cells = [f"{(readings[i][key] - readings[0][key]) * scale / streams:+.1f}" for i in (1, 2)]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    threads = " / ".join(str(reading["Threads"]) for reading in readings)
    lines += ["", f"Threads (before / open / closed): {threads}", ""]
    return "\n".join(lines)


def run(
    python: Path,
    code: Path,
    streams: int,
    *,
    frames: int = FRAMES,
    top: int = 40,
    depth: int = 6,
    keep: Path | None = None,
    batch: int = 0,
    before_tasks: bool = False,
    untraced: bool = False,
) -> str:
    work = Path(tempfile.mkdtemp(prefix="listen-memory-"))
    probe = keep if keep is not None else work / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    for old in probe.iterdir():
        old.unlink()
    stack = _ProbedStack(python, code, work, probe, frames, untraced)
    dump = "alloc.json" if untraced else "snap"
    try:
        stack.start()
        pid = stack.children["api"].pid
        if before_tasks and not untraced:
            _signal_and_wait(pid, probe / "started")
        say(f"starting {streams} tasks")
        started = asyncio.run(
            _listening.start_tasks({"port": stack.port, "tasks": streams, "delay_s": _listening.DELAY_S})
        )
        wait_idle(stack.pids, timeout=120)
        if not (before_tasks or untraced):
            _signal_and_wait(pid, probe / "started")
            time.sleep(1)
        _signal_and_wait(pid, probe / f"0.{dump}")
        say(f"opening {streams} streams")
        rss = asyncio.run(
            _open_and_close(stack.port, pid, probe, started["task_ids"], stack.roots, batch, dump)
        )
    finally:
        stack.stop()
    text = allocator_report(probe, streams) if untraced else report(probe, streams, top, depth)
    shutil.rmtree(work, ignore_errors=True)
    rss_line = (
        f"API RSS{'' if untraced else ' (traced, so larger than untraced)'}: {rss['before']:.1f} MiB before, "
        f"{rss['open']:.1f} with "
        f"{streams} streams ({(rss['open'] - rss['before']) * 1024 / streams:+.1f} KiB per stream), "
        f"{rss['closed']:.1f} once closed\n\n"
    )
    return rss_line + text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench._listen_memory", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--streams", type=int, default=STREAMS)
    parser.add_argument("--frames", type=int, default=FRAMES, help="frames tracemalloc keeps per block")
    parser.add_argument("--top", type=int, default=40, help="rows of each table")
    parser.add_argument("--depth", type=int, default=6, help="frames of each traceback group")
    parser.add_argument(
        "--before-tasks",
        action="store_true",
        help="start tracing before the tasks, not just before the streams",
    )
    parser.add_argument("--batch", type=int, default=0, help="open the streams this many at a time")
    parser.add_argument(
        "--untraced", action="store_true", help="no tracemalloc: where the RSS went, by allocator"
    )
    parser.add_argument("--keep", type=Path, help="keep the snapshots in this directory")
    parser.add_argument("--python-longtools", type=Path, default=longtools_python())
    parser.add_argument(
        "--code", type=Path, default=ROOT, help="the longtools tree to measure (default: this one)"
    )
    args = parser.parse_args(argv)
    text = run(
        args.python_longtools,
        args.code,
        args.streams,
        frames=args.frames,
        top=args.top,
        depth=args.depth,
        keep=args.keep,
        batch=args.batch,
        before_tasks=args.before_tasks,
        untraced=args.untraced,
    )
    print(text)  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
