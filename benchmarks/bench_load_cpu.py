"""What a note costs to write, in CPU: the bound on load throughput (a benchmark, not a test).

Wall times on a shared machine move with its load; CPU time barely does. This measures
the CPU of the loading process (``time.process_time``, with its enrichment workers') and
of every process of the embedded server (its backends, parallel maintenance workers and autovacuum: the
postmaster and its children in ``/proc``), so that ``cores / CPU seconds per note``
bounds the throughput any schedule of the same work could reach.

* ``bulk N``: a ``pgmem.bulk_load`` of N recombined real sentences (bench_scale's
  corpus, hashing vectors computed beforehand: embedding excluded) into a new store
  under ``--home`` (``--enrich-workers W``: its ``enrich_workers``); client and server
  CPU per note, wall time per phase.
* ``reindex``: the HNSW index of a store rebuilt alone (``REINDEX INDEX``), server CPU
  per vector — the graph build's share of a load.

    PYTHONPATH=.:benchmarks python benchmarks/bench_load_cpu.py bulk 60000 --home /tmp/load-60k
    PYTHONPATH=.:benchmarks python benchmarks/bench_load_cpu.py reindex --home /tmp/load-60k

The server must run on this machine (Linux ``/proc``): the embedded one, under ``--home``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from bench_ingest_cpu import server_cpu_seconds
from bench_lexical import DATA, synthetic
from bench_scale import DIMENSION, NAMESPACE, StoredVectors, spans

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.eval.bench import real_sentences


def _server_cpu(home: Path) -> float:
    seconds = server_cpu_seconds(str(home))
    assert seconds is not None  # a home is given
    return seconds


def _client_cpu() -> float:
    """This process's CPU seconds and its ended children's (bulk_load's enrichment workers)."""
    times = os.times()
    return time.process_time() + times.children_user + times.children_system


def bulk(notes: int, home: Path, enrich_workers: int = 0) -> dict[str, Any]:
    sentences, _ = real_sentences(DATA)
    texts = synthetic(sentences, notes, seed=0)
    embedder = StoredVectors(texts, HashingEmbedder(dimension=DIMENSION).embed(texts))
    with pgmem.connect(home=str(home), migrate=True) as conn:
        client, server, wall = _client_cpu(), _server_cpu(home), time.perf_counter()
        result = pgmem.bulk_load(
            conn, spans(texts, 0), namespace=NAMESPACE, embedder=embedder, enrich_workers=enrich_workers
        )
        client = _client_cpu() - client
        server = _server_cpu(home) - server
        wall = time.perf_counter() - wall
    return {
        "notes": notes,
        "enrich_workers": enrich_workers,
        "wall_s": wall,
        "notes_per_s": notes / wall,
        "client_ms_per_note": 1000 * client / notes,
        "server_ms_per_note": 1000 * server / notes,
        "bound_notes_per_s": (os.cpu_count() or 1) * notes / (client + server),
        "phases_s": result.seconds,
        "indexes_s": result.indexes,
        "maintenance_work_mem": result.maintenance_work_mem,
    }


def reindex(home: Path) -> dict[str, Any]:
    with pgmem.connect(home=str(home)) as conn:
        row = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'pgmem' AND indexdef ILIKE '%USING hnsw%'"
            " ORDER BY indexname LIMIT 1"
        ).fetchone()
        if row is None:
            raise SystemExit(f"no HNSW index in the store under {home}")
        index = row[0]
        count = conn.execute("SELECT count(*) FROM pgmem.notes").fetchone()
        vectors = int(count[0]) if count else 0
        memory = conn.execute("SELECT current_setting('maintenance_work_mem')").fetchone()
        server, wall = _server_cpu(home), time.perf_counter()
        conn.execute(f'REINDEX INDEX pgmem."{index}"')
        server = _server_cpu(home) - server
        wall = time.perf_counter() - wall
    return {
        "index": index,
        "vectors": vectors,
        "wall_s": wall,
        "server_ms_per_vector": 1000 * server / max(vectors, 1),
        "maintenance_work_mem": memory[0] if memory else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("mode", choices=("bulk", "reindex"))
    parser.add_argument("notes", type=int, nargs="?", default=60_000, help="bulk: notes to load (default 60,000)")
    parser.add_argument("--home", type=Path, required=True, help="embedded server folder (bulk: a new one)")
    parser.add_argument("--enrich-workers", type=int, default=0, help="bulk: pgmem.bulk_load's enrich_workers (0)")
    args = parser.parse_args()
    out = bulk(args.notes, args.home, args.enrich_workers) if args.mode == "bulk" else reindex(args.home)
    print(json.dumps({"mode": args.mode, "load_average": os.getloadavg(), **out}, indent=1))


if __name__ == "__main__":
    main()
