"""The schema is reached the same way by schema.sql and by the migration chain."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgmem
from pgmem.db.migrate import current_revision, head_revision
from pgmem.db.resources import sql_dir


def _pg_dump(dsn: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    binary = Path(POSTGRES_BIN_PATH) / "pg_dump"
    dump = subprocess.run(
        [
            str(binary),
            "--schema-only",
            "--no-owner",
            "--schema=pgmem",
            "--exclude-table=pgmem.alembic_version",
            "--restrict-key=pgmem",
            dsn,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return "\n".join(line for line in dump.splitlines() if not line.startswith("--"))


def _replay_chain(dsn: str, revision: str = "head") -> None:
    """Build the schema only through alembic revisions (never through schema.sql)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from alembic import command
    from pgmem.db.migrate import _alembic_config

    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), poolclass=NullPool)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE SCHEMA IF NOT EXISTS pgmem")
        config = _alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    engine.dispose()


def test_migration_chain_equals_current_schema(server_dsn: str, fresh_database: str, dsn: str) -> None:
    _replay_chain(fresh_database)
    from_chain = _pg_dump(fresh_database)
    from_schema = _pg_dump(dsn)  # the template was built from sql/schema.sql
    assert "CREATE TABLE pgmem.notes" in from_schema
    assert from_chain == from_schema


def test_migrate_is_idempotent_and_stamps_head(fresh_database: str) -> None:
    # The session's template database already uses the default roles in this cluster.
    assert pgmem.migrate(fresh_database, shared_roles=True) == head_revision()
    assert pgmem.migrate(fresh_database) == head_revision()
    with psycopg.connect(fresh_database) as conn:
        assert current_revision(conn) == head_revision()


def test_migrate_leaves_the_callers_connection_alone(fresh_database: str) -> None:
    with psycopg.connect(fresh_database) as conn:
        conn.execute("CREATE TEMPORARY TABLE scratch (x int)")
        pgmem.migrate(conn, shared_roles=True)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.execute("SELECT * FROM scratch")
        assert current_revision(conn) == head_revision()


def test_foreign_pgmem_schema_is_refused(fresh_database: str) -> None:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute((sql_dir() / "schema.sql").read_text())
    with pytest.raises(pgmem.SchemaError, match="no migration record"):
        pgmem.migrate(fresh_database)


def test_unmigrated_database_gives_a_schema_error(fresh_database: str, hashing: Any) -> None:
    with (
        psycopg.connect(fresh_database, autocommit=True) as conn,
        pytest.raises(pgmem.SchemaError, match="migrate"),
    ):
        pgmem.pack(conn, "anything", embedder=hashing)


def test_upgrading_to_0004_closes_what_older_versions_left_open(
    server_dsn: str, fresh_database: str, hashing: Any
) -> None:
    """A store used under 0003: a grant to a role since dropped, a forget that left the
    erased words, judgements and logged question behind. The upgrade clears them."""
    from helpers import make_spans, stats_are_consistent

    from pgmem.retrieval.pipeline import log_document

    _replay_chain(fresh_database, "0003")
    gone = f"t_gone_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as cluster:
        cluster.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(gone)))
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        ids = pgmem.ingest(
            conn, make_spans(["Xylophonic secret of Brevaldo.", "Public fact."]), embedder=hashing
        ).note_ids
        # Logged as 0003 logged packs (pack(log=True) now writes through 0007's log_pack_v2).
        pack, document = log_document(pgmem.pack(conn, "Xylophonic Brevaldo secret", embedder=hashing))
        conn.execute("SELECT pgmem.log_pack_v1(%(pack)s)", document)
        pgmem.feedback(conn, helpful=[ids[0]], unhelpful=[ids[1]])
        conn.execute("SELECT pgmem.grant_namespace_v1(%s, 'default')", (gone,))
        conn.execute("SELECT pgmem.forget_v1('default', 'notes', %s, 'erasure')", ([ids[0]],))
        assert conn.execute("SELECT count(*) FROM pgmem.lexeme_stats WHERE document_frequency = 0").fetchone()[0] > 0
    with psycopg.connect(server_dsn, autocommit=True) as cluster:
        cluster.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(gone)))

    assert pgmem.migrate(fresh_database, shared_roles=True) == head_revision()

    with psycopg.connect(fresh_database, autocommit=True) as conn:
        stats_are_consistent(conn)
        assert conn.execute("SELECT count(*) FROM pgmem.namespace_grants").fetchone() == (0,)
        assert conn.execute("SELECT note_id::text FROM pgmem.feedback").fetchall() == [(ids[1],)]
        assert conn.execute("SELECT family, helpful, unhelpful FROM pgmem.family_reliability").fetchall() == [
            ("f", 0.0, 1.0)
        ]
        assert conn.execute("SELECT feedback_helpful, feedback_unhelpful FROM pgmem.namespaces").fetchone() == (
            0.0,
            1.0,
        )
        assert conn.execute("SELECT count(*) FROM pgmem.pack_log WHERE pack_id = %s", (pack.pack_id,)).fetchone() == (
            0,
        )


def test_0005_stops_on_a_store_with_two_notes_on_one_span(fresh_database: str, hashing: Any) -> None:
    _replay_chain(fresh_database, "0003")
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        span = pgmem.Span(document_id="d", text="old text", start=0, end=8, family="f")
        first = pgmem.ingest(conn, [span], embedder=hashing).note_ids[0]
        # Before 0005 a corrected text on the same span became a second note.
        conn.execute(
            "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
            " confidence, model_id, embedding) SELECT namespace, gen_random_uuid(), document_id, span_start,"
            " span_end, 'new text', family, role, confidence, model_id, embedding FROM pgmem.notes"
        )
        with pytest.raises(pgmem.DatabaseError, match="1 document span"):
            pgmem.migrate(fresh_database)
        pgmem.forget(conn, namespace="default", note_ids=[first], reason="superseded before 0005")
        assert pgmem.migrate(fresh_database) == head_revision()
        assert conn.execute("SELECT text FROM pgmem.notes").fetchall() == [("new text",)]
