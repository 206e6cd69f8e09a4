"""PNG plots of evaluation results (matplotlib's Agg renderer: no display needed).

:func:`plot_recall` draws the evidence recall of every system under every stress
condition, from the report dicts of :func:`pgmem.eval.report.build_report`;
:func:`plot_growth` draws recall and stage-one latency against store size, from
:func:`pgmem.eval.growth.run_growth`, optionally overlaid with the synthetic scale
points of ``benchmarks/bench_scale.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmem.errors import ConfigurationError, InputError

try:
    # Figures are built without pyplot: no global figure state, and the caller's process
    # keeps whatever backend it chose (savefig renders PNG with Agg whatever it is).
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
except ImportError as exc:  # an optional extra: say which one
    raise ConfigurationError("evaluation plots need the 'eval' extra: pip install 'pgmem[eval]'") from exc
from pgmem.eval.report import SYSTEM_ORDER, system_order

__all__ = ["SYSTEM_ORDER", "plot_compaction", "plot_growth", "plot_recall", "system_order"]

#: Colours by :data:`pgmem.eval.report.SYSTEM_ORDER`, so a system keeps its colour.
_PALETTE = (
    "#1f77b4",  # calibrated: blue
    "#2ca02c",  # relevance: green
    "#9467bd",  # raw_bonus: purple
    "#17becf",  # beta: cyan
    "#7f7f7f",  # dense: grey
    "#ff7f0e",  # lexical: orange
    "#8c564b",  # rrf: brown
    "#e377c2",
    "#bcbd22",
    "#d62728",
)
#: Markers by the same order, so lines that coincide stay distinguishable.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
DPI = 120


def _colour(system: str, ordered: Sequence[str]) -> str:
    if system in SYSTEM_ORDER:
        return _PALETTE[SYSTEM_ORDER.index(system)]
    extra = [s for s in ordered if s not in SYSTEM_ORDER]
    return _PALETTE[(len(SYSTEM_ORDER) + extra.index(system)) % len(_PALETTE)]


def _condition(report: Mapping[str, Any]) -> str:
    label = str(report.get("condition", "clean"))
    cap = report.get("config", {}).get("packing", {}).get("family_cap")
    return f"{label}\nfamily cap {cap}" if cap else label


def _value(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def plot_recall(reports: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Grouped bars of evidence recall: one panel per dataset, one group per condition.

    Parameters
    ----------
    reports : sequence of mapping
        Report dicts of :func:`pgmem.eval.report.build_report` (or their JSON): reads
        ``corpus.name``, ``condition``, ``config.packing.family_cap`` and
        ``systems[system].recall`` (percent). Datasets and conditions keep the order
        they first appear in (``clean`` first); systems follow :func:`system_order`.
        Reports of one dataset at different budgets get one group per budget; of two
        reports with the same dataset, condition, family cap and budget, the later
        is drawn.
    path : Path
        The PNG to write (its folder must exist).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InputError
        ``reports`` is empty or a report lacks ``corpus.name`` or ``systems``.
    """
    if not reports:
        raise InputError("reports must hold at least one evaluation report")
    budgets: dict[str, set[Any]] = {}
    for number, report in enumerate(reports):
        name = report.get("corpus", {}).get("name")
        if not isinstance(name, str) or not isinstance(report.get("systems"), Mapping):
            raise InputError(f"reports[{number}] must be a build_report dict with corpus.name and systems")
        budgets.setdefault(name, set()).add(report.get("config", {}).get("budget"))
    panels: dict[str, dict[str, Mapping[str, Any]]] = {}
    for report in reports:
        name = report["corpus"]["name"]
        label = _condition(report)
        if len(budgets[name]) > 1:
            label += f"\nbudget {report.get('config', {}).get('budget')}"
        panels.setdefault(name, {})[label] = report["systems"]
    budget_label = {
        name: f" at budget {next(iter(values))}" if len(values) == 1 and None not in values else ""
        for name, values in budgets.items()
    }
    for name, conditions in panels.items():
        if "clean" in conditions:
            panels[name] = {"clean": conditions["clean"], **conditions}
    systems = system_order({s for conditions in panels.values() for results in conditions.values() for s in results})
    widest = max(len(conditions) for conditions in panels.values())
    group_width = 0.8
    bar = group_width / len(systems)
    figure = Figure(
        figsize=(max(7.0, 1.6 + widest * (0.35 + 0.22 * len(systems))), 3.4 * len(panels) + 0.6),
        layout="constrained",
    )
    axes = figure.subplots(len(panels), 1, squeeze=False)
    labelled = widest * len(systems) <= 36
    for axis, (name, conditions) in zip(axes[:, 0], panels.items(), strict=True):
        for index, system in enumerate(systems):
            positions = [g - group_width / 2 + (index + 0.5) * bar for g in range(len(conditions))]
            values = [_value(results.get(system, {}).get("recall")) for results in conditions.values()]
            bars = axis.bar(positions, values, bar, label=system, color=_colour(system, systems), edgecolor="white")
            if labelled:
                axis.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
        axis.set_xticks(range(len(conditions)), list(conditions), fontsize=9)
        axis.set_ylim(0, 105)
        axis.set_ylabel("evidence recall (%)")
        axis.set_title(f"{name}: evidence recall{budget_label[name]}, by stress condition", fontsize=11)
        axis.set_xlabel("stress condition")
        axis.grid(axis="y", alpha=0.3)
        axis.set_axisbelow(True)
        axis.set_xlim(-0.6, len(conditions) - 0.4)
    axes[0, 0].legend(title="system", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    figure.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def _notes_axis(axis: Any, ticks: Sequence[tuple[int, str]] | None = None) -> None:
    """A log axis of store sizes: ticks at ``ticks`` (count, label), else at decades."""
    axis.set_xscale("log")
    axis.set_xlabel("notes in the store (log scale)")
    if ticks:
        axis.set_xticks([count for count, _ in ticks], [label for _, label in ticks])
    else:
        axis.xaxis.set_major_locator(LogLocator(base=10))
        axis.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _compact(x)))
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.margins(x=0.08)
    axis.grid(which="major", alpha=0.3)


