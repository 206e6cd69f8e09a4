"""Cost of a total forget (a benchmark, not a test).

Builds one namespace of --notes notes (hashing embedder: the cost measured here is the
database's), logs --packs packs with their diagnostics and records feedback on the
packed notes, then forgets --forgets documents one by one and prints the median and p95
of each forget, with what it removed (notes, feedback rows, logged packs), next to the
median of a pack on the same store: forget deletes and recounts every row derived from
the notes (docs/security.md), so its cost grows with the logged packs of the namespace.

    .venv/bin/python benchmarks/bench_forget.py [--notes 20000] [--packs 2000] [--forgets 20] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time

import pgmem
from pgmem.embeddings import HashingEmbedder

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "widget",
    "pipeline",
    "release",
    "build",
    "server",
    "client",
    "ticket",
    "invoice",
    "payment",
    "refund",
    "order",
    "shipment",
    "warehouse",
    "customer",
    "account",
    "password",
    "login",
    "report",
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spans(notes: int, per_document: int, rng: random.Random) -> list[pgmem.Span]:
    out = []
    for i in range(notes):
        text = f"Note {i}: " + " ".join(rng.choices(WORDS, k=12)) + f" code{i}."
        out.append(
            pgmem.Span(
                document_id=f"doc{i // per_document}",
                text=text,
                start=(i % per_document) * 1000,
                end=(i % per_document) * 1000 + len(text.encode()),
                family=f"family{i % 17}",
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=20_000)
    parser.add_argument("--per-document", type=int, default=10)
    parser.add_argument("--packs", type=int, default=2_000)
    parser.add_argument("--forgets", type=int, default=20)
    parser.add_argument("--dsn")
    args = parser.parse_args()
    if args.dsn is None and "PGMEM_HOME" not in os.environ:
        os.environ["PGMEM_HOME"] = tempfile.mkdtemp(prefix="pgmem-bench-")
    rng = random.Random(7)
    embedder = HashingEmbedder()
    namespace = "bench-forget"
    with pgmem.connect(args.dsn, migrate=True) as conn:
        started = time.perf_counter()
        pgmem.ingest(conn, spans(args.notes, args.per_document, rng), namespace=namespace, embedder=embedder)
        print(f"ingested {args.notes} notes in {time.perf_counter() - started:.1f} s")
        pack_ms = []
        for i in range(args.packs):
            question = " ".join(rng.choices(WORDS, k=4)) + f" code{rng.randrange(args.notes)}"
            t0 = time.perf_counter()
            pack = pgmem.pack(conn, question, namespace=namespace, embedder=embedder, log=True)
            pack_ms.append((time.perf_counter() - t0) * 1000)
            if i % 4 == 0 and pack.items:
                pgmem.feedback(
                    conn,
                    namespace=namespace,
                    helpful=[pack.items[0].note_id],
                    unhelpful=[item.note_id for item in pack.items[1:3]],
                    pack_id=pack.pack_id,
                )
        documents = rng.sample(range(args.notes // args.per_document), args.forgets)
        forget_ms = []
        removed = [0, 0, 0]
        for document in documents:
            t0 = time.perf_counter()
            result = pgmem.forget(conn, namespace=namespace, document_id=f"doc{document}", reason="benchmark")
            forget_ms.append((time.perf_counter() - t0) * 1000)
            row = conn.execute(
                "SELECT notes_removed, feedback_removed, packs_removed FROM pgmem.forget_audit WHERE audit_id = %s",
                (result.audit_id,),
            ).fetchone()
            assert row is not None
            removed = [total + int(value) for total, value in zip(removed, row, strict=True)]
        version = conn.execute("SHOW server_version").fetchone()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, PostgreSQL {version[0] if version else '?'}")
    print(f"store: {args.notes} notes, {args.packs} logged packs, feedback on every fourth pack")
    print(f"pack (logged):  p50 {statistics.median(pack_ms):7.2f} ms  p95 {percentile(pack_ms, 0.95):7.2f} ms")
    print(
        f"forget (1 document of {args.per_document} notes): p50 {statistics.median(forget_ms):7.2f} ms"
        f"  p95 {percentile(forget_ms, 0.95):7.2f} ms"
        f"  ({statistics.median(forget_ms) / statistics.median(pack_ms):.1f}x a pack)"
    )
    notes, feedback, packs = removed
    print(f"removed over {args.forgets} forgets: {notes} notes, {feedback} feedback rows, {packs} logged packs")


if __name__ == "__main__":
    main()
