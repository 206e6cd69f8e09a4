"""Tenants, roles and erasure: row-level security by namespace, least privilege, audited forget."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from helpers import make_spans
from psycopg import sql

import pgmem
from pgmem.embeddings import HashingEmbedder


@pytest.fixture
def roles(server_dsn: str) -> Iterator[dict[str, str]]:
    """Login roles for one test: a reader and a writer of namespace 'a', an admin, a stranger."""
    suffix = uuid.uuid4().hex[:8]
    names = {kind: f"t_{kind}_{suffix}" for kind in ("reader", "writer", "admin", "stranger")}
    memberships = {"reader": "pgmem_reader", "writer": "pgmem_writer", "admin": "pgmem_admin"}
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        for kind, name in names.items():
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
            if kind in memberships:
                admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(memberships[kind]), sql.Identifier(name)))
    yield names
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        for name in names.values():
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def tenants(conn: psycopg.Connection[Any], hashing: HashingEmbedder, roles: dict[str, str]) -> psycopg.Connection[Any]:
    """Two namespaces written by the schema owner; the reader and writer may use 'a' only."""
    pgmem.ingest(
        conn,
        make_spans(["Alpha tenant secret: the launch code is 1234."], family="fa"),
        namespace="a",
        embedder=hashing,
    )
    pgmem.ingest(
        conn, make_spans(["Beta tenant secret: the vault code is 9876."], family="fb"), namespace="b", embedder=hashing
    )
    for kind in ("reader", "writer"):
        conn.execute("SELECT pgmem.grant_namespace_v1(%s, 'a')", (roles[kind],))
    return conn


def _as(dsn: str, role: str, namespace: str | None) -> psycopg.Connection[Any]:
    """A connection bound to ``namespace`` (as pgmem.connect does) acting as ``role``."""
    connection = pgmem.connect(dsn, namespace=namespace, migrate=False)
    connection.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
    return connection


def _visible(conn: psycopg.Connection[Any]) -> set[str]:
    return {row[0] for row in conn.execute("SELECT text FROM pgmem.notes")}


def test_a_reader_sees_only_its_namespace(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    with _as(dsn, roles["reader"], "a") as reader:
        assert _visible(reader) == {"Alpha tenant secret: the launch code is 1234."}
        assert pgmem.pack(reader, "what is the secret code?", namespace="a", embedder=hashing).items
        assert pgmem.pack(reader, "what is the secret code?", namespace="b", embedder=hashing).items == ()
        # Changing the session setting does not widen access: the role holds no grant for 'b'.
        reader.execute("SET pgmem.namespace = 'b'")
        assert _visible(reader) == set()
        assert pgmem.pack(reader, "vault code", namespace="b", embedder=hashing).items == ()
        assert reader.execute("SELECT count(*) FROM pgmem.lexeme_stats WHERE namespace = 'b'").fetchone() == (0,)


def test_a_reader_cannot_write_or_forget(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    with _as(dsn, roles["reader"], "a") as reader:
        with pytest.raises(pgmem.DatabaseError, match="permission denied"):
            pgmem.ingest(reader, make_spans(["reader writes"], document_id="r"), namespace="a", embedder=hashing)
        with pytest.raises(pgmem.DatabaseError, match="permission denied"):
            pgmem.forget(reader, namespace="a", family="fa", reason="curious")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("DELETE FROM pgmem.notes")


def test_a_writer_writes_only_where_it_may(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    with _as(dsn, roles["writer"], "a") as writer:
        assert (
            pgmem.ingest(
                writer, make_spans(["new alpha note"], document_id="w"), namespace="a", embedder=hashing
            ).inserted
            == 1
        )
        with pytest.raises(pgmem.DatabaseError, match="row-level security"):
            pgmem.ingest(writer, make_spans(["smuggled into beta"], document_id="w"), namespace="b", embedder=hashing)
        with pytest.raises(pgmem.DatabaseError, match="row-level security"):
            pgmem.ingest(writer, make_spans(["a new namespace"], document_id="w"), namespace="c", embedder=hashing)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute("UPDATE pgmem.notes SET text = 'x'")
    count = tenants.execute("SELECT count(*) FROM pgmem.notes WHERE namespace = 'b'").fetchone()
    assert count == (1,)


def test_a_stranger_without_pgmem_roles_gets_nothing(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    with _as(dsn, roles["stranger"], "a") as stranger, pytest.raises(psycopg.errors.InsufficientPrivilege):
        stranger.execute("SELECT count(*) FROM pgmem.notes")
    with _as(dsn, roles["stranger"], "a") as stranger, pytest.raises(pgmem.DatabaseError, match="permission denied"):
        pgmem.pack(stranger, "secret", namespace="a", embedder=hashing)


def test_an_admin_sees_all_namespaces(dsn: str, tenants: Any, roles: dict[str, str]) -> None:
    with _as(dsn, roles["admin"], None) as admin:
        assert len(_visible(admin)) == 2


def _stats_are_consistent(conn: psycopg.Connection[Any]) -> None:
    stored = dict(
        ((ns, lex), df)
        for ns, lex, df in conn.execute(
            "SELECT namespace, lexeme, document_frequency FROM pgmem.lexeme_stats WHERE document_frequency > 0"
        )
    )
    recomputed = dict(
        ((ns, lex), df)
        for ns, lex, df in conn.execute(
            "SELECT n.namespace, u.lexeme, count(*) FROM pgmem.notes AS n, unnest(n.lexemes) AS u GROUP BY 1, 2"
        )
    )
    assert stored == recomputed
    for namespace, count, total in conn.execute("SELECT namespace, note_count, lexeme_total FROM pgmem.namespaces"):
        row = conn.execute(
            "SELECT count(*), coalesce(sum(lexeme_count), 0) FROM pgmem.notes WHERE namespace = %s", (namespace,)
        ).fetchone()
        assert row == (count, total)


def test_forget_erases_content_and_audits_without_it(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    texts = ["Keep this public fact.", "Erase this private detail about Zed.", "Also erase Zed's address."]
    ids = pgmem.ingest(conn, make_spans(texts, document_id="profile"), embedder=hashing).note_ids
    pgmem.ingest(conn, make_spans(["Zed's other document stays."], document_id="other", family="g"), embedder=hashing)

    result = pgmem.forget(conn, namespace="default", note_ids=list(ids[1:]), reason="GDPR erasure request #17")
    assert result.notes_removed == 2
    assert {r[0] for r in conn.execute("SELECT text FROM pgmem.notes")} == {texts[0], "Zed's other document stays."}
    audit = conn.execute(
        "SELECT namespace, scope, selector, reason, requested_by, notes_removed, note_ids FROM pgmem.forget_audit"
        " WHERE audit_id = %s",
        (result.audit_id,),
    ).fetchone()
    assert audit is not None
    assert audit[:4] == ("default", "notes", list(ids[1:]), "GDPR erasure request #17")
    assert audit[5] == 2 and sorted(str(x) for x in audit[6]) == sorted(ids[1:])
    audit_text = " ".join(str(v) for v in audit)
    assert "private" not in audit_text and "address" not in audit_text
    _stats_are_consistent(conn)
    pack = pgmem.pack(conn, "Zed private detail address", embedder=hashing, budget=10)
    assert all(item.note_id not in ids[1:] for item in pack.items)

    assert pgmem.forget(conn, namespace="default", family="g", reason="family retired").notes_removed == 1
    assert pgmem.forget(conn, namespace="default", document_id="profile", reason="account closed").notes_removed == 1
    assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (0,)
    _stats_are_consistent(conn)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reason": "x"}, "exactly one of"),
        ({"reason": "x", "family": "f", "document_id": "d"}, "exactly one of"),
        ({"reason": "  ", "family": "f"}, "reason must not be empty"),
        ({"reason": "x", "note_ids": ["not-a-uuid"]}, r"note_ids\[0\] must be a UUID"),
        ({"reason": "x", "note_ids": []}, "non-empty list"),
    ],
)
def test_forget_arguments_are_checked(conn: psycopg.Connection[Any], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(pgmem.InputError, match=message):
        pgmem.forget(conn, namespace="default", **kwargs)


def test_the_forget_flag_alone_does_not_unlock_deletes(dsn: str, tenants: Any, roles: dict[str, str]) -> None:
    tenants.execute("SET pgmem.forget_in_progress = 'off'")
    with pytest.raises(psycopg.Error, match="immutable"):
        tenants.execute("DELETE FROM pgmem.notes")
    with _as(dsn, roles["writer"], "a") as writer:
        writer.execute("SET pgmem.forget_in_progress = 'on'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute("DELETE FROM pgmem.notes")


def test_feedback_needs_a_writer_and_stays_in_its_namespace(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    ids = {
        ns: str(tenants.execute("SELECT note_id FROM pgmem.notes WHERE namespace = %s", (ns,)).fetchone()[0])
        for ns in ("a", "b")
    }
    with _as(dsn, roles["reader"], "a") as reader:
        with pytest.raises(pgmem.DatabaseError, match="permission denied"):
            pgmem.feedback(reader, namespace="a", helpful=[ids["a"]])
        # Readers still pack in the beta mode: they may read the learned reliability.
        assert pgmem.pack(reader, "secret code", namespace="a", mode="beta", embedder=hashing).items
    with _as(dsn, roles["writer"], "a") as writer:
        assert pgmem.feedback(writer, namespace="a", helpful=[ids["a"]]).families == {"fa": (1.0, 0.0)}
        # Another namespace's notes are invisible to the writer, so unknown: nothing written.
        with pytest.raises(pgmem.InputError, match="not notes of namespace"):
            pgmem.feedback(writer, namespace="a", helpful=[ids["b"]])
        with pytest.raises(pgmem.InputError, match="not notes of namespace b"):
            pgmem.feedback(writer, namespace="b", helpful=[ids["b"]])
        with pytest.raises(pgmem.DatabaseError, match="permission denied"):
            pgmem.reset_feedback(writer, namespace="a")
        assert writer.execute("SELECT count(*) FROM pgmem.family_reliability").fetchone() == (1,)
    assert tenants.execute("SELECT namespace, family FROM pgmem.family_reliability").fetchall() == [("a", "fa")]
