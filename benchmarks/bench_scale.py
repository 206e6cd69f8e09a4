"""Stage-one latency as one namespace grows to a million notes (a benchmark, not a test).

Builds one namespace of N notes (default 1,000,000) from the shared data's real
sentences recombined into new ones (``bench_lexical.synthetic``: the first half of one
sentence, the second half of another, so the vocabulary and its skew are real),
ingested through ``pgmem.ingest`` in batches, and at each checkpoint (default 10k, 30k,
100k, 300k, 1M notes) times stage one — the statement ``pgmem.pack`` runs, with hints
derived from the question — for ~200 LoCoMo questions, each asked twice: a first pass
(whatever the cache holds after the build) and a second, warm pass.

The embedder is :class:`pgmem.embeddings.HashingEmbedder` at 384 dimensions, so the HNSW
index has the bundled MiniLM's dimension and the dense search comparable work; the
*quality* of those vectors is meaningless, and so is any recall here: only latency is
measured. The recall side of growth is ``pgmem eval-growth`` (real embedder, real gold).

    .venv/bin/python benchmarks/bench_scale.py [--notes 1000000] [--checkpoints 10000,100000,1000000]
                                               [--questions 200] [--batch 10000] [--out scale.json]
                                               [--home DIR | --dsn DSN]

``--bulk`` instead loads the store with one ``pgmem.bulk_load`` (``--vectors``: MiniLM
vectors of benchmarks/embed_corpus.py), or reuses the one under ``--home``; times stage one,
its ANN recall and ``--incremental`` batches of ``pgmem.ingest`` (``--writers`` at once, a
connection each; ``--incremental-from`` skips the batches a reused store already holds;
``--ingest-only``: the batches alone)::

    .venv/bin/python benchmarks/bench_scale.py --bulk --notes 1000000 --vectors DIR --home DIR \
        [--incremental 10] [--writers 2] [--incremental-from 10] [--ingest-only]

Where the build's time goes (measured here, 2 cores): before migration 0003, ingest
slowed down linearly with the store, because its rare-key link lookups were planned as a
walk of the primary key filtered row by row instead of a GIN lookup (599 notes/s for
the first 10k notes, 111 notes/s for the next 10k, over 85 % of it in those lookups);
0003 moved them into functions that plan them on the GIN indexes. What remains is the
INSERT itself, mostly the HNSW index (about 2 ms per 384-dimension vector against
0.4 ms for the rest near 30k notes), growing as the index outgrows the embedded
server's 128 MB of shared buffers (390 MB of HNSW index at 200k notes): sampled at 200k
notes, 90 % of the build's database time was that INSERT, a third of it waiting on data
file reads.

Without --dsn it runs the embedded PostgreSQL under --home (default: a new temporary
folder, kept, so an interrupted build can be resumed by passing it and --out again:
notes are deterministic, the build skips what the namespace already holds, and keeps
the checkpoints the JSON already has; ``resumed_at_notes`` records where). The JSON holds the
machine, versions, build times and, per checkpoint, the stage-one percentiles;
``pgmem.eval.plots.plot_growth`` overlays its points on the growth plot.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench_lexical import DATA, real_sentences, synthetic
from soak import machine

import pgmem
from pgmem.api import build_hints
from pgmem.db.vectors import vector_literal
from pgmem.embeddings import HashingEmbedder
from pgmem.embeddings.minilm import MODEL_NAME as MINILM_NAME
from pgmem.embeddings.minilm import MiniLMEmbedder
from pgmem.errors import ConfigurationError
from pgmem.eval.bench import _sizes, write_at_once, writer_connections
from pgmem.retrieval.stage_one import run_stage_one, stage_one_arguments

NAMESPACE = "scale"
DIMENSION = 384
FAMILIES = 50
DEFAULT_CHECKPOINTS = (10_000, 30_000, 100_000, 300_000, 1_000_000)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p95 (linear interpolation, as pgmem.eval.metrics does) and the mean, in ms."""
    array = np.asarray(values, dtype=np.float64)
    return {
        "p50": float(np.percentile(array, 50)),
        "p95": float(np.percentile(array, 95)),
        "mean": float(array.mean()),
    }


