"""Measure other dense / lexical fusions on the shared data, from one stage-one pool per question.

    .venv/bin/python tools/sweep_fusion.py locomo multihop hotpotqa --data-dir ../shared/data \
        [--home DIR | --dsn DSN] [--embedder minilm] [--choose-on locomo] [--out fusion.json]

For every answerable question stage one runs once (DESIGN defaults, hints derived from
the question, as ``pgmem eval``); every fusion is then re-scored from the pool's
components (:mod:`pgmem.eval.fusion`: the pool holds the dense and lexical top-k and
their neighbours whatever the weights) and packed in the default ``calibrated`` mode at
budget 8. Measured, overall and per category:

* the fixed linear mix, lexical share 0 to 1 (stage one's default is 0.3), and the
  per-question oracle over those mixes (the headroom of any per-query choice);
* normalised fusions (z-score, min-max, rank) at lexical shares 0.3 / 0.5 / 0.7;
* the link weight (0 / 0.1 / 0.2 against the default 0.3) at lexical shares 0.3 / 0.5 / 0.7;
* per-query rules ``signal > t ? share_hi : share_lo`` over the pool signals of
  :func:`pgmem.eval.fusion.pool_signals`, then also over the question's terms (share
  found in the namespace, largest and mean idf: stage one computes them but does not
  return them, so they are read here by a query of ``pgmem.lexeme_stats``): the best
  rule is chosen on ``--choose-on`` alone and reported on every dataset (transfer), with
  the best worst-case rule over all datasets (chosen in-sample, an upper bound);
* the time re-scoring takes against the calibrate-and-pack step it precedes.

The corpora are ingested idempotently under the ``eval-`` prefix, so a store built by
``pgmem eval`` is reused.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from pgmem.db.connection import connect
from pgmem.embeddings import get_embedder
from pgmem.eval.datasets import load_dataset
from pgmem.eval.fusion import Components, base_scores, components, pool_signals, relevance, rescored
from pgmem.eval.runner import answerable_pools
from pgmem.params import StageOneParams
from pgmem.retrieval.pipeline import finish_pack
from pgmem.retrieval.words import PoolWords

SHARES = tuple(round(0.1 * i, 1) for i in range(11))
DEFAULT = StageOneParams()
NORMALISED = ("zscore", "minmax", "rank")
LINK_WEIGHTS = (0.0, 0.1, 0.2)
THRESHOLD_PERCENTILES = tuple(range(5, 100, 5))

Fusion = Callable[[Components], np.ndarray]

#: The question's lexemes and, for those in the namespace, their document frequency: what
#: stage one's first step computes and does not return (read here for the analysis only).
QUERY_TERMS = """
SELECT (SELECT count(DISTINCT u.lexeme) FROM unnest(to_tsvector('english', %(question)s)) AS u) AS query_terms,
       n.note_count, coalesce(array_agg(s.document_frequency) FILTER (WHERE s.lexeme IS NOT NULL), '{}') AS df
FROM pgmem.namespaces AS n
LEFT JOIN pgmem.lexeme_stats AS s ON s.namespace = n.namespace AND s.document_frequency > 0
  AND s.lexeme IN (SELECT u.lexeme FROM unnest(to_tsvector('english', %(question)s)) AS u)
WHERE n.namespace = %(namespace)s
GROUP BY n.note_count
"""


def term_signals(conn: Any, question: str, namespace: str) -> dict[str, float]:
    """How many of the question's terms the namespace holds and how rare they are: stage
    one's BM25 idf of each, divided by ln(1 + N) so namespaces of N notes compare."""
    row = conn.execute(QUERY_TERMS, {"question": question, "namespace": namespace}).fetchone()
    if row is None or not row[0]:
        return {"terms_matched": 0.0, "terms_max_idf": 0.0, "terms_mean_idf": 0.0}
    query_terms, notes, frequencies = row[0], float(row[1]), np.array(row[2], dtype=np.float64)
    idf = np.log(1 + (notes - frequencies + 0.5) / (frequencies + 0.5)) / np.log(1 + max(notes, 1.0))
    return {
        "terms_matched": len(frequencies) / query_terms,
        "terms_max_idf": float(idf.max()) if len(idf) else 0.0,
        "terms_mean_idf": float(idf.mean()) if len(idf) else 0.0,
    }


