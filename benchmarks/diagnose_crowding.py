"""Where an attacker's notes take the pack slots of the questions it does *not* attack.

Reads the namespaces ``bench_provenance.py`` stored (same ``--home`` and ``--prefix``):
for each dataset, the clean store and one poisoned condition. Over the unattacked
questions of the poisoned store it prints how many of the ~100 stage-one candidates are
poison, how many of the eight packed notes are (default mode and relevance only), whether
the gold notes lost from the pack were still in the pool (the finish) or not (stage one),
and what separates the attacker's family from the genuine families of the same pools:
the alarm's inputs (calibration z and regulariser, echo, restatement, duplicate density,
collusion, pool and namespace share, newness) and, per note, its length in content
words, how many distinct questions its pool notes are aimed at, how much of the best
matching question of the namespace it restates, and the gaps between its write times.

    PYTHONPATH=. python benchmarks/diagnose_crowding.py --home /tmp/patient-home --prefix patient \\
        --datasets multihop locomo --condition poison-quarter-para

The figures are in docs/security.md ("The patient attacker's crowding").
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bench_provenance import dataset_slice

import pgmem
from pgmem.embeddings import CachedEmbedder, resolve_embedder
from pgmem.eval.runner import RunConfig, _Session
from pgmem.eval.stress import apply_condition, attack_targets
from pgmem.params import CalibrationParams, PackParams, StageOneParams
from pgmem.retrieval.calibrate import calibrate
from pgmem.retrieval.packer import rank_and_pack
from pgmem.retrieval.pipeline import fetch_pool
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.words import content_words

FAMILY_SIGNALS = (
    "z",
    "regularizer",
    "alarm_score",
    "question_echo",
    "question_restatement",
    "duplicate_density",
    "collusion",
    "pool_share",
    "namespace_share",
    "newness",
)


def _pools(conn: Any, corpus: Any, embedder: Any, prefix: str) -> list[tuple[Any, Pool]]:
    config = RunConfig(namespace_prefix=prefix, stage_one=StageOneParams(k_dense=50, k_lex=50))
    session = _Session(conn, corpus, embedder, config)
    return [(q, fetch_pool(conn, session.request(q))) for q in corpus.questions if q.gold]


def _packed(pool: Pool, mode: Any) -> list[str]:
    items = rank_and_pack(pool, calibrate(pool, CalibrationParams(), mode), PackParams()).items
    return [item.external_id or item.note_id for item in items]


def _summary(values: Sequence[float]) -> str:
    if not values:
        return "—"
    array = np.asarray(values, dtype=np.float64)
    p10, p50, p90 = np.percentile(array, [10, 50, 90])
    return f"p10 {p10:.3f} · median {p50:.3f} · p90 {p90:.3f} · max {array.max():.3f}"


def _best_restatement(words: frozenset[str], questions: list[frozenset[str]]) -> float:
    """The highest share of a namespace question's content words the note holds."""
    return max((len(words & q) / len(q) for q in questions if q), default=0.0)


