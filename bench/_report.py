"""The results as Markdown tables (``latest.md``) and a bar chart (``latest.png``).

Each scenario leads with its own figure: operations/s for B1, B2, their 2025-era twins B1L and B2L,
and B6 (higher is better), the latency of one task for B3 and the seconds of one run for B4 (lower
is better). Ratios follow the figure's direction and say which way is better; a scenario without a
floor row (B1L, B2L) has no ratio to the floor.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import _approving, _listening, _notifying, _parked, _waiting
from bench._scenarios import PARKED, WAITING

TIMES = "\u00d7"  # the multiplication sign
DASH = "\u2013"  # an en dash, for ranges and empty cells
_VISIBLE_MS = 0.05  # backend CPU below this per operation is idle polling, not work
_GENERATOR_BUSY = 0.8  # a generator above this share of its core may be what limits a run
_WORK_S = 6.0  # B4's work: 3 x 2 s, the least any implementation can take

Row = dict[str, Any]
Column = tuple[str, Callable[[Row], str]]


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _cpu(value: float) -> str:
    return _ms(value) if value < 100 else f"{value:,.0f}"


def _ratio(row: Row, key: str) -> str:
    return f"{row[key]:.2f}{TIMES}" if key in row else DASH


def _has_backend(row: Row) -> bool:
    # Older results have no "backend" key: there only longtools' rows had one.
    return bool(row.get("backend", row["role"] == "ours"))


def _backend_ms(row: Row) -> str:
    return _ms(row["backend_cpu_ms"]) if _has_backend(row) else DASH


def _generator(row: Row) -> str:
    return DASH if row.get("self_measured") else f"{row['gen_cpu_share']:.0%}"


def _range(value: float, low: float, high: float, form: str) -> str:
    if f"{low:{form}}" == f"{high:{form}}":  # one round, or rounds that agree
        return f"{value:{form}}"
    return f"{value:{form}} ({low:{form}}{DASH}{high:{form}})"


def _columns(figure: str, unit: str) -> list[Column]:
    one = unit.removesuffix("s")
    cpu = [
        (f"server CPU ms/{one}", lambda row: f"{row['server_cpu_ms']:.3f}"),
        ("server core busy", lambda row: f"{row['server_cpu_share']:.0%}"),
        (f"backend CPU ms/{one}", _backend_ms),
        ("generator CPU", _generator),
    ]
    if figure == "latency":
        return [
            ("p50 ms", lambda row: _ms(row["p50_ms"])),
            ("p99 ms", lambda row: _ms(row["p99_ms"])),
            ("of which tools/call, p50 ms", lambda row: _ms(row["create_p50_ms"])),
            ("tasks/get per task", lambda row: f"{row['polls_per_task']:.2f}"),
            ("tasks / direct results", lambda row: f"{row['created_tasks']} / {row['direct_results']}"),
            *cpu,
            ("p50 ÷ best peer (lower is better)", lambda row: _ratio(row, "p50_vs_best_peer")),
            ("p50 ÷ floor (lower is better)", lambda row: _ratio(row, "p50_vs_floor")),
            (f"CPU/{one} ÷ best peer", lambda row: _ratio(row, "cpu_vs_best_peer")),
        ]
    if figure == "duration":
        return [
            ("seconds", lambda row: _range(row["seconds"], row["seconds_min"], row["seconds_max"], ".2f")),
            (f"over the {_WORK_S:g} s of work", lambda row: f"{row['seconds'] - _WORK_S:+.2f} s"),
            ("tasks/get per run", lambda row: f"{row['polls_per_task']:.0f}"),
            (f"server CPU ms/{one}", lambda row: f"{row['server_cpu_ms']:.0f}"),
            (
                f"backend CPU ms/{one}",
                lambda row: f"{row['backend_cpu_ms']:.0f}" if _has_backend(row) else DASH,
            ),
            ("generator CPU", _generator),
            (
                "speed-up: best peer's seconds ÷ these (higher is better)",
                lambda row: _ratio(row, "speedup_vs_best_peer"),
            ),
        ]
    columns: list[Column] = [
        (f"{unit}/s", lambda row: _range(row["rate"], row["rate_min"], row["rate_max"], ",.0f")),
        ("p50 ms", lambda row: _ms(row["p50_ms"])),
        ("p99 ms", lambda row: _ms(row["p99_ms"])),
    ]
    if unit == "tasks":
        columns.append(("of which tools/call, p50 ms", lambda row: _ms(row["create_p50_ms"])))
        columns.append(("tasks/get per task", lambda row: f"{row['polls_per_task']:.2f}"))
    return [
        *columns,
        *cpu,
        (f"{unit}/s ÷ best peer", lambda row: _ratio(row, "rate_vs_best_peer")),
        (f"{unit}/s ÷ floor", lambda row: _ratio(row, "rate_vs_floor")),
        (f"CPU/{one} ÷ best peer", lambda row: _ratio(row, "cpu_vs_best_peer")),
        (f"CPU/{one} ÷ floor", lambda row: _ratio(row, "cpu_vs_floor")),
    ]


def _setting(meta: dict[str, Any], scenario: dict[str, Any]) -> str:
    """Rounds and what one round measures, e.g. "3 rounds, 10 s after 3 s of warm-up"."""
    rounds = scenario.get("rounds", meta["rounds"])
    load = scenario.get("load", {})
    quick = meta["quick"]
    if scenario.get("figure") == "latency":
        what = (
            f"{load.get('ops')} tasks after {load.get('warmup_ops')} of warm-up"
            if not quick
            else "a few tasks"
        )
    elif scenario.get("figure") == "duration":
        what = "one run"
    else:
        warmup, duration = scenario.get("window_s", (meta["warmup_s"], meta["duration_s"]))
        what = f"{duration:g} s after {warmup:g} s of warm-up"
    return f"{rounds} round{'s' if rounds != 1 else ''}, {what}"


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    machine = meta["machine"]
    quick = " (--quick)" if meta["quick"] else ""
    lines = [
        f"Run {meta['date']} at commit {meta['commit']} on {machine['cpus']} {TIMES} "
        f"{machine['cpu_model']}, {meta['pinned']}{quick}; each scenario's rounds and what one round "
        "measures are in brackets after its name. Each round starts every server afresh. "
        "Medians over the rounds; ranges in brackets. Server CPU is the "
        "measured process's utime+stime per operation; backend CPU is its backend's: Temporal and "
        "the longtools worker for longtools, Redis for fastmcp-tasks on Redis, Temporal for the "
        "Temporal floor (whose own process is client and worker at once). Ratios: each figure and "
        "the CPU per operation, divided by the best peer's and the floor's.",
        "",
    ]
    for scenario in meta["scenarios"]:
        rows = [row for row in results["rows"] if row["scenario"] == scenario["id"]]
        columns = _columns(scenario.get("figure", "throughput"), scenario["unit"])
        lines += [
            f"**{scenario['id']}** ({_setting(meta, scenario)}): {scenario['title']}",
            "",
            "| implementation | " + " | ".join(header for header, _ in columns) + " |",
            "|---|" + "---:|" * len(columns),
        ]
        for row in rows:
            if "rate" not in row:
                problem = row.get("problem", "?")[:200].replace("\n", " ").replace("|", "/")
                lines.append(f"| {row['label']} | not measured: {problem} |" + " |" * (len(columns) - 1))
                continue
            lines.append(f"| {row['label']} | " + " | ".join(cell(row) for _, cell in columns) + " |")
        lines.append("")
    shares = [row["gen_cpu_share_max"] for row in results["rows"] if "gen_cpu_share_max" in row]
    others = [row["other_cpu_share"] for row in results["rows"] if "other_cpu_share" in row]
    if shares:
        verdict = (
            "so it did not bound these figures"
            if max(shares) < _GENERATOR_BUSY
            else "close to saturation: the fastest rows may be bound by the generator"
        )
        lines.append(
            f"The load generator used at most {max(shares):.0%} of one core in any run, {verdict}. "
            f"Other activity on the machine during the windows: median "
            f"{sorted(others)[len(others) // 2]:.0%}, at most {max(others):.0%} of a core."
        )
        lines.append("")
    if PARKED in results:
        lines += [_parked.render(results[PARKED]), ""]
    if WAITING in results:
        lines += [_waiting.render(results[WAITING]), ""]
    if _listening.SCENARIO in results:
        lines += [_listening.render(results[_listening.SCENARIO]), ""]
    if _approving.SCENARIO in results:
        lines += [_approving.render(results[_approving.SCENARIO]), ""]
    if _notifying.SCENARIO in results:
        lines += [_notifying.render(results[_notifying.SCENARIO]), ""]
    return "\n".join(lines)


def write_markdown(results: dict[str, Any], path: Path) -> None:
    path.write_text(markdown(results))


def _figure_bars(axis: Any, rows: list[Row], scenario: dict[str, Any], color: list[str]) -> None:
    """The left panel: the scenario's own figure, with its range (or p99) as the error bar."""
    figure = scenario.get("figure", "throughput")
    places = list(range(len(rows)))
    if figure == "latency":
        values = [row["p50_ms"] for row in rows]
        axis.barh(places, values, color=color)
        axis.plot([row["p99_ms"] for row in rows], places, "k|", markersize=12)
        labels = [f" {row['p50_ms']:.1f} (p99 {row['p99_ms']:.1f})" for row in rows]
        ends = [row["p99_ms"] for row in rows]  # the labels go right of the p99 marks
        top = max(ends)
        axis.set_xlabel("ms per task, p50 (bar) and p99 (mark), medians; lower is better")
    elif figure == "duration":
        values = [row["seconds"] for row in rows]
        spread = [
            [row["seconds"] - row["seconds_min"] for row in rows],
            [row["seconds_max"] - row["seconds"] for row in rows],
        ]
        axis.barh(places, values, xerr=spread, color=color)
        axis.axvline(_WORK_S, color="#555555", linestyle=":", linewidth=1)
        labels = [f" {value:.2f} s" for value in values]
        ends = [row["seconds_max"] for row in rows]
        top = max(ends)
        axis.set_xlabel(
            f"seconds per run (median, min{DASH}max; dotted: the {_WORK_S:g} s of work); lower is better"
        )
    else:
        values = [row["rate"] for row in rows]
        spread = [
            [row["rate"] - row["rate_min"] for row in rows],
            [row["rate_max"] - row["rate"] for row in rows],
        ]
        axis.barh(places, values, xerr=spread, color=color)
        labels = [f" {value:,.0f}" for value in values]
        ends = [row["rate_max"] for row in rows]
        top = max(ends)
        axis.set_xlabel(f"{scenario['unit']}/s (median, min{DASH}max)")
    for place, end, text in zip(places, ends, labels, strict=True):
        axis.annotate(text, (end, place), va="center", fontsize=8)
    axis.set_xlim(0, top * 1.35)
    axis.set_yticks(places, [row["label"] for row in rows])
    axis.invert_yaxis()
    axis.set_title(f"{scenario['id']}: {scenario['title']}", loc="left", fontsize=9, wrap=True)


