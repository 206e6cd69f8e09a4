"""The evaluation report: a Markdown page and the same figures as JSON."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pgmem.eval.datasets import EvalCorpus
from pgmem.eval.metrics import (
    Difference,
    QuestionResult,
    Summary,
    answer_containment,
    evidence_recall,
    full_support,
    paired_bootstrap,
    summarise,
)
from pgmem.eval.runner import RunConfig, RunResult
from pgmem.eval.stress import attack_inclusion_rate, attack_targets, clean_recall_under_attack, poisoned_share
from pgmem.types import jsonable

#: The differences every report shows (A minus B), when both systems ran.
COMPARISONS = (
    ("calibrated", "relevance"),
    ("calibrated", "raw_bonus"),
    ("relevance", "rrf"),
    ("relevance", "dense"),
    ("relevance", "lexical"),
)
METRICS = (("recall", evidence_recall), ("full_support", full_support), ("answer_containment", answer_containment))


def _answerable(results: list[QuestionResult], corpus: EvalCorpus) -> list[QuestionResult]:
    adversarial = {q.id for q in corpus.questions if q.adversarial}
    return [r for r in results if r.question_id not in adversarial]


def _attack(corpus: EvalCorpus, run: RunResult) -> dict[str, Any]:
    targets = attack_targets(corpus)
    if not targets:
        return {}
    return {
        "attacked_questions": len(targets),
        "poisoned_notes": sum(len(ids) for ids in targets.values()),
        "systems": {
            system: {
                "attack_inclusion_rate": attack_inclusion_rate(results, targets),
                "poisoned_share": poisoned_share(results, targets),
                "clean_recall_under_attack": clean_recall_under_attack(results, targets),
            }
            for system, results in run.results.items()
        },
    }


def build_report(corpus: EvalCorpus, run: RunResult, config: RunConfig, *, condition: str = "clean") -> dict[str, Any]:
    """Everything the report shows, as plain data (the JSON output)."""
    summaries: dict[str, Summary] = {system: summarise(_answerable(rs, corpus)) for system, rs in run.results.items()}
    differences: list[Difference] = []
    for a, b in COMPARISONS:
        if a in run.results and b in run.results:
            for name, metric in METRICS:
                differences.append(
                    paired_bootstrap(
                        _answerable(run.results[a], corpus),
                        _answerable(run.results[b], corpus),
                        metric,
                        name=f"{a} − {b}: {name}",
                    )
                )
    reasons = Counter(reason for d in run.diagnostics for reason in d.degraded_reasons)
    pools = len(run.diagnostics)
    entropies = [d.entropy for d in run.diagnostics]
    fallback = {
        "pools": pools,
        "degraded_rate": sum(1 for d in run.diagnostics if d.degraded_reasons) / pools if pools else math.nan,
        "degraded_rate_by_reason": {reason: count / pools for reason, count in sorted(reasons.items())},
        "variance_floor_rate": (
            sum(d.floor_dominated_families for d in run.diagnostics) / max(1, sum(d.families for d in run.diagnostics))
        ),
        "entropy": (
            {
                "min": min(entropies),
                "median": statistics.median(entropies),
                "max": max(entropies),
                "mean": statistics.fmean(entropies),
            }
            if entropies
            else {}
        ),
        "pool_size_median": statistics.median(d.pool_size for d in run.diagnostics) if pools else math.nan,
    }
    return {
        "corpus": {"name": corpus.name, **corpus.stats()},
        "condition": condition,
        "attack": _attack(corpus, run),
        "config": {
            "budget": config.budget,
            "derive_hints": config.derive_hints,
            "stage_one": config.stage_one.as_dict(),
            "calibration": config.calibration.as_dict(),
            "packing": config.pack_params().as_dict(),
        },
        "ingest_seconds": run.ingest_seconds,
        "systems": {system: asdict(summary) for system, summary in summaries.items()},
        "differences": [asdict(d) for d in differences],
        "fallback": fallback,
    }


def _number(value: float, digits: int = 1) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as a Markdown page."""
    corpus = report["corpus"]
    lines = [
        f"# Evaluation: {corpus['name']} ({report.get('condition', 'clean')})",
        "",
        f"{corpus['spans']} notes in {corpus['namespaces']} namespace(s), {corpus['families']} families,"
        f" {corpus['questions']} questions; budget {report['config']['budget']},"
        f" family cap {report['config']['packing']['family_cap'] or 'none'}; ingest"
        f" {report['ingest_seconds']:.1f} s. All systems rank the same stage-one pool per question.",
        "",
        "| system | questions | recall | precision | full support | answer containment | stage one p50 / p95 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for system, s in report["systems"].items():
        latency = s["latency_ms"].get("stage_one", {})
        lines.append(
            f"| {system} | {s['n']} | {_number(s['recall'])} | {_number(s['precision'])} |"
            f" {_number(s['full_support'])} | {_number(s['answer_containment'])} |"
            f" {_number(latency.get('p50', math.nan))} / {_number(latency.get('p95', math.nan))} |"
        )
    categories = sorted({c for s in report["systems"].values() for c in s["by_category"]})
    if len(categories) > 1:
        lines += ["", "## Recall by category", "", "| system | " + " | ".join(categories) + " |"]
        lines.append("|---|" + "---|" * len(categories))
        for system, s in report["systems"].items():
            cells = [_number(s["by_category"].get(c, {}).get("recall", math.nan)) for c in categories]
            lines.append(f"| {system} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Differences (paired bootstrap, 95 % interval, percentage points)",
        "",
        "| comparison | mean | interval | questions |",
        "|---|---|---|---|",
    ]
    for d in report["differences"]:
        lines.append(f"| {d['metric']} | {d['mean']:+.2f} | [{d['low']:+.2f}, {d['high']:+.2f}] | {d['n']} |")
    attack = report.get("attack") or {}
    if attack:
        lines += [
            "",
            f"## Under attack: {attack['attacked_questions']} questions, {attack['poisoned_notes']} poisoned notes",
            "",
            "| system | packs with poison | poisoned share of packed notes | clean recall of attacked questions |",
            "|---|---|---|---|",
        ]
        for system, a in attack["systems"].items():
            lines.append(
                f"| {system} | {_number(100 * a['attack_inclusion_rate'])} | {_number(100 * a['poisoned_share'])} |"
                f" {_number(100 * a['clean_recall_under_attack'])} |"
            )
    f = report["fallback"]
    lines += [
        "",
        "## Calibration's fallback (calibrated mode)",
        "",
        f"* degraded pools: {_number(100 * f['degraded_rate'])} % of {f['pools']}"
        + "".join(f"; {reason} {_number(100 * rate)} %" for reason, rate in f["degraded_rate_by_reason"].items()),
        f"* variance floor dominated {_number(100 * f['variance_floor_rate'])} % of family rows",
        "* family-label entropy (nats): "
        + ", ".join(f"{name} {_number(value, 2)}" for name, value in f["entropy"].items()),
        f"* median pool size {_number(f['pool_size_median'], 0)}",
        "",
    ]
    return "\n".join(lines)


def write_report(report: Mapping[str, Any], folder: Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.json`` into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    markdown = folder / "report.md"
    data = folder / "report.json"
    markdown.write_text(render_markdown(report), encoding="utf-8")
    data.write_text(json.dumps(jsonable(report), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return markdown, data
