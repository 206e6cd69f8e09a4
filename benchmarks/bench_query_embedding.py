"""Latency of embedding one short question with the bundled MiniLM, configurations compared.

What pgmem.pack() spends before stage one: ``embed_unique(embedder, [question])``. Each
configuration is a separate ``MiniLMEmbedder`` (its own onnxruntime session). By default
each lives in its own worker process, as an application holds one embedder: the workers
take turns, one pass over the questions each, in an order rotating per pass, so a loaded
machine disturbs all of them alike while no other session's weights compete for the
caches during a pass. ``--layout interleaved`` keeps every session in this one process and
embeds each question with every configuration in turn (the earlier layout: the ratios
hold, but each session's ~90 MB of weights evicts the others', which inflates all of
them). Questions are LoCoMo's (``--data``), MultiHop-RAG's demo questions (``--source
demo``: long, ~60 tokens), else generated. Prints p50/p95/p99 per configuration, the
ratio to the first, the split between tokenizer and model, and the largest difference
between configurations' vectors.

    PYTHONPATH=. python benchmarks/bench_query_embedding.py [--questions 300] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import statistics
import time
from multiprocessing.connection import Connection
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


Timings = tuple[list[float], list[float]]


def timed_pass(embedder: MiniLMEmbedder, texts: list[str]) -> Timings:
    """Each question embedded once: wall milliseconds, and the calling thread's CPU
    milliseconds (all of the model's work with one intra-op thread, the caller's share
    with more; process time is not used: idle intra-op workers spin)."""
    wall: list[float] = []
    cpu: list[float] = []
    for text in texts:
        tick, cpu_tick = time.perf_counter(), time.thread_time()
        embed_unique(embedder, [text])
        wall.append((time.perf_counter() - tick) * 1000)
        cpu.append((time.thread_time() - cpu_tick) * 1000)
    return wall, cpu


def _warm(embedder: MiniLMEmbedder, texts: list[str]) -> None:
    for text in texts[:20]:  # load the session, warm up
        embed_unique(embedder, [text])


def _worker(name: str, texts: list[str], pipe: Connection) -> None:
    """One configuration in its own process: a timed pass per "pass", its vectors at the end."""
    embedder = configurations([name])[name]
    _warm(embedder, texts)
    pipe.send("ready")
    while pipe.recv() == "pass":
        pipe.send(timed_pass(embedder, texts))
    pipe.send(embedder.embed(texts))


def in_processes(names: list[str], texts: list[str], repeats: int) -> tuple[dict[str, Timings], dict[str, Any]]:
    context = multiprocessing.get_context("spawn")
    pipes: dict[str, Connection] = {}
    workers = []
    for name in names:
        parent, child = context.Pipe()
        worker = context.Process(target=_worker, args=(name, texts, child), daemon=True)
        worker.start()
        if parent.recv() != "ready":
            raise SystemExit(f"configuration {name!r} did not start")
        pipes[name] = parent
        workers.append(worker)
    timings: dict[str, Timings] = {name: ([], []) for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            pipes[name].send("pass")
            wall, cpu = pipes[name].recv()
            timings[name][0].extend(wall)
            timings[name][1].extend(cpu)
    vectors = {}
    for name in names:
        pipes[name].send("vectors")
        vectors[name] = pipes[name].recv()
    for worker in workers:
        worker.join()
    return timings, vectors


def interleaved(names: list[str], texts: list[str], repeats: int) -> tuple[dict[str, Timings], dict[str, Any]]:
    embedders = configurations(names)
    for embedder in embedders.values():
        _warm(embedder, texts)
    timings: dict[str, Timings] = {name: ([], []) for name in names}
    for repeat in range(repeats):
        for index, text in enumerate(texts):
            shift = (index + repeat) % len(names)
            for name in names[shift:] + names[:shift]:
                wall, cpu = timed_pass(embedders[name], [text])
                timings[name][0].extend(wall)
                timings[name][1].extend(cpu)
    return timings, {name: embedders[name].embed(texts) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2, help="passes over the questions (2)")
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--source", choices=("locomo", "demo"), default="locomo", help="whose questions (locomo)")
    parser.add_argument("--configs", default="default,threads=1", help="comma-separated (default,threads=1)")
    parser.add_argument(
        "--layout",
        choices=("processes", "interleaved"),
        default="processes",
        help="a worker process per configuration, passes alternated (default), or every session in this process",
    )
    args = parser.parse_args()
    if args.source == "demo":
        from pgmem.demo import load_corpus

        texts = list(dict.fromkeys(q.question for q in load_corpus()[1]))[: args.questions]
        origin = "MultiHop-RAG demo questions"
    else:
        texts, origin = questions(args.data, args.questions)
    names = args.configs.split(",")
    configurations(names)  # unknown names fail here, before any worker starts
    load_before = os.getloadavg()
    run = in_processes if args.layout == "processes" else interleaved
    timings, vectors = run(names, texts, args.repeats)
    load_after = os.getloadavg()
    # The tokenizer alone, to split the time.
    tokenizer = MiniLMEmbedder()._loaded()[0]
    tokenize = []
    for text in texts:
        tick = time.perf_counter()
        tokenizer.encode(text)
        tokenize.append((time.perf_counter() - tick) * 1000)
    tokens = [len(tokenizer.encode(text).ids) for text in texts]
    import onnxruntime

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs,"
        f" Python {platform.python_version()}, onnxruntime {onnxruntime.__version__};"
        f" load average {load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    layout = "a process per configuration" if args.layout == "processes" else "configurations interleaved"
    print(
        f"{len(texts)} questions ({origin}), {statistics.median(tokens):.0f} tokens median"
        f" ({min(tokens)}-{max(tokens)}); {args.repeats} passes, {layout}"
    )
    base = statistics.median(timings[names[0]][0])
    for name in names:
        wall, cpu = timings[name]
        p50 = statistics.median(wall)
        drift = float(np.abs(vectors[name] - vectors[names[0]]).max())
        print(
            f"  {name:<32} p50 {p50:6.2f} ms  p95 {percentile(wall, 95):6.2f} ms"
            f"  p99 {percentile(wall, 99):6.2f} ms  ratio {p50 / base:5.2f}"
            f"  caller CPU p50 {statistics.median(cpu):6.2f} ms  max |dv| {drift:.1e}"
        )
    print(f"  tokenizer alone: p50 {statistics.median(tokenize):.3f} ms, p95 {percentile(tokenize, 95):.3f} ms")


if __name__ == "__main__":
    main()
