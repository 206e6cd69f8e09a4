"""The pack's stage-one statement before and after migration 0022, interleaved (a benchmark).

Before 0022 the ``stage_one`` statement (queries.sql) joined stage_one_v1's rows to the
feedback, family and namespace statistics itself, sent unprepared: parsed and planned,
joins included, on every pack; its note id came as a uuid. Since 0022 it calls
``pgmem.stage_one_pool_v1``, whose statement (the same joins) is planned once per session,
and the note id comes as text. The "before" statement is rebuilt from that function's own
statement (its parameters bound as the pack binds them, the note id left a uuid): the
statement 0021's pack sent.

For each question, on one connection (which goes first alternates), both unprepared as
``run_stage_one`` runs them, binary rows:

* the server's CPU (``/proc/PID/schedstat`` of the backend, so the server must run on
  this machine) for each statement and its rows, and whether the rows are the same
  (every column but the ages, which follow ``now()``; note ids compared as text; floats
  within 1e-9, as ``bench_stage_one_ab.py`` compares them);
* the client's CPU (``time.process_time``) for what ``run_stage_one`` does with the
  result: ``fetchall()`` through ``dict_row`` and ``pool_from_rows``, ``--repeats`` times on
  the same result (before: the uuid turned into the pool's string by ``str()``, as
  ``pool_from_rows`` did); both must give the same candidates.

Prints medians and ratios (before / after).

    .venv/bin/python benchmarks/bench_stage_one_statement.py --home DIR --namespace NS \\
        [--embedder minilm] [--questions 200] [--repeats 10] [--question-set demo]
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_stage_one_ab import add_question_set, call_arguments, differences, question_set, server_cpu
from psycopg.rows import dict_row

import pgmem
from pgmem.api import build_hints
from pgmem.db.queries import query
from pgmem.db.resources import migration_function
from pgmem.embeddings import get_embedder
from pgmem.retrieval.stage_one import pool_from_rows, stage_one_arguments

ROOT = Path(__file__).resolve().parents[1]


def statement_before() -> str:
    """The ``stage_one`` statement as 0021's pack sent it: stage_one_pool_v1's statement
    with the pack's bind parameters, the note id a uuid."""
    definition = migration_function("0022", "pgmem.stage_one_pool_v1")
    body = definition[definition.index("    RETURN QUERY\n") + len("    RETURN QUERY\n") : definition.index(";\nEND;")]
    start = body.index("FROM pgmem.stage_one_v1(")
    body = body[:start] + f"FROM pgmem.stage_one_v1({call_arguments()}" + body[body.index(") AS s\n", start) :]
    body = body.replace("s.note_id::text AS note_id", "s.note_id", 1)
    return re.sub(r"\bp_namespace\b", "%(namespace)s", body)


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without their ages (they follow ``now()``), note ids as text."""
    return [
        {column: str(value) if column == "note_id" else value for column, value in row.items()}
        for row in ({c: v for c, v in row.items() if not c.endswith("_age_seconds")} for row in rows)
    ]


def _candidates(rows: list[dict[str, Any]], question: str, *, as_uuid: bool) -> list[tuple[Any, ...]]:
    if as_uuid:
        for row in rows:
            row["note_id"] = str(row["note_id"])
    pool = pool_from_rows(rows, query=question)
    return [(c.note_id, c.base_score, c.word_hashes) for c in pool.candidates]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=10, help="fetchall + pool_from_rows per result (10)")
    parser.add_argument("--embedder", default="hashing:384")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    add_question_set(parser)
    parser.add_argument("--dsn")
    parser.add_argument("--home")
    args = parser.parse_args()
    statements = {"before": statement_before(), "after": query("stage_one")}
    embedder = get_embedder(args.embedder)
    server: dict[str, list[float]] = {label: [] for label in statements}
    client: dict[str, list[float]] = {label: [] for label in statements}
    differing = 0
    questions = question_set(args.question_set, args.data)[: args.questions]
    with pgmem.connect(args.dsn, home=args.home, migrate=False) as conn:
        cursor = conn.cursor(row_factory=dict_row)
        pid = conn.info.backend_pid
        for number, question in enumerate(questions):
            arguments = stage_one_arguments(
                args.namespace,
                embedder.name,
                embedder.embed([question])[0],
                question,
                build_hints(question),
                pgmem.StageOneParams(),
            )
            rows: dict[str, list[dict[str, Any]]] = {}
            found: dict[str, list[tuple[Any, ...]]] = {}
            for label in ("before", "after") if number % 2 == 0 else ("after", "before"):
                rows[label], cpu = server_cpu(
                    pid, "bench_stage_one_statement", cursor, statements[label], arguments, prepare=False, binary=True
                )
                server[label].append(cpu)
                started = time.process_time()
                for _ in range(args.repeats):
                    cursor.scroll(0, mode="absolute")
                    found[label] = _candidates(cursor.fetchall(), question, as_uuid=label == "before")
                client[label].append((time.process_time() - started) * 1000 / args.repeats)
            # Floats within 1e-9, as bench_stage_one_ab compares: stage_one_v1's pool sums may
            # add the same terms in another order from one call to the next.
            found_differences = differences(comparable(rows["before"]), comparable(rows["after"]))
            if found["before"] != found["after"]:
                found_differences.append("the pools' candidates differ")
            if found_differences:
                differing += 1
                print(f"{question!r}: {found_differences[:3]}")
    print(f"{len(questions)} questions on {args.namespace!r}: {differing} with different rows")
    for name, spent in (("server CPU, statement and rows", server), ("client CPU, fetchall + pool_from_rows", client)):
        p50 = {label: float(np.percentile(values, 50)) for label, values in spent.items()}
        p95 = {label: float(np.percentile(values, 95)) for label, values in spent.items()}
        print(f"  {name}:")
        for label in spent:
            print(f"    {label:<7} p50 {p50[label]:6.3f} ms   p95 {p95[label]:6.3f} ms")
        print(f"    before / after: p50 {p50['before'] / p50['after']:.2f}x, p95 {p95['before'] / p95['after']:.2f}x")


if __name__ == "__main__":
    main()
