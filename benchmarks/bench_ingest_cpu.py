"""CPU per note of incremental ingest into a loaded store, step by step (a benchmark, not a test).

Builds a store of --notes recombined real sentences with ``pgmem.bulk_load`` (or reuses
the one under --home), then ingests --batches batches of --batch new notes with
``pgmem.ingest``: hashing vectors computed beforehand (embedding excluded), enrichment
included. For each batch it prints notes/s, the client's CPU per note, the server's
(every process of the embedded server: backends, background writer, autovacuum; Linux
/proc) and the session backend's, split by the writer's steps (each statement; the
backend's /proc/PID/schedstat before and after each).

* ``--compare FILE``: each batch in a transaction rolled back, alternately as the store is
  and after running FILE's SQL in that transaction (a migration: before / after on the
  same store, interleaved; which of a pair runs first alternates; the store keeps its
  notes).
* ``--rollback``: each batch rolled back (repeatable measurements on one store).
* ``--in-transaction``: each batch inside a transaction of the caller's (as on a
  connection that is not in autocommit mode), so the batch is a savepoint.
* ``--split ROUNDS``: instead, the first batch's INSERT alone, in savepoints rolled back,
  with parts of the table's work switched off in turn (an index dropped, triggers
  disabled), and ``EXPLAIN (ANALYZE, BUFFERS)`` of it once: what each part costs.
* ``--hnsw-alone ROUNDS``: the HNSW insert alone: scratch tables holding the store's size
  in hashing vectors and in composed MiniLM vectors (``--vectors``: the folder of
  benchmarks/embed_corpus.py --halves), each with only an HNSW index; the batch's
  vectors inserted and rolled back, alternating. The tables (``public.bench_hnsw_*``)
  stay for the next run; drop them by hand.

With --compare and --rollback, the batch's own transaction is the one rolled back (at its
commit), so the insert runs as in a real call: in a top-level transaction, or in a
savepoint with --in-transaction.

Needs the tables' owner (the embedded server's default user) for --split and --compare.

    .venv/bin/python benchmarks/bench_ingest_cpu.py --notes 60000 --home /tmp/ingest-60k \
        [--batches 3] [--batch 1000] [--in-transaction] [--compare sql/migrations/0020_ingest_speed.sql \
        | --rollback | --split 3 | --hnsw-alone 3 --vectors /tmp/million-vectors]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench_lexical import DATA, real_sentences, synthetic
from bench_scale import DIMENSION, NAMESPACE, StoredVectors, spans, stored_notes
from bench_stage_one_ab import backend_cpu_ms

import pgmem
import pgmem.db.steps
from pgmem.db.queries import query
from pgmem.db.vectors import vector_literal
from pgmem.embeddings import HashingEmbedder

#: Parts of the INSERT switched off by --split (each list runs in the savepoint first).
DROP_ALL_INDEXES = [
    "DROP INDEX pgmem.notes_embedding_hnsw_m{model}",
    "DROP INDEX pgmem.notes_lexemes_gin",
    "DROP INDEX pgmem.notes_external_id",
]
PARTS = {
    "full": [],
    "no hnsw": ["DROP INDEX pgmem.notes_embedding_hnsw_m{model}"],
    "no hnsw, no postings": [
        "DROP INDEX pgmem.notes_embedding_hnsw_m{model}",
        "ALTER TABLE pgmem.notes DISABLE TRIGGER notes_post_new",
    ],
    "no hnsw, postings without foreign keys": [
        "DROP INDEX pgmem.notes_embedding_hnsw_m{model}",
        "ALTER TABLE pgmem.lexeme_postings DISABLE TRIGGER ALL",
    ],
    "no hnsw, no lexeme statistics": [
        "DROP INDEX pgmem.notes_embedding_hnsw_m{model}",
        "ALTER TABLE pgmem.notes DISABLE TRIGGER notes_count_new",
    ],
    "no hnsw, no family triggers": [
        "DROP INDEX pgmem.notes_embedding_hnsw_m{model}",
        "ALTER TABLE pgmem.notes DISABLE TRIGGER notes_count_families",
        "ALTER TABLE pgmem.notes DISABLE TRIGGER notes_check_family_writers",
    ],
    "no hnsw, no word hashes": [
        "DROP INDEX pgmem.notes_embedding_hnsw_m{model}",
        "ALTER TABLE pgmem.notes DISABLE TRIGGER notes_word_hashes",
    ],
    "no hnsw, no notes foreign keys": [
        "DROP INDEX pgmem.notes_embedding_hnsw_m{model}",
        "ALTER TABLE pgmem.notes DISABLE TRIGGER ALL",
        "ALTER TABLE pgmem.notes ENABLE TRIGGER USER",
    ],
    "no hnsw, no user triggers": [
        "DROP INDEX pgmem.notes_embedding_hnsw_m{model}",
        "ALTER TABLE pgmem.notes DISABLE TRIGGER USER",
    ],
    "no hnsw, no lexemes GIN": ["DROP INDEX pgmem.notes_embedding_hnsw_m{model}", "DROP INDEX pgmem.notes_lexemes_gin"],
    "bare heap (no index but keys, no trigger)": ["ALTER TABLE pgmem.notes DISABLE TRIGGER ALL", *DROP_ALL_INDEXES],
}


def server_cpu_seconds(home: str | None) -> float | None:
    """CPU seconds of the embedded server under ``home``: its postmaster and every child."""
    if home is None:
        return None
    postmaster = int((Path(home) / "pgdata" / "postmaster.pid").read_text(encoding="ascii").split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended
        if int(entry.name) == postmaster or int(fields[1]) == postmaster:
            total += sum(int(value) for value in fields[11:15]) / tick
    return total


def backend_ms(conn: psycopg.Connection[Any]) -> float:
    return backend_cpu_ms(conn.info.backend_pid) or float("nan")


def step_name(step: Any) -> str:
    statement = getattr(step, "statement", None)
    if statement is not None:
        return str(statement.name)
    if isinstance(step, pgmem.db.steps.Copy):
        return f"copy {step.name}"
    return type(step).__name__


class RolledBack(Exception):
    """Raised at the batch's commit to roll it back."""