def spans(texts: Sequence[str], first: int) -> list[pgmem.Span]:
    """One-span documents ``doc-<i>``; families ``f0`` … ``f49`` in turn."""
    return [
        pgmem.Span(document_id=f"doc-{i}", text=text, start=0, end=len(text.encode("utf-8")), family=f"f{i % FAMILIES}")
        for i, text in enumerate(texts, start=first)
    ]


def stored_notes(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM pgmem.notes WHERE namespace = %s", (NAMESPACE,)).fetchone()
    return int(row[0]) if row else 0


def time_questions(
    conn: psycopg.Connection[Any],
    model: str,
    questions: Sequence[str],
    vectors: np.ndarray,
    params: pgmem.StageOneParams | None = None,
) -> dict[str, dict[str, float]]:
    """Stage one for every question (its query vector of ``model`` in ``vectors``), twice;
    the percentiles of each pass in ms."""
    return time_interleaved(conn, model, questions, vectors, {"stage_one": params or pgmem.StageOneParams()})[
        "stage_one"
    ]


def time_interleaved(
    conn: psycopg.Connection[Any],
    model: str,
    questions: Sequence[str],
    vectors: np.ndarray,
    settings: dict[str, pgmem.StageOneParams],
) -> dict[str, dict[str, dict[str, float]]]:
    """:func:`time_questions` for each of ``settings``, their passes alternated (first passes
    of every setting, then second passes), so that they share the machine's load."""
    arguments = {
        label: [
            stage_one_arguments(NAMESPACE, model, vector, question, build_hints(question), params)
            for question, vector in zip(questions, vectors, strict=True)
        ]
        for label, params in settings.items()
    }
    passes: dict[str, dict[str, dict[str, float]]] = {label: {} for label in settings}
    for name in ("first_pass", "second_pass"):
        for label, calls in arguments.items():
            times = []
            for argument in calls:
                tick = time.perf_counter()
                run_stage_one(conn, argument)
                times.append((time.perf_counter() - tick) * 1000)
            passes[label][name] = percentiles(times)
    return passes


def versions(conn: psycopg.Connection[Any]) -> dict[str, str]:
    server = conn.execute("SHOW server_version").fetchone()
    vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return {"postgresql": str(server[0]) if server else "?", "pgvector": str(vector[0]) if vector else "?"}


def summary(
    conn: psycopg.Connection[Any],
    args: argparse.Namespace,
    embedder: HashingEmbedder,
    questions: int,
    build_seconds: float,
    resumed: list[int],
    points: list[dict[str, Any]],
) -> dict[str, Any]:
    """The JSON of the run: machine, versions, settings and the checkpoints so far."""
    return {
        "benchmark": "bench_scale",
        "machine": machine(),
        **versions(conn),
        "embedder": f"{embedder.name} (latency only: its vectors carry no meaning here)",
        "namespace": NAMESPACE,
        "questions": questions,
        "stage_one_params": pgmem.StageOneParams().as_dict(),
        "build_seconds": build_seconds,
        "resumed_at_notes": resumed,
        "points": points,
    }


def _previous(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) and data.get("benchmark") == "bench_scale" else {}


def previous_points(path: Path, done: int) -> list[dict[str, Any]]:
    """The checkpoints an interrupted build already measured (store size <= ``done``)."""
    return [point for point in _previous(path).get("points", []) if point["notes"] <= done]


def previous_resumes(path: Path) -> list[int]:
    return [int(n) for n in _previous(path).get("resumed_at_notes", [])]


def parse_checkpoints(text: str, notes: int) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigurationError(f"--checkpoints must be comma-separated integers, got {text!r}") from None
    if not values or values[0] < 1:
        raise ConfigurationError(f"--checkpoints must be positive note counts, got {text!r}")
    return [value for value in values if value < notes] + [notes]


class StoredVectors:
    """An embedder answering from vectors computed beforehand (MiniLM's name and dimension),
    so that loads and ingests are timed without the embedding, as issue 12 measures them."""

    name = MINILM_NAME
    dimension = DIMENSION

    def __init__(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self._rows = {text: row for row, text in enumerate(texts)}
        self._vectors = vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors[[self._rows[text] for text in texts]]


def ann_recall(
    conn: psycopg.Connection[Any], vectors: np.ndarray, queries: np.ndarray, ef_search: Sequence[int], k: int
) -> dict[str, Any]:
    """Recall@k of stage one's dense step (HNSW, iterative scan as stage_one_v1 sets it) against
    the exact top k (numpy over every vector of the namespace), and its p50 ms, per ef_search."""
    row = conn.execute("SELECT model_id FROM pgmem.namespaces WHERE namespace = %s", (NAMESPACE,)).fetchone()
    model_id = int(row[0]) if row else 0
    # Note i is document doc-<i> and row i of ``vectors``.
    exact = [set(np.argpartition(-(vectors @ q), k)[:k].tolist()) for q in queries]
    results: dict[str, Any] = {}
    statement = (
        "SELECT document_id FROM pgmem.notes WHERE namespace = %s AND model_id = %s"
        f" ORDER BY embedding::vector({DIMENSION}) <=> %s::vector({DIMENSION}) LIMIT %s"
    )
    for ef in ef_search:
        hits, times = [], []
        with conn.transaction():
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(max(ef, k)),))
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
            explain = conn.execute("EXPLAIN " + statement, (NAMESPACE, model_id, vector_literal(queries[0]), k))
            plan = "\n".join(str(r[0]) for r in explain)
            for query_vector, truth in zip(queries, exact, strict=True):
                tick = time.perf_counter()
                found = conn.execute(statement, (NAMESPACE, model_id, vector_literal(query_vector), k)).fetchall()
                times.append((time.perf_counter() - tick) * 1000)
                hits.append(len({int(r[0][4:]) for r in found} & truth) / k)
        results[str(ef)] = {"recall": float(np.mean(hits)), "ms": percentiles(times), "uses_hnsw": "hnsw" in plan}
        print(f"  ef_search {ef}: recall@{k} {np.mean(hits):.3f}, p50 {np.percentile(times, 50):.1f} ms", flush=True)
    return results


