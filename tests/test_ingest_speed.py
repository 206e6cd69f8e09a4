"""Migration 0020: the foreign keys ingest checked per row that could never fail are gone;
what they refused is still refused (by notes_namespace_model), and postings still follow
the notes. Since migration 0029 the link lookups need no index on the notes' handles or entities."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from helpers import make_spans, stats_are_consistent

import pgmem
from pgmem.embeddings import HashingEmbedder

NOTE = (
    "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
    " confidence, model_id, embedding)"
    " SELECT %s, gen_random_uuid(), 'raw', 0, 4, 'four', 'f', 'fact', 0.5, %s, embedding"
    " FROM pgmem.notes LIMIT 1"
)


def _foreign_keys(conn: psycopg.Connection[Any], table: str) -> set[str]:
    rows = conn.execute("SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid = %s::regclass", (table,))
    return {row[0] for row in rows}


def test_one_foreign_key_checks_a_notes_namespace_and_model(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    assert _foreign_keys(conn, "pgmem.notes") == {"notes_namespace_model"}
    assert _foreign_keys(conn, "pgmem.lexeme_postings") == set()
    pgmem.ingest(conn, make_spans(["A first note about quokkas."]), namespace="a", embedder=hashing)
    model = conn.execute("SELECT model_id FROM pgmem.namespaces WHERE namespace = 'a'").fetchone()[0]
    # As the owner (no row-level security): an unregistered namespace, a model that does
    # not exist, a model other than the namespace's.
    other = conn.execute(
        "INSERT INTO pgmem.embedding_models (name, dimension) VALUES ('other-model', 384) RETURNING model_id"
    ).fetchone()[0]
    for namespace, model_id in (("ghost", model), ("a", 999_999), ("a", other)):
        with conn.transaction(), pytest.raises(psycopg.errors.ForeignKeyViolation, match="notes_namespace_model"):
            conn.execute(NOTE, (namespace, model_id))
    # Rows that notes depend on cannot go while the notes exist.
    with conn.transaction(), pytest.raises(psycopg.errors.ForeignKeyViolation):
        conn.execute("DELETE FROM pgmem.embedding_models WHERE model_id = %s", (model,))
    with conn.transaction(), pytest.raises(psycopg.errors.ForeignKeyViolation):
        conn.execute("DELETE FROM pgmem.namespaces WHERE namespace = 'a'")


def test_a_writer_cannot_write_into_a_namespace_nobody_registered(
    dsn: str, tenants: psycopg.Connection[Any], roles: dict[str, str]
) -> None:
    # A writer logged in as itself, granted a namespace that was never bound to a model:
    # its notes are refused.
    tenants.execute("SELECT pgmem.grant_namespace_v1(%s, 'ghost')", (roles["writer"],))
    model = tenants.execute("SELECT model_id FROM pgmem.namespaces WHERE namespace = 'a'").fetchone()[0]
    with (
        pgmem.connect(
            psycopg.conninfo.make_conninfo(dsn, user=roles["writer"]), namespace="ghost", migrate=False
        ) as writer,
        pytest.raises(psycopg.errors.ForeignKeyViolation, match="notes_namespace_model"),
    ):
        writer.execute(
            "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family,"
            " role, confidence, model_id, embedding)"
            " VALUES ('ghost', gen_random_uuid(), 'raw', 0, 4, 'four', 'f', 'fact', 0.5, %s,"
            " array_fill(0.1, ARRAY[384])::vector)",
            (model,),
        )
    assert tenants.execute("SELECT count(*) FROM pgmem.lexeme_postings WHERE namespace = 'ghost'").fetchone() == (0,)


def test_postings_follow_notes_through_ingest_supersede_and_forget(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    texts = ["Quokkas live on Rottnest Island.", "Wombats dig burrows.", "Numbats eat termites."]
    first = pgmem.ingest(conn, make_spans(texts), namespace="a", embedder=hashing)
    stats_are_consistent(conn)
    pgmem.supersede(
        conn,
        make_spans(["Quokkas live on Rottnest island.", *texts[1:]]),
        namespace="a",
        embedder=hashing,
        reason="typo",
    )
    stats_are_consistent(conn)
    conn.execute("SELECT * FROM pgmem.forget_v1('a', 'notes', %s, 'test')", ([first.note_ids[1]],))
    stats_are_consistent(conn)
    orphans = conn.execute(
        "SELECT count(*) FROM pgmem.lexeme_postings AS p"
        " WHERE NOT EXISTS (SELECT 1 FROM pgmem.notes AS n WHERE n.namespace = p.namespace AND n.note_id = p.note_id)"
    ).fetchone()
    assert orphans == (0,)


def test_the_link_lookups_find_the_holders_without_the_notes_gin_indexes(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    texts = [
        f"Ada Lovelace met Charles Babbage in London, see ACME-{i} and https://acme.example/{i}." for i in range(20)
    ]
    result = pgmem.ingest(conn, make_spans(texts), namespace="a", embedder=hashing)
    assert conn.execute("SELECT count(*) FROM pgmem.notes WHERE handles <> '{}' AND entities <> '[]'").fetchone() == (
        20,
    )
    # Migration 0029 dropped them: nothing reads the notes by handles or entities.
    indexes = conn.execute(
        "SELECT count(*) FROM pg_indexes WHERE schemaname = 'pgmem' AND indexname IN (%s, %s)",
        ("notes_handles_gin", "notes_entities_gin"),
    ).fetchone()
    assert indexes == (0,)
    # The lookups find the holders (a handle held by one note, an entity by all 20).
    rows = conn.execute("SELECT key, note_id::text FROM pgmem.handle_holders_v1('a', ARRAY['ACME-3'], 6)").fetchall()
    assert rows == [("ACME-3", result.note_ids[3])]
    rows = conn.execute("SELECT count(*) FROM pgmem.entity_holders_v1('a', ARRAY['Ada Lovelace'], 6)").fetchone()
    assert rows == (6,)