def diagnose(conn: Any, dataset: str, condition: str, prefix: str, data_dir: Path, embedder: Any) -> None:
    base = dataset_slice(dataset, data_dir)
    clean_corpus = apply_condition(base, "clean")
    corpus = apply_condition(base, condition)
    targets = attack_targets(corpus)
    aimed = {
        span.external_id: (span.metadata or {}).get("target")
        for spans in corpus.spans.values()
        for span in spans
        if (span.metadata or {}).get("poisoned")
    }
    question_words = [content_words(q.question) for q in corpus.questions]
    clean = {q.id: pool for q, pool in _pools(conn, clean_corpus, embedder, f"{prefix}-{dataset}-clean-")}
    counts: dict[str, list[float]] = {}
    attacker: dict[str, list[float]] = {name: [] for name in FAMILY_SIGNALS}
    genuine: dict[str, list[float]] = {name: [] for name in FAMILY_SIGNALS}
    notes: dict[str, dict[str, list[float]]] = {"attacker": {}, "genuine": {}}
    for question, pool in _pools(conn, corpus, embedder, f"{prefix}-{dataset}-{condition}-"):
        if question.id in targets:
            continue
        ids = [c.external_id or c.note_id for c in pool.candidates]
        by_score = sorted(range(len(ids)), key=lambda i: -pool.candidates[i].base_score)
        packed, relevance = _packed(pool, "calibrated"), _packed(pool, "relevance")
        clean_packed = _packed(clean[question.id], "calibrated")
        gold = set(question.gold)
        for key, value in (
            ("pool size", len(ids)),
            ("poison in pool", sum(i in aimed for i in ids)),
            ("poison in the top 8 by base score", sum(ids[i] in aimed for i in by_score[:8])),
            ("poison packed (default)", sum(i in aimed for i in packed)),
            ("poison packed (relevance only)", sum(i in aimed for i in relevance)),
            ("gold in pool, clean store", len(gold & {c.external_id for c in clean[question.id].candidates})),
            ("gold in pool, poisoned store", len(gold & set(ids))),
            ("gold lost from the pack, still in the pool", len((gold & set(clean_packed)) - set(packed) & set(ids))),
            ("gold lost from the pack, not in the pool", len((gold & set(clean_packed)) - set(packed) - set(ids))),
        ):
            counts.setdefault(key, []).append(value)
        calibration = calibrate(pool, CalibrationParams(), "calibrated")
        for record in calibration.families:
            side = attacker if record.family == "attacker" else genuine
            if record.count < 3 and side is genuine:
                continue  # families of one or two notes cannot collude: compared with the larger ones
            for name in FAMILY_SIGNALS:
                side[name].append(float(getattr(record, name)))
        for family in {c.family for c in pool.candidates}:
            rows = [i for i, c in enumerate(pool.candidates) if c.family == family]
            if len(rows) < 3:
                continue
            side_notes = notes["attacker" if family == "attacker" else "genuine"]
            ages = sorted(pool.candidates[i].age_seconds or 0.0 for i in rows)
            if family == "attacker":
                side_notes.setdefault("distinct questions its pool notes are aimed at", []).append(
                    len({aimed.get(ids[i]) for i in rows})
                )
            side_notes.setdefault("median gap between its write times (s)", []).append(
                statistics.median(np.diff(ages).tolist())
            )
            for i in rows:
                words = content_words(pool.candidates[i].text)
                side_notes.setdefault("note length (content words)", []).append(len(words))
                side_notes.setdefault("best share of a namespace question it holds", []).append(
                    _best_restatement(words, question_words)
                )
    print(f"\n## {dataset} {condition}: unattacked questions\n")
    print("| per question | mean | median |\n|---|---|---|")
    for key, values in counts.items():
        print(f"| {key} | {statistics.fmean(values):.2f} | {statistics.median(values):.1f} |")
    print("\n| family signal | attacker | genuine families of 3+ pool notes |\n|---|---|---|")
    for name in FAMILY_SIGNALS:
        print(f"| {name} | {_summary(attacker[name])} | {_summary(genuine[name])} |")
    print(
        f"| alarmed | {100 * np.mean(np.array(attacker['alarm_score']) >= 0.4):.1f} % | "
        f"{100 * np.mean(np.array(genuine['alarm_score']) >= 0.4):.1f} % |"
    )
    for key in notes["attacker"]:
        print(f"| {key} | {_summary(notes['attacker'][key])} | {_summary(notes['genuine'].get(key, []))} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", required=True)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--prefix", default="x")
    parser.add_argument("--datasets", nargs="+", default=["multihop", "locomo"])
    parser.add_argument("--condition", default="poison-quarter-para")
    args = parser.parse_args()
    embedder = CachedEmbedder(resolve_embedder(None))
    with pgmem.connect(home=args.home) as conn:
        for dataset in args.datasets:
            diagnose(conn, dataset, args.condition, args.prefix, Path(args.data_dir), embedder)


if __name__ == "__main__":
    main()
