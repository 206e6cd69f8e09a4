"""What a MiniLM-L6-sized cross-encoder would cost over pgmem's top 16 (issue 14's latency bound).

No cross-encoder ships inside a package on the index (docs/results.md), so its cost is
measured with the graph of the same size pgmem does ship: the bundled int8
all-MiniLM-L6-v2 run on ``[CLS] question [SEP] note [SEP]`` pairs (token types 0 / 1),
the input shape of ms-marco-MiniLM-L-6 and of every BERT-style re-ranker. For each of the
first ``--questions`` answerable LoCoMo questions it reads 16 turns of the question's
conversation (from its first gold turn on: real turn lengths) as one batch, padded to
its longest pair, and reports the wall time per batch, p50 / p95, beside the time of
embedding the question alone (what the read path runs today)::

    PYTHONPATH=.:benchmarks python benchmarks/bench_cross_encoder_cost.py [--questions 100] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from bench_lexical import DATA

from pgmem.embeddings.minilm import MiniLMEmbedder
from pgmem.eval import load_locomo

LOCOMO = DATA / "locomo" / "locomo_dev5.json"
PAIRS = 16


def batches(path: Path, count: int) -> list[tuple[str, list[str]]]:
    """(question, 16 turns of its conversation from its first gold turn) for ``count`` questions."""
    corpus = load_locomo(path)
    found = []
    for question in corpus.questions:
        if question.adversarial or not question.gold:
            continue
        turns = corpus.spans[question.namespace]
        start = next((i for i, span in enumerate(turns) if span.external_id == question.gold[0]), 0)
        texts = [span.text for span in turns[start : start + PAIRS]]
        if len(texts) == PAIRS:
            found.append((question.question, texts))
        if len(found) == count:
            break
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (1)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data", type=Path, default=LOCOMO)
    args = parser.parse_args()
    embedder = MiniLMEmbedder(intra_op_num_threads=args.threads)
    tokenizer, session = embedder._loaded()
    work = batches(args.data, args.questions)

    def pairs(question: str, texts: list[str]) -> None:
        embedder._run(session, tokenizer.encode_batch([(question, text) for text in texts]))

    for question, texts in work[:5]:  # warm up
        pairs(question, texts)
        embedder.embed([question])
    batch_ms: list[float] = []
    question_ms: list[float] = []
    for _ in range(args.rounds):
        for question, texts in work:
            tick = time.perf_counter()
            pairs(question, texts)
            batch_ms.append((time.perf_counter() - tick) * 1000)
            tick = time.perf_counter()
            embedder.embed([question])
            question_ms.append((time.perf_counter() - tick) * 1000)
    tokens = [len(e.ids) for question, texts in work for e in tokenizer.encode_batch([(question, t) for t in texts])]
    print(
        f"{len(work)} questions x {args.rounds} rounds, {PAIRS} pairs a batch (median {int(np.median(tokens))}"
        f" tokens a pair), {args.threads} thread(s)"
    )
    for label, values in ((f"{PAIRS} pairs", batch_ms), ("the question alone", question_ms)):
        print(f"  {label:<20s} p50 {np.percentile(values, 50):7.1f} ms  p95 {np.percentile(values, 95):7.1f} ms")


if __name__ == "__main__":
    main()
