"""Ingest and re-ingest throughput of the write path (a benchmark, not a test).

Ingests --notes synthetic notes (20 per document, a version-like handle each) in
batches of --batch into a fresh embedded store (or --dsn) with the hashing embedder, so
what is timed is pgmem's enrichment and the database's share; then re-ingests the first
batch unchanged (every span is looked up and compared with what is stored). Run it
against two checkouts to compare them (``PYTHONPATH=<checkout>``).

    .venv/bin/python benchmarks/bench_ingest_checks.py [--notes 20000] [--batch 1000] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import tempfile
import time

import pgmem
from pgmem.embeddings import HashingEmbedder

WORDS = "alpha beta gamma delta widget pipeline release build server client ticket invoice payment refund order"


def spans(notes: int) -> list[pgmem.Span]:
    rng = random.Random(3)
    words = WORDS.split()
    out = []
    for i in range(notes):
        text = f"Note {i}: " + " ".join(rng.choices(words, k=14)) + f" v{i % 97}.{i % 13}.1 code{i}"
        start = (i % 20) * 1000
        out.append(
            pgmem.Span(
                document_id=f"doc{i // 20}",
                text=text,
                start=start,
                end=start + len(text.encode()),
                family=f"f{i % 11}",
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--dsn")
    args = parser.parse_args()
    if args.dsn is None and "PGMEM_HOME" not in os.environ:
        os.environ["PGMEM_HOME"] = tempfile.mkdtemp(prefix="pgmem-bench-")
    batch = spans(args.notes)
    embedder = HashingEmbedder()
    rates = []
    with pgmem.connect(args.dsn, migrate=True) as conn:
        started = time.perf_counter()
        for first in range(0, args.notes, args.batch):
            t0 = time.perf_counter()
            pgmem.ingest(conn, batch[first : first + args.batch], embedder=embedder, namespace="bench-ingest")
            rates.append(len(batch[first : first + args.batch]) / (time.perf_counter() - t0))
        total = time.perf_counter() - started
        t0 = time.perf_counter()
        again = pgmem.ingest(conn, batch[: args.batch], embedder=embedder, namespace="bench-ingest")
        reingest_ms = (time.perf_counter() - t0) * 1000
    assert again.inserted == 0
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"ingest: {args.notes} notes in {total:.1f} s = {args.notes / total:.0f} notes/s"
        f" (batches of {args.batch}: first {rates[0]:.0f}/s, last {rates[-1]:.0f}/s)"
    )
    print(f"re-ingest of {args.batch} stored notes: {reingest_ms:.0f} ms ({again.skipped} skipped)")


if __name__ == "__main__":
    main()