def pool_dense_recall(
    conn: psycopg.Connection[Any],
    model: str,
    questions: Sequence[str],
    queries: np.ndarray,
    vectors: np.ndarray,
    params: pgmem.StageOneParams,
) -> dict[str, Any]:
    """How much of the exact dense top ``k_dense`` stage one's pool holds with ``params``
    (pgmem's defaults: its own ``ef_search`` for the namespace's size, iterative scan,
    family cap): the ANN stage's recall as a pack sees it."""
    k = params.k_dense
    shares = []
    for question, query_vector in zip(questions, queries, strict=True):
        exact = set(np.argpartition(-(vectors @ query_vector), k)[:k].tolist())
        pool = run_stage_one(
            conn, stage_one_arguments(NAMESPACE, model, query_vector, question, build_hints(question), params)
        )
        found = {int(c.document_id[4:]) for c in pool.candidates if c.document_id.startswith("doc-")}
        shares.append(len(found & exact) / k)
    row = conn.execute(
        "SELECT pgmem.hnsw_breadth_v1(model_id, note_count, %s, %s) FROM pgmem.namespaces WHERE namespace = %s",
        (params.ef_search, params.ef_search_notes, NAMESPACE),
    ).fetchone()
    breadth = int(row[0]) if row else None
    print(f"  stage one (ef_search {breadth}): its pool holds {np.mean(shares):.3f} of the exact top {k}", flush=True)
    return {"recall": float(np.mean(shares)), "p10": float(np.percentile(shares, 10)), "k": k, "ef_search": breadth}


