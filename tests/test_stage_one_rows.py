"""Migration 0019 cut stage_one_v1's work per call: the rows must be exactly 0018's.

0018's function (frozen in sql/migrations/0018_family_candidates.sql) is installed beside
the current one and both run on the same arguments, on a namespace whose three families
crowd every dense top k: the exact dense ranking with a family cap that binds (the
nearest 8k spread by family), with one that no family reaches (the nearest k as they
stand), and without one; questions with entity, time and keyword hints and linked
neighbours (the scoring and the pool aggregates); role and metadata filters (the dynamic
paths); the HNSW path above pgmem.exact_dense_notes.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import Any

import psycopg
import pytest
from helpers import stage_one_as_of, stage_one_call
from psycopg.rows import dict_row
from test_stage_one_speed import _spans as speed_spans

import pgmem
from pgmem.api import build_hints
from pgmem.db.queries import run
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.stage_one import stage_one_arguments

BEFORE = "pgmem_test_before_0019"
NAMESPACE = "crowded"
QUESTIONS = [
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint in May 2023?",
    "What career is Caroline considering?",
    "Where did Melanie's kids go camping?",
    "pottery class",
]


def _spans(count: int) -> list[pgmem.Span]:
    # test_stage_one_speed's turns (six a document: neighbours and links), in three
    # families: any cap below a third of k binds.
    return [dataclasses.replace(span, family=f"f{i % 3}") for i, span in enumerate(speed_spans(count))]


@pytest.fixture
def crowded(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    pgmem.ingest(conn, _spans(90), namespace=NAMESPACE, embedder=hashing)
    conn.execute(f"CREATE SCHEMA {BEFORE}")
    conn.execute(stage_one_as_of("0018", BEFORE))
    conn.row_factory = dict_row  # type: ignore[assignment]
    return conn


def _compare(conn: psycopg.Connection[Any], arguments: dict[str, Any], before: str = BEFORE) -> list[dict[str, Any]]:
    """The current function's rows, checked against those of ``before``'s copy (same notes, same order)."""
    old = conn.execute(stage_one_call(before), arguments).fetchall()
    new = conn.execute(stage_one_call("pgmem"), arguments).fetchall()
    assert old
    assert [row["note_id"] for row in new] == [row["note_id"] for row in old]
    for before, after in zip(old, new, strict=True):
        for column, value in before.items():
            if isinstance(value, float):
                # Pool and family sums may add the same terms in another order.
                assert math.isclose(after[column], value, rel_tol=1e-12, abs_tol=1e-12), column
            else:
                assert after[column] == value, column
    return new


@pytest.mark.parametrize(
    ("where", "roles", "params"),
    [
        # Exact dense top k, static: a cap that binds, one no family reaches, none.
        (None, None, pgmem.StageOneParams()),
        (None, None, pgmem.StageOneParams(k_dense=10, family_candidates=2)),
        (None, None, pgmem.StageOneParams(k_dense=10, family_candidates=10)),
        (None, None, pgmem.StageOneParams(k_dense=9, family_candidates=3)),
        (None, None, pgmem.StageOneParams(family_candidates=None)),
        (None, ("fact", "event", "dialogue"), pgmem.StageOneParams(k_dense=10, family_candidates=2)),
        # The dynamic paths: a metadata filter; the lexical side and neighbours off.
        ("metadata->>'n' IN ('0', '2')", None, pgmem.StageOneParams(k_dense=10, family_candidates=2)),
        (None, None, pgmem.StageOneParams(k_lex=0, neighbour_seeds=0, link_weight=0.0)),
    ],
)
def test_the_rows_are_those_of_0018(
    crowded: psycopg.Connection[Any],
    hashing: HashingEmbedder,
    where: str | None,
    roles: tuple[str, ...] | None,
    params: pgmem.StageOneParams,
) -> None:
    for question in QUESTIONS:
        hints = build_hints(question, where=where, roles=roles)
        arguments = stage_one_arguments(NAMESPACE, hashing.name, hashing.embed([question])[0], question, hints, params)
        _compare(crowded, arguments)


def test_the_exact_cap_binds_and_the_pool_aggregates_hold(
    crowded: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    question = QUESTIONS[0]
    params = pgmem.StageOneParams(k_dense=10, k_lex=0, neighbour_seeds=0, family_candidates=2)
    arguments = stage_one_arguments(
        NAMESPACE, hashing.name, hashing.embed([question])[0], question, build_hints(question), params
    )
    rows = _compare(crowded, arguments)
    # Three families, two each ahead of the rest: each family's two nearest notes are in
    # the pool, however far, and the nearest notes over the cap fill it to ten.
    ranked = crowded.execute(
        "SELECT note_id, family FROM pgmem.notes WHERE namespace = %s ORDER BY embedding <=> %s::vector, note_id",
        (NAMESPACE, arguments["query_embedding"]),
    ).fetchall()
    seen: Counter[str] = Counter()
    within = []
    for row in ranked:
        seen[row["family"]] += 1
        if seen[row["family"]] <= 2:
            within.append(row["note_id"])
    assert len(within) == 6
    assert set(within) <= {row["note_id"] for row in rows}
    assert len(rows) == 10
    # The pool aggregates are those of the rows returned.
    scores = [row["base_score"] for row in rows]
    mean = sum(scores) / len(scores)
    assert {row["pool_size"] for row in rows} == {len(rows)}
    assert all(math.isclose(row["pool_mean"], mean, rel_tol=1e-12) for row in rows)
    variance = sum((score - mean) ** 2 for score in scores) / len(scores)
    assert all(math.isclose(row["pool_variance"], variance, rel_tol=1e-9, abs_tol=1e-15) for row in rows)
    counts = Counter(row["family"] for row in rows)
    for row in rows:
        assert row["family_count"] == counts[row["family"]]
        family_sum = sum(other["base_score"] for other in rows if other["family"] == row["family"])
        assert math.isclose(row["family_score_sum"], family_sum, rel_tol=1e-12)
    entropy = -sum(m / len(rows) * math.log(m / len(rows)) for m in counts.values())
    assert all(math.isclose(row["pool_entropy"], entropy, rel_tol=1e-9, abs_tol=1e-12) for row in rows)


def test_the_hnsw_path_above_the_exact_threshold(crowded: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    crowded.execute("SET pgmem.exact_dense_notes = 10")
    for question in QUESTIONS[:2]:
        for cap in (2, None):
            params = pgmem.StageOneParams(k_dense=10, family_candidates=cap)
            arguments = stage_one_arguments(
                NAMESPACE, hashing.name, hashing.embed([question])[0], question, build_hints(question), params
            )
            _compare(crowded, arguments)


def test_the_statement_returns_every_column_of_the_function_and_the_note_id_as_text(
    crowded: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    # The stage_one statement names stage_one_v1's columns one by one (the note id cast to
    # text for the pool): none may be dropped or changed on the way.
    question = QUESTIONS[0]
    arguments = stage_one_arguments(
        NAMESPACE, hashing.name, hashing.embed([question])[0], question, build_hints(question), pgmem.StageOneParams()
    )
    function_rows = crowded.execute(stage_one_call("pgmem"), arguments).fetchall()
    statement_rows = run(crowded, "stage_one", arguments, prepare=False, binary=True).fetchall()
    assert function_rows
    assert len(statement_rows) == len(function_rows)
    for function_row, statement_row in zip(function_rows, statement_rows, strict=True):
        assert statement_row["note_id"] == str(function_row["note_id"])
        for column, value in function_row.items():
            if column != "note_id":
                assert statement_row[column] == value, column
