"""pool_from_rows (stage one's rows -> Pool) of two pgmem trees in one process, blocks alternated.

Stage one's rows arrive as dicts (pgmem reads them through ``dict_row``, by name); each
128-row LoCoMo pool of ``bench_finish.py`` is written out as the rows the ``stage_one``
statement returns for it (the note id as text, floats, the word hashes) and turned back
into a :class:`~pgmem.retrieval.pool.Pool` by each tree's ``pool_from_rows``, in blocks of
``--calls`` calls alternated A B, B A, ...; it prints each tree's median CPU per pool and the
per-block ratio B/A::

    python benchmarks/bench_pool_rows.py /path/to/before /path/to/after --blocks 24 --calls 100 [--tuples]

``--tuples`` starts from the rows as psycopg's binary fetch hands them to a row factory
(tuples, the statement's column names apart) and counts what each tree's stage one does
with them: a tree with ``pool_from_tuples`` reads the tuples by column name; an older one
makes each row a dict first, as ``dict_row`` does inside ``fetchall``, then
``pool_from_rows``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench_finish_ab import load_tree


def stage_one_rows(pool: Any) -> list[dict[str, Any]]:
    """``pool`` as the rows of the ``stage_one`` statement (column name -> value)."""
    families = {aggregate.family: aggregate for aggregate in pool.families}
    rows = []
    for candidate in pool.candidates:
        family = families[candidate.family]
        rows.append(
            {
                "note_id": candidate.note_id,
                "external_id": candidate.external_id,
                "document_id": candidate.document_id,
                "span_start": candidate.span_start,
                "span_end": candidate.span_end,
                "text": candidate.text,
                "context": candidate.context,
                "family": candidate.family,
                "role": candidate.role,
                "confidence": candidate.confidence,
                "source_ts": candidate.source_ts,
                "dense_score": candidate.dense_score,
                "lexical_score": candidate.lexical_score,
                "facet_boost": candidate.facet_boost,
                "link_boost": candidate.link_boost,
                "base_score": candidate.base_score,
                "pool_size": pool.size,
                "pool_mean": pool.mean,
                "pool_variance": pool.variance,
                "pool_entropy": pool.entropy,
                "family_count": family.count,
                "family_score_sum": family.score_sum,
                "family_mean_confidence": family.mean_confidence,
                "boost_entity": candidate.entity_boost,
                "boost_time": candidate.time_boost,
                "boost_keyword": candidate.keyword_boost,
                "boost_handle": candidate.handle_boost,
                "created_at": None,
                "word_hashes": candidate.word_hashes,
                "note_age_seconds": 3_600.0,
                "family_bound": family.bound,
                "family_feedback_helpful": family.feedback_helpful,
                "family_feedback_unhelpful": family.feedback_unhelpful,
                "namespace_feedback_helpful": pool.feedback_helpful,
                "namespace_feedback_unhelpful": pool.feedback_unhelpful,
                "family_namespace_count": family.namespace_count,
                "family_age_seconds": 86_400.0,
                "namespace_note_count": pool.namespace_notes,
                "namespace_age_seconds": 864_000.0,
            }
        )
    return rows


def from_tuples_as_dicts(pool_from_rows: Any) -> Any:
    """``pool_from_rows`` of tuples made dicts first, as psycopg's ``dict_row`` makes them."""

    def convert(columns: list[str], rows: list[tuple[Any, ...]], *, query: str) -> Any:
        return pool_from_rows([dict(zip(columns, values, strict=False)) for values in rows], query=query)  # as dict_row

    return convert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, help="tree A (before) and tree B (after)")
    parser.add_argument("--blocks", type=int, default=24, help="blocks per tree (24)")
    parser.add_argument("--calls", type=int, default=100, help="pool_from_rows calls per block (100)")
    parser.add_argument("--pools", type=int, default=40, help="distinct LoCoMo pools (40)")
    parser.add_argument("--tuples", action="store_true", help="from psycopg's tuples (dict_row's work counted)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    setups = []
    for tree in args.trees:
        _, _, pools, _ = load_tree(str(Path(tree).resolve()), args.pools, True, False)
        stage_one = sys.modules["pgmem.retrieval.stage_one"]  # the tree just imported
        inputs = [(stage_one_rows(pool), pool.query) for pool in pools]
        if args.tuples:
            inputs = [((list(rows[0]), [tuple(row.values()) for row in rows]), query) for rows, query in inputs]
            convert = getattr(stage_one, "pool_from_tuples", None) or from_tuples_as_dicts(stage_one.pool_from_rows)
            setups.append((lambda rows, query, convert=convert: convert(*rows, query=query), inputs))
        else:
            setups.append((stage_one.pool_from_rows, inputs))
    times: list[list[float]] = [[], []]
    for block in range(args.blocks):
        for which in (0, 1) if block % 2 == 0 else (1, 0):
            pool_from_rows, inputs = setups[which]
            picks = [inputs[(block * args.calls + i) % len(inputs)] for i in range(args.calls)]
            started = time.process_time()
            for rows, query in picks:
                pool_from_rows(rows, query=query)
            times[which].append((time.process_time() - started) / args.calls * 1e6)
    before, after = times
    ratios = [b / a for a, b in zip(before, after, strict=True)]
    quartiles = statistics.quantiles(ratios, n=4)
    source = "psycopg's tuples" if args.tuples else "dict rows"
    print(
        f"load average {os.getloadavg()[0]:.1f}; {source}; {args.blocks} x {args.calls} pools of 128 rows per tree,"
        " alternated"
    )
    for label, tree, values in (("A", args.trees[0], before), ("B", args.trees[1], after)):
        print(f"  {label} {tree}: CPU per pool median {statistics.median(values):.1f} us, min {min(values):.1f} us")
    print(f"  B/A per block: median {statistics.median(ratios):.3f}, quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}")


if __name__ == "__main__":
    main()