def bulk_main(args: argparse.Namespace) -> None:
    """--bulk: one pgmem.bulk_load of --notes notes, then stage one, ANN recall and incremental ingest."""
    from embed_corpus import composition_agreement, corpus_vectors

    sentences, all_questions = real_sentences(args.data)
    questions = all_questions[: args.questions]
    batches = range(args.incremental_from, args.incremental_from + args.incremental)
    texts = synthetic(sentences, args.notes + batches.stop * args.incremental_batch, seed=args.seed)
    if args.vectors is not None:
        vectors, real = corpus_vectors(args.vectors, sentences, texts[: args.notes])
        agreement = composition_agreement(args.vectors, sentences, texts[: min(args.notes, 50_000)])
        load_embedder: Any = StoredVectors(texts[: args.notes], vectors)
        query_vectors = MiniLMEmbedder(intra_op_num_threads=1).embed(questions)
    else:
        real, agreement = 0, {}
        hashing = HashingEmbedder(dimension=DIMENSION)
        vectors = hashing.embed(texts[: args.notes])
        load_embedder = StoredVectors(texts[: args.notes], vectors)
        query_vectors = hashing.embed(questions)
    kind = "composed MiniLM" if args.vectors is not None else "hashing"
    print(f"vectors: {real:,} real MiniLM, {args.notes - real:,} {kind}; agreement {agreement}", flush=True)
    out: dict[str, Any] = {
        "benchmark": "bench_scale --bulk",
        "machine": machine(),
        "notes": args.notes,
        "real_vectors": real,
        "other_vectors": kind,
        "composed_vectors": args.notes - real,
        "composition_agreement": agreement,
    }
    with pgmem.connect(args.dsn, migrate=True) as conn:
        out.update(versions(conn))
        if stored_notes(conn) == 0:
            result = pgmem.bulk_load(
                conn,
                spans(texts[: args.notes], 0),
                namespace=NAMESPACE,
                embedder=load_embedder,
                enrich_workers=args.enrich_workers,
            )
            out["bulk_load"] = {
                "enrich_workers": args.enrich_workers,
                "seconds": result.seconds,
                "indexes": result.indexes,
                "maintenance_work_mem": result.maintenance_work_mem,
                "notes_per_second": result.inserted / result.seconds["total"],
            }
            print(f"bulk load: {out['bulk_load']}", flush=True)
        tick = time.perf_counter()
        conn.execute("VACUUM ANALYZE pgmem.notes")
        out["vacuum_analyze_seconds"] = time.perf_counter() - tick
        out["sizes"] = {name: size for name, size in _sizes(conn, NAMESPACE).items()}
        out["lexeme_postings_bytes"] = int(
            conn.execute("SELECT pg_total_relation_size('pgmem.lexeme_postings')").fetchone()[0]
        )  # type: ignore[index]
        if not args.ingest_only:
            # pgmem's defaults, and a fixed HNSW breadth (ef_search at every size, as before
            # migration 0025), alternated.
            timed = time_interleaved(
                conn,
                load_embedder.name,
                questions,
                query_vectors,
                {
                    "default": pgmem.StageOneParams(),
                    "fixed_breadth": pgmem.StageOneParams(ef_search_notes=None),
                },
            )
            out["stage_one_ms"] = timed["default"]
            out["stage_one_ms_fixed_breadth"] = timed["fixed_breadth"]
            print(f"stage one ({len(questions)} questions): {timed}", flush=True)
            out["ann_recall"] = ann_recall(conn, vectors, query_vectors, args.ef_search, pgmem.StageOneParams().k_dense)
            out["pool_dense_recall"] = {
                label: pool_dense_recall(conn, load_embedder.name, questions, query_vectors, vectors, params)
                for label, params in (
                    ("default", pgmem.StageOneParams()),
                    ("fixed_breadth", pgmem.StageOneParams(ef_search_notes=None)),
                )
            }
        rates = incremental(conn, args, texts, vectors, list(batches))
        out["incremental_notes_per_second"] = rates
        out["incremental_writers"] = args.writers
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"written {args.out}")


