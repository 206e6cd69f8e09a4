"""The growth run as a Markdown page, and its files (Markdown, JSON, PNG)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pgmem.types import jsonable


def _number(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.{digits}f}"


def render_growth_markdown(growth: Mapping[str, Any]) -> str:
    """The growth run as a Markdown page.

    Parameters
    ----------
    growth : mapping
        What :func:`run_growth` returns, optionally with ``scale`` (the JSON of
        ``benchmarks/bench_scale.py``) added.

    Returns
    -------
    str
        Tables of evidence recall per system and of stage-one latency per store size.
    """
    corpus = growth["corpus"]
    steps = growth["factors"]
    systems = list(growth["systems"])
    lines = [
        f"# Growth: {corpus['name']}",
        "",
        f"{corpus['questions']} questions against {corpus['spans']} notes in {corpus['namespaces']} namespace(s),"
        f" padded in place with distractors from {growth['source']['name']} (seed {growth['seed']});"
        f" embedder {growth['embedder']}, budget {growth['budget']}. Metrics leave adversarial questions out.",
    ]
    if growth.get("recombined_own_texts"):
        lines += [
            "",
            "Padded with recombinations of their own texts (no other namespace to draw from), so distractors"
            f" hold halves of gold notes: {', '.join(growth['recombined_own_texts'])}.",
        ]
    for metric, title in (
        ("recall", "Evidence recall"),
        ("full_support", "Full support"),
        ("answer_containment", "Answer containment"),
    ):
        lines += [
            "",
            f"## {title} (%) by store size",
            "",
            "| factor | notes | " + " | ".join(systems) + " |",
            "|---:|---:|" + "---:|" * len(systems),
        ]
        for step in steps:
            cells = [_number(step["systems"][system][metric]) for system in systems]
            lines.append(f"| ×{step['factor']} | {step['notes']:,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Stage one",
        "",
        "| factor | notes | distractors (recombined) | ingest s | evaluate s | p50 ms | p95 ms | mean ms"
        " | median pool | degraded % |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step in steps:
        latency = step["stage_one_ms"]
        lines.append(
            f"| ×{step['factor']} | {step['notes']:,} |"
            f" {step['distractors']:,} ({step['recombined_distractors']:,}) | {_number(step['ingest_seconds'])} |"
            f" {_number(step['evaluate_seconds'])} | {_number(latency['p50'])} | {_number(latency['p95'])} |"
            f" {_number(latency['mean'])} | {_number(step['pool_size_median'], 0)} |"
            f" {_number(None if step['degraded_rate'] is None else 100 * step['degraded_rate'])} |"
        )
    scale = growth.get("scale")
    if scale:
        lines += [
            "",
            f"## Synthetic scale points (benchmarks/bench_scale.py; {scale.get('machine', 'machine not recorded')})",
            "",
            "Recombined real sentences in one namespace, hashing embedder at 384 dimensions: latency only.",
            "",
            "| notes | p50 ms | p95 ms | mean ms |",
            "|---:|---:|---:|---:|",
        ]
        for point in scale["points"]:
            latency = point["stage_one_ms"]
            lines.append(
                f"| {point['notes']:,} | {_number(latency['p50'])} | {_number(latency['p95'])} |"
                f" {_number(latency['mean'])} |"
            )
    lines.append("")
    return "\n".join(lines)


def write_growth(growth: Mapping[str, Any], folder: Path) -> tuple[Path, Path, Path]:
    """Write ``growth.md``, ``growth.json`` and ``growth.png`` into ``folder``.

    Parameters
    ----------
    growth : mapping
        What :func:`run_growth` returns, optionally with ``scale`` added (overlaid on
        the latency panel of the plot).
    folder : Path
        Created when missing.

    Returns
    -------
    tuple of Path
        The Markdown, JSON and PNG paths.
    """
    from pgmem.eval.plots import plot_growth

    folder.mkdir(parents=True, exist_ok=True)
    markdown, data, image = folder / "growth.md", folder / "growth.json", folder / "growth.png"
    markdown.write_text(render_growth_markdown(growth), encoding="utf-8")
    data.write_text(json.dumps(jsonable(growth), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    plot_growth(growth, image, scale=growth.get("scale"))
    return markdown, data, image
