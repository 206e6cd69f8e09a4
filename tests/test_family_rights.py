"""Family write rights (migration 0009): a bound family is written only by its writers.

Every probe runs as a real login role: the ``writer`` of namespace 'a' is the family's
legitimate author, the ``stranger`` is made a second writer of 'a' and plays the attacker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from helpers import as_role, make_spans, stats_are_consistent
from psycopg import sql

import pgmem
import pgmem.aio
from pgmem.embeddings import HashingEmbedder


@pytest.fixture
def attacker(tenants: psycopg.Connection[Any], roles: dict[str, str]) -> str:
    """The stranger, made a second writer of namespace 'a'."""
    tenants.execute(sql.SQL("GRANT pgmem_writer TO {}").format(sql.Identifier(roles["stranger"])))
    tenants.execute("SELECT pgmem.grant_namespace_v1(%s, 'a')", (roles["stranger"],))
    return roles["stranger"]


@pytest.fixture
def bound(tenants: psycopg.Connection[Any], roles: dict[str, str], attacker: str) -> psycopg.Connection[Any]:
    """Family 'fa' of namespace 'a' bound to the writer (it already holds one note)."""
    assert pgmem.bind_family(tenants, namespace="a", family="fa", roles=[roles["writer"]]) == 1
    return tenants


def _notes(conn: psycopg.Connection[Any], family: str) -> int:
    row = conn.execute("SELECT count(*) FROM pgmem.notes WHERE namespace = 'a' AND family = %s", (family,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_spoofing_writer_is_refused_and_writes_nothing_of_its_batch(
    dsn: str, bound: psycopg.Connection[Any], attacker: str, hashing: HashingEmbedder
) -> None:
    spans = [
        *make_spans(["An open note from the attacker."], family="attacker", document_id="d-open"),
        *make_spans(["Official: the launch code changed to 0000."], family="fa", document_id="d-spoof"),
    ]
    with as_role(dsn, attacker, "a") as writer:
        with pytest.raises(pgmem.FamilyRightsError, match=r"family 'fa' of namespace 'a' is bound") as error:
            pgmem.ingest(writer, spans, namespace="a", embedder=hashing)
        assert attacker in str(error.value)
    assert _notes(bound, "fa") == 1
    assert _notes(bound, "attacker") == 0
    stats_are_consistent(bound)


def test_the_bound_writer_writes_and_unbound_families_stay_open(
    dsn: str, bound: psycopg.Connection[Any], roles: dict[str, str], attacker: str, hashing: HashingEmbedder
) -> None:
    with as_role(dsn, roles["writer"], "a") as writer:
        pgmem.ingest(
            writer,
            make_spans(["Official: a second note."], family="fa", document_id="d2"),
            namespace="a",
            embedder=hashing,
        )
    with as_role(dsn, attacker, "a") as other:
        pgmem.ingest(
            other,
            make_spans(["Anyone may write here."], family="open", document_id="d3"),
            namespace="a",
            embedder=hashing,
        )
    assert _notes(bound, "fa") == 2
    assert _notes(bound, "open") == 1
    # The owner and admins are not bound by the binding (they may bind themselves anyway).
    with as_role(dsn, roles["admin"], "a") as admin:
        pgmem.ingest(admin, make_spans(["Admin note."], family="fa", document_id="d4"), namespace="a", embedder=hashing)
    assert _notes(bound, "fa") == 3
    counts = dict(bound.execute("SELECT family, note_count FROM pgmem.family_stats WHERE namespace = 'a'").fetchall())
    assert counts == {"fa": 3, "open": 1}


def test_the_attacker_cannot_bind_unbind_or_plant_bindings(
    dsn: str, bound: psycopg.Connection[Any], roles: dict[str, str], attacker: str
) -> None:
    with as_role(dsn, attacker, "a") as writer, pytest.raises(pgmem.DatabaseError, match="permission denied"):
        pgmem.bind_family(writer, namespace="a", family="fa", roles=[attacker])
    with as_role(dsn, attacker, "a") as writer, pytest.raises(pgmem.DatabaseError, match="permission denied"):
        pgmem.unbind_family(writer, namespace="a", family="fa")
    with as_role(dsn, attacker, "a") as writer, pytest.raises(psycopg.errors.InsufficientPrivilege):
        writer.execute(
            "INSERT INTO pgmem.family_writers (namespace, family, role_oid) VALUES ('a', 'fa', %s::regrole)",
            (attacker,),
        )
    with as_role(dsn, attacker, "a") as writer, pytest.raises(psycopg.errors.InsufficientPrivilege):
        writer.execute("DELETE FROM pgmem.family_writers")
    rows = bound.execute("SELECT family, role_name FROM pgmem.family_writers_v1 WHERE namespace = 'a'").fetchall()
    assert rows == [("fa", roles["writer"])]


def test_bindings_of_other_namespaces_stay_hidden(
    dsn: str, bound: psycopg.Connection[Any], roles: dict[str, str], attacker: str
) -> None:
    pgmem.bind_family(bound, namespace="b", family="fb", roles=[roles["admin"]])
    with as_role(dsn, attacker, "a") as writer:
        assert writer.execute("SELECT namespace, family FROM pgmem.family_writers_v1").fetchall() == [("a", "fa")]
        assert {r[0] for r in writer.execute("SELECT namespace FROM pgmem.family_stats")} == {"a"}
        writer.execute("SET pgmem.namespace = 'b'")
        assert writer.execute("SELECT count(*) FROM pgmem.family_writers").fetchone() == (0,)
        assert writer.execute("SELECT count(*) FROM pgmem.family_stats").fetchone() == (0,)


def test_the_attacker_cannot_supersede_a_bound_familys_note(
    dsn: str, bound: psycopg.Connection[Any], roles: dict[str, str], attacker: str, hashing: HashingEmbedder
) -> None:
    original = bound.execute("SELECT document_id, span_start, span_end FROM pgmem.notes WHERE family = 'fa'").fetchone()
    assert original is not None
    document_id, start, end = original
    replacement = "Alpha tenant secret: the launch code is 0000."  # same length: same span
    assert len(replacement.encode()) == end - start
    span = pgmem.Span(document_id=document_id, text=replacement, start=start, end=end, family="attacker")
    refused = pytest.raises(pgmem.FamilyRightsError, match="bound to other writer roles")
    with as_role(dsn, attacker, "a") as writer, refused:
        pgmem.supersede(writer, [span], namespace="a", reason="correction", embedder=hashing)
    assert _notes(bound, "fa") == 1
    with as_role(dsn, roles["writer"], "a") as writer:
        result = pgmem.supersede(
            writer,
            [pgmem.Span(document_id=document_id, text=replacement, start=start, end=end, family="fa")],
            namespace="a",
            reason="correction",
            embedder=hashing,
        )
    assert len(result.superseded) == 1
    stats_are_consistent(bound)


def test_unbinding_reopens_and_a_dropped_role_keeps_the_family_closed(
    server_dsn: str,
    dsn: str,
    bound: psycopg.Connection[Any],
    roles: dict[str, str],
    attacker: str,
    hashing: HashingEmbedder,
) -> None:
    with pytest.raises(pgmem.InputError, match=r"role .* does not exist"):
        pgmem.bind_family(bound, namespace="a", family="fa", roles=["no_such_role_x"])
    with pytest.raises(pgmem.InputError, match="at least one role"):
        pgmem.bind_family(bound, namespace="a", family="fa", roles=[])
    ghost = f"{attacker}_ghost"
    with psycopg.connect(server_dsn, autocommit=True) as owner:
        owner.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(ghost)))
        try:
            assert pgmem.bind_family(bound, namespace="a", family="closed", roles=[ghost]) == 0
        finally:
            owner.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(ghost)))
    with as_role(dsn, attacker, "a") as writer, pytest.raises(pgmem.FamilyRightsError):
        pgmem.ingest(writer, make_spans(["x"], family="closed", document_id="dx"), namespace="a", embedder=hashing)
    assert pgmem.unbind_family(bound, namespace="a", family="closed") == 1
    assert pgmem.unbind_family(bound, namespace="a", family="fa", roles=[roles["writer"]]) == 1
    with as_role(dsn, attacker, "a") as writer:
        pgmem.ingest(writer, make_spans(["y"], family="fa", document_id="dy"), namespace="a", embedder=hashing)
    assert _notes(bound, "fa") == 2


def test_forget_keeps_family_statistics_exact(bound: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.ingest(bound, make_spans(["one", "two"], family="gone", document_id="dg"), namespace="a", embedder=hashing)
    assert bound.execute(
        "SELECT note_count FROM pgmem.family_stats WHERE namespace = 'a' AND family = 'gone'"
    ).fetchone() == (2,)
    pgmem.forget(bound, namespace="a", reason="test", family="gone")
    assert bound.execute("SELECT count(*) FROM pgmem.family_stats WHERE family = 'gone'").fetchone() == (0,)
    recount = dict(bound.execute("SELECT family, count(*) FROM pgmem.notes WHERE namespace = 'a' GROUP BY 1"))
    stored = dict(bound.execute("SELECT family, note_count FROM pgmem.family_stats WHERE namespace = 'a'"))
    assert stored == recount


def test_async_binding_is_the_sync_binding(
    dsn: str, bound: psycopg.Connection[Any], roles: dict[str, str], attacker: str, hashing: HashingEmbedder
) -> None:
    """pgmem.aio.bind_family / unbind_family: the same statement, checks and refusals."""

    async def connect(role: str | None = None) -> psycopg.AsyncConnection[Any]:
        aconn = await pgmem.aio.connect(dsn, namespace="a")
        if role is not None:
            await aconn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        return aconn

    async def main() -> None:
        async with await connect() as owner:
            assert await pgmem.aio.bind_family(owner, namespace="a", family="closed", roles=[roles["writer"]]) == 0
            with pytest.raises(pgmem.InputError, match="at least one role"):
                await pgmem.aio.bind_family(owner, namespace="a", family="closed", roles=[])
        async with await connect(attacker) as writer:
            with pytest.raises(pgmem.DatabaseError, match="permission denied"):
                await pgmem.aio.bind_family(writer, namespace="a", family="closed", roles=[attacker])
            with pytest.raises(pgmem.DatabaseError, match="permission denied"):
                await pgmem.aio.unbind_family(writer, namespace="a", family="closed")
            with pytest.raises(pgmem.FamilyRightsError):
                spans = make_spans(["x"], family="closed", document_id="dx")
                await pgmem.aio.ingest(writer, spans, namespace="a", embedder=hashing)
        async with await connect() as owner:
            assert await pgmem.aio.unbind_family(owner, namespace="a", family="closed") == 1

    asyncio.run(main())
    rows = bound.execute("SELECT family, role_name FROM pgmem.family_writers_v1 WHERE namespace = 'a'").fetchall()
    assert rows == [("fa", roles["writer"])]
    assert _notes(bound, "closed") == 0
