"""Migration 0013: notes keep their embeddings in their rows, and stage one ranks the
dense top k of a small namespace exactly, whatever the planner's costs say.

The HNSW index is approximate; which search stage one runs is read from the index's scan
count in the current transaction (pg_stat_get_xact_numscans), not from timings.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from test_stage_one_speed import QUESTIONS, _call, _spans

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.stage_one import stage_one_arguments

# Costs that make any index path look cheaper than a sort of the namespace's notes.
PREFER_INDEXES = "SET LOCAL enable_sort = off; SET LOCAL enable_seqscan = off"


def _one(conn: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    row = conn.execute(query, params or None).fetchone()
    assert row is not None, query
    return row[0]


def _hnsw_scans(conn: psycopg.Connection[Any], question: str, hashing: HashingEmbedder) -> int:
    """Runs stage one for ``question`` in namespace ``inline``; how often it scanned the HNSW index."""
    index = _one(
        conn,
        "SELECT c.oid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
        " JOIN pg_am AS a ON a.oid = c.relam WHERE i.indrelid = 'pgmem.notes'::regclass AND a.amname = 'hnsw'",
    )
    arguments = stage_one_arguments(
        "inline",
        hashing.name,
        hashing.embed([question])[0],
        question,
        build_hints(question),
        pgmem.StageOneParams(),
    )
    before = _one(conn, "SELECT pg_stat_get_xact_numscans(%s)", index)
    rows = conn.execute(_call("pgmem"), arguments).fetchall()
    assert rows, question
    return int(_one(conn, "SELECT pg_stat_get_xact_numscans(%s)", index)) - int(before)


def test_a_note_is_stored_whole(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.ingest(conn, _spans(30), namespace="inline", embedder=hashing)
    assert _one(conn, "SELECT reloptions FROM pg_class WHERE oid = 'pgmem.notes'::regclass") == [
        "toast_tuple_target=8160"
    ]
    # Each row is above the default 2 kB target (its embedding would have gone to TOAST) ...
    assert _one(conn, "SELECT min(pg_column_size(n.*)) FROM pgmem.notes AS n") > 2032
    # ... and nothing of it is out of line.
    assert _one(conn, "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'pgmem.notes'::regclass") == 0


def test_a_small_namespace_is_ranked_exactly_whatever_the_costs(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.ingest(conn, _spans(60), namespace="inline", embedder=hashing)
    conn.commit()
    with conn.transaction():
        conn.execute(PREFER_INDEXES)
        assert [_hnsw_scans(conn, question, hashing) for question in QUESTIONS] == [0] * len(QUESTIONS)
    # Above pgmem.exact_dense_notes the planner picks, and with these costs it picks HNSW.
    with conn.transaction():
        conn.execute(PREFER_INDEXES)
        conn.execute("SET LOCAL pgmem.exact_dense_notes = 60")
        assert all(_hnsw_scans(conn, question, hashing) > 0 for question in QUESTIONS)
    with conn.transaction():
        conn.execute(PREFER_INDEXES)
        conn.execute("SET LOCAL pgmem.exact_dense_notes = 61")
        assert [_hnsw_scans(conn, question, hashing) for question in QUESTIONS] == [0] * len(QUESTIONS)


def test_a_threshold_that_is_not_a_note_count_is_refused(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.ingest(conn, _spans(6), namespace="inline", embedder=hashing)
    conn.commit()
    for value in ("-1", "many", "1e4"):
        with conn.transaction():
            conn.execute("SELECT set_config('pgmem.exact_dense_notes', %s, true)", (value,))
            with pytest.raises(pgmem.PgmemError, match=r"pgmem\.exact_dense_notes must be a note count"):
                pgmem.pack(conn, QUESTIONS[0], namespace="inline", embedder=hashing)
