"""Migration 0008 rebuilt stage_one_v1 for speed: the rows must be exactly the old ones.

The pre-0008 function (as migration 0001 defined it, frozen in
sql/migrations/0001_initial.sql) is installed beside the current one and both run on the
same arguments: questions with derived hints, role and metadata filters, the lexical side
off, neighbours off; and a model above 2,000 dimensions, whose cosine is computed in
halfvec like its index.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
import pytest
from helpers import stage_one_as_of, stage_one_call
from psycopg.rows import dict_row

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.stage_one import stage_one_arguments

BEFORE = "pgmem_test_before_0008"

TURNS = [
    "Caroline went to the LGBTQ support group on Tuesday evening",
    "Melanie painted a sunrise over the lake last summer",
    "Caroline is thinking about a career in counseling and mental health",
    "Melanie ran a charity race for mental health in May",
    "They talked about adoption agencies and Caroline's plans",
    "Melanie's kids loved the camping trip to the mountains",
    "Caroline gave a speech at a school about her transition",
    "Melanie signed up for a pottery class on Saturday",
]
QUESTIONS = [
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint?",
    "What career is Caroline considering?",
    "Where did Melanie's kids go camping?",
    "What class did Melanie sign up for?",
]


def _before_function() -> str:
    return stage_one_as_of("0001", BEFORE)


def _call(schema: str) -> str:
    # 0001's function has no family cap (0018); the fixture's families never reach it
    return stage_one_call(schema, family_cap=schema != BEFORE)


def _spans(namespace_size: int) -> list[pgmem.Span]:
    spans = []
    for i in range(namespace_size):
        turn = TURNS[i % len(TURNS)] + f" (day {i})"
        document = f"session-{i // 6}"  # six turns a document: previous/next neighbours exist
        spans.append(
            pgmem.Span(
                document_id=document,
                text=turn,
                start=(i % 6) * 1000,
                end=(i % 6) * 1000 + len(turn.encode("utf-8")),
                family=f"s{i // 6}",
                source_ts=datetime(2023, 5, 1 + i % 28, tzinfo=UTC),
                metadata={"speaker": "Caroline" if "Caroline" in turn else "Melanie", "n": str(i % 3)},
            )
        )
    return spans


def _same_rows(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    assert [row["note_id"] for row in after] == [row["note_id"] for row in before]
    for old, new in zip(before, after, strict=True):
        for column, value in old.items():
            if isinstance(value, float):
                assert math.isclose(new[column], value, rel_tol=1e-12, abs_tol=1e-12), column
            else:
                assert new[column] == value, column


@pytest.fixture
def before(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute(f"CREATE SCHEMA {BEFORE}")
    conn.execute(_before_function())
    conn.row_factory = dict_row  # type: ignore[assignment]
    return conn


@pytest.mark.parametrize(
    ("where", "roles", "params"),
    [
        (None, None, pgmem.StageOneParams()),
        ("metadata->>'speaker' = 'Melanie'", None, pgmem.StageOneParams()),
        ("metadata->>'n' IN ('0', '2') AND source_ts >= '2023-05-05'", ("dialogue", "fact", "event"), None),
        (None, None, pgmem.StageOneParams(k_lex=0, neighbour_seeds=0)),
        (None, None, pgmem.StageOneParams(k_dense=5, k_lex=5, lex_max_postings=3, bm25_k1=0.9, link_weight=0.0)),
    ],
)
def test_the_rows_are_the_old_ones(
    before: psycopg.Connection[Any],
    hashing: HashingEmbedder,
    where: str | None,
    roles: tuple[str, ...] | None,
    params: pgmem.StageOneParams | None,
) -> None:
    pgmem.ingest(before, _spans(60), namespace="speed", embedder=hashing)
    for question in QUESTIONS:
        arguments = stage_one_arguments(
            "speed",
            hashing.name,
            hashing.embed([question])[0],
            question,
            build_hints(question, where=where, roles=roles),
            # Without 0018's family cap: the function against its own past, like for like.
            dataclasses.replace(params or pgmem.StageOneParams(), family_candidates=None),
        )
        old = before.execute(_call(BEFORE), arguments).fetchall()
        new = before.execute(_call("pgmem"), arguments).fetchall()
        assert old, question
        _same_rows(old, new)


def test_a_halfvec_model_scores_in_halfvec(before: psycopg.Connection[Any]) -> None:
    wide = HashingEmbedder(dimension=2048)
    pgmem.ingest(before, _spans(24), namespace="wide", embedder=wide)
    question = QUESTIONS[1]
    vector = wide.embed([question])[0]
    params = pgmem.StageOneParams(family_candidates=None)
    arguments = stage_one_arguments("wide", wide.name, vector, question, build_hints(question), params)
    old = before.execute(_call(BEFORE), arguments).fetchall()
    new = before.execute(_call("pgmem"), arguments).fetchall()
    _same_rows(old, new)
    literal = "[" + ",".join(map(repr, np.asarray(vector, dtype=np.float32).tolist())) + "]"
    expected = before.execute(
        "SELECT note_id, 1 - (embedding::halfvec(2048) <=> %s::halfvec(2048)) AS cosine FROM pgmem.notes"
        " WHERE namespace = 'wide'",
        (literal,),
    ).fetchall()
    cosine = {row["note_id"]: row["cosine"] for row in expected}
    assert all(row["dense_score"] == cosine[row["note_id"]] for row in new)
