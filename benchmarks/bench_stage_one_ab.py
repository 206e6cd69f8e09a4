"""Stage one before and after a migration, interleaved on one store (a benchmark).

Installs the stage-one function as an earlier migration defined it (``--before 0001``,
the default: as migration 0001 did, before 0008; ``--before 0008``: before 0011; any
migration that defines it, e.g. ``--before 0013``), read
from the frozen file in sql/migrations/, under another schema, ``pgmem_ab_before``, then
runs it and the current ``pgmem.stage_one_v1`` on the same arguments for each question,
one after the other, and prints:

* whether the two return the same rows (same notes in the same order, every column
  equal; floats within 1e-9 — window sums may differ in the last bit);
* p50 / p95 of both, measured interleaved (so machine load hits both alike; which runs
  first alternates), and their ratio;
* when the server runs on this machine (Linux), the CPU time its backend spent on each
  call (``/proc/PID/schedstat``): unlike latency, it does not count the time spent
  waiting for a CPU, so its ratio holds on a loaded machine.

Questions are LoCoMo's (categories 1-4; ``--question-set demo``: the demo corpus's
MultiHop-RAG questions, long ones), with hints derived as ``pgmem.pack`` derives
them; the query vector comes from ``--embedder`` (the store's own embedder).

    .venv/bin/python benchmarks/bench_stage_one_ab.py --namespace bench --questions 200 \
        [--before 0001|0008] [--embedder hashing:384] [--home DIR | --dsn DSN]

Drops ``pgmem_ab_before`` when done.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
from psycopg.rows import dict_row

import pgmem
from pgmem.api import build_hints
from pgmem.db.resources import migration_function
from pgmem.demo import load_corpus
from pgmem.embeddings import get_embedder
from pgmem.eval.bench import real_sentences
from pgmem.retrieval.stage_one import stage_one_arguments

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "pgmem_ab_before"


def before_function(migration: str = "0001") -> str:
    """stage_one_v1 as the migration numbered ``migration`` defined it, renamed into ``SCHEMA``."""
    try:
        definition = migration_function(migration, "pgmem.stage_one_v1")
    except ValueError as exc:
        raise SystemExit(f"--before {migration}: {exc}") from None
    return re.sub(r"^CREATE (OR REPLACE )?FUNCTION pgmem\.", f"CREATE FUNCTION {SCHEMA}.", definition)


def call_arguments(family_cap: bool = True, breadth: bool = True) -> str:
    """The arguments of the ``stage_one`` statement's call (queries.sql; stage_one_pool_v1
    passes them on to stage_one_v1 unchanged), without the family cap's for a function older
    than migration 0018 and without ``ef_search_notes`` for one older than 0025."""
    queries = (ROOT / "sql" / "queries.sql").read_text(encoding="utf-8")
    start = queries.index("FROM pgmem.stage_one_pool_v1(") + len("FROM pgmem.stage_one_pool_v1(")
    arguments = queries[start : queries.index(") AS s;\n", start)]
    if not family_cap:
        arguments = arguments.replace(", family_candidates => %(family_candidates)s", "")
    if not breadth:
        arguments = arguments.replace(",\n    ef_search_notes => %(ef_search_notes)s", "")
    return arguments


def call(schema: str, family_cap: bool = True, breadth: bool = True) -> str:
    """The ``stage_one`` statement's call of ``schema``'s stage_one_v1."""
    return f"SELECT * FROM {schema}.stage_one_v1({call_arguments(family_cap, breadth)})"


def add_question_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--question-set",
        choices=("locomo", "demo"),
        default="locomo",
        help="LoCoMo's questions (default) or the demo corpus's (MultiHop-RAG, long; what `make bench` asks)",
    )


def question_set(name: str, data: Path) -> list[str]:
    """The questions of ``--question-set``: LoCoMo's from ``data``, or the demo corpus's."""
    if name == "demo":
        return [question.question for question in load_corpus()[1]]
    return real_sentences(data)[1]


def backend_cpu_ms(pid: int) -> float | None:
    """CPU time the server process ``pid`` has run, in ms (None when it cannot be read)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text(encoding="ascii").split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


def server_cpu(pid: int, what: str, target: Any, statement: str, arguments: Any, **execute: Any) -> tuple[Any, float]:
    """The rows of ``statement`` run on ``target`` (a connection or cursor) and the CPU time
    the server process ``pid`` spent meanwhile, in ms (SystemExit naming ``what`` when it
    cannot be read); ``execute`` goes to ``target.execute``."""
    started = backend_cpu_ms(pid)
    rows = target.execute(statement, arguments, **execute).fetchall()
    ended = backend_cpu_ms(pid)
    if started is None or ended is None:
        raise SystemExit(f"{what}: cannot read the server's CPU time (/proc/PID/schedstat)")
    return rows, ended - started


