"""The client's CPU per pack through the real pipeline, two pgmem trees in one process, alternated.

Ingests the LoCoMo conversations of ``bench_finish.py`` (hashing embedder, one namespace per
conversation, families by session) into a private embedded store with tree A, then packs
their questions with each tree's own pipeline pieces on the same connection, in blocks
alternated A B, B A, ...: ``prepare_pack`` and ``embed_question`` (not timed), then
``fetch_pool`` (the stage-one statement: psycopg's send, wait and fetch, and the rows
turned into a pool) and ``finish_pack`` (calibrate, alarm, pack, diagnostics), each timed
in this process's CPU (``time.process_time``: the server's work is another process's).
Prints each tree's median CPU per pack of both steps and the per-block ratios B/A::

    PGMEM_HOME=/tmp/NAME-store python benchmarks/bench_pack_client_ab.py BEFORE AFTER --blocks 16 --calls 50

Both trees must share the schema (no migration between them).
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

from_here = Path(__file__).parent


def tree_pipeline(tree: str) -> Any:
    """``tree``'s pipeline module (fresh modules: what load_tree leaves imported)."""
    load_tree(tree, 1, True, False)
    return sys.modules["pgmem.retrieval.pipeline"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, help="tree A (before) and tree B (after)")
    parser.add_argument("--blocks", type=int, default=16, help="blocks per tree (16)")
    parser.add_argument("--calls", type=int, default=50, help="packs per block (50)")
    parser.add_argument("--questions", type=int, default=200, help="distinct questions (200)")
    args = parser.parse_args()
    if "PGMEM_HOME" not in os.environ:
        raise SystemExit("set PGMEM_HOME to a private store directory")
    sys.path.insert(0, str(from_here))
    trees = [str(Path(tree).resolve()) for tree in args.trees]
    pipelines = [tree_pipeline(tree) for tree in trees]
    pgmem = sys.modules["pgmem"]  # tree B's, the last imported: connect and ingest
    embedder = sys.modules["pgmem.embeddings"].HashingEmbedder()
    bench = sys.modules["bench_finish"]
    corpus = bench.load_locomo(bench.LOCOMO)
    conn = pgmem.connect()
    for namespace, spans in corpus.spans.items():
        if conn.execute("SELECT count(*) FROM pgmem.notes WHERE namespace = %s", (namespace,)).fetchone()[0] == 0:
            pgmem.ingest(conn, spans, namespace=namespace, embedder=embedder)
    conn.execute("ANALYZE")
    questions = [(q.namespace, q.question) for q in corpus.questions][: args.questions]
    requests = [
        [
            pipeline.embed_question(pipeline.prepare_pack(question, namespace=namespace, embedder=embedder))
            for namespace, question in questions
        ]
        for pipeline in pipelines
    ]
    fetch: list[list[float]] = [[], []]
    finish: list[list[float]] = [[], []]
    sizes: list[int] = []
    for block in range(args.blocks):
        for which in (0, 1) if block % 2 == 0 else (1, 0):
            pipeline = pipelines[which]
            fetched = finished = 0.0
            for i in range(args.calls):
                request = requests[which][(block * args.calls + i) % len(questions)]
                started = time.process_time()
                pool = pipeline.fetch_pool(conn, request)
                middle = time.process_time()
                pipeline.finish_pack(request, pool)
                finished += time.process_time() - middle
                fetched += middle - started
                sizes.append(pool.size)
            fetch[which].append(fetched / args.calls * 1000)
            finish[which].append(finished / args.calls * 1000)
    print(
        f"load average {os.getloadavg()[0]:.1f}; {len(questions)} LoCoMo questions, pools of"
        f" {statistics.median(sizes):.0f} rows (median); {args.blocks} x {args.calls} packs per tree, alternated"
    )
    for step, times in (("fetch_pool", fetch), ("finish_pack", finish)):
        ratios = [b / a for a, b in zip(*times, strict=True)]
        quartiles = statistics.quantiles(ratios, n=4)
        before, after = (statistics.median(values) for values in times)
        print(
            f"  {step}: CPU per pack median A {before:.3f} ms, B {after:.3f} ms; B/A per block median"
            f" {statistics.median(ratios):.3f}, quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}"
        )


if __name__ == "__main__":
    main()