class StepClock:
    """Backend CPU, client CPU and wall time per writer step: wraps the sync driver's
    step runner (a benchmark's instrument; pgmem itself never does this).

    With ``setup`` (SQL, may be empty) the batch's own transaction runs it first and is
    rolled back at its commit (:class:`RolledBack`).
    """

    def __init__(self, setup: str | None = None) -> None:
        self.totals: dict[str, list[float]] = {}
        self._perform = pgmem.db.steps._perform
        self._setup = setup

    def __enter__(self) -> StepClock:
        def timed(conn: psycopg.Connection[Any], step: Any, *rest: Any) -> Any:
            if self._setup is not None and isinstance(step, pgmem.db.steps.Commit):
                raise RolledBack
            backend, client, wall = backend_ms(conn), time.process_time(), time.perf_counter()
            try:
                result = self._perform(conn, step, *rest)
                if self._setup and isinstance(step, pgmem.db.steps.Begin):
                    conn.execute(self._setup)  # type: ignore[arg-type]  # the benchmark's own SQL file
                return result
            finally:
                spent = self.totals.setdefault(step_name(step), [0.0, 0.0, 0.0])
                spent[0] += backend_ms(conn) - backend
                spent[1] += (time.process_time() - client) * 1000
                spent[2] += (time.perf_counter() - wall) * 1000

        pgmem.db.steps._perform = timed  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        pgmem.db.steps._perform = self._perform  # type: ignore[assignment]


def timed_ingest(
    conn: psycopg.Connection[Any],
    home: str | None,
    texts: Sequence[str],
    first: int,
    vectors: np.ndarray,
    setup: str | None = None,
) -> dict[str, Any]:
    """One pgmem.ingest of ``texts`` (note numbers from ``first``): rates and CPU per note.

    With ``setup`` (SQL, may be empty) the batch's transaction runs it first and is rolled
    back (see :class:`StepClock`).
    """
    size = len(texts)
    server, backend = server_cpu_seconds(home), backend_ms(conn)
    client, wall = time.process_time(), time.perf_counter()
    with StepClock(setup) as clock, contextlib.suppress(RolledBack):
        pgmem.ingest(conn, spans(texts, first), namespace=NAMESPACE, embedder=StoredVectors(texts, vectors))
    wall, client = time.perf_counter() - wall, time.process_time() - client
    server_after = server_cpu_seconds(home)
    return {
        "notes_per_s": size / wall,
        "client_ms": 1000 * client / size,
        "server_ms": None if server is None or server_after is None else 1000 * (server_after - server) / size,
        "backend_ms": (backend_ms(conn) - backend) / size,
        "steps": {name: [value / size for value in spent] for name, spent in clock.totals.items()},
    }


