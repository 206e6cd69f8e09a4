"""What stage one costs against the least any pgmem-shaped search must do (a benchmark).

On a loaded store (``--home`` / ``--dsn``, namespace ``--namespace``), for LoCoMo's
questions (or the demo corpus's), the server CPU of each call (the backend's
``/proc/PID/schedstat``: the server must run on this machine, Linux), p50 and p95:

* ``--mode floor``: the dense top ``k_dense`` alone (the model's HNSW index at stage one's
  breadth, ``pgmem.hnsw_breadth_v1``, iterative scan), the lexical top ``k_lex`` alone (BM25
  over every query term, from the postings), both with their union fetched, its cosine and
  BM25 computed and the pool's window aggregates (no family cap, neighbours, boosts or
  links: the least a stage one returning a scored pool does), as prepared statements; and
  the pack's own statement (``stage_one_pool_v1``) on the same questions, alternated.
* ``--mode tail``: the pack's statement with the default family cap and without one, and
  the slowest questions with the cap, with their query terms' postings: where stage one's
  p95 comes from.

    .venv/bin/python benchmarks/bench_stage_one_floor.py --home DIR --namespace NS --mode floor|tail \
        [--questions 150] [--embedder minilm] [--question-set locomo|demo]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from bench_stage_one_ab import add_question_set, question_set, server_cpu
from psycopg.rows import tuple_row

import pgmem
from pgmem.api import build_hints
from pgmem.db.queries import query
from pgmem.embeddings import get_embedder
from pgmem.retrieval.stage_one import stage_one_arguments

ROOT = Path(__file__).resolve().parents[1]

# The query terms of the namespace with their idf, and its average note length (as stage one).
TERMS = """
    terms AS (
        SELECT coalesce(array_agg(s.lexeme ORDER BY s.document_frequency, s.lexeme), '{{}}') AS lexemes,
               coalesce(array_agg(ln(1 + (n.note_count::float8 - s.document_frequency + 0.5)
                                         / (s.document_frequency + 0.5))
                                  ORDER BY s.document_frequency, s.lexeme), '{{}}') AS idf,
               coalesce(sum(s.document_frequency), 0) AS postings,
               max(greatest(n.lexeme_total::float8 / greatest(n.note_count, 1), 1)) AS average_length
        FROM (SELECT DISTINCT u.lexeme FROM unnest(to_tsvector('english', %(question)s)) AS u) AS q
        JOIN pgmem.lexeme_stats AS s ON s.namespace = %(namespace)s AND s.lexeme = q.lexeme
        JOIN pgmem.namespaces AS n ON n.namespace = %(namespace)s
        WHERE s.document_frequency > 0)"""
DENSE = """
    dense AS (
        SELECT n.note_id FROM pgmem.notes AS n
        WHERE n.namespace = %(namespace)s AND n.model_id = {model_id}
        ORDER BY n.embedding::{vector_type} <=> %(vector)s::{vector_type}
        LIMIT %(k_dense)s)"""
LEXICAL = """
    lexical AS (
        SELECT p.note_id
        FROM terms AS t
        CROSS JOIN LATERAL unnest(t.lexemes, t.idf) AS q (lexeme, idf)
        JOIN pgmem.lexeme_postings AS p ON p.namespace = %(namespace)s AND p.lexeme = q.lexeme
        GROUP BY p.note_id
        ORDER BY sum(pgmem.bm25_term_v1(q.idf, p.term_frequency, %(k1)s, %(b)s, p.lexeme_count,
                                        (SELECT t.average_length FROM terms AS t))) DESC, p.note_id
        LIMIT %(k_lex)s)"""
MINIMAL = (
    "WITH"
    + TERMS
    + ","
    + DENSE
    + ","
    + LEXICAL
    + """,
    scored AS (
        SELECT n.note_id, n.external_id, n.document_id, n.span_start, n.span_end, n.text, n.context,
               n.family, n.role, n.confidence, n.source_ts, n.created_at, n.word_hashes,
               1 - (n.embedding <=> %(vector)s::vector) AS cosine, coalesce(b.bm25, 0) AS bm25
        FROM (SELECT d.note_id FROM dense AS d UNION SELECT l.note_id FROM lexical AS l) AS c
        JOIN pgmem.notes AS n ON n.namespace = %(namespace)s AND n.note_id = c.note_id
        CROSS JOIN terms AS t
        CROSS JOIN LATERAL pgmem.bm25_v1(n.lexemes, n.lexeme_count, t.lexemes, t.idf, %(k1)s, %(b)s,
                                         t.average_length) AS b),
    based AS (
        SELECT s.*, %(dense_weight)s * s.cosine
                    + %(lexical_weight)s * coalesce(s.bm25 / nullif(max(s.bm25) OVER (), 0), 0) AS base
        FROM scored AS s)
    SELECT b.*, count(*) OVER f, sum(b.base) OVER f, avg(b.confidence) OVER f,
           count(*) OVER (), avg(b.base) OVER (), var_pop(b.base) OVER ()
    FROM based AS b
    WINDOW f AS (PARTITION BY b.family)
    ORDER BY b.base DESC, b.note_id"""
)
STATEMENTS = {
    "dense top k alone": "WITH" + DENSE + " SELECT d.note_id FROM dense AS d",
    "lexical top k alone": "WITH" + TERMS + "," + LEXICAL + " SELECT l.note_id FROM lexical AS l",
    "minimal one-statement hybrid": MINIMAL,
}


def percentiles(values: list[float]) -> str:
    return f"p50 {np.percentile(values, 50):7.2f} ms   p95 {np.percentile(values, 95):7.2f} ms"


def timed(conn: Any, statement: str, arguments: dict[str, Any], prepare: bool) -> float:
    """Server CPU (ms) of one call (bench_stage_one_ab.server_cpu); its rows are read and dropped."""
    cursor = conn.cursor(row_factory=tuple_row)
    _, spent = server_cpu(conn.info.backend_pid, "--mode", cursor, statement, arguments, prepare=prepare, binary=True)
    return spent


def floor(conn: Any, namespace: str, calls: list[dict[str, Any]], passes: int = 2) -> None:
    row = conn.execute(
        "SELECT n.model_id, m.dimension, m.index_type, n.note_count FROM pgmem.namespaces AS n"
        " JOIN pgmem.embedding_models AS m USING (model_id) WHERE n.namespace = %s",
        (namespace,),
    ).fetchone()
    if row is None:
        raise SystemExit(f"--namespace {namespace}: no such namespace")
    model_id, dimension, index_type, notes = row
    params = pgmem.StageOneParams()
    breadth = conn.execute(
        "SELECT pgmem.hnsw_breadth_v1(%s, %s, %s, %s)", (model_id, notes, params.ef_search, params.ef_search_notes)
    ).fetchone()[0]
    conn.execute(f"SET hnsw.ef_search = {max(int(breadth), params.k_dense)}")
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    print(f"{notes:,} notes; HNSW breadth {breadth}; k_dense {params.k_dense}, k_lex {params.k_lex}")
    statements = {
        name: text.format(model_id=model_id, vector_type=f"{index_type}({dimension})")
        for name, text in STATEMENTS.items()
    }
    spent: dict[str, list[float]] = {name: [] for name in [*statements, "the pack's statement"]}
    for number in range(passes + 1):  # the first pass warms the caches and the plans
        for arguments in calls:
            floor_arguments = {
                "namespace": namespace,
                "question": arguments["query"],
                "vector": arguments["query_embedding"],
                "k_dense": params.k_dense,
                "k_lex": params.k_lex,
                "k1": params.bm25_k1,
                "b": params.bm25_b,
                "dense_weight": params.dense_weight,
                "lexical_weight": params.lexical_weight,
            }
            for name, statement in statements.items():
                cpu = timed(conn, statement, floor_arguments, prepare=True)
                if number:
                    spent[name].append(cpu)
            cpu = timed(conn, query("stage_one"), arguments, prepare=False)
            if number:
                spent["the pack's statement"].append(cpu)
    for name, values in spent.items():
        print(f"  {name:<30s} server CPU {percentiles(values)}")


def tail(conn: Any, namespace: str, calls: list[dict[str, Any]], slowest: int = 10) -> None:
    postings = ("WITH" + TERMS + " SELECT t.postings, cardinality(t.lexemes) FROM terms AS t").format()
    capped: list[float] = []
    uncapped: list[float] = []
    for number in range(2):
        for arguments in calls:
            with_cap = timed(conn, query("stage_one"), arguments, prepare=False)
            without = timed(conn, query("stage_one"), {**arguments, "family_candidates": None}, prepare=False)
            if number:
                capped.append(with_cap)
                uncapped.append(without)
    cap = f"with the family cap ({pgmem.StageOneParams().family_candidates})"
    print(f"  {cap:<30s} server CPU {percentiles(capped)}")
    print(f"  {'without it':<30s} server CPU {percentiles(uncapped)}")
    print(f"  the {slowest} slowest questions with the cap (ms with, ms without, postings, terms):")
    for index in np.argsort(capped)[::-1][:slowest]:
        question = calls[index]["query"]
        total, terms = conn.execute(postings, {"namespace": namespace, "question": question}).fetchone()
        print(f"    {capped[index]:6.1f} {uncapped[index]:6.1f} {int(total):7d} {terms:3d}  {question}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=("floor", "tail"), required=True)
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    add_question_set(parser)
    parser.add_argument("--dsn")
    parser.add_argument("--home")
    args = parser.parse_args()
    embedder = get_embedder(args.embedder)
    questions = question_set(args.question_set, args.data)[: args.questions]
    vectors = embedder.embed(questions)
    calls = [
        stage_one_arguments(
            args.namespace, embedder.name, vector, question, build_hints(question), pgmem.StageOneParams()
        )
        for question, vector in zip(questions, vectors, strict=True)
    ]
    with pgmem.connect(args.dsn, home=args.home, migrate=False) as conn:
        conn.autocommit = True
        print(f"{len(calls)} questions on {args.namespace!r}, server CPU per call:")
        if args.mode == "floor":
            floor(conn, args.namespace, calls)
        else:
            tail(conn, args.namespace, calls)


if __name__ == "__main__":
    main()
