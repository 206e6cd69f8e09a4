"""pgvector indexes side by side: HNSW precision (``vector`` / ``halfvec`` / sign bits), build parameters, ivfflat.

Loads N recombined notes' composed MiniLM vectors (``benchmarks/embed_corpus.py --halves``
folder) into a bare table of the embedded server, copies it once per ``--index`` variant
(``KIND[:m=M][:ef_construction=E]``, KIND ``vector`` or ``halfvec``: the column as it is or
its ``halfvec`` cast; ``bit[:rerank=R]``: its sign bits under Hamming distance, the nearest
R (400) by bits ordered by the exact cosine; ``ivfflat[:lists=L]``: inverted lists instead
of a graph, each ``--ef-search`` value then the lists probed; ``none`` for a table without
an index) and builds each variant's index with the same ``maintenance_work_mem``, a
checkpoint before each. Then it times the top 50 of the first ``--questions`` LoCoMo
questions (MiniLM query vectors) through each index at every ``--ef-search``, iterative scan
on, the variants interleaved per breadth, with the share of the exact top 50 (numpy,
float32; ties at the 50th place, duplicate recombined texts, broken arbitrarily) each
returns; and with ``--inserts K``, what writing K more notes' vectors costs per row in each
table (batches of 100 by binary COPY, the variants interleaved batch by batch, each
variant's batches in one transaction that is rolled back: the tables keep their N rows).
Prints build seconds, index sizes, p50 / p95 client milliseconds, recall and milliseconds
per inserted row.

    PYTHONPATH=.:benchmarks python benchmarks/bench_ann_precision.py --notes 1000000 \\
        --halves /tmp/halves --home /tmp/ann-1m [--ef-search 40,100,200,400] [--rounds 2] \\
        [--index vector --index vector:ef_construction=32 --index none] [--inserts 2000]

The tables are kept under --home: a second run reuses them (and their vectors) and
rebuilds the indexes only with --rebuild (do so after a run with --inserts: the rolled-back
rows are dead tuples in the graphs until then).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench_lexical import DATA, real_sentences
from embed_corpus import composed
from soak import machine

import pgmem
from pgmem.db.connection import conninfo_of
from pgmem.db.vectors import vector_binary_dumper, vector_literal
from pgmem.embeddings.minilm import DIMENSION, MiniLMEmbedder

K = 50
INSERT_BATCH = 100
_HNSW = frozenset({"m", "ef_construction"})
#: Per kind: the indexed expression, the distance the top K orders by, the access method and
#: the options a spec may give it.
_KINDS: dict[str, tuple[str, str, str, frozenset[str]]] = {
    "vector": ("(v vector_cosine_ops)", "v <=> %(q)s::vector", "hnsw", _HNSW),
    "halfvec": (
        f"((v::halfvec({DIMENSION})) halfvec_cosine_ops)",
        f"v::halfvec({DIMENSION}) <=> %(q)s::vector::halfvec({DIMENSION})",
        "hnsw",
        _HNSW,
    ),
    # The sign bits of each vector (pgvector's binary_quantize) under Hamming distance:
    # the index finds the nearest `rerank` by bits, the exact cosine orders them.
    "bit": (
        f"((binary_quantize(v)::bit({DIMENSION})) bit_hamming_ops)",
        f"binary_quantize(v)::bit({DIMENSION}) <~> binary_quantize(%(q)s::vector)",
        "hnsw",
        _HNSW | {"rerank"},
    ),
    # Inverted lists (k-means centroids, pgvector's ivfflat): ``lists=L`` when built, and the
    # breadth searched is the number of lists probed (``ivfflat.probes``).
    "ivfflat": ("(v vector_cosine_ops)", "v <=> %(q)s::vector", "ivfflat", frozenset({"lists"})),
    "none": ("", "", "", frozenset()),
}
#: Rows the ``bit`` kind fetches by Hamming distance before the exact re-rank (``rerank=R``).
BIT_RERANK = 400
_OPTION = re.compile(r"([a-z_]+)=(\d+)")


@dataclass(frozen=True)
class Variant:
    """One ``--index`` spec: a table of its own and (unless KIND is ``none``) its index."""

    spec: str
    kind: str
    options: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, spec: str) -> Variant:
        kind, *options = spec.split(":")
        if kind not in _KINDS:
            raise argparse.ArgumentTypeError(f"--index kind must be one of {', '.join(_KINDS)}, got {kind!r}")
        allowed = _KINDS[kind][3]
        parsed = []
        for option in options:
            match = _OPTION.fullmatch(option)
            if match is None or match[1] not in allowed:
                takes = ", ".join(f"{name}=N" for name in sorted(allowed)) or "no options"
                raise argparse.ArgumentTypeError(f"--index {kind} takes {takes}, got {option!r}")
            parsed.append((match[1], int(match[2])))
        return cls(spec, kind, tuple(parsed))

    @property
    def built(self) -> list[tuple[str, int]]:
        """The options the index is built with (``rerank`` is the search's)."""
        return [(name, value) for name, value in self.options if name != "rerank"]

    @property
    def table(self) -> str:
        """The variant's table: one per kind and build options (``rerank`` variants share it)."""
        built = "".join(f":{name}={value}" for name, value in self.built)
        return "ann_bench_" + re.sub(r"[^a-z0-9]+", "_", (self.kind + built).lower()).strip("_")

    @property
    def indexed(self) -> bool:
        return self.kind != "none"

    def create_index(self) -> str:
        expression, _, method, _ = _KINDS[self.kind]
        with_ = f" WITH ({', '.join(f'{name} = {value}' for name, value in self.built)})" if self.built else ""
        return f"CREATE INDEX {self.table}_hnsw ON {self.table} USING {method} {expression}{with_}"

    def top_k(self) -> str:
        """The top K statement (the query vector bound as ``q``)."""
        order = _KINDS[self.kind][1]
        if self.kind != "bit":
            return f"SELECT id FROM {self.table} ORDER BY {order} LIMIT {K}"
        rerank = dict(self.options).get("rerank", BIT_RERANK)
        return (
            f"SELECT id FROM (SELECT id, v FROM {self.table} ORDER BY {order} LIMIT {rerank}) AS nearest"
            f" ORDER BY v <=> %(q)s::vector LIMIT {K}"
        )


def _vector_oid(conn: psycopg.Connection[Any]) -> int:
    return int(conn.execute("SELECT 'vector'::regtype::oid").fetchone()[0])


def _copy(conn: psycopg.Connection[Any], oid: int, table: str, first_id: int, vectors: np.ndarray) -> None:
    """``vectors`` into ``table`` (id, v) by one binary COPY, ids from ``first_id``; ``oid``: the vector type's."""
    with conn.cursor() as cur:
        cur.adapters.register_dumper(np.ndarray, vector_binary_dumper(oid))
        with cur.copy(f"COPY {table} (id, v) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int4", oid])
            for i, vector in enumerate(vectors, start=first_id):
                copy.write_row((i, vector))