def write_chart(results: dict[str, Any], path: Path) -> bool:
    """Per scenario, its figure and the CPU per operation; False without matplotlib."""
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
    except ImportError:
        return False
    matplotlib.use("Agg")
    pyplot: Any = importlib.import_module("matplotlib.pyplot")
    scenarios = [
        scenario
        for scenario in results["meta"]["scenarios"]
        if any(row["scenario"] == scenario["id"] and "rate" in row for row in results["rows"])
    ]
    if not scenarios:
        return False
    figure, axes = pyplot.subplots(
        len(scenarios), 2, figsize=(14, 1.2 + 2.4 * len(scenarios)), squeeze=False, constrained_layout=True
    )
    colors = {"floor": "#9e9e9e", "peer": "#5b8def", "ours": "#e8793a"}
    for (left, right), scenario in zip(axes, scenarios, strict=True):
        rows = [row for row in results["rows"] if row["scenario"] == scenario["id"] and "rate" in row]
        color = [colors[row["role"]] for row in rows]
        _figure_bars(left, rows, scenario, color)
        places = list(range(len(rows)))
        server = [row["server_cpu_ms"] for row in rows]
        backend = [row["backend_cpu_ms"] if _has_backend(row) else 0.0 for row in rows]
        right.barh(places, server, color=color)
        right.barh(places, backend, left=server, color="#f3c19d")
        for place, mine, theirs in zip(places, server, backend, strict=True):
            text = f" {_cpu(mine)}" + (f" + {_cpu(theirs)} backend" if theirs >= _VISIBLE_MS else "")
            right.annotate(text, (mine + theirs, place), va="center", fontsize=8)
        right.set_xlim(0, max(a + b for a, b in zip(server, backend, strict=True)) * 1.5)
        right.set_yticks(places, [""] * len(rows))
        right.invert_yaxis()
        one = scenario["unit"].removesuffix("s")
        right.set_xlabel(
            f"CPU ms per {one} (median): server; light: its backend (Temporal, worker, Redis)", fontsize=9
        )
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return True
