"""Security and integrity, second pass: each probe an attacker or a careless operator ran,
kept as a regression test with real login roles (migration 0004)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from helpers import as_role as _as
from helpers import make_spans, stats_are_consistent
from psycopg import sql

import pgmem
from pgmem.embeddings import HashingEmbedder

VIEWS = (
    "pack_degraded_rate_v1",
    "pack_variance_floor_rate_v1",
    "pack_entropy_distribution_v1",
    "family_regularizer_stats_v1",
    "store_families_v1",
)


def _namespaces_seen(conn: psycopg.Connection[Any], view: str) -> set[str]:
    query = sql.SQL("SELECT DISTINCT namespace FROM pgmem.{}").format(sql.Identifier(view))
    return {row[0] for row in conn.execute(query)}


@pytest.fixture
def logged(tenants: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    """Packs logged in both namespaces, so every diagnostic view has rows for each."""
    for namespace in ("a", "b"):
        for question in ("what is the secret code?", "launch vault code"):
            pgmem.pack(tenants, question, namespace=namespace, embedder=hashing, log=True)
    return tenants


@pytest.mark.parametrize("view", VIEWS)
def test_diagnostic_views_show_a_reader_only_its_namespace(
    dsn: str, logged: Any, roles: dict[str, str], view: str
) -> None:
    assert _namespaces_seen(logged, view) == {"a", "b"}  # the owner sees both
    with _as(dsn, roles["reader"], "a") as reader:
        assert _namespaces_seen(reader, view) == {"a"}
        reader.execute("SET pgmem.namespace = 'b'")
        assert _namespaces_seen(reader, view) == set()
    with _as(dsn, roles["reader"], None) as unbound:
        unbound.execute("RESET pgmem.namespace")
        assert _namespaces_seen(unbound, view) == set()
    with _as(dsn, roles["admin"], None) as admin:
        assert _namespaces_seen(admin, view) == {"a", "b"}


def test_every_view_runs_with_the_callers_rights(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute(
        "SELECT c.relname, coalesce(c.reloptions, '{}') FROM pg_class AS c"
        " WHERE c.relnamespace = 'pgmem'::regnamespace AND c.relkind = 'v' ORDER BY 1"
    ).fetchall()
    assert {name for name, _ in rows} >= set(VIEWS)
    assert [name for name, options in rows if "security_invoker=true" not in options] == []


def test_a_grant_does_not_outlive_its_role(server_dsn: str, dsn: str, tenants: Any) -> None:
    name = f"t_reborn_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as cluster:
        cluster.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE pgmem_reader").format(sql.Identifier(name)))
    try:
        tenants.execute("SELECT pgmem.grant_namespace_v1(%s, 'a')", (name,))
        with _as(dsn, name, "a") as first:
            assert first.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (1,)
        with psycopg.connect(server_dsn, autocommit=True) as cluster:
            cluster.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
            cluster.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE pgmem_reader").format(sql.Identifier(name)))
        # Same name, new role: it inherits nothing, and packs of everyone else still work.
        with _as(dsn, name, "a") as reborn:
            assert reborn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (0,)
            assert reborn.execute("SELECT count(*) FROM pgmem.namespace_grants").fetchone() == (0,)
        assert tenants.execute("SELECT pgmem.prune_grants_v1()").fetchone() == (1,)
        assert tenants.execute("SELECT pgmem.prune_grants_v1()").fetchone() == (0,)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as cluster:
            cluster.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def test_grants_are_listed_by_name_and_refuse_unknown_roles(tenants: Any, roles: dict[str, str]) -> None:
    listed = set(tenants.execute("SELECT role_name, namespace FROM pgmem.namespace_grants_v1").fetchall())
    assert listed == {(roles["reader"], "a"), (roles["writer"], "a")}
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="role nobody_here does not exist"):
        tenants.execute("SELECT pgmem.grant_namespace_v1('nobody_here', 'a')")
    tenants.execute("SELECT pgmem.revoke_namespace_v1(%s, 'a')", (roles["reader"],))
    assert tenants.execute("SELECT count(*) FROM pgmem.namespace_grants").fetchone() == (1,)


# Forget is total --------------------------------------------------------------------------


def test_forget_leaves_no_word_no_judgement_and_no_logged_question_behind(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    secret = "Zanzibarian passport number belongs to Quillon Ashgrove."
    kept = ["The office opens at nine.", "Lunch is served at noon in the office."]
    ids = pgmem.ingest(conn, make_spans([secret, *kept], document_id="hr", family="hr"), embedder=hashing).note_ids
    pgmem.ingest(conn, make_spans(["Parking is free on Sundays."], document_id="p", family="ops"), embedder=hashing)
    about = pgmem.pack(conn, "Quillon Ashgrove Zanzibarian passport", embedder=hashing, budget=2, log=True)
    unrelated = pgmem.pack(conn, "parking Sundays", embedder=hashing, budget=1, log=True)
    assert ids[0] in {item.note_id for item in about.items}
    assert ids[0] not in {item.note_id for item in unrelated.items}
    assert {r.note_id for r in unrelated.diagnostics.rejections} | {i.note_id for i in unrelated.items} <= set(
        ids[1:]
    ) | {str(r[0]) for r in conn.execute("SELECT note_id FROM pgmem.notes WHERE family = 'ops'")}
    pgmem.feedback(conn, helpful=[ids[0], ids[1]], unhelpful=[ids[2]], pack_id=about.pack_id)

    result = pgmem.forget(conn, namespace="default", note_ids=[ids[0]], reason="erasure request #3")

    lexemes = {row[0] for row in conn.execute("SELECT lexeme FROM pgmem.lexeme_stats")}
    assert not lexemes & {"zanzibarian", "quillon", "ashgrov", "passport"}
    assert conn.execute("SELECT count(*) FROM pgmem.feedback WHERE note_id = %s", (ids[0],)).fetchone() == (0,)
    # What was learned from the erased note is gone; what was learned from the others stays.
    assert conn.execute("SELECT family, helpful, unhelpful FROM pgmem.family_reliability").fetchall() == [
        ("hr", 1.0, 1.0)
    ]
    assert conn.execute("SELECT feedback_helpful, feedback_unhelpful FROM pgmem.namespaces").fetchone() == (1.0, 1.0)
    logged = {row[0] for row in conn.execute("SELECT query FROM pgmem.pack_log")}
    assert logged == {"parking Sundays"}
    assert conn.execute(
        "SELECT count(*) FROM pgmem.pack_log_families WHERE pack_id = %s", (about.pack_id,)
    ).fetchone() == (0,)
    audit = conn.execute(
        "SELECT notes_removed, feedback_removed, packs_removed FROM pgmem.forget_audit WHERE audit_id = %s",
        (result.audit_id,),
    ).fetchone()
    assert audit == (1, 1, 1)
    stats_are_consistent(conn)
    # The remaining feedback still counts for the beta mode (the totals are the rows').
    assert conn.execute("SELECT sum(weight) FROM pgmem.feedback").fetchone() == (2.0,)


def test_forget_of_a_whole_family_removes_its_learned_reliability(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    ids = pgmem.ingest(conn, make_spans(["one note", "two notes"], family="gone"), embedder=hashing).note_ids
    pgmem.feedback(conn, helpful=list(ids))
    pgmem.forget(conn, namespace="default", family="gone", reason="source withdrawn")
    assert conn.execute("SELECT count(*) FROM pgmem.family_reliability").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM pgmem.lexeme_stats").fetchone() == (0,)
    assert conn.execute("SELECT note_count, lexeme_total, feedback_helpful FROM pgmem.namespaces").fetchone() == (
        0,
        0,
        0.0,
    )


# Writers write shared state only through checked paths -------------------------------------------


def _note(conn: psycopg.Connection[Any], namespace: str) -> tuple[str, str]:
    row = conn.execute("SELECT note_id, family FROM pgmem.notes WHERE namespace = %s", (namespace,)).fetchone()
    assert row is not None
    return str(row[0]), str(row[1])


def test_a_writer_cannot_forge_feedback(dsn: str, tenants: Any, roles: dict[str, str]) -> None:
    note_a, family_a = _note(tenants, "a")
    note_b, family_b = _note(tenants, "b")
    insert = "INSERT INTO pgmem.feedback (namespace, note_id, family, helpful, weight) VALUES (%s, %s, %s, true, 1000)"
    with _as(dsn, roles["writer"], "a") as writer:
        for arguments in (
            ("a", str(uuid.uuid4()), family_a),  # a note that does not exist
            ("a", note_a, "someone-else"),  # a real note under another family
            ("a", note_b, family_b),  # another namespace's note
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
                writer.execute(insert, arguments)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            writer.execute(
                "INSERT INTO pgmem.feedback (namespace, note_id, family, helpful, weight, pack_id)"
                " VALUES ('a', %s, %s, true, 1, %s)",
                (note_a, family_a, str(uuid.uuid4())),
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            writer.execute(
                "INSERT INTO pgmem.feedback (namespace, note_id, family, helpful, weight, given_by)"
                " VALUES ('a', %s, %s, true, 1, 'the_ceo')",
                (note_a, family_a),
            )
        # The checked path still works, signed by the session.
        writer.execute(insert, ("a", note_a, family_a))
    assert tenants.execute("SELECT given_by FROM pgmem.feedback").fetchall() == [
        (tenants.execute("SELECT session_user").fetchone()[0],)
    ]
    assert tenants.execute("SELECT family, helpful FROM pgmem.family_reliability").fetchall() == [(family_a, 1000.0)]


def test_a_writer_cannot_plant_namespace_statistics(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    tenants.execute("SELECT pgmem.grant_namespace_v1(%s, 'fresh')", (roles["writer"],))
    model_id = tenants.execute("SELECT model_id FROM pgmem.namespaces WHERE namespace = 'a'").fetchone()[0]
    with (
        _as(dsn, roles["writer"], "fresh") as writer,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"),
    ):
        writer.execute(
            "INSERT INTO pgmem.namespaces (namespace, model_id, note_count, lexeme_total)"
            " VALUES ('fresh', %s, -5, -1000000)",
            (model_id,),
        )
    with _as(dsn, roles["writer"], "fresh") as writer:
        writer.execute("INSERT INTO pgmem.namespaces (namespace, model_id) VALUES ('fresh', %s)", (model_id,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute("UPDATE pgmem.namespaces SET note_count = -1")
        pgmem.ingest(writer, make_spans(["fresh start for a writer"]), namespace="fresh", embedder=hashing)
        assert pgmem.pack(writer, "fresh start", namespace="fresh", embedder=hashing).items
    stats_are_consistent(tenants)


def test_an_admin_can_repair_statistics(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    ids = pgmem.ingest(conn, make_spans(["alpha beta", "beta gamma", "gamma delta"]), embedder=hashing).note_ids
    pgmem.feedback(conn, helpful=[ids[0]], unhelpful=[ids[1]])
    # However statistics went wrong (here: the owner, who bypasses every check).
    conn.execute("ALTER TABLE pgmem.namespaces DROP CONSTRAINT namespaces_statistics_check")
    conn.execute("UPDATE pgmem.namespaces SET note_count = -7, lexeme_total = 0, feedback_helpful = 99")
    conn.execute("UPDATE pgmem.lexeme_stats SET document_frequency = 1000")
    conn.execute("UPDATE pgmem.family_reliability SET helpful = 500")
    conn.execute("SELECT pgmem.recount_namespace_v1('default')")
    stats_are_consistent(conn)
    assert conn.execute("SELECT helpful, unhelpful FROM pgmem.family_reliability").fetchone() == (1.0, 1.0)
    assert conn.execute("SELECT feedback_helpful, feedback_unhelpful FROM pgmem.namespaces").fetchone() == (1.0, 1.0)


def test_only_admins_register_embedding_models(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    indexes = "SELECT count(*) FROM pg_indexes WHERE schemaname = 'pgmem' AND indexname LIKE 'notes_embedding_hnsw_m%'"
    before = tenants.execute(indexes).fetchone()
    tenants.execute("SELECT pgmem.grant_namespace_v1(%s, 'other-model')", (roles["writer"],))
    with _as(dsn, roles["writer"], "other-model") as writer:
        for statement in (
            "INSERT INTO pgmem.embedding_models (name, dimension) VALUES ('spam-1', 7)",
            "SELECT pgmem.ensure_model_index_v1(1)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                writer.execute(statement)
        with pytest.raises(psycopg.Error, match="not registered"):
            writer.execute("SELECT pgmem.register_model_v1('spam-2', 9)")
        other = HashingEmbedder(dimension=48)
        with pytest.raises(
            pgmem.ConfigurationError, match=r"hashing.*48 dimensions\) is not registered.*register_model"
        ):
            pgmem.ingest(writer, make_spans(["needs a model"]), namespace="other-model", embedder=other)
    assert tenants.execute(indexes).fetchone() == before
    with _as(dsn, roles["admin"], None) as admin:
        assert pgmem.register_model(admin, other) == pgmem.register_model(admin, other)
    with _as(dsn, roles["writer"], "other-model") as writer:
        assert (
            pgmem.ingest(writer, make_spans(["needs a model"]), namespace="other-model", embedder=other).inserted == 1
        )
    assert tenants.execute(indexes).fetchone() == (before[0] + 1,)


# Owner-rights functions cannot be steered from a temporary schema ------------------------------


def test_every_owner_rights_function_searches_pg_temp_last(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute(
        "SELECT p.proname, p.proconfig FROM pg_proc AS p"
        " WHERE p.pronamespace = 'pgmem'::regnamespace AND p.prosecdef ORDER BY 1"
    ).fetchall()
    assert len(rows) >= 6
    unpinned = [name for name, config in rows if not any(c.endswith("pg_temp") for c in (config or []))]
    assert unpinned == []


def test_temporary_tables_cannot_shadow_what_owner_rights_functions_read(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    shadows = ("notes", "lexeme_stats", "namespaces", "feedback", "family_reliability", "pack_log", "forget_audit")
    with _as(dsn, roles["writer"], "a") as writer:
        writer.execute("SET search_path = pg_temp, pgmem, public")
        for name in shadows:
            writer.execute(
                sql.SQL("CREATE TEMPORARY TABLE {} (namespace text, lexeme text)").format(sql.Identifier(name))
            )
        ids = pgmem.ingest(
            writer, make_spans(["shadowed write", "second shadowed"], document_id="s"), namespace="a", embedder=hashing
        )
        pgmem.feedback(writer, namespace="a", helpful=[ids.note_ids[0]])
        for name in shadows:
            count = writer.execute(sql.SQL("SELECT count(*) FROM pg_temp.{}").format(sql.Identifier(name))).fetchone()
            assert count == (0,), name
    stats_are_consistent(tenants)
    assert tenants.execute("SELECT helpful FROM pgmem.family_reliability").fetchall() == [(1.0,)]


# Several databases in one cluster --------------------------------------------------------------


@pytest.fixture
def prefixed_cleanup(server_dsn: str) -> Iterator[list[str]]:
    """Role prefixes a test installs; their roles are dropped after its databases."""
    prefixes: list[str] = []
    yield prefixes
    with psycopg.connect(server_dsn, autocommit=True) as cluster:
        for prefix in prefixes:
            for kind in ("admin", "writer", "reader"):
                cluster.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(f"{prefix}_{kind}")))


def _new_database(server_dsn: str) -> str:
    name = f"pgmem_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as cluster:
        cluster.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name


def _drop_database(server_dsn: str, name: str) -> None:
    with psycopg.connect(server_dsn, autocommit=True) as cluster:
        cluster.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_second_database_does_not_share_admins_by_accident(
    server_dsn: str, template_dsn: str, roles: dict[str, str], prefixed_cleanup: list[str], hashing: HashingEmbedder
) -> None:
    name = _new_database(server_dsn)
    dsn = psycopg.conninfo.make_conninfo(server_dsn, dbname=name)
    prefix = f"crm{uuid.uuid4().hex[:6]}"
    prefixed_cleanup.append(prefix)
    try:
        with pytest.raises(pgmem.SchemaError, match=r"already hold privileges in database.*role_prefix"):
            pgmem.migrate(dsn)
        pgmem.migrate(dsn, role_prefix=prefix)
        assert pgmem.migrate(dsn) == pgmem.migrate(dsn, role_prefix=prefix)
        with pytest.raises(pgmem.SchemaError, match="differs from the prefix"):
            pgmem.migrate(dsn, role_prefix="pgmem")
        with psycopg.connect(dsn, autocommit=True) as owner:
            assert owner.execute("SELECT pgmem.group_role_v1('admin')").fetchone() == (f"{prefix}_admin",)
            pgmem.ingest(owner, make_spans(["crm secret"]), namespace="crm", embedder=hashing)
            owner.execute(
                sql.SQL("GRANT {} TO {}").format(sql.Identifier(f"{prefix}_admin"), sql.Identifier(roles["writer"]))
            )
        # The other application's admin is nobody here ...
        with _as(dsn, roles["admin"], "crm") as foreign_admin:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                foreign_admin.execute("SELECT count(*) FROM pgmem.notes")
            with pytest.raises(pgmem.DatabaseError, match="permission denied"):
                pgmem.forget(foreign_admin, namespace="crm", family="f", reason="cross-database")
        # ... and this database's admin administers it.
        with _as(dsn, roles["writer"], "crm") as own_admin:
            assert own_admin.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (1,)
    finally:
        _drop_database(server_dsn, name)


def test_databases_migrated_at_the_same_moment_both_get_their_roles(
    server_dsn: str, prefixed_cleanup: list[str]
) -> None:
    prefix = f"race{uuid.uuid4().hex[:6]}"
    prefixed_cleanup.append(prefix)
    names = [_new_database(server_dsn) for _ in range(2)]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def install(name: str) -> None:
        try:
            start.wait()
            pgmem.migrate(
                psycopg.conninfo.make_conninfo(server_dsn, dbname=name), role_prefix=prefix, shared_roles=True
            )
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=install, args=(name,)) for name in names]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert errors == []
        for name in names:
            with psycopg.connect(psycopg.conninfo.make_conninfo(server_dsn, dbname=name)) as conn:
                assert conn.execute("SELECT pgmem.group_role_v1('reader')").fetchone() == (f"{prefix}_reader",)
    finally:
        for name in names:
            _drop_database(server_dsn, name)


# The next class: what the catalog tells about other tenants ------------------------------------


def test_planner_statistics_show_no_tenant_content(dsn: str, tenants: Any, roles: dict[str, str]) -> None:
    tenants.execute("ANALYZE")
    owner_sees = tenants.execute(
        "SELECT count(*) FROM pg_stats WHERE schemaname = 'pgmem' AND tablename = 'notes'"
    ).fetchone()
    assert owner_sees is not None and owner_sees[0] > 0
    with _as(dsn, roles["reader"], "a") as reader:
        # pg_stats hides the columns of tables under row-level security from those it binds.
        rows = reader.execute("SELECT DISTINCT tablename FROM pg_stats WHERE schemaname = 'pgmem'").fetchall()
        assert {row[0] for row in rows} <= {"embedding_models"}
        assert reader.execute("SELECT count(*) FROM pg_stats_ext WHERE schemaname = 'pgmem'").fetchone() == (0,)


def test_another_namespaces_note_ids_cannot_be_probed_by_collision(
    dsn: str, tenants: Any, roles: dict[str, str]
) -> None:
    existing, _ = _note(tenants, "b")
    model_id = tenants.execute("SELECT model_id FROM pgmem.namespaces WHERE namespace = 'b'").fetchone()[0]
    insert = (
        "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
        " confidence, model_id, embedding) VALUES ('b', %s, 'x', 0, 1, 'x', 'f', 'fact', 1, %s, '[1,0,0]')"
    )
    messages = []
    for note_id in (existing, str(uuid.uuid4())):
        with _as(dsn, roles["writer"], "a") as writer, pytest.raises(psycopg.Error) as caught:
            writer.execute(insert, (note_id, model_id))
        messages.append((type(caught.value), str(caught.value).replace(note_id, "<id>")))
    assert messages[0] == messages[1]
    assert "row-level security" in messages[0][1]
