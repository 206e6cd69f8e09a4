"""Latency of pgmem.pack() on the demo corpus (a benchmark, not a test).

Ingests the shipped MultiHop-RAG demo corpus (438 facts) into the embedded server (or
--dsn), then times N pack() calls over distinct questions and prints the median and
p95 of the whole call and of each stage, plus the statements per pack. The tables are
analyzed after the load (what autovacuum does within a minute) unless --fresh-statistics.

    .venv/bin/python benchmarks/bench_pack.py [--calls 50] [--dsn DSN] [--embedder minilm]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

import pgmem
from pgmem.demo import NAMESPACE, load_corpus
from pgmem.embeddings import get_embedder


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--dsn")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--fresh-statistics", action="store_true", help="pack right after the load, before any ANALYZE")
    args = parser.parse_args()
    if args.dsn is None and "PGMEM_HOME" not in os.environ:
        os.environ["PGMEM_HOME"] = tempfile.mkdtemp(prefix="pgmem-bench-")

    model = get_embedder(args.embedder)
    spans, questions = load_corpus()
    with pgmem.connect(args.dsn, migrate=True) as conn:
        started = time.perf_counter()
        pgmem.ingest(conn, spans, namespace=NAMESPACE, embedder=model)
        ingest_s = time.perf_counter() - started
        if not args.fresh_statistics:
            # Steady state: autovacuum analyzes a freshly loaded table within about a
            # minute; until then the planner guesses row counts (--fresh-statistics).
            conn.execute("ANALYZE pgmem.notes, pgmem.lexeme_stats, pgmem.lexeme_postings")
        asked = [q.question for q in questions][: args.calls]
        pgmem.pack(conn, asked[0], namespace=NAMESPACE, embedder=model)  # warm caches and the model
        totals: list[float] = []
        stages: dict[str, list[float]] = {}
        for question in asked:
            tick = time.perf_counter()
            evidence = pgmem.pack(conn, question, namespace=NAMESPACE, embedder=model)
            totals.append((time.perf_counter() - tick) * 1000)
            for stage, ms in evidence.diagnostics.timings_ms.items():
                stages.setdefault(stage, []).append(ms)

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}"
    )
    print(f"corpus: {len(spans)} notes ingested in {ingest_s:.1f} s with {model.name}")
    print(f"pack() over {len(totals)} distinct questions, budget 8, mode calibrated:")
    print(f"  whole call   median {statistics.median(totals):6.1f} ms   p95 {percentile(totals, 0.95):6.1f} ms")
    for stage, values in stages.items():
        print(f"  {stage:<12} median {statistics.median(values):6.1f} ms   p95 {percentile(values, 0.95):6.1f} ms")


if __name__ == "__main__":
    main()
