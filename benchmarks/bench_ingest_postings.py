"""What the postings of migration 0011 cost the write path (a benchmark, not a test).

Ingests recombined real sentences (``bench_lexical.synthetic``) with the hashing
embedder in batches of --batch, alternating two namespaces of one store: batches into
``with_postings`` run with the trigger ``notes_post_new`` enabled, batches into
``without_postings`` with it disabled (``ALTER TABLE ... DISABLE TRIGGER``, the schema
owner's right, inside the batch's own transaction), so machine load hits both alike and
both namespaces grow together. Prints notes/s of each and their ratio.

    .venv/bin/python benchmarks/bench_ingest_postings.py [--notes 20000] [--batch 1000] [--home DIR | --dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from bench_lexical import DATA, real_sentences, synthetic
from bench_scale import spans

import pgmem
from pgmem.embeddings import HashingEmbedder


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--notes", type=int, default=20_000, help="notes per namespace")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--dsn")
    parser.add_argument("--home")
    args = parser.parse_args()
    home = args.home or (None if args.dsn else tempfile.mkdtemp(prefix="pgmem-postings-"))
    if home is not None:
        os.environ["PGMEM_HOME"] = home
    embedder = HashingEmbedder(dimension=384)
    sentences, _ = real_sentences(DATA)
    texts = synthetic(sentences, 2 * args.notes, seed=5)
    rates: dict[str, list[float]] = {"with_postings": [], "without_postings": []}
    with pgmem.connect(args.dsn, migrate=True) as conn:
        for number, first in enumerate(range(0, args.notes, args.batch)):
            # Alternate which goes first, so neither always follows the other's checkpoint.
            order = ("with_postings", "without_postings") if number % 2 == 0 else ("without_postings", "with_postings")
            for namespace in order:
                offset = args.notes if namespace == "without_postings" else 0
                batch = spans(texts[offset + first : offset + min(first + args.batch, args.notes)], offset + first)
                with conn.transaction():
                    if namespace == "without_postings":
                        conn.execute("ALTER TABLE pgmem.notes DISABLE TRIGGER notes_post_new")
                    tick = time.perf_counter()
                    pgmem.ingest(conn, batch, namespace=namespace, embedder=embedder)
                    seconds = time.perf_counter() - tick
                    if namespace == "without_postings":
                        conn.execute("ALTER TABLE pgmem.notes ENABLE TRIGGER notes_post_new")
                rates[namespace].append(len(batch) / seconds)
        postings = conn.execute(
            "SELECT count(*), pg_total_relation_size('pgmem.lexeme_postings') FROM pgmem.lexeme_postings"
        ).fetchone()
        notes = conn.execute("SELECT pg_total_relation_size('pgmem.notes')").fetchone()
    for namespace, values in rates.items():
        print(f"{namespace:<17} median {np.median(values):7.0f} notes/s over {len(values)} batches of {args.batch}")
    ratio = np.median(rates["with_postings"]) / np.median(rates["without_postings"])
    print(f"with / without postings: {ratio:.2f}x throughput")
    if postings and notes:
        print(
            f"postings: {postings[0]:,} rows, {postings[1] / 2**20:.0f} MiB;"
            f" notes: {notes[0] / 2**20:.0f} MiB (both namespaces)"
        )


if __name__ == "__main__":
    main()
