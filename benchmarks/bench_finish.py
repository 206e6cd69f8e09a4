"""CPU time of finish_pack() (calibrate + family alarm + pack + diagnostics) on 128-row pools.

The pools are built from LoCoMo conversations without a database: for each question the
conversation's turns are scored by hashing-embedder cosine (plus a small word-overlap
term, as stage one's lexical side) and the best ``--rows`` become the pool, with
families by session and the namespace's family counts, so the alarm reads real texts,
real echoes and real near-duplicates. Without the LoCoMo file the synthetic pool of
``bench_pack_python.py`` is used (its query set, so echo is measured too).

It runs against whichever pgmem is on PYTHONPATH, so interleaved runs compare trees::

    for i in 1 2 3; do
      PYTHONPATH=/path/to/before python benchmarks/bench_finish.py
      PYTHONPATH=/path/to/after  python benchmarks/bench_finish.py
    done
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import re
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.eval import load_locomo
from pgmem.retrieval.pipeline import finish_pack, prepare_pack
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate, Span

LOCOMO = Path("/work/shared/data/locomo/locomo_dev5.json")
_WORD = re.compile(r"\w+")


def locomo_pools(path: Path, rows: int, count: int) -> list[Pool]:
    """``count`` pools of ``rows`` turns, one per question of the first conversations."""
    corpus = load_locomo(path)
    per_conversation = max(1, count // len(corpus.spans))
    groups = [
        (spans, [q.question for q in corpus.questions if q.namespace == namespace][:per_conversation])
        for namespace, spans in corpus.spans.items()
    ]
    return scored_pools(groups, rows, role="dialogue", contexts=False)[:count]


def demo_pools(rows: int, count: int) -> list[Pool]:
    """``count`` pools of at most ``rows`` facts of the demo corpus (MultiHop-RAG news: long
    questions naming several entities, so multi-entity coverage packs them), one per question."""
    from pgmem.demo import load_corpus

    spans, questions = load_corpus()
    return scored_pools([(spans, [q.question for q in questions[:count]])], rows, role="fact", contexts=True)


def scored_pools(
    groups: Sequence[tuple[Sequence[Span], Sequence[str]]], rows: int, *, role: str, contexts: bool
) -> list[Pool]:
    """For each (spans, questions) group, a pool per question: the spans scored by
    hashing-embedder cosine plus a small word-overlap term (as stage one's lexical side),
    the best ``rows`` of them, families as the spans', the group's family counts; each
    note's context kept when ``contexts`` (else empty)."""
    embedder = HashingEmbedder()
    pools: list[Pool] = []
    for spans, questions in groups:
        texts = [span.text for span in spans]
        vectors = embedder.embed(texts)
        words = [set(_WORD.findall(text.lower())) for text in texts]
        counts = Counter(span.family for span in spans)
        for question in questions:
            query_words = set(_WORD.findall(question.lower()))
            dense = vectors @ embedder.embed([question])[0]
            lexical = np.array([len(query_words & w) / max(len(query_words), 1) for w in words])
            scores = 0.8 * dense + 0.2 * lexical
            best = np.argsort(-scores, kind="stable")[:rows]
            candidates = [
                Candidate(
                    note_id=str(uuid.UUID(int=int(i) + 1)),
                    external_id=spans[i].external_id,
                    document_id=spans[i].document_id,
                    span_start=spans[i].start,
                    span_end=spans[i].end,
                    text=spans[i].text,
                    context=(spans[i].context or "") if contexts else "",
                    family=spans[i].family,
                    role=role,
                    confidence=0.7,
                    source_ts=None,
                    dense_score=float(dense[i]),
                    lexical_score=float(lexical[i]),
                    facet_boost=0.0,
                    link_boost=0.0,
                    base_score=float(scores[i]),
                )
                for i in best
            ]
            pools.append(Pool.from_candidates(candidates, query=question, namespace_counts=counts))
    return pools


def synthetic_pools(rows: int) -> list[Pool]:
    from bench_pack_python import QUESTIONS, _pool

    base = _pool()
    candidates = list(base.candidates)
    while len(candidates) < rows:
        extra = candidates[len(candidates) % len(base.candidates)]
        candidates.append(Candidate(**{**vars(extra), "note_id": str(uuid.UUID(int=len(candidates) + 1))}))
    return [Pool.from_candidates(candidates[:rows], query=question) for question in QUESTIONS]


def _forgetter() -> Callable[[], None] | None:
    """What empties the per-process memo of note words (None: this pgmem has none)."""
    from pgmem.retrieval import words

    memo = getattr(words, "_WORD_HASHES", None) or getattr(words, "_CONTENT_IDS", None)
    return None if memo is None else memo.clear


def with_stored_hashes(pools: list[Pool]) -> list[Pool]:
    """The pools with each ASCII note's word hashes, as stage one returns them (migration
    0016; NULL for text the database does not hash); unchanged for a pgmem without them."""
    from pgmem.retrieval import words

    if not hasattr(words, "word_hashes"):
        return pools
    return [
        dataclasses.replace(
            pool,
            candidates=tuple(
                dataclasses.replace(
                    c, word_hashes=words.word_hashes(c.text) if words.hashed_by_database(c.text) else None
                )
                for c in pool.candidates
            ),
        )
        for pool in pools
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=128, help="pool size (128)")
    parser.add_argument("--pools", type=int, default=40, help="distinct pools (40)")
    parser.add_argument("--calls", type=int, default=500, help="finish_pack calls per repeat (500)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument(
        "--corpus", choices=("locomo", "demo"), default="locomo", help="whose pools: LoCoMo's (default) or the demo's"
    )
    parser.add_argument(
        "--cold", action="store_true", help="forget every note's words before each call (no per-process memo)"
    )
    parser.add_argument("--no-hashes", action="store_true", help="candidates without stored word hashes")
    args = parser.parse_args()
    forget = _forgetter() if args.cold else None
    if args.corpus == "demo":
        pools, origin = demo_pools(args.rows, args.pools), "the demo corpus (MultiHop-RAG)"
    elif args.data.is_file():
        pools, origin = locomo_pools(args.data, args.rows, args.pools), f"LoCoMo {args.data.name}"
    else:
        pools, origin = synthetic_pools(args.rows), "synthetic (bench_pack_python)"
    if not args.no_hashes:
        pools = with_stored_hashes(pools)
    requests = [prepare_pack(pool.query, embedder=HashingEmbedder()) for pool in pools]
    for request, pool in zip(requests, pools, strict=True):  # warm up
        finish_pack(request, pool)
    per_call: list[float] = []
    wall: list[float] = []
    for _ in range(args.repeats):
        # A fresh Pool per call, as stage one returns: nothing read from a pool is reused.
        fresh = [dataclasses.replace(pools[i % len(pools)]) for i in range(args.calls)]
        started = time.process_time()
        for i in range(args.calls):
            if forget is not None:
                forget()
            tick = time.perf_counter()
            finish_pack(requests[i % len(pools)], fresh[i])
            wall.append((time.perf_counter() - tick) * 1000)
        per_call.append((time.process_time() - started) / args.calls * 1000)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}; pgmem from {pgmem.__file__}"
    )
    sizes = sorted({pool.size for pool in pools})
    memo = "none (cold)" if args.cold else "warm"
    print(f"{len(pools)} pools of {sizes} rows from {origin}; {args.repeats} x {args.calls} calls; word memo {memo}")
    print(
        f"  finish_pack CPU per call: median {statistics.median(per_call):.3f} ms (min {min(per_call):.3f} ms);"
        f" wall p50 {np.percentile(wall, 50):.3f} ms, p95 {np.percentile(wall, 95):.3f} ms"
    )


if __name__ == "__main__":
    main()
