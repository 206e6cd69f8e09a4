"""Profile stage one inside the database (a benchmark): where a call's time goes.

The embedded server ships no ``auto_explain``, so this copies ``stage_one_v1``'s body
into temporary functions (``pg_temp``, this session only) that report on themselves:

* ``before``: ``EXPLAIN (ANALYZE, BUFFERS)`` of the one dynamic statement of the
  pre-0008 function (as migration 0001 defined it, frozen in
  sql/migrations/0001_initial.sql), planning time included;
* ``candidates``: the same for the candidate search of the function as migration
  ``--migration`` defined it (0011, the current one, by default; or 0008);
* ``steps``: that function with the time of each step (query terms, the lexical
  step from postings from 0011 on, candidate search, scoring) raised as notices; p50 /
  p95 per step are printed;
* ``cpu``: copies of that function that return after each step, run one after the
  other on every question; the CPU time the server's backend spent on each call
  (``/proc/PID/schedstat``, so the server must run on this machine, Linux) gives each
  step's cost as the difference of consecutive p50s. Unlike ``steps``, this holds on a
  loaded machine: time spent waiting for a CPU is not counted.
* ``scoring`` (0019 on): the scoring statement (step 4) alone, on the inputs the function
  computed for each question before it (captured once), whole and with one part cut at a
  time (BM25, each boost, the link self-join, the pool aggregates; the fetch alone; the
  rows alone), run one after the other in rotating order; server CPU p50 of each and its
  difference to the whole statement: what each part costs. A cut whose text the
  migration's statement does not hold is skipped.
* ``routes`` (0019 on): which route each question's lexical top k takes in that
  function — none (no screen term), from postings, or through the bound of
  ``lexical_bound_v1`` — with how many notes the screen holds on the bound route and
  how many of them the bound keeps.

    .venv/bin/python benchmarks/profile_stage_one.py --home DIR --namespace scale \
        --mode before|candidates|steps|cpu|scoring|routes [--migration 0014|0011|0008] [--questions 20] \
        [--embedder hashing:384]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from bench_stage_one_ab import add_question_set, question_set, server_cpu
from bench_stage_one_ab import call_arguments as stage_one_call_arguments

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import get_embedder
from pgmem.retrieval.stage_one import stage_one_arguments

ROOT = Path(__file__).resolve().parents[1]
# Where --mode cpu cuts the function (the step comments of 0008 to 0014; absent ones are skipped).
CUTS = (
    ("setup", "    -- 1. The query terms"),
    ("terms", "    -- 2. The lexical top k from postings"),
    ("lexical", "    -- 3. The candidates"),
    ("dense", "    -- The usual call"),
    ("candidates", "    -- 4. Scores"),
)
STEP = "    RAISE NOTICE '{name} %', extract(epoch FROM clock_timestamp() - v_t) * 1000; v_t := clock_timestamp();\n"


def _definition(migration: str) -> str:
    """stage_one_v1's arguments and body as the migration numbered ``migration`` defined it."""
    (path,) = (ROOT / "sql" / "migrations").glob(f"{migration}_*.sql")
    text = path.read_text(encoding="utf-8")
    found = re.search(r"CREATE (OR REPLACE )?FUNCTION pgmem\.stage_one_v1\(", text)
    if found is None:
        raise SystemExit(f"--migration {migration}: {path.name} does not define pgmem.stage_one_v1")
    return text[found.end() : text.index("$function$;", found.start()) + len("$function$;")]


def _explaining(body: str, statement: str, into: str | None) -> str:
    """``body`` returning the EXPLAIN text of its dynamic ``statement`` instead of rows."""
    body = re.sub(
        r"RETURNS TABLE \(.*?\)\n(?:    --[^\n]*\n)*    LANGUAGE plpgsql STABLE",
        "RETURNS SETOF text\n    LANGUAGE plpgsql VOLATILE",
        body,
        count=1,
        flags=re.S,
    )
    body = body.replace(statement, "RETURN QUERY EXECUTE 'EXPLAIN (ANALYZE, BUFFERS) ' || format(", 1)
    if into is not None:
        body = body.replace(into, "    USING", 1)
        body = body[: body.index("    IF v_iterative THEN\n        PERFORM set_config('hnsw.iterative_scan', coalesce")]
        body += "END;\n$function$;"
    return "CREATE FUNCTION pg_temp.profiled(" + body