def load(conn: psycopg.Connection[Any], vectors: np.ndarray) -> None:
    """The table ``ann_bench`` (id, v) holding ``vectors``, without an index but its key."""
    conn.execute(f"CREATE TABLE ann_bench (id integer PRIMARY KEY, v vector({DIMENSION}))")
    started = time.perf_counter()
    _copy(conn, _vector_oid(conn), "ann_bench", 0, vectors)
    conn.execute("VACUUM ANALYZE ann_bench")
    print(f"loaded {len(vectors):,} vectors in {time.perf_counter() - started:.1f} s", flush=True)


def prepare(conn: psycopg.Connection[Any], variant: Variant, memory: str, rebuild: bool) -> None:
    """The variant's copy of ``ann_bench`` and its index, built unless kept (and not ``rebuild``)."""
    if conn.execute("SELECT to_regclass(%s) IS NULL", (variant.table,)).fetchone()[0]:
        conn.execute(f"CREATE TABLE {variant.table} (id integer PRIMARY KEY, v vector({DIMENSION}))")
        conn.execute(f"INSERT INTO {variant.table} SELECT id, v FROM ann_bench")
        conn.execute(f"VACUUM ANALYZE {variant.table}")
    if not variant.indexed:
        return
    # A kept index is reused; one missing (a build that did not finish) is built.
    if not rebuild and not conn.execute("SELECT to_regclass(%s) IS NULL", (f"{variant.table}_hnsw",)).fetchone()[0]:
        return
    conn.execute(f"SET maintenance_work_mem = '{memory}'")
    conn.execute(f"DROP INDEX IF EXISTS {variant.table}_hnsw")
    conn.execute("CHECKPOINT")
    started = time.perf_counter()
    conn.execute(variant.create_index())
    seconds = time.perf_counter() - started
    size = conn.execute(f"SELECT pg_relation_size('{variant.table}_hnsw')").fetchone()[0]
    print(f"{variant.spec}: built in {seconds:.1f} s, {size / 2**20:,.0f} MiB", flush=True)