@contextlib.contextmanager
def memoised_duplicates() -> Iterator[None]:
    """Within: the family alarm's near-duplicate Jaccards, which depend on the pool's
    texts, documents and families only and not on the scores, are computed once per pool
    instead of once per fusion (the sweep's dominant cost on a 2-core machine; no result
    changes). Timings are taken outside, with the read path's own code."""
    compute = PoolWords.nearest_duplicates
    cache: dict[tuple[Any, ...], Any] = {}

    def memoised(
        words: PoolWords, documents: Sequence[str], rows: Any = None, families: Sequence[str] | None = None
    ) -> Any:
        key = (
            tuple(words._texts),
            tuple(documents),
            None if rows is None else tuple(np.asarray(rows).tolist()),
            None if families is None else tuple(families),
        )
        if key not in cache:
            cache[key] = compute(words, documents, rows, families)
        return cache[key]

    PoolWords.nearest_duplicates = memoised  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        PoolWords.nearest_duplicates = compute  # type: ignore[method-assign]


def _fusions() -> dict[str, tuple[Fusion, float]]:
    """Name -> (relevance of the components, link weight)."""
    fusions: dict[str, tuple[Fusion, float]] = {}
    for share in SHARES:
        fusions[f"linear {share}"] = (partial(relevance, lexical_share=share), DEFAULT.link_weight)
    for method, share in itertools.product(NORMALISED, (0.3, 0.5, 0.7)):
        fusions[f"{method} {share}"] = (partial(relevance, lexical_share=share, method=method), DEFAULT.link_weight)
    for share, weight in itertools.product((0.3, 0.5, 0.7), LINK_WEIGHTS):
        fusions[f"linear {share}, link {weight}"] = (partial(relevance, lexical_share=share), weight)
    return fusions


def collect(conn: Any, name: str, data_dir: Path, embedder: Any) -> dict[str, Any]:
    questions, requests, pools = answerable_pools(conn, load_dataset(name, data_dir), embedder)
    parts = [components(pool, DEFAULT) for pool in pools]
    recalls: dict[str, list[float]] = {}
    with memoised_duplicates():
        for label, (fuse, link_weight) in _fusions().items():
            row = []
            for question, request, pool, part in zip(questions, requests, pools, parts, strict=True):
                pool_now = rescored(pool, base_scores(part, fuse(part), link_weight))
                items = finish_pack(request, pool_now).items
                packed = {item.external_id or item.note_id for item in items}
                row.append(len(set(question.gold) & packed) / len(set(question.gold)))
            recalls[label] = row
            print(f"{name}: {label} {100 * np.mean(row):.2f}", file=sys.stderr, flush=True)
    timings = _timings(requests, pools)
    return {
        "dataset": name,
        "categories": [q.category for q in questions],
        "recalls": recalls,
        "signals": [
            {**pool_signals(part), **term_signals(conn, request.question, request.namespace)}
            for request, part in zip(requests, parts, strict=True)
        ],
        "unmatched_links": sum(part.unmatched for part in parts),
        "linked": sum(int((part.partner >= 0).sum()) for part in parts),
        "pool_sizes": [pool.size for pool in pools],
        "timings_ms": timings,
    }


def _timings(requests: list[Any], pools: list[Any]) -> dict[str, float]:
    """Median milliseconds per pool of each re-scoring step and of finish_pack (the read
    path's calibrate and pack, alarm included), interleaved pool by pool so every step
    sees the same machine load."""
    steps: dict[str, list[float]] = {"read_parts": [], "fuse": [], "rebuild_pool": [], "finish_pack": []}
    for request, pool in zip(requests, pools, strict=True):
        ticks = [time.perf_counter()]
        part = components(pool, DEFAULT)
        ticks.append(time.perf_counter())
        base = base_scores(part, relevance(part, 0.5), DEFAULT.link_weight)
        ticks.append(time.perf_counter())
        pool_now = rescored(pool, base)
        ticks.append(time.perf_counter())
        finish_pack(request, pool_now)
        ticks.append(time.perf_counter())
        for step, (start, end) in zip(steps, itertools.pairwise(ticks), strict=True):
            steps[step].append(1000 * (end - start))
    return {step: round(float(np.median(values)), 4) for step, values in steps.items()}


def _percent(values: Any) -> float:
    return round(100 * float(np.mean(values)), 1)


def _by_category(result: dict[str, Any], values: np.ndarray) -> dict[str, float]:
    categories = np.array(result["categories"])
    return {c: _percent(values[categories == c]) for c in sorted(set(result["categories"]))}


def _rule_recall(result: dict[str, Any], signal: str, threshold: float, low: float, high: float) -> np.ndarray:
    values = np.array([s.get(signal, 0.0) for s in result["signals"]])
    low_row = np.array(result["recalls"][f"linear {low}"])
    high_row = np.array(result["recalls"][f"linear {high}"])
    return np.where(values > threshold, high_row, low_row)


def _interval(differences: np.ndarray, resamples: int = 2000) -> list[float]:
    """95 % paired percentile-bootstrap interval of a mean recall gain, in points (seed 0)."""
    rng = np.random.default_rng(0)
    means = [differences[rng.integers(0, len(differences), len(differences))].mean() for _ in range(resamples)]
    return [round(100 * float(v), 2) for v in np.percentile(means, [2.5, 97.5])]


