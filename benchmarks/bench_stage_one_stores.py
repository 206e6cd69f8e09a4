"""Stage one on two stores of the same notes, interleaved (a benchmark, not a test).

For a change of the stored layout rather than of the SQL (migration 0011 keeps the
embeddings in the notes' rows, ``toast_tuple_target``; rows written before it keep
theirs): build the same namespace twice, e.g. ``bench_scale.py --notes 3000`` under one
home with the old layout (or rewritten with ``ALTER TABLE pgmem.notes RESET
(toast_tuple_target); VACUUM FULL pgmem.notes``) and under another with the new one, then
run the current ``pgmem.stage_one_v1`` on both for each question, alternating which goes
first. Prints whether the rows are the same (note ids in order, every column within
1e-9; the namespace's and families' ages excepted), the TOAST size of each store's
notes, and p50 / p95 of both with their ratio.

    .venv/bin/python benchmarks/bench_stage_one_stores.py --home-a DIR --home-b DIR \
        [--namespace scale] [--questions 200] [--embedder hashing:384] [--exact-dense]

``--exact-dense`` times only the dense top-50 by exact scan (index scans off), the
statement stage one's planner picks for small namespaces.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_stage_one_ab import call, differences
from psycopg.rows import dict_row

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import get_embedder
from pgmem.eval.bench import real_sentences
from pgmem.retrieval.stage_one import stage_one_arguments

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = (
    "SELECT coalesce(c.reloptions::text, 'default') AS options, pg_relation_size(c.oid) AS heap,"
    " pg_relation_size(c.reltoastrelid) AS toast FROM pg_class AS c WHERE c.oid = 'pgmem.notes'::regclass"
)

EXACT_DENSE = (
    "SELECT n.note_id FROM pgmem.notes AS n WHERE n.namespace = %(namespace)s"
    " ORDER BY n.embedding::vector(384) <=> %(query_embedding)s::vector(384), n.note_id LIMIT 50"
)


def _built_alike(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows without the ages of namespace and families (the stores were built at different times)."""
    return [{k: v for k, v in row.items() if not k.endswith("_age_seconds")} for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--home-a", required=True)
    parser.add_argument("--home-b", required=True)
    parser.add_argument("--namespace", default="scale")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--embedder", default="hashing:384")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--exact-dense", action="store_true", help="time the exact dense top-50 only")
    args = parser.parse_args()
    embedder = get_embedder(args.embedder)
    questions = real_sentences(args.data)[1][: args.questions]
    statement = EXACT_DENSE if args.exact_dense else call("pgmem")
    with (
        pgmem.connect(home=args.home_a, migrate=False) as first,
        pgmem.connect(home=args.home_b, migrate=False) as second,
    ):
        stores = {"a": first, "b": second}
        times: dict[str, list[float]] = {"a": [], "b": []}
        for label, conn in stores.items():
            conn.row_factory = dict_row  # type: ignore[assignment]
            if args.exact_dense:
                conn.execute("SET enable_indexscan = off")
                conn.execute("SET enable_bitmapscan = off")
            layout = conn.execute(LAYOUT).fetchone()
            assert layout is not None
            print(
                f"store {label}: notes {layout['options']}, heap {layout['heap'] / 2**20:.1f} MiB,"
                f" TOAST {layout['toast'] / 2**20:.1f} MiB"
            )
        differing = 0
        for number, question in enumerate(questions):
            vector = embedder.embed([question])[0]
            arguments = stage_one_arguments(
                args.namespace, embedder.name, vector, question, build_hints(question), pgmem.StageOneParams()
            )
            rows = {}
            for label in ("a", "b") if number % 2 == 0 else ("b", "a"):
                started = time.perf_counter()
                rows[label] = stores[label].execute(statement, arguments).fetchall()
                times[label].append((time.perf_counter() - started) * 1000)
            found = differences(*(_built_alike(rows[label]) for label in ("a", "b")))
            if found:
                differing += 1
                print(f"{question!r}: {found[:3]}")
    p50 = {label: float(np.percentile(values, 50)) for label, values in times.items()}
    p95 = {label: float(np.percentile(values, 95)) for label, values in times.items()}
    print(f"{len(questions)} questions on {args.namespace!r}: {differing} with different rows")
    for label in times:
        print(f"  store {label} p50 {p50[label]:7.1f} ms   p95 {p95[label]:7.1f} ms")
    print(f"  a / b: p50 {p50['a'] / p50['b']:.2f}x, p95 {p95['a'] / p95['b']:.2f}x")


if __name__ == "__main__":
    main()