def run_batch(
    conn: psycopg.Connection[Any],
    home: str | None,
    texts: Sequence[str],
    first: int,
    vectors: np.ndarray,
    setup: str | None,
    in_transaction: bool,
) -> dict[str, Any]:
    """:func:`timed_ingest`, inside a transaction of the caller's when ``in_transaction``."""
    if not in_transaction:
        return timed_ingest(conn, home, texts, first, vectors, setup)
    with conn.transaction():
        return timed_ingest(conn, home, texts, first, vectors, setup)


def print_batch(label: str, result: dict[str, Any]) -> None:
    server = "n/a" if result["server_ms"] is None else f"{result['server_ms']:.3f}"
    print(
        f"{label}: {result['notes_per_s']:.0f} notes/s; ms per note: client {result['client_ms']:.3f},"
        f" server {server}, backend {result['backend_ms']:.3f}",
        flush=True,
    )
    for name, (backend, client, wall) in sorted(result["steps"].items(), key=lambda item: -item[1][0]):
        if backend >= 0.001 or client >= 0.001:
            print(f"    {name:24s} backend {backend:7.3f}  client {client:7.3f}  wall {wall:7.3f}")


def split_insert(
    conn: psycopg.Connection[Any], texts: Sequence[str], first: int, vectors: np.ndarray, rounds: int
) -> None:
    """--split: the batch's INSERT, staged by the writer, with PARTS switched off in turn."""
    costs: dict[str, list[float]] = {part: [] for part in PARTS}
    row = conn.execute("SELECT model_id FROM pgmem.namespaces WHERE namespace = %s", (NAMESPACE,)).fetchone()
    model = int(row[0]) if row else 0
    perform = pgmem.db.steps._perform

    class Staged(Exception):
        """The writer reached its INSERT: stop the batch there."""

    def at_insert(conn: psycopg.Connection[Any], step: Any, *rest: Any) -> Any:
        if step_name(step) != "insert_from_staging":
            return perform(conn, step, *rest)
        statement = query("insert_from_staging")
        for done in range(rounds):
            for part, ddl in PARTS.items():
                with conn.transaction(force_rollback=True):
                    for command in ddl:
                        conn.execute(command.format(model=model))  # type: ignore[arg-type]  # fixed names
                    before = backend_ms(conn)
                    conn.execute(statement).fetchall()  # type: ignore[arg-type]  # pgmem's own SQL
                    costs[part].append((backend_ms(conn) - before) / len(texts))
            print(f"  round {done + 1}/{rounds} done", flush=True)
        with conn.transaction(force_rollback=True):
            plan = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {statement}").fetchall()  # type: ignore[arg-type]
        print("\n".join(str(line[0]) for line in plan))
        raise Staged

    pgmem.db.steps._perform = at_insert  # type: ignore[assignment]
    try:
        with conn.transaction(force_rollback=True), contextlib.suppress(Staged):
            pgmem.ingest(conn, spans(texts, first), namespace=NAMESPACE, embedder=StoredVectors(texts, vectors))
    finally:
        pgmem.db.steps._perform = perform  # type: ignore[assignment]
    print("\nbackend CPU of the INSERT, ms per note (median over rounds; the rounds):")
    for part, values in costs.items():
        print(f"  {part:42s} {statistics.median(values):7.3f}   " + " ".join(f"{v:.3f}" for v in values))


