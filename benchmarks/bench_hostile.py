"""What hostile inputs cost: extractors on crafted 16 KiB spans, and packs with hints.

Times each write-path extractor on spans crafted to make a backtracking regex rescan a
long run from each of its characters, then packs with the largest hints pgmem accepts
(64 entity, keyword and handle hints of 512 characters each) against a plain pack, and
shows that an unbounded hint list (200,000 keywords) is refused at once. Before the
bounds, the crafted spans took 4-171 s each and a pack with 200,000 keywords about 10 s.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_hostile.py [--dsn DSN] [--home DIR] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.ingestion.handles import extract_handles
from pgmem.ingestion.roles import classify_role
from pgmem.ingestion.split import sentence_ranges

SIZE = 16_384
CRAFTED: dict[str, tuple[Callable[[str], object], str]] = {
    "handles: e-mail local parts ('a.' * n + '@')": (extract_handles, ("a." * SIZE)[: SIZE - 1] + "@"),
    "handles: numbers ('1,' * n)": (extract_handles, ("1," * SIZE)[:SIZE]),
    "handles: dotted names ('a.' * n)": (extract_handles, ("a." * SIZE)[:SIZE]),
    "handles: thousands of handles ('$1' * n)": (extract_handles, ("$1" * SIZE)[:SIZE]),
    "roles: a run of dashes": (lambda text: classify_role(text, {}, False), "-" * SIZE),
    "split: a run of full stops": (sentence_ranges, "." * SIZE),
}


def best_of(repeats: int, call: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call(*args, **kwargs)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="PostgreSQL with pgvector (default: the embedded server)")
    parser.add_argument("--home", help="data folder of the embedded server")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    for label, (extract, text) in CRAFTED.items():
        print(f"{label:48s} {best_of(args.repeats, extract, text) * 1000:9.1f} ms")

    conn = pgmem.connect(args.dsn, home=args.home, migrate=True)
    embedder = HashingEmbedder()
    namespace = "bench-hostile"
    texts = [f"note {i} about topic {i % 17} with ticket ABC-{i} and Alice" for i in range(300)]
    spans = []
    position = 0
    for text in texts:
        spans.append(pgmem.Span("doc", text, position, position + len(text), family=f"f{position % 5}"))
        position += len(text) + 1
    pgmem.ingest(conn, spans, namespace=namespace, embedder=embedder)
    widest = [f"{i:03d}" + "x" * 509 for i in range(64)]
    packs: dict[str, dict[str, Any]] = {
        "pack: no hints": {},
        "pack: 64 keywords of 512 characters": {"keywords": widest},
        "pack: 64 of each hint kind, 512 characters": {"keywords": widest, "entities": widest, "handles": widest},
    }
    question = "what about topic 3 and ABC-12?"
    for label, hints in packs.items():
        seconds = best_of(args.repeats, pgmem.pack, conn, question, namespace=namespace, embedder=embedder, **hints)
        print(f"{label:48s} {seconds * 1000:9.1f} ms")
    keywords = [f"k{i}" for i in range(200_000)]
    started = time.perf_counter()
    try:
        pgmem.pack(conn, question, namespace=namespace, embedder=embedder, keywords=keywords)
    except pgmem.InputError as exc:
        print(f"{'pack: 200,000 keywords':48s} {(time.perf_counter() - started) * 1000:9.1f} ms  refused: {exc}")


if __name__ == "__main__":
    main()