def rules(results: list[dict[str, Any]], choose_on: str, with_terms: bool) -> dict[str, Any]:
    """The best per-query rule chosen on ``choose_on`` alone, and the best worst case, over
    the pool's signals (``with_terms``: and the query-term signals stage one does not return)."""
    chosen = next(r for r in results if r["dataset"] == choose_on)
    base = {r["dataset"]: np.array(r["recalls"]["linear 0.3"]) for r in results}
    candidates = []
    for signal in sorted(k for k in chosen["signals"][0] if with_terms or not k.startswith("terms_")):
        values = np.array([s[signal] for s in chosen["signals"]])
        for threshold in sorted(set(np.percentile(values, THRESHOLD_PERCENTILES).round(4).tolist())):
            for low, high in itertools.permutations(SHARES, 2):
                gains = {}
                for r in results:
                    rule = _rule_recall(r, signal, threshold, low, high)
                    gains[r["dataset"]] = 100 * float((rule - base[r["dataset"]]).mean())
                candidates.append(((signal, threshold, low, high), gains))
    best = max(candidates, key=lambda c: c[1][choose_on])
    worst_case = max(candidates, key=lambda c: min(c[1].values()))

    def describe(entry: tuple[tuple[str, float, float, float], dict[str, float]]) -> dict[str, Any]:
        (signal, threshold, low, high), gains = entry
        return {
            "rule": f"{signal} > {threshold:g} ? {high} : {low}",
            "gain": {name: round(gain, 2) for name, gain in gains.items()},
            "interval": {
                r["dataset"]: _interval(_rule_recall(r, signal, threshold, low, high) - base[r["dataset"]])
                for r in results
            },
            "by_category": {
                r["dataset"]: _by_category(r, _rule_recall(r, signal, threshold, low, high)) for r in results
            },
        }

    return {
        "signals": "pool and query terms" if with_terms else "pool",
        "chosen_on": choose_on,
        "rules_tried": len(candidates),
        "best": describe(best),
        "worst_case": describe(worst_case),
    }


def render(results: list[dict[str, Any]], choices: list[dict[str, Any]]) -> str:
    lines = []
    for result in results:
        categories = sorted(set(result["categories"]))
        lines += [
            f"## {result['dataset']} ({len(result['categories'])} questions; links re-scored {result['linked']},"
            f" unmatched {result['unmatched_links']}; median pool {int(np.median(result['pool_sizes']))};"
            f" median ms per pool: {result['timings_ms']})",
            "",
            "| fusion | recall | " + " | ".join(categories) + " |",
            "|---|---|" + "---|" * len(categories),
        ]
        rows = {label: np.array(values) for label, values in result["recalls"].items()}
        oracle = np.max([rows[f"linear {share}"] for share in SHARES], axis=0)
        for label, values in [*rows.items(), ("oracle over linear 0..1", oracle)]:
            cells = _by_category(result, values)
            lines.append(f"| {label} | {_percent(values)} | " + " | ".join(f"{cells[c]}" for c in categories) + " |")
        lines.append("")
    for chosen, kind in itertools.product(choices, ("best", "worst_case")):
        entry = chosen[kind]
        title = f"chosen on {chosen['chosen_on']}" if kind == "best" else "best worst case over all (in-sample)"
        title += f", {chosen['signals']} signals"
        lines.append(
            f"* rule {title} ({chosen['rules_tried']} tried): `{entry['rule']}` — gain {entry['gain']}"
            f" (95 % intervals {entry['interval']});"
            f" by category {entry['by_category']}"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--dsn")
    parser.add_argument("--home")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--choose-on", default="locomo")
    parser.add_argument("--out", default="fusion.json")
    parser.add_argument("--from-json", help="re-render (and re-choose rules) from an earlier --out file")
    args = parser.parse_args(argv)
    if args.choose_on not in args.datasets:
        parser.error(f"--choose-on {args.choose_on} is not among the datasets")
    if args.from_json:
        stored = json.loads(Path(args.from_json).read_text(encoding="utf-8"))["results"]
        results = [r for name in args.datasets for r in stored if r["dataset"] == name]
    else:
        embedder = get_embedder(args.embedder)
        with connect(args.dsn, home=args.home, migrate=True) as conn:
            results = [collect(conn, name, Path(args.data_dir), embedder) for name in args.datasets]
        Path(args.out).write_text(json.dumps({"results": results}) + "\n", encoding="utf-8")
    choices = [rules(results, args.choose_on, with_terms) for with_terms in (False, True)]
    print(render(results, choices), flush=True)
    Path(args.out).write_text(json.dumps({"results": results, "rules": choices}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
