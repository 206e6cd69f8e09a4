"""Embed the recombined corpus of ``pgmem bench`` / bench_scale.py with the bundled MiniLM, in shards.

Writes ``texts-<k>.json`` and ``vectors-<k>.npy`` (float32, rows in text order) for shard k
of ``--shard`` notes under ``--out``; a shard is written to a temporary name and renamed, so
an interrupted run resumes at the first missing shard. The texts are
``pgmem.eval.bench.recombined(real_sentences(data), notes)`` (seed 7): note i of the store is
text i, so bench_scale.py --vectors DIR ingests these vectors for those texts.

    nice -n 10 .venv/bin/python benchmarks/embed_corpus.py [--notes 1000000] [--out /tmp/million-vectors]
                                                           [--threads 1] [--shard 10000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import time
from pathlib import Path

import numpy as np

from pgmem.embeddings.minilm import DIMENSION, MiniLMEmbedder
from pgmem.eval.bench import real_sentences, recombined

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def halves(sentence: str) -> tuple[str, str]:
    """The two halves ``recombined`` cuts a sentence into (first half, second half)."""
    words = sentence.split()
    return " ".join(words[: max(1, len(words) // 2)]), " ".join(words[len(words) // 2 :])


def embed_halves(sentences: list[str], out: Path, threads: int) -> None:
    """MiniLM vectors of every distinct source sentence's two halves (``halves.json``, ``halves-*.npy``)."""
    distinct = sorted(set(sentences))
    embedder = MiniLMEmbedder(intra_op_num_threads=threads)
    tick = time.time()
    for side in (0, 1):
        vectors = embedder.embed([halves(s)[side] for s in distinct])
        np.save(out / f"halves-{side}.npy", vectors)
        print(
            f"{time.strftime('%H:%M:%S')} halves {side}: {len(distinct) / (time.time() - tick):.0f} texts/s", flush=True
        )
    (out / "halves.json").write_text(json.dumps(distinct), encoding="utf-8")


def recombined_pairs(sentences: list[str], count: int, seed: int = 7) -> list[tuple[int, int]]:
    """The two source sentences (indices) of each text ``recombined(sentences, count, seed)`` makes.

    The same random draws: ``rng.choice`` of a range draws the index ``rng.choice`` of the
    list does.
    """
    rng = random.Random(seed)
    indices = range(len(sentences))
    return [(rng.choice(indices), rng.choice(indices)) for _ in range(count)]


def corpus_vectors(folder: Path, sentences: list[str], texts: list[str]) -> tuple[np.ndarray, int]:
    """Vectors of ``recombined`` texts: the embedded shards' real MiniLM vectors for the prefix
    they cover, and for the rest a composed MiniLM vector (below); how many are real.

    A text beyond the shards is the first half of sentence A and the second half of B; its
    composed vector is the normalised sum of the real MiniLM vectors of those two halves,
    each weighted by its word count (mean pooling over the tokens of both halves, without
    the attention across them). :func:`composition_agreement` measures how close that is.
    """
    out = np.empty((len(texts), DIMENSION), dtype=np.float32)
    real = 0
    for k in itertools.count():
        path = folder / f"vectors-{k:04d}.npy"
        if not path.exists() or real >= len(texts):
            break
        shard_texts = json.loads((folder / f"texts-{k:04d}.json").read_text(encoding="utf-8"))
        rows = min(len(shard_texts), len(texts) - real)
        if shard_texts[:rows] != texts[real : real + rows]:
            raise SystemExit(f"{path}: its texts are not the corpus's texts {real}..{real + rows}")
        out[real : real + rows] = np.load(path)[:rows]
        real += rows
    if real < len(texts):
        out[real:] = composed(folder, sentences, len(texts))[real:]
    return out, real


def composed(folder: Path, sentences: list[str], count: int) -> np.ndarray:
    """The composed vectors of the first ``count`` recombined texts (see corpus_vectors)."""
    distinct = json.loads((folder / "halves.json").read_text(encoding="utf-8"))
    row = {sentence: i for i, sentence in enumerate(distinct)}
    first, second = np.load(folder / "halves-0.npy"), np.load(folder / "halves-1.npy")
    words = [len(halves(s)[0].split()) for s in distinct], [len(halves(s)[1].split()) for s in distinct]
    pairs = np.array([(row[sentences[a]], row[sentences[b]]) for a, b in recombined_pairs(sentences, count)])
    counts = np.asarray(words[0], dtype=np.float32), np.asarray(words[1], dtype=np.float32)
    out = np.empty((count, DIMENSION), dtype=np.float32)
    for start in range(0, count, 100_000):
        a, b = pairs[start : start + 100_000, 0], pairs[start : start + 100_000, 1]
        vectors = counts[0][a, None] * first[a] + counts[1][b, None] * second[b]
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        out[start : start + len(a)] = vectors
    return out


def composition_agreement(folder: Path, sentences: list[str], texts: list[str]) -> dict[str, float]:
    """Cosine between the real and the composed vector of every text the shards cover."""
    real_vectors, real = corpus_vectors(folder, sentences, texts)
    if real == 0:
        return {}
    cosines = np.sum(real_vectors[:real] * composed(folder, sentences, real), axis=1)
    return {
        "texts": real,
        "mean": float(cosines.mean()),
        "p5": float(np.percentile(cosines, 5)),
        "min": float(cosines.min()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/million-vectors"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shard", type=int, default=10_000)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--halves", action="store_true", help="embed the source sentences' halves instead")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sentences, _questions = real_sentences(args.data)
    if args.halves:
        embed_halves(sentences, args.out, args.threads)
        return
    texts = recombined(sentences, args.notes)
    embedder = MiniLMEmbedder(intra_op_num_threads=args.threads)
    started = time.time()
    done = 0
    for k, first in enumerate(range(0, len(texts), args.shard)):
        target = args.out / f"vectors-{k:04d}.npy"
        if target.exists():
            continue
        chunk = texts[first : first + args.shard]
        tick = time.time()
        vectors = embedder.embed(chunk)
        (args.out / f"texts-{k:04d}.json.tmp").write_text(json.dumps(chunk), encoding="utf-8")
        os.replace(args.out / f"texts-{k:04d}.json.tmp", args.out / f"texts-{k:04d}.json")
        with open(args.out / f"vectors-{k:04d}.tmp.npy", "wb") as handle:
            np.save(handle, vectors.astype(np.float32))
        os.replace(args.out / f"vectors-{k:04d}.tmp.npy", target)
        done += len(chunk)
        rate = done / (time.time() - started)
        eta = time.strftime("%Y-%m-%d %H:%M", time.gmtime(time.time() + (len(texts) - first - len(chunk)) / rate))
        print(
            f"{time.strftime('%H:%M:%S')} shard {k} ({first + len(chunk)} notes):"
            f" {len(chunk) / (time.time() - tick):.0f} texts/s, {rate:.0f} texts/s overall, ETA {eta} UTC",
            flush=True,
        )


if __name__ == "__main__":
    main()
