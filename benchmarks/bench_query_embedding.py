"""Latency of embedding one short question with the bundled MiniLM, configurations interleaved.

What pgmem.pack() spends before stage one: ``embed_unique(embedder, [question])``. Each
configuration is a separate ``MiniLMEmbedder`` (its own onnxruntime session) in this
one process; every question is embedded by every configuration in turn (the order
rotating per question), so a loaded machine disturbs all of them alike and the ratios
hold. Questions are LoCoMo's (``--data``), else generated. Prints p50/p95/p99 per
configuration, the ratio to the first, the split between tokenizer and model, and the
largest difference between configurations' vectors.

    PYTHONPATH=. python benchmarks/bench_query_embedding.py [--questions 300] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from pgmem.embeddings import MiniLMEmbedder, embed_unique

LOCOMO = Path("/work/shared/data/locomo/locomo_dev5.json")


def questions(path: Path, count: int) -> tuple[list[str], str]:
    if path.is_file():
        samples = json.loads(path.read_text(encoding="utf-8"))
        found = list(dict.fromkeys(qa["question"] for sample in samples for qa in sample["qa"]))
        random.Random(0).shuffle(found)
        return found[:count], f"LoCoMo questions from {path}"
    words = [
        "who",
        "what",
        "when",
        "where",
        "did",
        "the",
        "team",
        "launch",
        "review",
        "parser",
        "release",
        "move",
        "why",
    ]
    rng = random.Random(0)
    made = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 14))) + "?" for _ in range(count)]
    return made, "generated questions (data file absent)"


def configurations(names: list[str]) -> dict[str, MiniLMEmbedder]:
    """The embedders compared; ``default`` is what pgmem ships."""
    made: dict[str, Any] = {}
    for name in names:
        if name == "default":
            made[name] = MiniLMEmbedder()
        elif name.startswith("threads="):
            made[name] = MiniLMEmbedder(intra_op_num_threads=int(name.split("=", 1)[1]))
        else:
            raise SystemExit(f"unknown configuration {name!r}")
    return made


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2, help="passes over the questions (2)")
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--configs", default="default,threads=1", help="comma-separated (default,threads=1)")
    args = parser.parse_args()
    texts, origin = questions(args.data, args.questions)
    embedders = configurations(args.configs.split(","))
    for embedder in embedders.values():
        for text in texts[:20]:  # load the session, warm up
            embed_unique(embedder, [text])
    names = list(embedders)
    latencies: dict[str, list[float]] = {name: [] for name in names}
    # CPU time of the calling thread per call: all of the model's work with one intra-op
    # thread, the caller's share with more; far less disturbed than wall time by other
    # processes' load (process time is not used: the other sessions' idle workers spin).
    cpu: dict[str, list[float]] = {name: [] for name in names}
    load_before = os.getloadavg()
    for repeat in range(args.repeats):
        for index, text in enumerate(texts):
            shift = (index + repeat) % len(names)
            for name in names[shift:] + names[:shift]:
                tick, cpu_tick = time.perf_counter(), time.thread_time()
                embed_unique(embedders[name], [text])
                latencies[name].append((time.perf_counter() - tick) * 1000)
                cpu[name].append((time.thread_time() - cpu_tick) * 1000)
    load_after = os.getloadavg()
    # Tokenizer alone (the default configuration's), to split the time.
    tokenizer = embedders[names[0]]._loaded()[0]
    tokenize = []
    for text in texts:
        tick = time.perf_counter()
        tokenizer.encode_batch([text])
        tokenize.append((time.perf_counter() - tick) * 1000)
    tokens = [len(tokenizer.encode(text).ids) for text in texts]
    vectors = {name: embedders[name].embed(texts) for name in names}
    import onnxruntime

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs,"
        f" Python {platform.python_version()}, onnxruntime {onnxruntime.__version__};"
        f" load average {load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    print(
        f"{len(texts)} questions ({origin}), {statistics.median(tokens):.0f} tokens median"
        f" ({min(tokens)}-{max(tokens)}); {args.repeats} passes, configurations interleaved"
    )
    base = statistics.median(latencies[names[0]])
    for name in names:
        values = latencies[name]
        p50 = statistics.median(values)
        drift = float(np.abs(vectors[name] - vectors[names[0]]).max())
        print(
            f"  {name:<32} p50 {p50:6.2f} ms  p95 {percentile(values, 95):6.2f} ms"
            f"  p99 {percentile(values, 99):6.2f} ms  ratio {p50 / base:5.2f}"
            f"  caller CPU p50 {statistics.median(cpu[name]):6.2f} ms  max |dv| {drift:.1e}"
        )
    print(f"  tokenizer alone: p50 {statistics.median(tokenize):.3f} ms, p95 {percentile(tokenize, 95):.3f} ms")


if __name__ == "__main__":
    main()