def _timed(body: str) -> str:
    body = body.replace("\nDECLARE\n", "\nDECLARE\n    v_t timestamptz := clock_timestamp();\n", 1)
    # The step comments of 0008 and of 0011 (which put the lexical bound between them).
    for marker, name in (
        ("    -- 1. The query terms", "setup"),
        ("    -- 2. The candidates:", "terms"),
        ("    -- 2. The lexical top k from postings", "terms"),
        ("    -- 3. The candidates:", "lexical"),
        ("    IF v_iterative THEN\n        PERFORM set_config('hnsw.iterative_scan', coalesce", "candidates"),
    ):
        body = body.replace(marker, STEP.format(name=name) + marker, 1)
    body = body.replace(
        "    ORDER BY a.base_score DESC, a.note_id;\nEND;",
        "    ORDER BY a.base_score DESC, a.note_id;\n" + STEP.format(name="scoring") + "END;",
        1,
    )
    return "CREATE FUNCTION pg_temp.profiled(" + body


# Reported where the candidate search starts: the lexical route the call took; and right
# after the bound, how many notes it kept.
ROUTE = (
    "    RAISE NOTICE 'route % %', CASE WHEN v_screen IS NULL OR k_lex = 0 THEN 'none'"
    " WHEN v_lexical_screened IS NULL THEN 'postings' ELSE 'bound' END, coalesce(v_lexical_screened, 0);\n"
)
BOUND = "v_fetch_lex, bm25_k1, bm25_b, v_average_length) AS l;\n"
KEPT = "            RAISE NOTICE 'kept %', cardinality(v_lexical_kept);\n"


def _routed(body: str) -> str:
    body = body.replace(BOUND, BOUND + KEPT, 1).replace(
        "    -- 3. The candidates", ROUTE + "    -- 3. The candidates", 1
    )
    return "CREATE FUNCTION pg_temp.profiled(" + body


def _cut(body: str, marker: str | None, name: str) -> str:
    """``body`` as a function ``pg_temp.name`` that returns no rows before ``marker``."""
    if marker is not None:
        body = body.replace(marker, "    RETURN;\n" + marker, 1)
    return f"CREATE FUNCTION pg_temp.{name}(" + body


def _cpu_steps(conn: Any, definition: str, calls: list[str], arguments: list[dict[str, Any]]) -> None:
    """Print the p50 server CPU of stage one cut after each step, and each step's share."""
    cuts = [(name, marker) for name, marker in CUTS if marker in definition] + [("scoring", None)]
    for number, (_, marker) in enumerate(cuts):
        conn.execute(_cut(definition, marker, f"upto_{number}"))
    pid = conn.info.backend_pid
    spent: dict[str, list[float]] = {name: [] for name, _ in cuts}
    for argument in arguments:
        for (name, _), call in zip(cuts, calls, strict=False):
            _, cpu = server_cpu(pid, "--mode cpu", conn, call, argument)
            spent[name].append(cpu)
    previous = 0.0
    for name, values in spent.items():
        p50 = float(np.percentile(values, 50))
        print(f"until {name:<12} server CPU p50 {p50:7.2f} ms   this step {p50 - previous:+6.2f} ms")
        previous = p50


# The values step 4 reads besides the function's arguments (0019 on), captured before it.
SCORING_INPUTS = (
    ("v_candidates", "uuid[]"),
    ("v_cosines", "double precision[]"),
    ("v_terms", "text[]"),
    ("v_idf", "double precision[]"),
    ("v_average_length", "double precision"),
    ("v_entity_hints", "text[]"),
)
SCORING_MARKER = "    -- 4. Scores"
# The parts cut from the scoring statement (0019's text): (old, new) replacements.
SCORING_CUTS: dict[str, list[tuple[str, str]]] = {
    "no BM25": [
        ("coalesce(score.bm25, 0) AS bm25", "0::float8 AS bm25"),
        (
            "        CROSS JOIN LATERAL pgmem.bm25_v1(n.lexemes, n.lexeme_count, v_terms, v_idf, bm25_k1, bm25_b,\n"
            "                                         v_average_length) AS score\n",
            "",
        ),
    ],
    "no entity boost": [("WHERE cardinality(v_entity_hints) > 0 AND", "WHERE false AND")],
    "no keyword boost": [
        ("keyword_boost * CASE WHEN cardinality(keyword_hints) > 0", "keyword_boost * CASE WHEN false")
    ],
    "no link boost": [("WHERE link_weight > 0 AND", "WHERE false AND")],
    "no pool aggregate": [
        (
            "        SELECT count(*) AS pool_size, avg(b.base_score) AS pool_mean,"
            " var_pop(b.base_score) AS pool_variance,\n"
            "               greatest(-avg(ln(f.family_count::float8 / (SELECT count(*) FROM based AS c))), 0)"
            " AS pool_entropy\n"
            "        FROM based AS b\n"
            "        JOIN families AS f ON f.family = b.family\n",
            "        SELECT 1 AS pool_size, 0::float8 AS pool_mean, 0::float8 AS pool_variance,"
            " 0::float8 AS pool_entropy\n",
        )
    ],
}


