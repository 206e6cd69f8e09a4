"""finish_pack of two pgmem trees in one process, blocks of calls alternated (A/B CPU ratio).

On a shared machine the load changes between two runs of ``bench_finish.py``; here both
trees are imported side by side (each with its own modules and word memo), build the
same pools, and run blocks of ``--calls`` calls in turn (A B, B A, ...), so every
pair of neighbouring blocks sees nearly the same load. It prints each tree's median CPU
per call and the per-block ratio B/A (median and quartiles)::

    python benchmarks/bench_finish_ab.py /path/to/before /path/to/after --blocks 24 --calls 100 [--cold]

``--corpus demo`` builds the pools from the demo corpus instead (MultiHop-RAG news facts,
long questions naming several entities: multi-entity coverage on).
``--turn-documents`` makes each turn its own document, so that the sessions (families)
span documents and the alarm reads every note's same-family near-duplicates.

A tree whose candidates carry word hashes (migration 0016) gets them as stage one returns
them: ``word_hashes(text)`` for each note whose text ``pgmem.word_hashes_v1`` hashes
(``hashed_by_database``), None for the others; ``--no-hashes`` leaves them out (every note tokenised, as for notes
written before 0016).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def load_tree(
    tree: str, pool_count: int, hashes: bool, texts_only: bool, turn_documents: bool = False, corpus: str = "locomo"
) -> tuple[Any, Any, list[Any], list[Any]]:
    """Import pgmem from ``tree`` (fresh modules) and build its pools and requests."""
    for name in [m for m in sys.modules if m == "pgmem" or m.startswith("pgmem.") or m == "bench_finish"]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    try:
        bench = importlib.import_module("bench_finish")
        pipeline = importlib.import_module("pgmem.retrieval.pipeline")
        words = importlib.import_module("pgmem.retrieval.words")
        embedder = importlib.import_module("pgmem.embeddings").HashingEmbedder()
    finally:
        sys.path.remove(tree)
    if not bench.pgmem.__file__.startswith(tree):
        raise SystemExit(f"pgmem was not imported from {tree}: {bench.pgmem.__file__}")
    demo = corpus == "demo"
    pools = bench.demo_pools(128, pool_count) if demo else bench.locomo_pools(bench.LOCOMO, 128, pool_count)
    if hashes and hasattr(words, "word_hashes"):
        pools = [with_stored_hashes(pool, words) for pool in pools]
    if turn_documents:
        pools = [as_turn_documents(pool) for pool in pools]
    requests = [pipeline.prepare_pack(pool.query, embedder=embedder) for pool in pools]
    for request, pool in zip(requests, pools, strict=True):  # warm up
        pipeline.finish_pack(request, pool)
    memo = getattr(words, "_WORD_HASHES", None) or words._CONTENT_IDS
    forget = memo.clear if not texts_only else memo._texts.clear  # both memos keep texts in _texts
    return pipeline.finish_pack, forget, pools, requests


def with_stored_hashes(pool: Any, words: Any) -> Any:
    """``pool`` with its notes' word hashes as stage one returns them (``words``: the tree's module)."""
    candidates = tuple(
        dataclasses.replace(c, word_hashes=words.word_hashes(c.text) if words.hashed_by_database(c.text) else None)
        for c in pool.candidates
    )
    return dataclasses.replace(pool, candidates=candidates)


def as_turn_documents(pool: Any) -> Any:
    """``pool`` with each turn its own document: a session (family) then spans many documents,
    so the alarm measures the same-family near-duplicates of every note (collusion)."""
    candidates = tuple(dataclasses.replace(c, document_id=c.external_id or c.note_id) for c in pool.candidates)
    return dataclasses.replace(pool, candidates=candidates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, help="tree A (before) and tree B (after)")
    parser.add_argument("--blocks", type=int, default=24, help="blocks per tree (24)")
    parser.add_argument("--calls", type=int, default=100, help="finish_pack calls per block (100)")
    parser.add_argument("--pools", type=int, default=40, help="distinct pools (40)")
    parser.add_argument(
        "--corpus", choices=("locomo", "demo"), default="locomo", help="whose pools: LoCoMo's (default) or the demo's"
    )
    parser.add_argument("--cold", action="store_true", help="forget every note's words before each call")
    parser.add_argument("--no-hashes", action="store_true", help="candidates without stored word hashes")
    parser.add_argument(
        "--texts-only", action="store_true", help="with --cold: forget the note texts, keep the word vocabulary"
    )
    parser.add_argument(
        "--turn-documents", action="store_true", help="each turn its own document (families span documents)"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    setups = [
        load_tree(
            str(Path(tree).resolve()),
            args.pools,
            not args.no_hashes,
            args.texts_only,
            args.turn_documents,
            args.corpus,
        )
        for tree in args.trees
    ]
    times: list[list[float]] = [[], []]
    calls = args.calls
    for block in range(args.blocks):
        for which in (0, 1) if block % 2 == 0 else (1, 0):
            finish, forget, pools, requests = setups[which]
            # A fresh Pool per call, as stage one returns: nothing read from a pool is reused.
            picks = [(block * calls + i) % len(pools) for i in range(calls)]
            fresh = [dataclasses.replace(pools[i]) for i in picks]
            started = time.process_time()
            for i, pool in zip(picks, fresh, strict=True):
                if args.cold:
                    forget()
                finish(requests[i], pool)
            times[which].append((time.process_time() - started) / calls * 1000)
    before, after = times
    ratios = [b / a for a, b in zip(before, after, strict=True)]
    quartiles = statistics.quantiles(ratios, n=4)
    memo = f"{args.corpus} pools, warm"
    if args.cold:
        memo = (
            "cold (note texts forgotten before each call)"
            if args.texts_only
            else "cold (memo emptied before each call)"
        )
    if args.no_hashes:
        memo += ", no stored hashes"
    if args.turn_documents:
        memo += ", each turn its own document"
    print(f"load average {os.getloadavg()[0]:.1f}; {memo}; {args.blocks} x {calls} calls per tree, alternated")
    for label, tree, values in (("A", args.trees[0], before), ("B", args.trees[1], after)):
        print(f"  {label} {tree}: CPU per call median {statistics.median(values):.3f} ms, min {min(values):.3f} ms")
    print(f"  B/A per block: median {statistics.median(ratios):.3f}, quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}")


if __name__ == "__main__":
    main()
