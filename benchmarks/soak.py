"""Soak: concurrent clients mixing pack() and ingest() for a fixed time (a benchmark, not a test).

N client threads share a psycopg_pool.ConnectionPool. Each loops until the time is up:
with probability --pack-ratio it packs a random demo question in a random namespace,
otherwise it ingests a batch of new, unique spans into a random namespace. At the end it
prints throughput and p50/p95/p99 latency per operation (pool checkout included), the
errors (any exception counts; the first few are printed), and checks that the notes in
the database are exactly the seed plus every note ingest() reported as inserted.
Exits 1 on any error or lost note.

    .venv/bin/python benchmarks/soak.py [--clients 8] [--seconds 60] [--pack-ratio 0.8]
                                        [--embedder hashing|minilm] [--dsn DSN]

Without --dsn it starts a fresh embedded PostgreSQL in a temporary folder (removed at
exit). Needs psycopg-pool (pip install psycopg-pool).
"""

from __future__ import annotations

import argparse
import atexit
import os
import platform
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

import pgmem
from pgmem.demo import load_corpus
from pgmem.embeddings import Embedder, get_embedder

EMBEDDERS = {"hashing": "hashing", "minilm": "minilm"}
SHOWN_ERRORS = 5


@dataclass
class Tally:
    """What the clients did, shared between their threads (guarded by ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: {"pack": [], "ingest": []})
    errors: list[str] = field(default_factory=list)
    inserted: int = 0

    def record(self, op: str, ms: float, inserted: int) -> None:
        with self.lock:
            self.latencies_ms[op].append(ms)
            self.inserted += inserted

    def fail(self, op: str, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(f"{op}: {type(exc).__name__}: {exc}")
            if len(self.errors) <= SHOWN_ERRORS:
                print(f"error during {op}:", file=sys.stderr)
                traceback.print_exception(exc, file=sys.stderr)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def machine() -> str:
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")
        ]
        model = names[0] if names else model
    memory = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        total_kib = int(meminfo.read_text().split("MemTotal:", 1)[1].split()[0])
        memory = f", {total_kib / 1024**2:.0f} GiB"
    return f"{model}, {os.cpu_count()} cores{memory}, Python {platform.python_version()}"


def new_spans(texts: Sequence[str], document_id: str, family: str) -> list[pgmem.Span]:
    """Spans laid end to end in one document, with exact byte offsets."""
    spans = []
    position = 0
    for text in texts:
        size = len(text.encode("utf-8"))
        spans.append(pgmem.Span(document_id=document_id, text=text, start=position, end=position + size, family=family))
        position += size + 1
    return spans


def client(
    number: int,
    pool: Any,
    deadline: float,
    args: argparse.Namespace,
    embedder: Embedder,
    namespaces: Sequence[str],
    questions: Sequence[str],
    facts: Sequence[str],
    tally: Tally,
) -> None:
    rng = random.Random(args.seed * 1000 + number)
    batch_number = 0
    while time.perf_counter() < deadline:
        namespace = rng.choice(namespaces)
        op = "pack" if rng.random() < args.pack_ratio else "ingest"
        started = time.perf_counter()
        try:
            with pool.connection() as conn:
                if op == "pack":
                    pgmem.pack(conn, rng.choice(questions), namespace=namespace, embedder=embedder)
                    inserted = 0
                else:
                    batch_number += 1
                    # Unique text: every span of every batch is a new note.
                    texts = [
                        f"{rng.choice(facts)} (soak client {number}, batch {batch_number}, span {i})"
                        for i in range(args.batch)
                    ]
                    batch = new_spans(texts, f"soak-{number}-{batch_number}", f"soak-{number}")
                    inserted = pgmem.ingest(conn, batch, namespace=namespace, embedder=embedder).inserted
        except Exception as exc:  # every failure is counted and reported, never hidden
            tally.fail(op, exc)
            continue
        tally.record(op, (time.perf_counter() - started) * 1000, inserted)


def count(conn: psycopg.Connection[Any], query: str) -> int:
    row = conn.execute(query).fetchone()
    if row is None:
        raise RuntimeError(f"no row from {query!r}")
    return int(row[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent client threads (default 8)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the clients run (default 60)")
    parser.add_argument("--pack-ratio", type=float, default=0.8, help="share of operations that are packs")
    parser.add_argument("--dsn", help="database to use (default: a fresh embedded server in a temporary folder)")
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default="hashing")
    parser.add_argument("--namespaces", type=int, default=4, help="namespaces the clients spread over (default 4)")
    parser.add_argument("--batch", type=int, default=5, help="spans per ingest call (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.clients < 1 or args.seconds <= 0 or not 0.0 <= args.pack_ratio <= 1.0 or args.batch < 1:
        parser.error("--clients and --batch must be >= 1, --seconds > 0, --pack-ratio in [0, 1]")
    try:
        from psycopg_pool import ConnectionPool
    except ImportError:
        parser.error("the soak needs psycopg-pool: pip install psycopg-pool")

    home = None
    if args.dsn is None:
        home = Path(tempfile.mkdtemp(prefix="pgmem-soak-"))
        # Registered before the server starts, so it runs after the server's own
        # stop-at-exit handler (atexit runs last-registered first).
        atexit.register(shutil.rmtree, home, ignore_errors=True)

    embedder = get_embedder(EMBEDDERS[args.embedder])
    spans, demo_questions = load_corpus()
    questions = [q.question for q in demo_questions]
    facts = [span.text for span in spans]
    namespaces = [f"soak-{i}" for i in range(args.namespaces)]

    with pgmem.connect(args.dsn, home=home, migrate=True) as conn:
        dsn = args.dsn or conn.info.dsn
        versions = conn.execute(
            "SELECT current_setting('server_version'), (SELECT extversion FROM pg_extension WHERE extname = 'vector')"
        ).fetchone()
        # Seed: the demo corpus, split over the namespaces.
        seeded = 0
        for i, namespace in enumerate(namespaces):
            seeded += pgmem.ingest(conn, spans[i :: len(namespaces)], namespace=namespace, embedder=embedder).inserted
            pgmem.pack(conn, questions[0], namespace=namespace, embedder=embedder)  # warm the model
        before = count(conn, "SELECT count(*) FROM pgmem.notes")

    tally = Tally()
    with ConnectionPool(
        dsn, min_size=args.clients, max_size=args.clients, kwargs={"autocommit": True}, timeout=30, open=True
    ) as pool:
        pool.wait(timeout=30)
        started = time.perf_counter()
        deadline = started + args.seconds
        threads = [
            threading.Thread(
                target=client,
                args=(number, pool, deadline, args, embedder, namespaces, questions, facts, tally),
                daemon=True,
            )
            for number in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(args.seconds + 120)
        elapsed = time.perf_counter() - started
        stuck = sum(thread.is_alive() for thread in threads)
        if stuck:
            tally.errors.append(f"{stuck} client(s) still running 120 s after the deadline")

    with psycopg.connect(dsn, autocommit=True) as conn:
        after = count(conn, "SELECT count(*) FROM pgmem.notes")
        stats_off = count(
            conn,
            "SELECT count(*) FROM pgmem.namespaces AS s"
            " WHERE s.note_count <> (SELECT count(*) FROM pgmem.notes AS n WHERE n.namespace = s.namespace)",
        )

    print(f"machine: {machine()}")
    server, vector = versions if versions else ("?", "?")
    print(f"PostgreSQL {server}, pgvector {vector}, {'--dsn ' + args.dsn if args.dsn else 'fresh embedded server'}")
    print(
        f"soak: {args.clients} clients, {elapsed:.1f} s, pack ratio {args.pack_ratio}, embedder {embedder.name},"
        f" {len(namespaces)} namespaces seeded with {seeded} notes, {args.batch} new spans per ingest"
    )
    total = 0
    for op, values in tally.latencies_ms.items():
        total += len(values)
        if not values:
            print(f"  {op:<6} 0 ops")
            continue
        print(
            f"  {op:<6} {len(values):6d} ops {len(values) / elapsed:7.1f} ops/s   p50 {percentile(values, 0.5):6.1f} ms"
            f"   p95 {percentile(values, 0.95):6.1f} ms   p99 {percentile(values, 0.99):6.1f} ms"
        )
    print(f"  all    {total:6d} ops {total / elapsed:7.1f} ops/s")
    print(f"errors: {len(tally.errors)}")
    for message in tally.errors[:SHOWN_ERRORS]:
        print(f"  {message}")
    expected = before + tally.inserted
    lost = expected - after
    print(
        f"notes: {before} before + {tally.inserted} reported inserted = {expected} expected, {after} found;"
        f" notes lost: {lost}; namespaces with a wrong note_count: {stats_off}"
    )
    return 1 if tally.errors or lost != 0 or stats_off else 0


if __name__ == "__main__":
    sys.exit(main())