def _scoring_functions(definition: str) -> dict[str, str]:
    """The scoring statement of ``definition`` as functions ``pg_temp.scoring_N`` (the
    function's arguments and the captured inputs, its columns): whole, each cut, the fetch
    alone and the rows alone; and ``pg_temp.captured``, the function raising its step-4
    inputs as a notice and returning before the scoring."""
    arguments = definition[: definition.index("\n)\n    RETURNS TABLE")]
    arguments += "".join(f",\n    {name} {kind} DEFAULT NULL" for name, kind in SCORING_INPUTS)
    columns = re.search(r"RETURNS TABLE \((.*?)\n    \)", definition, flags=re.S)
    start = definition.index("    RETURN QUERY\n", definition.index(SCORING_MARKER))
    if columns is None:
        raise SystemExit("--mode scoring: the function's RETURNS TABLE was not found")
    statement = definition[start : definition.index("END;\n$function$;", start)]
    names = ", ".join(f"'{name}', {name}" for name, _ in SCORING_INPUTS)
    captured = definition.replace(
        SCORING_MARKER, f"    RAISE NOTICE '%', jsonb_build_object({names});\n    RETURN;\n{SCORING_MARKER}", 1
    )
    selected = ", ".join(
        "c.note_id" if column.split()[0] == "note_id" else f"NULL::{' '.join(column.split()[1:])}"
        for column in columns.group(1).split(",\n")
    )
    variants = {"whole": statement}
    for label, replacements in SCORING_CUTS.items():
        if all(old in statement for old, _ in replacements):
            cut = statement
            for old, new in replacements:
                cut = cut.replace(old, new)
            variants[label] = cut
        else:
            print(f"--mode scoring: {label!r} skipped (its text is not in this migration's statement)")
    variants["rows alone"] = f"    RETURN QUERY SELECT {selected} FROM unnest(v_candidates) AS c (note_id);\n"
    variants["fetch alone"] = (
        f"    RETURN QUERY SELECT {selected.replace('c.note_id', 'n.note_id', 1)}\n"
        "    FROM unnest(v_candidates) AS c (note_id)\n"
        "    JOIN pgmem.notes AS n ON n.namespace = p_namespace AND n.note_id = c.note_id;\n"
    )
    functions = {"captured": "CREATE FUNCTION pg_temp.captured(" + captured}
    for number, (label, body) in enumerate(variants.items()):
        functions[label] = (
            f"CREATE FUNCTION pg_temp.scoring_{number}({arguments}\n)\n    RETURNS TABLE ({columns.group(1)}\n    )\n"
            f"    LANGUAGE plpgsql STABLE AS $function$\n#variable_conflict use_column\nBEGIN\n{body}END;\n$function$;"
        )
    return functions


