"""The Python side of one pgmem.pack() call, without the database (a benchmark, not a test).

Stage one is replaced by a fixed pool (120 candidates, 12 families), so what is timed is
everything pack() does in Python around its one statement: checking the arguments,
deriving hints, embedding the question (hashing embedder), calibrating, packing and
writing the diagnostics. CPU time per call (time.process_time) is reported, which a
loaded machine disturbs far less than wall time. It runs against whichever pgmem is
on PYTHONPATH, so the same command compares two trees:

    PYTHONPATH=/path/to/before python benchmarks/bench_pack_python.py
    PYTHONPATH=/path/to/after  python benchmarks/bench_pack_python.py
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import time
from typing import Any

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate

QUESTIONS = [
    "Who founded Acme Corp in Paris in 2021?",
    "What did the review on Friday find in the parser?",
    "Which team owns the release checklist for v2.3.1?",
    "When did Maria move the launch, and why?",
]


def _pool() -> Pool:
    candidates = [
        Candidate(
            note_id=f"00000000-0000-0000-0000-{i:012d}",
            external_id=None,
            document_id=f"doc-{i % 30}",
            span_start=0,
            span_end=40,
            text=f"Note {i} about Acme Corp, the parser review and release {i % 7}.",
            context="",
            family=f"family-{i % 12}",
            role="fact",
            confidence=0.5 + (i % 5) / 10,
            source_ts=None,
            dense_score=0.3 + (i * 37 % 100) / 200,
            lexical_score=(i * 13 % 50) / 25,
            facet_boost=0.0,
            link_boost=0.0,
            base_score=0.3 + (i * 37 % 100) / 200 + (i * 13 % 50) / 100,
        )
        for i in range(120)
    ]
    return Pool.from_candidates(candidates)


def _replace_stage_one(pool: Pool) -> str:
    """Make stage one return ``pool`` in whichever module pack() calls it from."""

    def fixed(conn: Any, arguments: Any, timeout: Any = None) -> Pool:
        return pool

    for name in ("pgmem.retrieval.pipeline", "pgmem.api"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "run_stage_one"):
            module.run_stage_one = fixed  # type: ignore[attr-defined]
            return name
    raise SystemExit("no run_stage_one to replace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    where = _replace_stage_one(_pool())
    embedder = HashingEmbedder()
    for question in QUESTIONS:  # warm up
        pgmem.pack(None, question, embedder=embedder)  # type: ignore[arg-type]
    per_call: list[float] = []
    for _ in range(args.repeats):
        started = time.process_time()
        for i in range(args.calls):
            pgmem.pack(None, QUESTIONS[i % len(QUESTIONS)], embedder=embedder)  # type: ignore[arg-type]
        per_call.append((time.process_time() - started) / args.calls * 1000)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}; pgmem from {pgmem.__file__}"
    )
    print(f"stage one replaced in {where}; {args.repeats} x {args.calls} calls")
    print(f"  CPU per pack() call: median {statistics.median(per_call):.3f} ms (min {min(per_call):.3f} ms)")


if __name__ == "__main__":
    main()
