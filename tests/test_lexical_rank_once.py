"""Migration 0027: the lexical top k from postings is ranked once 2k deep, and at most once
more 8k deep, however many times the family cap spreads it: the rows must be exactly 0026's.

0026's function (frozen in sql/migrations/0026_unbounded_screen.sql) ran the whole ranking
again at 2k, 4k and 8k while one family crowded the list. Both are installed side by side
and run on the same arguments over a namespace where one family holds most of the notes
that match the questions, so that the spread stops at each depth in turn (2k, 4k, 8k), on
a ranking that runs out of notes first, with a cap no family reaches, and without a cap.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from helpers import as_role, stage_one_as_of, stage_one_call
from psycopg.rows import dict_row
from test_stage_one_rows import _compare

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.stage_one import stage_one_arguments

BEFORE = "pgmem_test_before_0027"
NAMESPACE = "one-loud-family"
QUESTIONS = [
    "Which garden plants did the volunteers water?",
    "When did the volunteers plant tomatoes in the garden?",
    "garden",
]


def _spans() -> list[pgmem.Span]:
    """120 notes: 100 of family "loud" about the garden, 20 of four quiet families, half
    of them about the garden too (the notes a spread must reach past the loud ones)."""
    spans = []
    for i in range(120):
        loud = i < 100
        about = "garden" if loud or i % 2 == 0 else "harbour"
        text = f"Note {i}: the volunteers watered the {about} plants and planted tomatoes on day {i % 30}."
        spans.append(
            pgmem.Span(
                document_id=f"doc-{i // 4}",
                text=text,
                start=(i % 4) * 1000,
                end=(i % 4) * 1000 + len(text.encode("utf-8")),
                family="loud" if loud else f"quiet-{i % 4}",
            )
        )
    return spans


@pytest.fixture
def loud(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    pgmem.ingest(conn, _spans(), namespace=NAMESPACE, embedder=hashing)
    conn.execute(f"CREATE SCHEMA {BEFORE}")
    conn.execute(stage_one_as_of("0026", BEFORE))
    conn.row_factory = dict_row  # type: ignore[assignment]
    return conn


@pytest.mark.parametrize(
    "params",
    [
        pgmem.StageOneParams(k_dense=4, k_lex=10, family_candidates=2),  # spread at 2k, 4k, 8k
        pgmem.StageOneParams(k_dense=4, k_lex=6, family_candidates=1),
        pgmem.StageOneParams(k_dense=4, k_lex=10, family_candidates=5),
        pgmem.StageOneParams(k_dense=4, k_lex=20, family_candidates=3),  # runs out of notes first
        pgmem.StageOneParams(k_dense=4, k_lex=40, family_candidates=3),
        pgmem.StageOneParams(k_dense=4, k_lex=10, family_candidates=10),  # no family above the cap
        pgmem.StageOneParams(k_dense=4, k_lex=10, family_candidates=None),
    ],
)
def test_the_rows_are_those_of_0026(
    loud: psycopg.Connection[Any], hashing: HashingEmbedder, params: pgmem.StageOneParams
) -> None:
    for question in QUESTIONS:
        arguments = stage_one_arguments(
            NAMESPACE, hashing.name, hashing.embed([question])[0], question, build_hints(question), params
        )
        rows = _compare(loud, arguments, BEFORE)
        assert rows


def test_the_loud_family_makes_the_spread_go_deep(loud: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    """The fixture does what the comparison needs: with a cap of 2 the first 8k of the
    ranking are mostly the loud family's, so the spread reaches past them (a quiet family's
    notes among the candidates that the uncapped search leaves out)."""
    question = QUESTIONS[0]
    vector = hashing.embed([question])[0]

    def families(params: pgmem.StageOneParams) -> list[str]:
        arguments = stage_one_arguments(NAMESPACE, hashing.name, vector, question, build_hints(question), params)
        return [row["family"] for row in loud.execute(stage_one_call("pgmem"), arguments).fetchall()]

    capped = families(pgmem.StageOneParams(k_dense=1, k_lex=10, family_candidates=2, neighbour_seeds=0))
    uncapped = families(pgmem.StageOneParams(k_dense=1, k_lex=10, family_candidates=None, neighbour_seeds=0))
    assert uncapped.count("loud") > 2
    assert sum(family != "loud" for family in capped) > sum(family != "loud" for family in uncapped)


def test_a_reader_cannot_rank_another_tenants_crowded_notes(
    tenants: psycopg.Connection[Any], hashing: HashingEmbedder, dsn: str, roles: dict[str, str]
) -> None:
    """As an attacker with a login role would try: a reader of namespace 'a' asks for the
    other tenant's crowded namespace on the route that ranks and spreads (a cap of 1, deep
    spreads) and gets nothing; asking for its own, it sees only its own notes."""
    pgmem.ingest(tenants, _spans(), namespace="b", embedder=hashing)
    question = QUESTIONS[0]
    params = pgmem.StageOneParams(k_dense=4, k_lex=10, family_candidates=1)
    with as_role(dsn, roles["reader"], "a") as reader:
        for namespace in ("b", "a"):
            arguments = stage_one_arguments(
                namespace, hashing.name, hashing.embed([question])[0], question, build_hints(question), params
            )
            texts = [row[5] for row in reader.execute(stage_one_call("pgmem"), arguments).fetchall()]
            assert not any("volunteers" in text for text in texts), namespace
    own = stage_one_arguments(
        "a", hashing.name, hashing.embed(["launch code"])[0], "launch code", build_hints("launch code"), params
    )
    with as_role(dsn, roles["reader"], "a") as reader:
        assert [row[5] for row in reader.execute(stage_one_call("pgmem"), own).fetchall()] == [
            "Alpha tenant secret: the launch code is 1234."
        ]
