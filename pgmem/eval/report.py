"""The evaluation report: a Markdown page and the same figures as JSON."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pgmem.eval.datasets import EvalCorpus
from pgmem.eval.metrics import (
    PUBLISHED_METRICS,
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
    ("beta", "relevance"),
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
            "feedback_folds": config.feedback_folds,
            "seed": config.seed,
        },
        "ingest_seconds": run.ingest_seconds,
        "feedback": asdict(run.feedback) if run.feedback is not None else None,
        "systems": {system: asdict(summary) for system, summary in summaries.items()},
        "differences": [asdict(d) for d in differences],
        "fallback": fallback,
    }


def _number(value: float | None, digits: int = 1) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _percent(share: float | None) -> str:
    """A share in [0, 1] as a percentage; "—" when undefined (e.g. no note was packed)."""
    return _number(None if share is None else 100 * share)


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
    reported = {name for s in report["systems"].values() for name in s.get("published", {})}
    published = [name for name in PUBLISHED_METRICS if name in reported]
    if published:
        lines += [
            "",
            "## The metrics other memory tools publish",
            "",
            "Easier than recall above, shown so figures can be set next to published ones:"
            " `session_any@5` counts a hit when one gold session (document) is among the pack's first five"
            " distinct sessions; `recall_any@k`, `recall_all@k` and `ndcg_any@k` are LongMemEval's turn-level"
            " metrics over the pack's first k notes (a pack of 8 makes @10 the whole pack).",
            "",
            "| system | " + " | ".join(published) + " |",
            "|---|" + "---|" * len(published),
        ]
        for system, s in report["systems"].items():
            cells = [_number(s.get("published", {}).get(name, math.nan)) for name in published]
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
    fed = report.get("feedback")
    if fed:
        judged = fed["helpful"] + fed["unhelpful"]
        lines += [
            "",
            "## What the beta mode learned from",
            "",
            f"Cross-fitted over {fed['folds']} folds: each fold's questions were packed with the reliability"
            f" learned from feedback on the other folds' packs only ({fed['training_packs']} training packs,"
            f" {judged} judgements, {_number(100 * fed['helpful'] / judged if judged else math.nan)} % helpful).",
        ]
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


#: The order systems are shown in; any other system follows, by name.
SYSTEM_ORDER = ("calibrated", "relevance", "raw_bonus", "beta", "dense", "lexical", "rrf")


def system_order(systems: Iterable[str]) -> list[str]:
    """``systems`` in the reports' and plots' stable order: :data:`SYSTEM_ORDER`, then
    the rest by name."""
    seen = set(systems)
    return [s for s in SYSTEM_ORDER if s in seen] + sorted(seen - set(SYSTEM_ORDER))


def systems_of(reports: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every system that ran in any of ``reports``, in :func:`system_order`."""
    return system_order(system for report in reports for system in report["systems"])


def run_label(report: Mapping[str, Any]) -> str:
    """A report's condition, with its family cap when it had one."""
    cap = report["config"]["packing"].get("family_cap")
    return str(report.get("condition", "clean")) + (f", family cap {cap}" if cap else "")


def _difference_cell(report: Mapping[str, Any], metric: str) -> str:
    found = next((d for d in report["differences"] if d["metric"] == metric), None)
    return f"{found['mean']:+.2f} [{found['low']:+.2f}, {found['high']:+.2f}]" if found else "—"


def render_summary(reports: Sequence[Mapping[str, Any]]) -> str:
    """Several reports (datasets × conditions) as Markdown tables: recall of every
    system, the calibrated − relevance and beta − relevance recall differences with
    their intervals, and, for attacked runs, the attack metrics."""
    ordered = sorted(reports, key=lambda r: (r["corpus"]["name"], run_label(r)))
    systems = systems_of(ordered)
    lines = [
        "| data | condition | " + " | ".join(systems) + " | calibrated − relevance | beta − relevance |",
        "|---|---|" + "---|" * len(systems) + "---|---|",
    ]
    for r in ordered:
        recall = [_number(r["systems"][s]["recall"]) if s in r["systems"] else "—" for s in systems]
        lines.append(
            f"| {r['corpus']['name']} | {run_label(r)} | "
            + " | ".join(recall)
            + f" | {_difference_cell(r, 'calibrated − relevance: recall')}"
            + f" | {_difference_cell(r, 'beta − relevance: recall')} |"
        )
    attacked = [r for r in ordered if r.get("attack")]
    if attacked:
        lines += [
            "",
            "| data | condition | system | packs with poison | poisoned share | clean recall (attacked) |",
            "|---|---|---|---|---|---|",
        ]
        for r in attacked:
            for system in systems:
                a = r["attack"]["systems"].get(system)
                if a is not None:
                    lines.append(
                        f"| {r['corpus']['name']} | {run_label(r)} | {system} |"
                        f" {_percent(a['attack_inclusion_rate'])} | {_percent(a['poisoned_share'])} |"
                        f" {_percent(a['clean_recall_under_attack'])} |"
                    )
    return "\n".join(lines) + "\n"
