"""Lexical stage one at scale: rare-term screening against exact BM25 (a benchmark).

Builds a namespace of N notes (default 300,000) from the shared data's real sentences
(LoCoMo turns, HotpotQA sentences, MultiHop-RAG facts) recombined into new sentences
(the first half of one, the second half of another, so the vocabulary and its skew are
real), with a tiny hashing embedder so the dense side costs nothing. Then, for LoCoMo
questions, it compares the lexical top-50 of stage one as shipped (screening by the
rarest terms, `lex_max_postings` 20,000) with exact BM25 over every matching note
(screening unbounded), and prints the overlap (recall of the exact top-50) and the
latency of both.

    .venv/bin/python benchmarks/bench_lexical.py [--notes 300000] [--questions 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.eval.bench import real_sentences, recombined
from pgmem.retrieval.stage_one import Hints, run_stage_one, stage_one_arguments

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


# The store's text and the questions: shared with `pgmem bench`.
synthetic = recombined


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=300_000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--dsn")
    parser.add_argument("--postings", default="2000,5000,20000", help="lex_max_postings values to compare")
    args = parser.parse_args()
    if args.dsn is None and "PGMEM_HOME" not in os.environ:
        os.environ["PGMEM_HOME"] = tempfile.mkdtemp(prefix="pgmem-lexical-")
    embedder = HashingEmbedder(dimension=8)
    sentences, questions = real_sentences(args.data)
    texts = synthetic(sentences, args.notes)
    with pgmem.connect(args.dsn, migrate=True) as conn:
        started = time.perf_counter()
        present = conn.execute("SELECT note_count FROM pgmem.namespaces WHERE namespace = 'lexical'").fetchone()
        # Re-running against the same PGMEM_HOME reuses the store (ingest is idempotent anyway).
        for first in range(0, len(texts) if not present or present[0] < len(texts) else 0, 10_000):
            spans = [
                pgmem.Span(document_id=f"doc-{i}", text=t, start=0, end=len(t.encode("utf-8")), family=f"f{i % 50}")
                for i, t in enumerate(texts[first : first + 10_000], start=first)
            ]
            pgmem.ingest(conn, spans, namespace="lexical", embedder=embedder)
        print(f"{len(texts)} notes ingested in {time.perf_counter() - started:.0f} s")
        conn.execute("VACUUM ANALYZE pgmem.notes")

        asked = questions[: args.questions]
        settings = {
            f"postings {p}": pgmem.StageOneParams(k_dense=1, k_lex=50, lex_max_postings=int(p))
            for p in args.postings.split(",")
        }
        settings["exact"] = pgmem.StageOneParams(k_dense=1, k_lex=50, lex_max_terms=64, lex_max_postings=10**12)
        overlaps: dict[str, list[float]] = {label: [] for label in settings}
        times: dict[str, list[float]] = {label: [] for label in settings}
        for question in asked * 2:  # the first pass warms the cache; both passes are timed
            vector = embedder.embed([question])[0]
            results = {}
            for label, params in settings.items():
                tick = time.perf_counter()
                pool = run_stage_one(
                    conn, stage_one_arguments("lexical", embedder.name, vector, question, Hints(), params)
                )
                times[label].append((time.perf_counter() - tick) * 1000)
                ranked = sorted(pool.candidates, key=lambda c: (-c.lexical_score, c.note_id))
                results[label] = {c.note_id for c in ranked[:50] if c.lexical_score > 0}
            if results["exact"]:
                for label in settings:
                    overlaps[label].append(len(results[label] & results["exact"]) / len(results["exact"]))
    print(f"{len(asked)} LoCoMo questions (asked twice), lexical top-50, k_dense 1:")
    for label, values in times.items():
        ordered = sorted(values)
        print(
            f"  {label:<16} recall of exact top-50 {100 * statistics.fmean(overlaps[label]):5.1f} %"
            f"   stage one median {statistics.median(values):7.1f} ms"
            f"  p95 {ordered[round(0.95 * (len(ordered) - 1))]:7.1f} ms"
        )


if __name__ == "__main__":
    main()
