"""A logged pack is explainable from SQL alone (migration 0007), under the notes' row-level security."""

from __future__ import annotations

import math
import tempfile
from typing import Any

import psycopg
import pytest
from helpers import as_role, make_spans
from psycopg import sql
from psycopg.rows import dict_row

import pgmem
from pgmem.embeddings import HashingEmbedder

FACTS = {
    "wire": [
        "Acme Corp was founded by Ada Lovelace in Paris.",
        "Ada Lovelace started Acme Corp with two engineers.",
        "Acme Corp's founder Ada Lovelace announced a new product.",
    ],
    "blog": [
        "I think Acme Corp was founded by Charles Babbage.",
        "Acme Corp was founded by Charles Babbage, I think.",
        "Cheese and wine pair well in autumn.",
    ],
}
QUESTION = "Who founded Acme Corp?"


@pytest.fixture
def store(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    for family, texts in FACTS.items():
        pgmem.ingest(conn, make_spans(texts, document_id=f"doc-{family}", family=family), embedder=hashing)
    return conn


def _explain(conn: psycopg.Connection[Any], pack_id: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cursor:
        return cursor.execute(
            "SELECT * FROM pgmem.pack_explain_v1 WHERE pack_id = %s ORDER BY outcome, rank, final_score DESC",
            (pack_id,),
        ).fetchall()


def test_every_packed_note_and_rejection_is_explained_in_sql(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    # A family cap of 1 and a hard overlap make the packer refuse candidates for reasons.
    evidence = pgmem.pack(store, QUESTION, embedder=hashing, family_cap=1, log=True)
    assert evidence.pack_id and evidence.items and evidence.diagnostics.rejections
    rows = _explain(store, evidence.pack_id)
    packed = {r["note_id"]: r for r in rows if r["outcome"] == "packed"}
    assert [str(packed[k]["note_id"]) for k in sorted(packed, key=lambda k: packed[k]["rank"])] == [
        i.note_id for i in evidence.items
    ]
    for item in evidence.items:
        row = next(r for r in packed.values() if str(r["note_id"]) == item.note_id)
        assert row["rank"] == item.rank and row["family"] == item.family and row["reason"] is None
        for field in ("base_score", "normalized_score", "regularizer", "final_score", "decayed_score", "max_overlap"):
            assert row[field] == getattr(item, field), field
        assert row["regularizer"] == evidence.diagnostics.family(item.family).regularizer
        assert row["family_z"] == evidence.diagnostics.family(item.family).z
    rejected = [r for r in rows if r["outcome"] == "rejected"]
    assert len(rejected) == len(evidence.diagnostics.rejections)
    by_note = {str(r["note_id"]): r for r in rejected}
    for rejection in evidence.diagnostics.rejections:
        row = by_note[rejection.note_id]
        assert row["reason"] == rejection.reason and row["rank"] is None
        assert row["final_score"] == rejection.final_score and row["decayed_score"] == rejection.decayed_score
        assert rejection.base_score is not None and rejection.regularizer is not None
        assert row["base_score"] == rejection.base_score and row["regularizer"] == rejection.regularizer
        assert math.isclose(row["normalized_score"] + row["regularizer"], row["final_score"], abs_tol=1e-12)
    assert "family_cap" in {r["reason"] for r in rejected}
    # The parameters and the pool travel with every row.
    assert rows[0]["parameters"]["packing"]["family_cap"] == 1
    assert rows[0]["pool_size"] == evidence.diagnostics.pool_size
    assert rows[0]["mode"] == "calibrated"


def test_a_rejection_knows_its_base_score_and_regularizer(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    """Not logged too: the diagnostics of every pack explain rejections like packed items."""
    evidence = pgmem.pack(store, QUESTION, embedder=hashing, family_cap=1)
    for rejection in evidence.diagnostics.rejections:
        assert rejection.regularizer == evidence.diagnostics.family(rejection.family).regularizer
        assert rejection.base_score is not None and math.isfinite(rejection.base_score)
    assert "base_score" in evidence.to_dict()["diagnostics"]["rejections"][0]


def test_how_often_calibration_switched_itself_off(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.pack(store, QUESTION, embedder=hashing, log=True)
    pgmem.pack(store, "nothing", namespace="empty-one", embedder=hashing, log=True)
    pgmem.pack(store, "nothing again", namespace="empty-one", embedder=hashing, log=True)
    rows = store.execute(
        "SELECT namespace, reason, packs, degraded_packs, rate FROM pgmem.pack_degraded_daily_v1"
        " WHERE reason IN ('any', 'pool_too_small') ORDER BY namespace, reason"
    ).fetchall()
    assert ("empty-one", "any", 2, 2, 1.0) in rows and ("empty-one", "pool_too_small", 2, 2, 1.0) in rows
    default_any = next(r for r in rows if r[0] == "default" and r[1] == "any")
    assert default_any[2] == 1


def test_forget_takes_the_explanations_of_erased_notes_along(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    evidence = pgmem.pack(store, QUESTION, embedder=hashing, family_cap=1, log=True)
    other = pgmem.pack(store, "cheese and wine", embedder=hashing, budget=1, log=True)
    assert evidence.pack_id and other.pack_id
    erased = evidence.diagnostics.rejections[0].note_id  # a rejected note is enough
    assert erased not in {i.note_id for i in other.items} | {r.note_id for r in other.diagnostics.rejections}
    pgmem.forget(store, namespace="default", note_ids=[erased], reason="test")
    for table in ("pack_log_items", "pack_log_rejections"):
        query = sql.SQL("SELECT count(*) FROM pgmem.{} WHERE pack_id = %s").format(sql.Identifier(table))
        assert store.execute(query, (evidence.pack_id,)).fetchone() == (0,)
    assert _explain(store, evidence.pack_id) == []
    assert _explain(store, other.pack_id)  # packs without the erased note stay


def _round_trips(conn: psycopg.Connection[Any], action: Any) -> int:
    with tempfile.TemporaryFile(mode="w+") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
        try:
            action()
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        messages = [line.split("\t") for line in trace.read().splitlines()]
    return sum(1 for m in messages if len(m) > 2 and m[0] == "B" and m[2].startswith("ReadyForQuery"))


def test_a_logged_pack_costs_one_more_statement_and_no_more(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    """Stage one, then one statement writing pack, families, items and rejections (docs/architecture.md)."""
    for _ in range(7):  # past psycopg's prepare threshold too
        assert _round_trips(store, lambda: pgmem.pack(store, QUESTION, embedder=hashing, log=True)) == 2


# --- row-level security, probed with real login roles ---------------------------------

EXPLAIN_RELATIONS = ("pack_log_items", "pack_log_rejections", "pack_explain_v1", "pack_degraded_daily_v1")


def _namespaces_seen(conn: psycopg.Connection[Any], relation: str) -> set[str]:
    query = sql.SQL("SELECT DISTINCT namespace FROM pgmem.{}").format(sql.Identifier(relation))
    return {row[0] for row in conn.execute(query)}


@pytest.fixture
def logged(tenants: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    for namespace in ("a", "b"):
        # Two more notes of one family, so a family cap of 1 rejects one of them.
        more = make_spans(["The code changes every week.", "The secret code is kept in a safe."], document_id="more")
        pgmem.ingest(tenants, more, namespace=namespace, embedder=hashing)
        for question in ("what is the secret code?", "launch vault code"):
            pgmem.pack(tenants, question, namespace=namespace, embedder=hashing, family_cap=1, log=True)
    return tenants


@pytest.mark.parametrize("relation", EXPLAIN_RELATIONS)
def test_a_reader_sees_only_its_namespaces_explanations(
    dsn: str, logged: psycopg.Connection[Any], roles: dict[str, str], relation: str
) -> None:
    assert _namespaces_seen(logged, relation) == {"a", "b"}  # the owner sees both
    with as_role(dsn, roles["reader"], "a") as reader:
        assert _namespaces_seen(reader, relation) == {"a"}
        reader.execute("SET pgmem.namespace = 'b'")  # a granted namespace only
        assert _namespaces_seen(reader, relation) == set()
    with as_role(dsn, roles["stranger"], None) as stranger, pytest.raises(psycopg.errors.InsufficientPrivilege):
        _namespaces_seen(stranger, relation)
    with as_role(dsn, roles["admin"], None) as admin:
        assert _namespaces_seen(admin, relation) == {"a", "b"}


def test_a_reader_logs_explained_packs_in_its_namespace_only(
    dsn: str, logged: psycopg.Connection[Any], roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    b_pack = logged.execute("SELECT pack_id FROM pgmem.pack_log WHERE namespace = 'b' LIMIT 1").fetchone()
    assert b_pack is not None
    with as_role(dsn, roles["reader"], "a") as reader:
        evidence = pgmem.pack(reader, "what is the secret code?", namespace="a", embedder=hashing, log=True)
        assert evidence.pack_id and _explain(reader, evidence.pack_id)
        # Its own session, another namespace: refused by row-level security.
        with pytest.raises(pgmem.DatabaseError, match="log pack"):
            pgmem.pack(reader, "vault code", namespace="b", embedder=hashing, log=True)
        # Forged explanation rows for a pack of namespace b: refused.
        for namespace in ("b", "a"):
            with pytest.raises(psycopg.Error):
                reader.execute(
                    "INSERT INTO pgmem.pack_log_rejections (namespace, pack_id, scan_order, note_id, family, role,"
                    " reason, final_score, decayed_score, max_overlap)"
                    " VALUES (%s, %s, 99, gen_random_uuid(), 'x', 'fact', 'overlap', 0, 0, 0)",
                    (namespace, b_pack[0]),
                )
        # Nor can a reader rewrite or erase explanations.
        for statement in ("DELETE FROM pgmem.pack_log_items", "UPDATE pgmem.pack_log_rejections SET reason = 'x'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(statement)
