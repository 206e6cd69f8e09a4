"""Migration 0028: ingest's rare-key lookups probe pgmem.link_keys, a B-tree of each note's
hashed handles and entity texts written and deleted with the notes, instead of the notes'
GIN indexes (dropped in 0029); the holders they return are the ones the GIN containment
tests found."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import psycopg
import pytest
from helpers import as_role, assert_refused, make_spans

import pgmem
from pgmem.embeddings import HashingEmbedder

TEXTS = [
    "Ticket ACME-1234 was opened by Priya Raman in Lisbon.",
    "Priya Raman closed ACME-1234 and opened ACME-77.",
    "Nobody in Lisbon saw ACME-77, said Tomas Varga.",
    "Tomas Varga and Priya Raman met Dr. Ines Okafor about INC-5.",
    "A note without a name or a ticket.",
]
HOLDERS = "SELECT key, note_id::text FROM pgmem.{kind}_holders_v1('default', %s::text[], 1000)"
# What the GIN indexes answered before 0028: containment, any confidence.
CONTAINED = {
    "entity": "SELECT note_id::text FROM pgmem.notes WHERE namespace = 'default'"
    " AND entities @> jsonb_build_array(jsonb_build_object('text', %s::text))",
    "handle": "SELECT note_id::text FROM pgmem.notes WHERE namespace = 'default' AND handles @> ARRAY[%s::text]",
}
# Each note's keys recomputed from its stored entities and handles.
RECOUNT = """
SELECT namespace, 'e', sha256(convert_to(e.value ->> 'text', 'UTF8')), note_id::text
FROM pgmem.notes, jsonb_array_elements(entities) AS e WHERE jsonb_typeof(e.value -> 'text') = 'string'
UNION
SELECT namespace, 'h', sha256(convert_to(h, 'UTF8')), note_id::text FROM pgmem.notes, unnest(handles) AS h
"""


def keys_are_consistent(conn: psycopg.Connection[Any]) -> None:
    stored = set(conn.execute("SELECT namespace, kind, digest, note_id::text FROM pgmem.link_keys").fetchall())
    assert stored == set(conn.execute(RECOUNT).fetchall())


def test_the_holders_are_the_notes_the_containment_tests_find(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.ingest(conn, make_spans(TEXTS, document_id="a"), embedder=hashing)
    pgmem.ingest(conn, make_spans(TEXTS[:3], document_id="b"), embedder=hashing)
    entities = sorted(
        {
            row[0]
            for row in conn.execute("SELECT DISTINCT e ->> 'text' FROM pgmem.notes, jsonb_array_elements(entities) e")
        }
    )
    handles = sorted({row[0] for row in conn.execute("SELECT DISTINCT unnest(handles) FROM pgmem.notes")})
    assert len(entities) >= 4 and len(handles) >= 3  # the texts give the enricher both kinds
    for kind, keys in (("entity", [*entities, "Nobody Here"]), ("handle", [*handles, "ZZZ-0"])):
        found: dict[str, set[str]] = defaultdict(set)
        for key, note_id in conn.execute(HOLDERS.format(kind=kind), (keys,)).fetchall():
            found[key].add(note_id)
        for key in keys:
            expected = {row[0] for row in conn.execute(CONTAINED[kind], (key,))}
            assert found.get(key, set()) == expected, (kind, key)
    # One probe per key: the plan is the primary key's, the sequential scan kept off.
    config = conn.execute("SELECT proconfig FROM pg_proc WHERE proname = 'key_holders_v1'").fetchone()[0]
    assert config == ["enable_seqscan=off"]


def test_link_keys_follow_ingest_supersede_and_forget(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    ids = pgmem.ingest(conn, make_spans(TEXTS), embedder=hashing).note_ids
    keys_are_consistent(conn)
    assert conn.execute("SELECT count(*) FROM pgmem.link_keys WHERE note_id = %s", (ids[0],)).fetchone()[0] >= 3
    changed = make_spans(TEXTS)
    changed[1] = pgmem.Span(**{**vars(changed[1]), "text": "Priya Raman closed ACME-1234 and opened ACME-78."})
    pgmem.supersede(conn, changed[:2], namespace="default", embedder=hashing, reason="corrected ticket")
    keys_are_consistent(conn)
    pgmem.forget(conn, namespace="default", note_ids=[ids[0]], reason="erasure")
    keys_are_consistent(conn)
    # No key of the erased note stays, so its entities and handles cannot be probed for.
    assert conn.execute("SELECT count(*) FROM pgmem.link_keys WHERE note_id = %s", (ids[0],)).fetchone() == (0,)


def test_link_keys_are_read_in_the_callers_namespace_only_and_written_by_no_role(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    # 'b' holds "Beta tenant secret: the vault code is 9876." (tenants).
    beta = [row[0] for row in tenants.execute("SELECT DISTINCT unnest(handles) FROM pgmem.notes WHERE namespace = 'b'")]
    beta += [
        row[0]
        for row in tenants.execute(
            "SELECT DISTINCT e ->> 'text' FROM pgmem.notes, jsonb_array_elements(entities) e WHERE namespace = 'b'"
        )
    ]
    for namespace in ("a", "b"):
        assert tenants.execute("SELECT count(*) FROM pgmem.link_keys WHERE namespace = %s", (namespace,)).fetchone()[0]
    with as_role(dsn, roles["reader"], "a") as reader:
        assert {row[0] for row in reader.execute("SELECT DISTINCT namespace FROM pgmem.link_keys")} == {"a"}
        reader.execute("SET pgmem.namespace = 'b'")
        assert reader.execute("SELECT count(*) FROM pgmem.link_keys").fetchone() == (0,)
    with as_role(dsn, roles["writer"], "a") as writer:
        # Asking for 'b's keys by name through the lookups finds nothing.
        for kind in ("handle", "entity"):
            rows = writer.execute(f"SELECT * FROM pgmem.{kind}_holders_v1('b', %s::text[], 10)", (beta,)).fetchall()
            assert rows == []
        assert_refused(
            writer,
            "INSERT INTO pgmem.link_keys VALUES ('a', 'e', '\\x00', gen_random_uuid())",
            "UPDATE pgmem.link_keys SET kind = 'h'",
            "DELETE FROM pgmem.link_keys",
        )
        # Its own ingest writes its notes' keys (owner-rights trigger) in its transaction.
        pgmem.ingest(
            writer,
            make_spans(["Alpha ticket ACME-4242 for Zora Quill."], document_id="w"),
            namespace="a",
            embedder=hashing,
        )
        assert writer.execute("SELECT count(*) FROM pgmem.link_keys").fetchone()[0] > 0
    with as_role(dsn, roles["stranger"], "a") as stranger, pytest.raises(psycopg.errors.InsufficientPrivilege):
        stranger.execute("SELECT count(*) FROM pgmem.link_keys")
    keys_are_consistent(tenants)
