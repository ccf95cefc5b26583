"""The results as a Markdown table (``latest.md``) and a bar chart (``latest.png``)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

TIMES = "\u00d7"  # the multiplication sign
DASH = "\u2013"  # an en dash, for ranges and empty cells
_VISIBLE_MS = 0.05  # backend CPU below this per operation is idle polling, not work
_GENERATOR_BUSY = 0.8  # a generator above this share of its core may be what limits a run


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _ratio(row: dict[str, Any], key: str) -> str:
    return f"{row[key]:.2f}{TIMES}" if key in row else DASH


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    machine = meta["machine"]
    quick = " (--quick)" if meta["quick"] else ""
    lines = [
        f"Run {meta['date']} at commit {meta['commit']} on {machine['cpus']} {TIMES} "
        f"{machine['cpu_model']}, {meta['rounds']} round(s) {TIMES} {meta['duration_s']:g} s after "
        f"{meta['warmup_s']:g} s of warm-up per implementation, {meta['pinned']}{quick}. Medians over "
        "the rounds; throughput's range in brackets. Server CPU is the measured process's utime+stime "
        "per operation; backend CPU is Temporal's and the worker's (longtools rows only). Ratios: "
        "throughput and CPU per operation, each divided by the best peer's (highest throughput, lowest "
        "CPU) and the floor's.",
        "",
    ]
    for scenario in meta["scenarios"]:
        rows = [row for row in results["rows"] if row["scenario"] == scenario["id"]]
        unit = scenario["unit"]
        one = unit.removesuffix("s")
        lines += [
            f"**{scenario['id']}**: {scenario['title']}",
            "",
            f"| implementation | {unit}/s | p50 ms | p99 ms | server CPU ms/{one} | server core busy "
            f"| backend CPU ms/{one} "
            f"| generator CPU | {unit}/s ÷ best peer | {unit}/s ÷ floor | CPU/{one} ÷ best peer "
            f"| CPU/{one} ÷ floor |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows:
            if "rate" not in row:
                lines.append(
                    f"| {row['label']} | not measured: {row.get('problem', '?')[:200]} |" + " |" * 10
                )
                continue
            backend = _ms(row["backend_cpu_ms"]) if row["role"] == "ours" else DASH
            lines.append(
                f"| {row['label']} | {row['rate']:,.0f} ({row['rate_min']:,.0f}{DASH}{row['rate_max']:,.0f}) "
                f"| {_ms(row['p50_ms'])} | {_ms(row['p99_ms'])} | {row['server_cpu_ms']:.3f} "
                f"| {row['server_cpu_share']:.0%} | {backend} "
                f"| {row['gen_cpu_share']:.0%} "
                f"| {_ratio(row, 'rate_vs_best_peer')} | {_ratio(row, 'rate_vs_floor')} "
                f"| {_ratio(row, 'cpu_vs_best_peer')} | {_ratio(row, 'cpu_vs_floor')} |"
            )
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
    return "\n".join(lines)


def write_markdown(results: dict[str, Any], path: Path) -> None:
    path.write_text(markdown(results))


def write_chart(results: dict[str, Any], path: Path) -> bool:
    """Bars of throughput and server CPU per operation for each scenario; False without matplotlib."""
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
    except ImportError:
        return False
    matplotlib.use("Agg")
    pyplot: Any = importlib.import_module("matplotlib.pyplot")
    scenarios = results["meta"]["scenarios"]
    figure, axes = pyplot.subplots(
        len(scenarios), 2, figsize=(13, 1.2 + 2.2 * len(scenarios)), squeeze=False, constrained_layout=True
    )
    colors = {"floor": "#9e9e9e", "peer": "#5b8def", "ours": "#e8793a"}
    for (left, right), scenario in zip(axes, scenarios, strict=True):
        rows = [row for row in results["rows"] if row["scenario"] == scenario["id"] and "rate" in row]
        labels = [row["label"] for row in rows]
        places = list(range(len(rows)))
        rates = [row["rate"] for row in rows]
        spread = [
            [row["rate"] - row["rate_min"] for row in rows],
            [row["rate_max"] - row["rate"] for row in rows],
        ]
        color = [colors[row["role"]] for row in rows]
        left.barh(places, rates, xerr=spread, color=color)
        for place, rate in zip(places, rates, strict=True):
            left.annotate(f" {rate:,.0f}", (rate, place), va="center", fontsize=8)
        left.set_xlim(0, max(row["rate_max"] for row in rows) * 1.18)
        left.set_yticks(places, labels)
        left.invert_yaxis()
        left.set_xlabel(f"{scenario['unit']}/s (median, min{DASH}max)")
        left.set_title(f"{scenario['id']}: {scenario['title']}", loc="left", fontsize=9)
        server = [row["server_cpu_ms"] for row in rows]
        backend = [row["backend_cpu_ms"] if row["role"] == "ours" else 0.0 for row in rows]
        right.barh(places, server, color=color)
        right.barh(places, backend, left=server, color="#f3c19d")
        for place, mine, theirs in zip(places, server, backend, strict=True):
            text = f" {mine:.2f}" + (f" + {theirs:.2f} backend" if theirs >= _VISIBLE_MS else "")
            right.annotate(text, (mine + theirs, place), va="center", fontsize=8)
        right.set_xlim(0, max(a + b for a, b in zip(server, backend, strict=True)) * 1.4)
        right.set_yticks(places, [""] * len(rows))
        right.invert_yaxis()
        one = scenario["unit"].removesuffix("s")
        right.set_xlabel(f"CPU ms per {one} (median): server; light: Temporal + worker", fontsize=9)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return True