def hnsw_alone(conn: psycopg.Connection[Any], kinds: dict[str, np.ndarray], stored: int, rounds: int) -> None:
    """--hnsw-alone: per kind of vectors, a scratch table of ``stored`` of them with only an
    HNSW index (as pgmem's: cosine, pgvector's defaults); the rest inserted, rolled back."""
    for kind, vectors in kinds.items():
        table = f"bench_hnsw_{kind}_{stored}"
        if conn.execute("SELECT to_regclass(%s)", (f"public.{table}",)).fetchone() == (None,):
            with conn.transaction():
                conn.execute(f"CREATE TABLE public.{table} (embedding vector({DIMENSION}))")  # type: ignore[arg-type]
                with conn.cursor().copy(f"COPY public.{table} (embedding) FROM STDIN") as copy:  # type: ignore[arg-type]
                    for vector in vectors[:stored]:
                        copy.write_row((vector_literal(vector),))
                conn.execute(f"CREATE INDEX ON public.{table} USING hnsw (embedding vector_cosine_ops)")  # type: ignore[arg-type]
    for done in range(rounds):
        for kind, vectors in kinds.items():
            new = vectors[stored:]
            with conn.transaction(force_rollback=True):
                conn.execute(f"CREATE TEMPORARY TABLE bench_hnsw_new (embedding vector({DIMENSION})) ON COMMIT DROP")  # type: ignore[arg-type]
                with conn.cursor().copy("COPY bench_hnsw_new (embedding) FROM STDIN") as copy:
                    for vector in new:
                        copy.write_row((vector_literal(vector),))
                before = backend_ms(conn)
                conn.execute(f"INSERT INTO public.bench_hnsw_{kind}_{stored} SELECT embedding FROM bench_hnsw_new")  # type: ignore[arg-type]
                spent = (backend_ms(conn) - before) / len(new)
            print(f"round {done + 1}, {kind} vectors: HNSW insert {spent:.3f} ms per vector (backend CPU)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--notes", type=int, default=60_000, help="notes in the store before the batches")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000, help="spans per pgmem.ingest call")
    parser.add_argument("--seed", type=int, default=0, help="seed of the recombined sentences")
    parser.add_argument("--home", help="embedded server folder (kept; reused when it holds the store)")
    parser.add_argument("--dsn")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--compare", type=Path, help="SQL file: each batch before and after it, rolled back")
    mode.add_argument("--rollback", action="store_true", help="roll each batch back")
    mode.add_argument("--split", type=int, metavar="ROUNDS", help="the first batch's INSERT, part by part")
    mode.add_argument("--hnsw-alone", type=int, metavar="ROUNDS", help="the HNSW insert alone, scratch tables")
    parser.add_argument("--in-transaction", action="store_true", help="each batch inside a caller's transaction")
    parser.add_argument("--vectors", type=Path, help="with --hnsw-alone: embed_corpus.py's folder (halves)")
    args = parser.parse_args()
    home = args.home if args.dsn is None else None
    if home is not None:
        os.environ["PGMEM_HOME"] = home
    sentences, _ = real_sentences(DATA)
    hashing = HashingEmbedder(dimension=DIMENSION)
    # --compare runs the migration under test inside rolled-back transactions: the store
    # stays as it is (it must exist).
    with pgmem.connect(args.dsn, migrate=args.compare is None) as conn:
        if stored_notes(conn) == 0:
            loaded = synthetic(sentences, args.notes, seed=args.seed)
            pgmem.bulk_load(
                conn, spans(loaded, 0), namespace=NAMESPACE, embedder=StoredVectors(loaded, hashing.embed(loaded))
            )
            conn.execute("VACUUM ANALYZE pgmem.notes")
        stored = stored_notes(conn)
        print(f"store: {stored:,} notes; batches of {args.batch} from note {stored:,}", flush=True)
        # The same recombined sequence as the store's: new notes continue it.
        texts = synthetic(sentences, stored + args.batches * args.batch, seed=args.seed)
        if args.hnsw_alone:
            from embed_corpus import composed

            kinds = {"hashing": hashing.embed(texts[: stored + args.batch])}
            if args.vectors is not None:
                kinds["composed"] = composed(args.vectors, sentences, stored + args.batch)
            hnsw_alone(conn, kinds, stored, args.hnsw_alone)
            return
        results: dict[str, list[dict[str, Any]]] = {}
        for number in range(args.batches):
            first = stored + number * args.batch
            batch = texts[first : first + args.batch]
            vectors = hashing.embed(batch)
            if args.split:
                split_insert(conn, batch, first, vectors, args.split)
                return
            if args.compare:
                # Batches alternate between before and after, and which comes first alternates
                # by pair: each batch is new text with new vectors (the HNSW index keeps the
                # elements of a rolled-back insert, and merges an equal vector into them, so
                # the same batch twice would be cheap the second time).
                setup = "" if (number // 2 + number) % 2 == 0 else args.compare.read_text(encoding="utf-8")
                label = "after " if setup else "before"
                result = run_batch(conn, home, batch, first, vectors, setup, args.in_transaction)
                results.setdefault(label, []).append(result)
                print_batch(f"batch {number} {label}", result)
            elif args.rollback:
                print_batch(f"batch {number}", run_batch(conn, home, batch, first, vectors, "", args.in_transaction))
            else:
                print_batch(f"batch {number}", run_batch(conn, home, batch, first, vectors, None, args.in_transaction))
        for label, runs in results.items():
            print(
                f"median {label}: "
                + ", ".join(
                    f"{key} {statistics.median(run[key] for run in runs):.3f}"
                    for key in ("notes_per_s", "client_ms", "server_ms", "backend_ms")
                    if runs[0][key] is not None
                )
            )


if __name__ == "__main__":
    main()
