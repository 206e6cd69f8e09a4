"""The schema is reached the same way by schema.sql and by the migration chain."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb
from schema_catalog import (
    GROUP_ROLE_KINDS,
    Snapshot,
    catalog_snapshot,
    differing_kinds,
    group_role_memberships,
    snapshot_differences,
    with_default_role_prefix,
)

import pgmem
from pgmem.db.migrate import DEFAULT_ROLE_PREFIX, current_revision, head_revision, with_role_prefix
from pgmem.db.resources import sql_dir


def _replay_chain(dsn: str, revision: str = "head", role_prefix: str = DEFAULT_ROLE_PREFIX) -> None:
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
        config.attributes["role_prefix"] = role_prefix
        command.upgrade(config, revision)
    engine.dispose()


def _snapshot(dsn: str) -> Snapshot:
    with psycopg.connect(dsn) as conn:
        return catalog_snapshot(conn)


def test_migration_chain_equals_current_schema(fresh_database: str, dsn: str) -> None:
    _replay_chain(fresh_database)
    from_chain = _snapshot(fresh_database)
    from_schema = _snapshot(dsn)  # the template was built from sql/schema.sql
    assert ("notes", "r") in {row[:2] for row in from_schema["relations"]}
    assert all(from_schema[kind] for kind in ("columns", "constraints", "indexes", "functions", "policies", "grants"))
    # Grants name each function by its whole signature (stage_one_v1's is longer than a name).
    assert {row[1] for row in from_schema["grants"] if row[0] == "function"} == {
        row[0] for row in from_schema["functions"]
    }
    assert snapshot_differences(from_chain, from_schema, ("chain", "schema.sql")) == []
    assert from_chain == from_schema


# Each statement changes one thing a migration could get wrong; the snapshot must see it.
MUTATIONS = [
    ("ALTER TABLE pgmem.pack_log ADD COLUMN extra integer", {"columns"}),
    ("ALTER TABLE pgmem.pack_log ALTER COLUMN created_at SET DEFAULT '2000-01-01'", {"columns"}),
    ("ALTER TABLE pgmem.pack_log ALTER COLUMN query DROP NOT NULL", {"columns", "constraints"}),
    ("ALTER TABLE pgmem.forget_audit ALTER COLUMN packs_removed TYPE bigint", {"columns"}),
    (
        "ALTER TABLE pgmem.notes DROP CONSTRAINT notes_span_length,"
        " ADD CONSTRAINT notes_span_length CHECK (span_end >= 0)",
        {"constraints"},
    ),
    (
        "DROP INDEX pgmem.pack_log_created;\nCREATE INDEX pack_log_created ON pgmem.pack_log (created_at)",
        {"indexes"},
    ),
    (
        "CREATE OR REPLACE FUNCTION pgmem.group_role_v1(p_kind text) RETURNS name LANGUAGE sql IMMUTABLE"
        " RETURN CASE p_kind WHEN 'reader' THEN 'pgmem_reader'::name END",
        {"functions"},
    ),
    ("ALTER FUNCTION pgmem.group_role_v1(text) STABLE", {"functions"}),
    ("ALTER FUNCTION pgmem.group_role_v1(text) SECURITY DEFINER", {"functions"}),
    ("ALTER FUNCTION pgmem.group_role_v1(text) SET search_path = pg_catalog", {"functions"}),
    ("ALTER TABLE pgmem.notes DISABLE TRIGGER notes_count_new", {"triggers"}),
    (
        "DROP TRIGGER notes_count_new ON pgmem.notes;\nCREATE TRIGGER notes_count_new AFTER INSERT ON pgmem.notes"
        " FOR EACH ROW EXECUTE FUNCTION pgmem.count_new_notes_v1()",
        {"triggers"},
    ),
    ("ALTER VIEW pgmem.store_families_v1 SET (security_invoker = false)", {"relations"}),
    (
        "DO $$ BEGIN EXECUTE format('CREATE OR REPLACE VIEW pgmem.namespace_grants_v1"
        " WITH (security_invoker = true) AS SELECT * FROM (%s) AS original LIMIT 1',"
        " rtrim(pg_get_viewdef('pgmem.namespace_grants_v1'::regclass), ';')); END $$",
        {"views"},
    ),
    ("ALTER POLICY admin_all ON pgmem.notes TO pgmem_writer", {"policies"}),
    ("ALTER POLICY admin_all ON pgmem.notes USING (namespace <> '')", {"policies"}),
    ("ALTER TABLE pgmem.notes FORCE ROW LEVEL SECURITY", {"relations"}),
    ("ALTER TABLE pgmem.pack_log DISABLE ROW LEVEL SECURITY", {"relations"}),
    ("GRANT UPDATE ON pgmem.notes TO pgmem_reader", {"grants"}),
    ("REVOKE INSERT (pack_id) ON pgmem.feedback FROM pgmem_writer", {"grants"}),
    ("GRANT EXECUTE ON FUNCTION pgmem.forget_v1 TO pgmem_reader", {"grants"}),
    ("GRANT EXECUTE ON FUNCTION pgmem.group_role_v1 TO PUBLIC", {"grants"}),
    ("REVOKE USAGE ON SCHEMA pgmem FROM pgmem_reader", {"grants"}),
    ("ALTER TABLE pgmem.feedback ALTER COLUMN feedback_id SET INCREMENT BY 2", {"sequences"}),
    ("CREATE TYPE pgmem.mood AS ENUM ('calm')", {"types", "grants"}),
    ("COMMENT ON TABLE pgmem.notes IS 'changed'", {"comments"}),
]


def test_the_schema_comparison_sees_every_kind_of_change(dsn: str) -> None:
    """Each mutation of a schema.sql database must show up, under the kind it changed,
    so the chain-equals-schema test above can fail."""
    with psycopg.connect(dsn) as conn:
        before = catalog_snapshot(conn)
        conn.rollback()
        for statement, kinds in MUTATIONS:
            for part in statement.split(";\n"):
                conn.execute(part)
            changed = differing_kinds(before, catalog_snapshot(conn))
            conn.rollback()
            assert changed == kinds, statement
        assert catalog_snapshot(conn) == before


@pytest.fixture
def new_databases(server_dsn: str) -> Iterator[Any]:
    """Makes empty databases, each under group roles of its own prefix; drops them all afterwards."""
    made: list[tuple[str, str]] = []

    def make() -> tuple[str, str]:
        name, prefix = f"pgmem_test_{uuid.uuid4().hex[:12]}", f"t{uuid.uuid4().hex[:10]}"
        with psycopg.connect(server_dsn, autocommit=True) as cluster:
            cluster.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        made.append((name, prefix))
        return psycopg.conninfo.make_conninfo(server_dsn, dbname=name), prefix

    yield make
    with psycopg.connect(server_dsn, autocommit=True) as cluster:
        for name, prefix in made:
            cluster.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            for kind in reversed(GROUP_ROLE_KINDS):
                cluster.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(f"{prefix}_{kind}")))


def _install_schema_text(dsn: str, prefix: str, text: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(with_role_prefix(text, prefix))


def _install(dsn: str, prefix: str) -> tuple[Snapshot, list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        return with_default_role_prefix(catalog_snapshot(conn), prefix), group_role_memberships(conn, prefix)


def test_group_roles_of_a_new_prefix_are_the_same_from_schema_and_chain(new_databases: Any) -> None:
    """Role memberships are cluster-wide, so the test above cannot see them: install
    once from schema.sql (pgmem.migrate on a fresh database) and once by the chain, each
    under group roles of its own, and compare the roles' memberships and the catalog."""
    schema_dsn, schema_prefix = new_databases()
    chain_dsn, chain_prefix = new_databases()
    pgmem.migrate(schema_dsn, role_prefix=schema_prefix)
    _replay_chain(chain_dsn, role_prefix=chain_prefix)
    from_schema, from_chain = _install(schema_dsn, schema_prefix), _install(chain_dsn, chain_prefix)

    assert from_schema[1] == from_chain[1]
    assert {row[:2] for row in from_schema[1]} == {("writer", "reader"), ("admin", "writer")}
    assert snapshot_differences(from_chain[0], from_schema[0], ("chain", "schema.sql")) == []
    # Every mention of the prefixed roles was renamed before comparing.
    assert schema_prefix not in repr(from_schema[0]) and "pgmem_reader" in repr(from_schema[0]["policies"])