def _scoring(conn: Any, definition: str, call_arguments: str, arguments: list[dict[str, Any]]) -> None:
    """Print the server CPU p50 of the scoring statement alone, whole and with each cut."""
    functions = _scoring_functions(definition)
    for function in functions.values():
        conn.execute(function)
    notices: list[str] = []
    conn.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
    inputs = ", ".join(f"{name} => %({name})s::{kind}" for name, kind in SCORING_INPUTS)
    calls = []
    for argument in arguments:
        notices.clear()
        conn.execute(f"SELECT * FROM pg_temp.captured({call_arguments})", argument).fetchall()
        calls.append({**argument, **json.loads(notices[-1])})
    labels = [label for label in functions if label != "captured"]
    pid = conn.info.backend_pid
    spent: dict[str, list[float]] = {label: [] for label in labels}
    for number, argument in enumerate(calls):
        for turn in range(len(labels)):
            label = labels[(number + turn) % len(labels)]
            call = f"SELECT * FROM pg_temp.scoring_{labels.index(label)}({call_arguments}, {inputs})"
            _, cpu = server_cpu(pid, "--mode scoring", conn, call, argument)
            spent[label].append(cpu)
    whole = float(np.percentile(spent["whole"], 50))
    sizes = [len(call["v_candidates"] or []) for call in calls]
    print(f"{len(calls)} questions, {float(np.median(sizes)):.0f} candidates per pool (median)")
    for label, values in spent.items():
        p50 = float(np.percentile(values, 50))
        print(f"{label:<18} server CPU p50 {p50:7.2f} ms   whole minus this {whole - p50:+6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=("before", "candidates", "steps", "cpu", "scoring", "routes"), required=True)
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--migration", default="0011", help="whose stage_one_v1 --mode candidates|steps profiles")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--embedder", default="hashing:384")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    add_question_set(parser)
    parser.add_argument("--dsn")
    parser.add_argument("--home")
    args = parser.parse_args()
    if args.mode == "before":
        function = _explaining(_definition("0001"), "RETURN QUERY EXECUTE format(", None)
    elif args.mode == "candidates":
        function = _explaining(
            _definition(args.migration), "EXECUTE format(", "    INTO v_candidates, v_cosines\n    USING"
        )
    elif args.mode == "steps":
        function = _timed(_definition(args.migration))
    elif args.mode == "routes":
        function = _routed(_definition(args.migration))
    # A function older than 0018 has no family cap.
    call_arguments = stage_one_call_arguments(
        "family_candidates" in _definition(args.migration), "ef_search_notes" in _definition(args.migration)
    )
    call = f"SELECT * FROM pg_temp.profiled({call_arguments})"
    embedder = get_embedder(args.embedder)
    notices: list[str] = []
    steps: dict[str, list[float]] = {}
    routes: dict[str, list[tuple[int, int]]] = {}
    if args.mode in ("cpu", "scoring"):
        questions = question_set(args.question_set, args.data)[: args.questions]
        arguments = [
            stage_one_arguments(
                args.namespace, embedder.name, embedder.embed([q])[0], q, build_hints(q), pgmem.StageOneParams()
            )
            for q in questions
        ]
        calls = [f"SELECT * FROM pg_temp.upto_{number}({call_arguments})" for number in range(len(CUTS) + 1)]
        with pgmem.connect(args.dsn, home=args.home, migrate=False) as conn:
            for argument in arguments:  # warm the caches and the session's plans
                conn.execute(f"SELECT * FROM pgmem.stage_one_v1({call_arguments})", argument).fetchall()
            if args.mode == "scoring":
                _scoring(conn, _definition(args.migration), call_arguments, arguments)
            else:
                _cpu_steps(conn, _definition(args.migration), calls, arguments)
        return
    with pgmem.connect(args.dsn, home=args.home, migrate=False) as conn:
        conn.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
        conn.execute(function)
        for question in question_set(args.question_set, args.data)[: args.questions]:
            vector = embedder.embed([question])[0]
            arguments: dict[str, Any] = stage_one_arguments(
                args.namespace, embedder.name, vector, question, build_hints(question), pgmem.StageOneParams()
            )
            notices.clear()
            rows = conn.execute(call, arguments).fetchall()
            if args.mode == "steps":
                for notice in notices:
                    name, value = notice.split()
                    steps.setdefault(name, []).append(float(value))
            elif args.mode == "routes":
                kept = [int(n.split()[1]) for n in notices if n.startswith("kept ") and n.split()[1].isdigit()]
                (_, route, screened) = notices[-1].split()
                routes.setdefault(route, []).append((int(screened), kept[0] if kept else 0))
            else:
                print(f"=== {question}")
                print("\n".join(row[0] for row in rows))
    for route, sizes in sorted(routes.items()):
        screened, kept = np.array(sizes).T
        print(
            f"{route:<9} {len(sizes):4d} questions   screened notes p50 {np.percentile(screened, 50):6.0f}"
            f" max {screened.max():5d}   kept p50 {np.percentile(kept, 50):6.0f} max {kept.max():5d}"
        )
    for name, values in steps.items():
        print(f"{name:<12} p50 {np.percentile(values, 50):8.2f} ms   p95 {np.percentile(values, 95):8.2f} ms")


if __name__ == "__main__":
    main()