def incremental(
    conn: psycopg.Connection[Any],
    args: argparse.Namespace,
    texts: Sequence[str],
    vectors: np.ndarray,
    batches: list[int],
) -> list[float]:
    """Notes/s of each round of ``pgmem.ingest`` batches: ``--writers`` batches at once, each
    writer on its own connection (pgmem.eval.bench's writers; one writer: one batch a round)."""
    rates = []
    with writer_connections(conn, args.writers) as writers:
        for start in range(0, len(batches), len(writers)):
            round_batches = batches[start : start + len(writers)]
            firsts = [args.notes + batch * args.incremental_batch for batch in round_batches]
            new = [texts[first : first + args.incremental_batch] for first in firsts]
            # Vectors of stored notes, permuted: real-looking vectors, embedding excluded.
            positions = [np.arange(first, first + len(part)) for first, part in zip(firsts, new, strict=True)]
            picks = (np.concatenate(positions) * 7919) % args.notes
            embedder = StoredVectors([text for part in new for text in part], vectors[picks])
            tick = time.perf_counter()
            inserted = write_at_once(
                writers, [spans(part, first) for part, first in zip(new, firsts, strict=True)], NAMESPACE, embedder
            )
            rates.append(inserted / (time.perf_counter() - tick))
            print(
                f"  incremental batches {round_batches} ({len(round_batches)} writers):"
                f" {inserted} new notes, {rates[-1]:.0f} notes/s",
                flush=True,
            )
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--notes", type=int, default=1_000_000, help="final store size (default 1,000,000)")
    parser.add_argument(
        "--checkpoints",
        default=",".join(map(str, DEFAULT_CHECKPOINTS)),
        help="store sizes to time stage one at (comma-separated; --notes is always one)",
    )
    parser.add_argument("--questions", type=int, default=200, help="LoCoMo questions timed per checkpoint")
    parser.add_argument("--batch", type=int, default=10_000, help="spans per ingest() call (one transaction)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the recombined sentences")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    parser.add_argument("--out", type=Path, default=Path("scale.json"), help="JSON output")
    parser.add_argument("--dsn")
    parser.add_argument("--home", help="embedded server folder (default: a new temporary folder)")
    parser.add_argument("--bulk", action="store_true", help="one pgmem.bulk_load of --notes notes (checkpoints unused)")
    parser.add_argument("--vectors", type=Path, help="with --bulk: MiniLM vectors of benchmarks/embed_corpus.py")
    parser.add_argument("--ef-search", type=lambda t: [int(v) for v in t.split(",")], default=[40, 100, 200, 400])
    parser.add_argument("--incremental", type=int, default=5, help="with --bulk: ingest() batches timed after the load")
    parser.add_argument("--incremental-batch", type=int, default=1000)
    parser.add_argument(
        "--incremental-from",
        type=int,
        default=0,
        help="with --bulk: the first incremental batch's number (a reused store already holds the earlier ones)",
    )
    parser.add_argument(
        "--writers", type=int, default=1, help="with --bulk: incremental batches written at once, a connection each (1)"
    )
    parser.add_argument(
        "--enrich-workers", type=int, default=0, help="with --bulk: pgmem.bulk_load's enrich_workers (0)"
    )
    parser.add_argument(
        "--ingest-only", action="store_true", help="with --bulk: the incremental batches alone (no search timed)"
    )
    args = parser.parse_args()
    if args.notes < 1:
        raise ConfigurationError(f"--notes must be >= 1, got {args.notes}")
    if args.batch < 1:
        raise ConfigurationError(f"--batch must be >= 1, got {args.batch}")
    if args.writers < 1:
        raise ConfigurationError(f"--writers must be >= 1, got {args.writers}")
    checkpoints = parse_checkpoints(args.checkpoints, args.notes)
    home = args.home or (None if args.dsn else tempfile.mkdtemp(prefix="pgmem-scale-"))
    if home is not None:
        os.environ["PGMEM_HOME"] = home
        print(f"embedded server under {home}", flush=True)
    if args.bulk:
        bulk_main(args)
        return
    embedder = HashingEmbedder(dimension=DIMENSION)
    sentences, all_questions = real_sentences(args.data)
    questions = all_questions[: args.questions]
    texts = synthetic(sentences, args.notes, seed=args.seed)
    points: list[dict[str, Any]] = []
    resumed: list[int] = []
    with pgmem.connect(args.dsn, migrate=True) as conn:
        done = stored_notes(conn)
        if done:
            # Checkpoints measured before the build stopped are kept, not re-measured.
            points = previous_points(args.out, done)
            resumed = [*previous_resumes(args.out), done]
            print(
                f"resuming: namespace {NAMESPACE!r} already holds {done} notes;"
                f" {len(points)} checkpoint(s) kept from {args.out}",
                flush=True,
            )
        build_seconds = sum(float(point["ingest_seconds"]) for point in points)
        for checkpoint in checkpoints:
            if checkpoint < done or any(point["notes"] == checkpoint for point in points):
                # A store does not shrink: a resumed build measures only what is left.
                continue
            started, before = time.perf_counter(), done
            for first in range(done, checkpoint, args.batch):
                batch = texts[first : min(first + args.batch, checkpoint)]
                tick = time.perf_counter()
                pgmem.ingest(conn, spans(batch, first), namespace=NAMESPACE, embedder=embedder)
                seconds = time.perf_counter() - tick
                done = first + len(batch)
                print(
                    f"  {done:>9,} notes  (+{len(batch)} in {seconds:5.1f} s, {len(batch) / seconds:6.0f} notes/s)",
                    flush=True,
                )
            ingest_seconds = time.perf_counter() - started
            build_seconds += ingest_seconds
            tick = time.perf_counter()
            # What autovacuum would have done by now on a live store: fresh statistics
            # for the planner and a visibility map for index-only scans.
            conn.execute("VACUUM ANALYZE pgmem.notes")
            vacuum_seconds = time.perf_counter() - tick
            stored = stored_notes(conn)
            passes = time_questions(conn, embedder.name, questions, embedder.embed(list(questions)))
            size = conn.execute("SELECT pg_total_relation_size('pgmem.notes')").fetchone()
            point: dict[str, Any] = {
                "notes": stored,
                "ingest_seconds": ingest_seconds,
                "ingested": done - before,
                "vacuum_analyze_seconds": vacuum_seconds,
                "notes_table_bytes": int(size[0]) if size else None,
                "stage_one_ms": passes["second_pass"],
                "stage_one_ms_first_pass": passes["first_pass"],
            }
            points.append(point)
            warm, cold = passes["second_pass"], passes["first_pass"]
            print(
                f"checkpoint {stored:,} notes: ingest {ingest_seconds:.0f} s, vacuum analyze {vacuum_seconds:.0f} s;"
                f" stage one p50 {warm['p50']:.1f} ms, p95 {warm['p95']:.1f} ms"
                f" (first pass p50 {cold['p50']:.1f}, p95 {cold['p95']:.1f})",
                flush=True,
            )
            # Written at every checkpoint: a long build that dies still leaves its points.
            result = summary(conn, args, embedder, len(questions), build_seconds, resumed, points)
            args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        result = summary(conn, args, embedder, len(questions), build_seconds, resumed, points)

    print(f"\n{result['machine']}; PostgreSQL {result['postgresql']}, pgvector {result['pgvector']}")
    print(f"{len(questions)} LoCoMo questions per checkpoint, stage one as pgmem.pack runs it (hints derived):\n")
    print("| notes | ingest s (step) | notes/s | p50 ms | p95 ms | mean ms | first pass p50 / p95 ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    previous = 0
    for point in points:
        # "ingested" differs from the step's size when the build resumed inside the step.
        added = point.get("ingested", point["notes"] - previous)
        rate = added / point["ingest_seconds"] if point["ingest_seconds"] > 0 and added > 0 else float("nan")
        warm, cold = point["stage_one_ms"], point["stage_one_ms_first_pass"]
        print(
            f"| {point['notes']:,} | {point['ingest_seconds']:.0f} | {rate:.0f} | {warm['p50']:.1f} |"
            f" {warm['p95']:.1f} | {warm['mean']:.1f} | {cold['p50']:.1f} / {cold['p95']:.1f} |"
        )
        previous = point["notes"]
    print(f"\nbuild: {build_seconds:.0f} s in ingest() for {points[-1]['notes']:,} notes; written {args.out}")


if __name__ == "__main__":
    main()