def differences(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    if [r["note_id"] for r in before] != [r["note_id"] for r in after]:
        return [f"notes differ: {len(before)} rows before, {len(after)} after"]
    found = []
    for old, new in zip(before, after, strict=True):
        for column, value in old.items():
            other = new[column]
            same = abs(value - other) <= 1e-9 if isinstance(value, float) else value == other
            if not same:
                found.append(f"{old['note_id']} {column}: {value!r} before, {other!r} after")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--before", default="0001", help="the migration whose stage_one_v1 runs as 'before'")
    parser.add_argument("--embedder", default="hashing:384")
    parser.add_argument(
        "--family-candidates",
        default="default",
        help="the family cap both run with: a number, 'none', or 'default' (StageOneParams'); ignored by a"
        " function older than 0018",
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    add_question_set(parser)
    parser.add_argument("--dsn")
    parser.add_argument("--home")
    parser.add_argument("--json", type=Path, help="append this run's figures to a JSON list (for the plot)")
    args = parser.parse_args()
    embedder = get_embedder(args.embedder)
    questions = question_set(args.question_set, args.data)[: args.questions]
    params = pgmem.StageOneParams()
    if args.family_candidates != "default":
        cap = None if args.family_candidates == "none" else int(args.family_candidates)
        params = pgmem.StageOneParams(family_candidates=cap)
    with pgmem.connect(args.dsn, home=args.home, migrate=False) as conn:
        conn.row_factory = dict_row  # type: ignore[assignment]
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        conn.execute(f"CREATE SCHEMA {SCHEMA}")
        definition = before_function(args.before)
        conn.execute(definition)
        try:
            before = call(SCHEMA, "family_candidates" in definition, "ef_search_notes" in definition)
            statements = {"before": before, "after": call("pgmem")}
            times: dict[str, list[float]] = {"before": [], "after": []}
            cpu: dict[str, list[float]] = {"before": [], "after": []}
            pid = conn.info.backend_pid
            differing = 0
            notes = conn.execute(
                "SELECT count(*) AS n FROM pgmem.notes WHERE namespace = %s", (args.namespace,)
            ).fetchone()
            for number, question in enumerate(questions):
                vector = embedder.embed([question])[0]
                arguments = stage_one_arguments(
                    args.namespace, embedder.name, vector, question, build_hints(question), params
                )
                rows = {}
                # Alternate which one runs first, so neither always finds the other's pages warm.
                for label in ("before", "after") if number % 2 == 0 else ("after", "before"):
                    statement = statements[label]
                    started, cpu_started = time.perf_counter(), backend_cpu_ms(pid)
                    rows[label] = conn.execute(statement, arguments).fetchall()
                    times[label].append((time.perf_counter() - started) * 1000)
                    cpu_ended = backend_cpu_ms(pid)
                    if cpu_started is not None and cpu_ended is not None:
                        cpu[label].append(cpu_ended - cpu_started)
                found = differences(rows["before"], rows["after"])
                if found:
                    differing += 1
                    print(f"{question!r}: {found[:3]}")
        finally:
            conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    p50 = {label: float(np.percentile(values, 50)) for label, values in times.items()}
    p95 = {label: float(np.percentile(values, 95)) for label, values in times.items()}
    print(f"{len(questions)} questions on {args.namespace!r}: {differing} with different rows")
    for label in times:
        print(f"  {label:<7} p50 {p50[label]:7.1f} ms   p95 {p95[label]:7.1f} ms")
    print(f"  before / after: p50 {p50['before'] / p50['after']:.2f}x, p95 {p95['before'] / p95['after']:.2f}x")
    cpu_p50 = {label: float(np.percentile(values, 50)) for label, values in cpu.items() if values}
    cpu_p95 = {label: float(np.percentile(values, 95)) for label, values in cpu.items() if values}
    if len(cpu_p50) == 2:
        for label in cpu_p50:
            print(f"  {label:<7} server CPU p50 {cpu_p50[label]:6.2f} ms   p95 {cpu_p95[label]:6.2f} ms")
        print(
            f"  before / after, server CPU: p50 {cpu_p50['before'] / cpu_p50['after']:.2f}x, "
            f"p95 {cpu_p95['before'] / cpu_p95['after']:.2f}x"
        )
    if args.json:
        runs = json.loads(args.json.read_text(encoding="utf-8")) if args.json.is_file() else []
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        runs.append(
            {
                "notes": notes["n"] if notes else 0,
                "before": args.before,
                "questions": len(questions),
                "differing": differing,
                "p50": p50,
                "p95": p95,
                "server_cpu_p50": cpu_p50,
                "server_cpu_p95": cpu_p95,
                "load_average": load,
            }
        )
        args.json.write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