def _compact(count: float) -> str:
    for divisor, suffix in ((1e6, "M"), (1e3, "k")):
        if count >= divisor:
            return f"{count / divisor:.3g}{suffix}"
    return f"{count:g}"


def plot_growth(growth: Mapping[str, Any], path: Path, scale: Mapping[str, Any] | None = None) -> Path:
    """Recall and stage-one latency against store size, side by side.

    Parameters
    ----------
    growth : mapping
        What :func:`pgmem.eval.growth.run_growth` returns: reads ``corpus.name``,
        ``systems`` and, per entry of ``factors``, ``factor``, ``notes``,
        ``systems[system].recall`` and ``stage_one_ms`` (``p50``, ``p95``).
    path : Path
        The PNG to write (its folder must exist).
    scale : mapping, optional
        ``benchmarks/bench_scale.py`` JSON: its ``points`` (``notes``,
        ``stage_one_ms.p50/p95``) are overlaid on the latency panel.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InputError
        ``growth`` holds no factor.
    """
    steps = list(growth.get("factors") or [])
    if not steps:
        raise InputError("growth must hold at least one factor (run_growth's output)")
    notes = [int(step["notes"]) for step in steps]
    systems = system_order(list(growth.get("systems") or steps[0]["systems"]))
    figure = Figure(figsize=(12.5, 4.6), layout="constrained")
    recall_axis, latency_axis = figure.subplots(1, 2)

    for index, system in enumerate(systems):
        values = [_value(step["systems"].get(system, {}).get("recall")) for step in steps]
        recall_axis.plot(
            notes,
            values,
            marker=_MARKERS[index % len(_MARKERS)],
            label=system,
            color=_colour(system, systems),
            linewidth=1.6,
            markersize=6,
            alpha=0.9,
        )
    step_ticks = [(int(step["notes"]), f"{_compact(step['notes'])}\n×{step['factor']}") for step in steps]
    _notes_axis(recall_axis, step_ticks)
    recall_axis.set_ylim(0, 100)
    recall_axis.set_ylabel("evidence recall (%)")
    recall_axis.set_title(f"{growth['corpus']['name']}: recall as distractors are added", fontsize=11)
    recall_axis.legend(title="system", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)

    latency_values: list[float] = []
    for key, style in (("p50", "-"), ("p95", "--")):
        values = [_value(step["stage_one_ms"].get(key)) for step in steps]
        latency_values += values
        latency_axis.plot(
            notes, values, style, marker="o", color="#1f77b4", label=f"{growth['corpus']['name']}, padded: {key}"
        )
    if scale:
        points = sorted(scale.get("points", []), key=lambda p: p["notes"])
        sizes = [int(p["notes"]) for p in points]
        for key, style in (("p50", "-"), ("p95", "--")):
            values = [_value(p["stage_one_ms"].get(key)) for p in points]
            latency_values += values
            latency_axis.plot(sizes, values, style, marker="s", color="#d62728", label=f"synthetic store: {key}")
    _notes_axis(latency_axis, None if scale else step_ticks)
    finite = [v for v in latency_values if math.isfinite(v) and v > 0]
    if finite and max(finite) / min(finite) > 20:
        latency_axis.set_yscale("log")
        latency_axis.set_ylabel("stage-one latency (ms, log scale)")
    else:
        latency_axis.set_ylim(bottom=0)
        latency_axis.set_ylabel("stage-one latency (ms)")
    title = "stage-one latency (p50 solid, p95 dashed)"
    latency_axis.set_title(title, fontsize=11)
    latency_axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    if scale:
        figure.text(
            0.99,
            0.01,
            "synthetic store: recombined real sentences, hashing embedder (384 d), latency only"
            + (f"; {scale['machine']}" if scale.get("machine") else ""),
            ha="right",
            fontsize=7,
            color="#555555",
        )
    figure.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def plot_compaction(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Evidence-in-context recall against mean live-context tokens, a line per policy over caps.

    ``rows`` are the ``compaction.json`` rows of :mod:`pgmem.eval.compaction`.
    """
    if not rows:
        raise InputError("plot_compaction needs at least one row")
    figure = Figure(figsize=(8, 5), dpi=DPI)
    axis = figure.add_subplot()
    policies = list(dict.fromkeys(str(r["policy"]) for r in rows))
    for index, policy in enumerate(policies):
        points = sorted((r for r in rows if r["policy"] == policy), key=lambda r: int(r["cap"]))
        axis.plot(
            [_value(r["context_tokens"]) for r in points],
            [_value(r["evidence_recall"]) for r in points],
            marker=_MARKERS[index % len(_MARKERS)],
            color=_PALETTE[index % len(_PALETTE)],
            label=policy,
        )
        for r in points:
            axis.annotate(
                f"{int(r['cap']) // 1000}k" if int(r["cap"]) % 1000 == 0 else str(r["cap"]),
                (_value(r["context_tokens"]), _value(r["evidence_recall"])),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
                color=_PALETTE[index % len(_PALETTE)],
            )
    axis.set_xlabel("mean live-context tokens at a question")
    axis.set_ylabel("evidence-in-context recall (%)")
    axis.set_title("Compaction policies under a live context cap (labels: cap)")
    axis.set_ylim(0, 100)
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8, loc="best")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path
