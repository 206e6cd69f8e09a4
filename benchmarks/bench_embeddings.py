"""Throughput and single-query latency of the bundled embedders.

Embeds N sentences with one ``embed()`` call per run (the embedder cuts batches of the
given size) and prints sentences per second, then times single-text queries (median
and p95). The sentences are the evidence facts of the MultiHop-RAG
sample (cycled when there are fewer than N), or generated ones when the file is absent.

Usage (from the repository root; ``PYTHONPATH=.`` is not needed once pgmem is installed)::

    PYTHONPATH=. python benchmarks/bench_embeddings.py [--n 2000] [--batch-sizes 64,32]
        [--queries 200] [--repeats 3] [--data PATH] [--embedders minilm,hashing] [--threads N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path

import numpy as np

from pgmem.embeddings import Embedder, HashingEmbedder, MiniLMEmbedder

DEFAULT_DATA = Path("/work/shared/data/multihop_rag_sample/ground_truth.json")


def load_sentences(path: Path, count: int) -> tuple[list[str], str]:
    """Return ``count`` sentences and a description of where they came from."""
    if path.is_file():
        records = json.loads(path.read_text(encoding="utf-8"))
        facts = list(
            dict.fromkeys(
                evidence["fact"]
                for record in records.values()
                for evidence in record.get("evidence_list", [])
                if evidence.get("fact")
            )
        )
        if facts:
            sentences = list(itertools.islice(itertools.cycle(facts), count))
            return sentences, f"{len(facts)} distinct evidence facts from {path}, cycled"
    rng = random.Random(0)
    words = [
        "market", "court", "company", "city", "river", "report", "energy", "school",
        "player", "bank", "model", "data", "law", "price", "vote", "storm", "island",
        "museum", "vaccine", "engine", "contract", "satellite", "festival",
    ]  # fmt: skip
    sentences = [
        " ".join(rng.choice(words) for _ in range(rng.randint(8, 40))).capitalize() + "." for _ in range(count)
    ]
    return sentences, "generated sentences (data file absent)"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def bench(embedder: Embedder, sentences: list[str], batch_size: int, queries: int, repeats: int) -> None:
    if isinstance(embedder, MiniLMEmbedder):
        embedder.batch_size = batch_size
    embedder.embed(sentences[:8])  # load the model and warm up outside the timing
    # One embed() call over the whole list, as ingestion does: the embedder sorts by
    # length and cuts its own batches. The median of several runs damps a noisy host.
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        embedder.embed(sentences)
        rates.append(len(sentences) / (time.perf_counter() - start))
    rate = statistics.median(rates)

    rng = random.Random(1)
    latencies = []
    for text in rng.sample(sentences, min(queries, len(sentences))):
        start = time.perf_counter()
        embedder.embed([text])
        latencies.append((time.perf_counter() - start) * 1000.0)
    median = statistics.median(latencies)
    p95 = float(np.percentile(latencies, 95))
    spread = f"{min(rates):.0f}-{max(rates):.0f}"
    print(
        f"{embedder.name:<28} batch {batch_size:>3}: {rate:8.1f} sentences/s"
        f" (median of {repeats}, range {spread}) | single query over {len(latencies)}:"
        f" median {median:.2f} ms, p95 {p95:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="sentences to embed (2000)")
    parser.add_argument("--batch-sizes", default="64,32,16", help="comma-separated MiniLM batch sizes (64,32,16)")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs, median (3)")
    parser.add_argument("--queries", type=int, default=200, help="single queries timed (200)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="ground_truth.json")
    parser.add_argument("--embedders", default="minilm,hashing", help="comma-separated")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads")
    args = parser.parse_args()

    sentences, origin = load_sentences(args.data, args.n)
    characters = sum(len(s) for s in sentences) / len(sentences)
    python = platform.python_version()
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs, Python {python}")
    print(f"data: {origin}; mean length {characters:.0f} characters")
    print(f"load average before: {load_average()}")
    batch_sizes = [int(size) for size in args.batch_sizes.split(",")]
    for choice in args.embedders.split(","):
        if choice == "minilm":
            minilm = MiniLMEmbedder(intra_op_num_threads=args.threads)
            for size in batch_sizes:
                bench(minilm, sentences, size, args.queries, args.repeats)
        elif choice == "hashing":
            # Batch size means nothing to the hashing embedder; it runs once.
            bench(HashingEmbedder(), sentences, batch_sizes[0], args.queries, args.repeats)
        else:
            parser.error(f"unknown embedder {choice!r}; choose minilm and/or hashing")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
