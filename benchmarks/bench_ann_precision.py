"""The HNSW index in single (``vector``) and half (``halfvec``) precision, side by side.

Loads N recombined notes' composed MiniLM vectors (``benchmarks/embed_corpus.py --halves``
folder) into a bare table of the embedded server, builds pgvector's HNSW index on the
column as it is and on its ``halfvec`` cast (each with the same ``maintenance_work_mem``,
a checkpoint before each), then times the top 50 of the first ``--questions`` LoCoMo
questions (MiniLM query vectors) through each index at every ``--ef-search``, iterative
scan on, the two interleaved per breadth, and the share of the exact top 50 (numpy, float32;
ties at the 50th place, duplicate recombined texts, broken arbitrarily)
each returns. Prints build seconds, index sizes, p50 / p95 client milliseconds and recall.

    PYTHONPATH=.:benchmarks python benchmarks/bench_ann_precision.py --notes 1000000 \\
        --halves /tmp/halves --home /tmp/ann-1m [--ef-search 40,100,200,400] [--rounds 2]

The table is kept under --home: a second run reuses it (and its vectors) and rebuilds the
indexes only with --rebuild.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench_lexical import DATA, real_sentences
from embed_corpus import composed
from soak import machine

import pgmem
from pgmem.db.vectors import vector_binary_dumper, vector_literal
from pgmem.embeddings.minilm import DIMENSION, MiniLMEmbedder

K = 50
INDEXES = {
    "vector": ("(v vector_cosine_ops)", "v <=> %s::vector"),
    "halfvec": (
        f"((v::halfvec({DIMENSION})) halfvec_cosine_ops)",
        f"v::halfvec({DIMENSION}) <=> %s::vector::halfvec({DIMENSION})",
    ),
}


def load(conn: psycopg.Connection[Any], vectors: np.ndarray) -> None:
    """The table ``ann_bench`` (id, v) holding ``vectors``, written by one binary COPY."""
    oid = conn.execute("SELECT 'vector'::regtype::oid").fetchone()[0]
    conn.execute(f"CREATE TABLE ann_bench (id integer PRIMARY KEY, v vector({DIMENSION}))")
    started = time.perf_counter()
    with conn.cursor() as cur:
        cur.adapters.register_dumper(np.ndarray, vector_binary_dumper(oid))
        with cur.copy("COPY ann_bench (id, v) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int4", oid])
            for i, vector in enumerate(vectors):
                copy.write_row((i, vector))
    conn.execute("VACUUM ANALYZE ann_bench")
    print(f"loaded {len(vectors):,} vectors in {time.perf_counter() - started:.1f} s", flush=True)


def build(conn: psycopg.Connection[Any], memory: str) -> None:
    """Both indexes, rebuilt one after the other under ``maintenance_work_mem`` = memory."""
    conn.execute(f"SET maintenance_work_mem = '{memory}'")
    for kind, (expression, _order) in INDEXES.items():
        conn.execute(f"DROP INDEX IF EXISTS ann_bench_{kind}")
        conn.execute("CHECKPOINT")
        started = time.perf_counter()
        conn.execute(f"CREATE INDEX ann_bench_{kind} ON ann_bench USING hnsw {expression}")
        seconds = time.perf_counter() - started
        size = conn.execute(f"SELECT pg_relation_size('ann_bench_{kind}')").fetchone()[0]
        print(f"{kind}: built in {seconds:.1f} s, {size / 2**20:,.0f} MiB", flush=True)


def search(
    conn: psycopg.Connection[Any], queries: np.ndarray, exact: list[set[int]], breadths: list[int], rounds: int
) -> None:
    """p50 / p95 and recall@50 of each index at each breadth, interleaved per breadth."""
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    literals = [vector_literal(q) for q in queries]
    for round_ in range(rounds):
        for ef in breadths:
            conn.execute(f"SET hnsw.ef_search = {ef}")
            for kind, (_expression, order) in INDEXES.items():
                times, recall = [], []
                for literal, truth in zip(literals, exact, strict=True):
                    tick = time.perf_counter()
                    rows = conn.execute(f"SELECT id FROM ann_bench ORDER BY {order} LIMIT {K}", (literal,)).fetchall()
                    times.append((time.perf_counter() - tick) * 1000)
                    recall.append(len(truth & {row[0] for row in rows}) / K)
                print(
                    f"round {round_} ef_search {ef:4d} {kind:8s} p50 {np.percentile(times, 50):6.2f}"
                    f" p95 {np.percentile(times, 95):6.2f} ms  recall@{K} {np.mean(recall):.4f}",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=1_000_000)
    parser.add_argument("--halves", type=Path, required=True, help="embed_corpus.py --halves output folder")
    parser.add_argument("--home", required=True, help="embedded server folder (the table is kept there)")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--ef-search", type=lambda t: [int(v) for v in t.split(",")], default=[40, 100, 200, 400])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--maintenance-work-mem", default="4GB", help="for both builds (default 4GB)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the indexes of a kept table")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    os.environ["PGMEM_HOME"] = args.home
    print(machine(), flush=True)
    sentences, questions = real_sentences(args.data)
    vectors = composed(args.halves, sentences, args.notes)
    queries = MiniLMEmbedder(intra_op_num_threads=1).embed(questions[: args.questions])
    exact = [set(np.argpartition(-(vectors @ q), K)[:K].tolist()) for q in queries]
    with pgmem.connect(None, migrate=True) as conn:
        fresh = conn.execute("SELECT to_regclass('ann_bench') IS NULL").fetchone()[0]
        if fresh:
            load(conn, vectors)
        if fresh or args.rebuild:
            build(conn, args.maintenance_work_mem)
        search(conn, queries, exact, args.ef_search, args.rounds)


if __name__ == "__main__":
    main()
