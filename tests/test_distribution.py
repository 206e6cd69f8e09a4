"""The schema distributes by namespace (Citus): checked on the catalog of a migrated database.

Citus needs every unique key and foreign key of a distributed table to include the
distribution column, and foreign keys between distributed tables to join on it (or to
point at a reference table). docker/citus/distribute.sql must name every pgmem table.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTE_SQL = ROOT / "docker" / "citus" / "distribute.sql"

#: Global tables, replicated to every node (Citus reference tables).
REFERENCE_TABLES = {"embedding_models"}


def _tables(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = 'pgmem'::regnamespace"
        " AND c.relkind IN ('r', 'p') AND c.relname <> 'alembic_version'"
    ).fetchall()
    return {row[0] for row in rows}


def _distribution_statements() -> tuple[dict[str, str], set[str]]:
    text = re.sub(r"--[^\n]*", "", DISTRIBUTE_SQL.read_text())
    distributed = dict(
        re.findall(r"create_distributed_table\(\s*'pgmem\.(\w+)'\s*,\s*'(\w+)'", text, flags=re.IGNORECASE)
    )
    reference = set(re.findall(r"create_reference_table\(\s*'pgmem\.(\w+)'", text, flags=re.IGNORECASE))
    return distributed, reference


def test_every_unique_key_of_a_namespace_table_includes_the_namespace(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute(
        """
        SELECT t.relname AS table_name, i.relname AS index_name,
               array_agg(a.attname ORDER BY k.position) AS columns
        FROM pg_index AS x
        JOIN pg_class AS t ON t.oid = x.indrelid
        JOIN pg_class AS i ON i.oid = x.indexrelid
        CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k (attnum, position)
        LEFT JOIN pg_attribute AS a ON a.attrelid = t.oid AND a.attnum = k.attnum
        WHERE t.relnamespace = 'pgmem'::regnamespace AND x.indisunique AND t.relname <> 'alembic_version'
        GROUP BY t.relname, i.relname
        """
    ).fetchall()
    unique_keys = {(table, index): columns for table, index, columns in rows if table not in REFERENCE_TABLES}
    assert ("notes", "notes_pkey") in unique_keys  # the query sees the keys at all
    missing = {key: columns for key, columns in unique_keys.items() if "namespace" not in columns}
    assert missing == {}


def test_every_foreign_key_joins_on_the_namespace_or_points_at_a_reference_table(
    conn: psycopg.Connection[Any],
) -> None:
    rows = conn.execute(
        """
        SELECT c.conname, src.relname, dst.relname,
               array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY AS k (n, p)
                     JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.p),
               array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY AS k (n, p)
                     JOIN pg_attribute AS a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.p)
        FROM pg_constraint AS c
        JOIN pg_class AS src ON src.oid = c.conrelid
        JOIN pg_class AS dst ON dst.oid = c.confrelid
        WHERE c.contype = 'f' AND src.relnamespace = 'pgmem'::regnamespace
        """
    ).fetchall()
    assert any(name == "notes_namespace_model" for name, *_ in rows)
    wrong = [
        (name, source, target, local, remote)
        for name, source, target, local, remote in rows
        if target not in REFERENCE_TABLES
        and not ("namespace" in local and remote[local.index("namespace")] == "namespace")
    ]
    assert wrong == []


def test_every_namespace_table_has_a_namespace_column(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute(
        "SELECT c.relname FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid"
        " WHERE c.relnamespace = 'pgmem'::regnamespace AND a.attname = 'namespace' AND NOT a.attisdropped"
    ).fetchall()
    with_namespace = {row[0] for row in rows}
    assert _tables(conn) - with_namespace == REFERENCE_TABLES


def test_the_citus_statements_distribute_every_table(conn: psycopg.Connection[Any]) -> None:
    distributed, reference = _distribution_statements()
    assert reference == REFERENCE_TABLES
    assert set(distributed.values()) == {"namespace"}
    assert set(distributed) | reference == _tables(conn)
    assert not set(distributed) & reference


def test_the_erasure_audit_is_keyed_by_namespace(conn: psycopg.Connection[Any]) -> None:
    row = conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'forget_audit_pkey'"
    ).fetchone()
    assert row == ("PRIMARY KEY (namespace, audit_id)",)
