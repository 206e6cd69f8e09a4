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
import sqlglot
from sqlglot import exp

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


# Routing: Citus sends a statement whole to one worker when every distributed table in it
# is restricted to one value of the distribution column. Checked on the SQL text of a pack.


def _is_namespace_parameter(node: exp.Expression, alias: str) -> bool:
    """``alias.namespace = $1`` (either side)."""
    if not isinstance(node, exp.EQ):
        return False
    sides = (node.this, node.expression)
    column = any(isinstance(s, exp.Column) and s.name == "namespace" and s.table == alias for s in sides)
    parameter = any(isinstance(s, exp.Parameter) and s.name == "1" for s in sides)
    return column and parameter


def _unrouted_tables(statement: str) -> tuple[list[str], list[str]]:
    """The pgmem tables a statement reads, and those not restricted by ``namespace = $1``."""
    tree = sqlglot.parse_one(statement, read="postgres")
    seen, unrouted = [], []
    for table in tree.find_all(exp.Table):
        if table.db != "pgmem" or not isinstance(table.this, exp.Identifier):
            continue  # not pgmem's, or a function call such as pgmem.stage_one_v1(...)
        seen.append(table.name)
        select = table.find_ancestor(exp.Select)
        assert select is not None
        conditions = [select.args.get("where")] + [join.args.get("on") for join in select.args.get("joins") or []]
        alias = table.alias_or_name
        if not any(_is_namespace_parameter(node, alias) for c in conditions if c for node in c.find_all(exp.EQ)):
            unrouted.append(f"{table.name} AS {alias}")
    return seen, unrouted


def test_every_table_a_pack_statement_reads_is_restricted_to_its_namespace() -> None:
    text = (ROOT / "sql" / "queries.sql").read_text()
    statement = text.split("-- name: stage_one --", 1)[1].split("-- name:", 1)[0]
    statement = re.sub(r"%\(\w+\)s", lambda m: "$1" if m.group(0) == "%(namespace)s" else "$2", statement)
    # Since migration 0022 the pack's statement calls stage_one_pool_v1 and reads no table
    # itself; the function's statement joins the statistics to stage one's rows.
    assert _unrouted_tables(statement) == ([], [])
    schema = (ROOT / "sql" / "schema.sql").read_text()
    start = schema.index("CREATE FUNCTION pgmem.stage_one_pool_v1(")
    body = schema[
        schema.index("    RETURN QUERY\n", start) + len("    RETURN QUERY\n") : schema.index(";\nEND;", start)
    ]
    seen, unrouted = _unrouted_tables(re.sub(r"\bp_namespace\b", "$1", body))
    assert sorted(seen) == ["family_reliability", "family_stats", "family_writers", "namespaces"]
    assert unrouted == []
    distribute = re.sub(r"--[^\n]*", "", DISTRIBUTE_SQL.read_text())
    assert re.search(r"create_distributed_function\(\s*'pgmem\.stage_one_pool_v1\(", distribute)


def test_every_table_stage_one_reads_is_restricted_to_its_namespace() -> None:
    """Migration 0001's stage_one_v1 (replaced by 0008's, which the test below reads)."""
    text = (ROOT / "sql" / "migrations" / "0001_initial.sql").read_text()
    start = text.index("CREATE FUNCTION pgmem.stage_one_v1(")
    body = text[start : text.index("$function$;", start)]
    match = re.search(r"RETURN QUERY EXECUTE format\(\$query\$(.*?)\$query\$", body, flags=re.DOTALL)
    assert match is not None
    # format() arguments: %1$s the model id, %2$s the vector type, %3$s the compiled filter.
    statement = match.group(1).replace("%1$s", "1").replace("%2$s", "vector").replace("%3$s", "TRUE")
    assert "$1" in statement and not re.search(r"%\d\$", statement)
    seen, unrouted = _unrouted_tables(statement)
    assert set(seen) == {"notes", "lexeme_stats"} and len(seen) >= 5
    assert unrouted == []


def test_the_routing_check_sees_a_missing_predicate() -> None:
    seen, unrouted = _unrouted_tables(
        "SELECT * FROM pgmem.notes AS n JOIN pgmem.lexeme_stats AS s ON s.lexeme = n.text WHERE n.namespace = $1"
    )
    assert seen == ["notes", "lexeme_stats"] and unrouted == ["lexeme_stats AS s"]


def test_every_table_stage_one_reads_since_0008_is_restricted_to_its_namespace() -> None:
    """Migration 0008's stage_one_v1: the candidate search and the static statements around it."""
    text = (ROOT / "sql" / "migrations" / "0008_stage_one_speed.sql").read_text()
    start = text.index("CREATE OR REPLACE FUNCTION pgmem.stage_one_v1(")
    body = text[start : text.index("$function$;", start)]
    match = re.search(r"EXECUTE format\(\$candidates\$(.*?)\$candidates\$", body, flags=re.DOTALL)
    assert match is not None
    # format() arguments: %1$s the row filter (model, roles, compiled filter), %2$s the vector type.
    candidates = match.group(1).replace("%1$s", "TRUE").replace("%2$s", "vector")
    assert not re.search(r"%\d\$", candidates)
    seen, unrouted = _unrouted_tables(candidates)
    assert set(seen) == {"notes"} and len(seen) >= 5 and unrouted == []
    # The static statements name the namespace by the function's argument p_namespace.
    static = [
        body[body.index("    SELECT coalesce(array_agg(t.lexeme") : body.index("INTO v_terms, v_idf, v_screen")]
        + body[body.index("    FROM (SELECT s.lexeme,") : body.index(") AS t;") + len(") AS t")],
        body[
            body.index("    RETURN QUERY\n") + len("    RETURN QUERY\n") : body.index(
                "ORDER BY a.base_score DESC, a.note_id;"
            )
        ],
    ]
    for statement in static:
        seen, unrouted = _unrouted_tables(re.sub(r"\bp_namespace\b", "$1", statement))
        assert seen and unrouted == []
