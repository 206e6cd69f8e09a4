"""Small builders shared by the tests."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

import pgmem


def make_spans(texts: list[str], *, document_id: str = "doc", family: str = "f", **fields: Any) -> list[pgmem.Span]:
    """Spans laid end to end in one document (offsets exact, one byte between them)."""
    spans = []
    position = 0
    for text in texts:
        size = len(text.encode("utf-8"))
        spans.append(
            pgmem.Span(
                document_id=document_id,
                text=text,
                start=position,
                end=position + size,
                family=family,
                **fields,
            )
        )
        position += size + 1
    return spans


def as_role(dsn: str, role: str, namespace: str | None) -> psycopg.Connection[Any]:
    """A connection bound to ``namespace`` (as pgmem.connect does) acting as ``role``."""
    connection = pgmem.connect(dsn, namespace=namespace, migrate=False)
    connection.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
    return connection


def stats_are_consistent(conn: psycopg.Connection[Any]) -> None:
    """The BM25 statistics equal a recount from the notes (no row left at zero)."""
    stored = {
        (ns, lex): df
        for ns, lex, df in conn.execute("SELECT namespace, lexeme, document_frequency FROM pgmem.lexeme_stats")
    }
    recomputed = {
        (ns, lex): df
        for ns, lex, df in conn.execute(
            "SELECT n.namespace, u.lexeme, count(*) FROM pgmem.notes AS n, unnest(n.lexemes) AS u GROUP BY 1, 2"
        )
    }
    assert stored == recomputed
    for namespace, count, total in conn.execute("SELECT namespace, note_count, lexeme_total FROM pgmem.namespaces"):
        row = conn.execute(
            "SELECT count(*), coalesce(sum(lexeme_count), 0) FROM pgmem.notes WHERE namespace = %s", (namespace,)
        ).fetchone()
        assert row == (count, total)