def test_the_membership_comparison_sees_a_missing_role_grant(new_databases: Any) -> None:
    dsn, prefix = new_databases()
    mutated_dsn, mutated_prefix = new_databases()
    text = (sql_dir() / "schema.sql").read_text(encoding="utf-8")
    assert text.count("GRANT pgmem_reader TO pgmem_writer;\n") == 1
    _install_schema_text(dsn, prefix, text)
    _install_schema_text(mutated_dsn, mutated_prefix, text.replace("GRANT pgmem_reader TO pgmem_writer;\n", ""))
    (snapshot, memberships), (mutated_snapshot, mutated_memberships) = (
        _install(dsn, prefix),
        _install(mutated_dsn, mutated_prefix),
    )
    assert snapshot == mutated_snapshot  # invisible to the catalog of the database ...
    assert memberships != mutated_memberships  # ... but not to the memberships


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

    _replay_chain(fresh_database, "0003")
    gone = f"t_gone_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as cluster:
        cluster.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(gone)))
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        ids = pgmem.ingest(
            conn, make_spans(["Xylophonic secret of Brevaldo.", "Public fact."]), embedder=hashing
        ).note_ids
        # A pack that packed the note, logged as 0003 logged packs (today's pack() reads
        # tables of later migrations, so the document is written as 0003's log_pack_v1 reads it).
        pack_id = str(uuid.uuid4())
        document = {
            "namespace": "default", "pack_id": pack_id, "query": "Xylophonic Brevaldo secret",
            "mode": "calibrated", "embedding_model": hashing.name, "degraded": False, "degraded_reasons": [],
            "pool_size": 2, "pool_mean": 0.5, "pool_variance": 0.1, "entropy": 0.0, "note_ids": [ids[0]],
            "parameters": {}, "hints": {}, "rejections": [], "timings_ms": {}, "families": [],
        }  # fmt: skip
        conn.execute("SELECT pgmem.log_pack_v1(%s)", (Jsonb(document),))
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
        assert conn.execute("SELECT count(*) FROM pgmem.pack_log WHERE pack_id = %s", (pack_id,)).fetchone() == (0,)


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