def search(
    conn: psycopg.Connection[Any],
    variants: list[Variant],
    queries: np.ndarray,
    exact: list[set[int]],
    breadths: list[int],
    rounds: int,
) -> None:
    """p50 / p95 and recall@50 of each index at each breadth, interleaved per breadth."""
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    conn.execute("SET ivfflat.iterative_scan = relaxed_order")
    literals = [vector_literal(q) for q in queries]
    for round_ in range(rounds):
        for ef in breadths:
            # The breadth: HNSW's candidate list, or the inverted lists probed.
            conn.execute(f"SET hnsw.ef_search = {ef}")
            conn.execute(f"SET ivfflat.probes = {ef}")
            for variant in variants:
                times, recall = [], []
                for literal, truth in zip(literals, exact, strict=True):
                    tick = time.perf_counter()
                    rows = conn.execute(variant.top_k(), {"q": literal}).fetchall()
                    times.append((time.perf_counter() - tick) * 1000)
                    recall.append(len(truth & {row[0] for row in rows}) / K)
                print(
                    f"round {round_} ef_search {ef:4d} {variant.spec:32s} p50 {np.percentile(times, 50):6.2f}"
                    f" p95 {np.percentile(times, 95):6.2f} ms  recall@{K} {np.mean(recall):.4f}",
                    flush=True,
                )


def _batches(vectors: np.ndarray, first_id: int) -> Iterator[tuple[int, np.ndarray]]:
    for start in range(0, len(vectors), INSERT_BATCH):
        yield first_id + start, vectors[start : start + INSERT_BATCH]


def inserts(conninfo: str, variants: list[Variant], vectors: np.ndarray, first_id: int) -> None:
    """Milliseconds per row of writing ``vectors`` into each variant's table: batch by batch,
    the variants interleaved, each on its own connection in one transaction rolled back."""
    with ExitStack() as stack:
        connections = [stack.enter_context(psycopg.connect(conninfo)) for _ in variants]
        oid = _vector_oid(connections[0])  # looked up once, outside the timed batches
        per_row: list[list[float]] = [[] for _ in variants]
        for start, batch in _batches(vectors, first_id):
            for conn, variant, times in zip(connections, variants, per_row, strict=True):
                tick = time.perf_counter()
                _copy(conn, oid, variant.table, start, batch)
                times.append((time.perf_counter() - tick) * 1000 / len(batch))
        for conn in connections:
            conn.rollback()
    for variant, times in zip(variants, per_row, strict=True):
        print(
            f"inserts {variant.spec:32s} {len(vectors):,} rows: ms per row median {np.median(times):.3f}"
            f" (batches of {INSERT_BATCH}; p25 {np.percentile(times, 25):.3f}, p75 {np.percentile(times, 75):.3f})",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=1_000_000)
    parser.add_argument("--halves", type=Path, required=True, help="embed_corpus.py --halves output folder")
    parser.add_argument("--home", required=True, help="embedded server folder (the tables are kept there)")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--ef-search", type=lambda t: [int(v) for v in t.split(",")], default=[40, 100, 200, 400])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--index",
        dest="variants",
        type=Variant.parse,
        action="append",
        help="KIND[:m=M][:ef_construction=E][:rerank=R] or ivfflat[:lists=L], KIND vector, halfvec, bit"
        " or none; repeatable (default: vector, halfvec)",
    )
    parser.add_argument("--inserts", type=int, default=0, help="rows written per variant after the searches (0)")
    parser.add_argument("--maintenance-work-mem", default="4GB", help="for every build (default 4GB)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the indexes of kept tables")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    variants: list[Variant] = args.variants or [Variant.parse("vector"), Variant.parse("halfvec")]
    os.environ["PGMEM_HOME"] = args.home
    print(machine(), flush=True)
    sentences, questions = real_sentences(args.data)
    vectors = composed(args.halves, sentences, args.notes + args.inserts)
    stored, extra = vectors[: args.notes], vectors[args.notes :]
    queries = MiniLMEmbedder(intra_op_num_threads=1).embed(questions[: args.questions])
    exact = [set(np.argpartition(-(stored @ q), K)[:K].tolist()) for q in queries]
    with pgmem.connect(None, migrate=True) as conn:
        if conn.execute("SELECT to_regclass('ann_bench') IS NULL").fetchone()[0]:
            load(conn, stored)
        for variant in variants:
            prepare(conn, variant, args.maintenance_work_mem, args.rebuild)
        searched = [variant for variant in variants if variant.indexed]
        if searched:
            search(conn, searched, queries, exact, args.ef_search, args.rounds)
        if args.inserts:
            # One writer per table: variants differing only in their re-rank share one.
            writers = list({variant.table: variant for variant in variants}.values())
            inserts(conninfo_of(conn), writers, extra, args.notes)


if __name__ == "__main__":
    main()
