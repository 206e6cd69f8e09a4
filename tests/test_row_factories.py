"""pgmem runs on the caller's connection, whatever row factory it was opened with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from helpers import make_spans
from psycopg.rows import dict_row, namedtuple_row, tuple_row

import pgmem
from pgmem.db.migrate import current_revision, head_revision
from pgmem.embeddings import HashingEmbedder

FACTORIES: dict[str, Callable[..., Any]] = {"tuple": tuple_row, "dict": dict_row, "namedtuple": namedtuple_row}
TEXTS = [
    "The launch moved to Friday after the review.",
    "Maria owns the release checklist for v2.3.1.",
    "The review found two blocking bugs in the parser.",
]


@pytest.mark.parametrize("factory", FACTORIES)
def test_pack_is_the_same_whatever_the_row_factory(dsn: str, hashing: HashingEmbedder, factory: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as plain:
        pgmem.ingest(plain, make_spans(TEXTS), embedder=hashing)
        expected = pgmem.pack(plain, "who owns the release checklist?", embedder=hashing)
    with psycopg.connect(dsn, autocommit=True, row_factory=FACTORIES[factory]) as conn:
        got = pgmem.pack(conn, "who owns the release checklist?", embedder=hashing)
    assert [item.note_id for item in got.items] == [item.note_id for item in expected.items]
    assert [item.final_score for item in got.items] == [item.final_score for item in expected.items]


@pytest.mark.parametrize("factory", ["dict", "namedtuple"])
def test_every_operation_works_whatever_the_row_factory(dsn: str, hashing: HashingEmbedder, factory: str) -> None:
    with psycopg.connect(dsn, autocommit=True, row_factory=FACTORIES[factory]) as conn:
        written = pgmem.ingest(conn, make_spans(TEXTS), embedder=hashing)
        assert written.inserted == 3
        assert pgmem.ingest(conn, make_spans(TEXTS), embedder=hashing).skipped == 3
        assert pgmem.register_model(conn, hashing) > 0
        # Same length as the stored first span: the same document span, other text.
        corrected = make_spans(["The launch moved to Monday after the review."])
        replaced = pgmem.supersede(conn, corrected, namespace="default", reason="date fixed", embedder=hashing)
        assert len(replaced.superseded) == 1
        pack = pgmem.pack(conn, "when is the launch?", embedder=hashing, log=True)
        assert pack.items and pack.pack_id
        given = pgmem.feedback(conn, helpful=[pack.items[0].note_id], pack_id=pack.pack_id)
        assert given.families == {"f": (1.0, 0.0)}
        assert pgmem.reset_feedback(conn, namespace="default") == 1
        removed = pgmem.forget(conn, namespace="default", note_ids=[written.note_ids[1]], reason="test")
        assert removed.notes_removed == 1
        assert current_revision(conn) == head_revision()


def test_a_pooled_connection_without_prepared_statements_works(dsn: str, hashing: HashingEmbedder) -> None:
    """As behind pgbouncer in transaction mode: connections from a pool, no server-side prepares."""
    from psycopg_pool import ConnectionPool

    options = {"autocommit": True, "prepare_threshold": None, "row_factory": dict_row}
    with ConnectionPool(dsn, min_size=1, max_size=2, kwargs=options, open=True) as pool:
        with pool.connection() as conn:
            pgmem.ingest(conn, make_spans(TEXTS), embedder=hashing)
        for _ in range(8):  # past psycopg's default prepare threshold of 5
            with pool.connection() as conn:
                assert pgmem.pack(conn, "who owns the release checklist?", embedder=hashing).items
        with pool.connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone() == {"n": 0}


def test_inside_the_callers_transaction_nothing_is_committed(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:  # not autocommit
        with conn.transaction(force_rollback=True):
            pgmem.ingest(conn, make_spans(TEXTS), embedder=hashing)
            pack = pgmem.pack(conn, "who owns the release checklist?", embedder=hashing, log=True)
            pgmem.feedback(conn, helpful=[pack.items[0].note_id])
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert conn.execute("SELECT count(*) AS n FROM pgmem.notes").fetchone() == {"n": 0}
