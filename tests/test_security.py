"""Tenants, roles and erasure: row-level security by namespace, least privilege, audited forget."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from helpers import as_role as _as
from helpers import make_spans, stats_are_consistent

import pgmem
from pgmem.db.queries import run
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.stage_one import Hints, stage_one_arguments


def _login(dsn: str, role: str, namespace: str | None) -> psycopg.Connection[Any]:
    """A connection logged in as ``role`` itself (so session_user is the role)."""
    return pgmem.connect(psycopg.conninfo.make_conninfo(dsn, user=role), namespace=namespace, migrate=False)


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


def test_the_pack_statement_reads_stage_one_and_its_statistics_with_the_callers_rights(
    dsn: str, tenants: psycopg.Connection[Any], roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    # pgmem.stage_one_pool_v1 (migration 0022) joins the feedback, family and namespace
    # statistics to stage one's rows: as the caller, so row-level security keeps a reader
    # to its namespace's rows and statistics, and a role without pgmem_reader cannot call it.
    beta = [str(row[0]) for row in tenants.execute("SELECT note_id FROM pgmem.notes WHERE namespace = 'b'")]
    pgmem.feedback(tenants, namespace="b", helpful=beta)
    (definer,) = tenants.execute(
        "SELECT prosecdef FROM pg_proc WHERE oid = 'pgmem.stage_one_pool_v1'::regproc"
    ).fetchone()
    assert definer is False

    def rows(conn: psycopg.Connection[Any], namespace: str) -> list[dict[str, Any]]:
        question = "what is the secret code?"
        arguments = stage_one_arguments(
            namespace, hashing.name, hashing.embed([question])[0], question, Hints(), pgmem.StageOneParams()
        )
        return run(conn, "stage_one", arguments, prepare=False, binary=True).fetchall()

    owner_rows = rows(tenants, "b")
    assert owner_rows and owner_rows[0]["family_feedback_helpful"] > 0  # the owner sees b's feedback
    with _login(dsn, roles["reader"], "a") as reader:
        (row,) = rows(reader, "a")
        assert row["text"] == "Alpha tenant secret: the launch code is 1234."
        assert row["namespace_note_count"] == 1
        assert rows(reader, "b") == []
    # A role that may use the schema but is no reader may not call it (not PUBLIC's).
    stranger_role = psycopg.sql.Identifier(roles["stranger"])
    tenants.execute(psycopg.sql.SQL("GRANT USAGE ON SCHEMA pgmem TO {}").format(stranger_role))
    try:
        with (
            _login(dsn, roles["stranger"], "a") as stranger,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="stage_one_pool_v1"),
        ):
            rows(stranger, "a")
    finally:
        tenants.execute(psycopg.sql.SQL("REVOKE USAGE ON SCHEMA pgmem FROM {}").format(stranger_role))


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
    stats_are_consistent(conn)
    pack = pgmem.pack(conn, "Zed private detail address", embedder=hashing, budget=10)
    assert all(item.note_id not in ids[1:] for item in pack.items)

    assert pgmem.forget(conn, namespace="default", family="g", reason="family retired").notes_removed == 1
    assert pgmem.forget(conn, namespace="default", document_id="profile", reason="account closed").notes_removed == 1
    assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (0,)
    stats_are_consistent(conn)


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


ALPHA = "Alpha tenant secret: the launch code is 1234."
CORRECTED = "Alpha tenant secret: the launch code is 4321."


def test_a_writer_supersedes_in_its_namespace_audited(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    old = str(tenants.execute("SELECT note_id FROM pgmem.notes WHERE namespace = 'a'").fetchone()[0])
    corrected = make_spans([CORRECTED], family="fa")
    with _login(dsn, roles["writer"], "a") as writer:
        with pytest.raises(pgmem.InputError, match=r"span 0 \(document 'doc', bytes 0-45\).*different text"):
            pgmem.ingest(writer, corrected, namespace="a", embedder=hashing)
        result = pgmem.supersede(writer, corrected, namespace="a", reason="typo in the code", embedder=hashing)
        assert (result.inserted, result.superseded) == (1, (old,))
        assert _visible(writer) == {CORRECTED}
        audit = writer.execute(
            "SELECT namespace, old_note_id::text, new_note_id::text, document_id, span_start, span_end, reason,"
            " requested_by FROM pgmem.supersede_audit"
        ).fetchall()
        assert audit == [("a", old, result.note_ids[0], "doc", 0, 45, "typo in the code", roles["writer"])]
        # Superseding again with the same spans changes nothing.
        assert pgmem.supersede(writer, corrected, namespace="a", reason="again", embedder=hashing).superseded == ()
        assert pgmem.pack(writer, "launch code", namespace="a", embedder=hashing).items[0].text == CORRECTED
        # A family-only correction keeps the note id (it hashes span and text) and is audited too.
        relabelled = make_spans([CORRECTED], family="fa-verified")
        again = pgmem.supersede(writer, relabelled, namespace="a", reason="source verified", embedder=hashing)
        assert again.superseded == result.note_ids and again.note_ids == result.note_ids
        assert writer.execute("SELECT family FROM pgmem.notes").fetchall() == [("fa-verified",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute("DELETE FROM pgmem.notes")
    stats_are_consistent(tenants)
    assert tenants.execute("SELECT count(*) FROM pgmem.supersede_audit").fetchone() == (2,)


def test_supersede_needs_a_writer_of_that_namespace(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    beta = make_spans(["Beta tenant secret: the vault code is 0000."], family="fb")
    with _as(dsn, roles["reader"], "a") as reader, pytest.raises(pgmem.DatabaseError, match="permission denied"):
        pgmem.supersede(reader, make_spans([CORRECTED], family="fa"), namespace="a", reason="r", embedder=hashing)
    with _as(dsn, roles["writer"], "a") as writer:
        # 'b' is invisible to the writer: its note is not even found, and writing there is refused.
        with pytest.raises(pgmem.DatabaseError, match="row-level security"):
            pgmem.supersede(writer, beta, namespace="b", reason="hostile", embedder=hashing)
        with pytest.raises(pgmem.InputError, match="reason must not be empty"):
            pgmem.supersede(writer, beta, namespace="a", reason=" ", embedder=hashing)
    assert tenants.execute("SELECT text FROM pgmem.notes WHERE namespace = 'b'").fetchall() == [
        ("Beta tenant secret: the vault code is 9876.",)
    ]
    assert tenants.execute("SELECT count(*) FROM pgmem.supersede_audit").fetchone() == (0,)


def test_the_request_path_deletes_nothing_a_writer_may_not_replace(
    dsn: str, tenants: Any, roles: dict[str, str]
) -> None:
    ids = {
        ns: str(tenants.execute("SELECT note_id FROM pgmem.notes WHERE namespace = %s", (ns,)).fetchone()[0])
        for ns in ("a", "b")
    }
    request = (
        "INSERT INTO pgmem.supersede_audit (namespace, old_note_id, new_note_id, document_id, span_start, span_end,"
        " reason) VALUES (%s, %s, gen_random_uuid(), 'doc', 0, %s, 'raw')"
    )
    with _login(dsn, roles["writer"], "a") as writer:
        # Another namespace's note: under this namespace, or naming the other namespace.
        for namespace in ("a", "b"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
                writer.execute(request, (namespace, ids["b"], 44))
        # Its own note, on a span it is not on.
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            writer.execute(request, ("a", ids["a"], 44))
        # Who and when are not the caller's to say.
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            writer.execute(
                "INSERT INTO pgmem.supersede_audit (namespace, old_note_id, new_note_id, document_id, span_start,"
                " span_end, reason, requested_by) VALUES ('a', %s, gen_random_uuid(), 'doc', 0, 45, 'r', 'someone')",
                (ids["a"],),
            )
        # A visible note, requested without its replacement: erasure is not a writer's, refused at commit.
        with pytest.raises(psycopg.Error, match=r"its replacement .* is not on span doc\[0:45\]") as caught:
            writer.execute(request, ("a", ids["a"], 45))
        assert caught.value.sqlstate == "PM005"
        writer.execute("SET pgmem.forget_in_progress = 'on'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute("DELETE FROM pgmem.notes")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute("UPDATE pgmem.notes SET family = 'x'")
    assert tenants.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (2,)
    assert tenants.execute("SELECT count(*) FROM pgmem.supersede_audit").fetchone() == (0,)
    stats_are_consistent(tenants)


def test_supersede_audit_is_read_per_namespace(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    pgmem.supersede(tenants, make_spans([CORRECTED], family="fa"), namespace="a", reason="fix", embedder=hashing)
    pgmem.supersede(
        tenants, make_spans(["Beta tenant secret: the vault code is 0000."], family="fb"), namespace="b",
        reason="fix", embedder=hashing,
    )  # fmt: skip
    with _as(dsn, roles["reader"], "a") as reader:
        assert reader.execute("SELECT namespace FROM pgmem.supersede_audit").fetchall() == [("a",)]
    with _as(dsn, roles["admin"], None) as admin:
        assert admin.execute("SELECT count(*) FROM pgmem.supersede_audit").fetchone() == (2,)
    with _as(dsn, roles["stranger"], "a") as stranger, pytest.raises(psycopg.errors.InsufficientPrivilege):
        stranger.execute("SELECT count(*) FROM pgmem.supersede_audit")


def test_a_writer_cannot_store_rows_that_lie_about_themselves(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    note = (
        "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
        " confidence, model_id, embedding{extra})"
        " SELECT 'a', gen_random_uuid(), 'raw', 100, 100 + %s, %s, 'fa', 'fact', 0.5, {model}, embedding{value}"
        " FROM pgmem.notes WHERE namespace = 'a'"
    )
    with _login(dsn, roles["writer"], "a") as writer:
        # Offsets that do not cover the text's UTF-8 bytes (5 characters, 6 bytes).
        with pytest.raises(psycopg.errors.CheckViolation, match="notes_span_length"):
            writer.execute(note.format(extra="", model="model_id", value=""), (5, "caf\u00e9!"))
        # A model other than the namespace's (registered by the owner: writers register
        # none): stage one would never read the note.
        other = tenants.execute(
            "INSERT INTO pgmem.embedding_models (name, dimension) VALUES ('other-model', 384) RETURNING model_id"
        ).fetchone()[0]
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="notes_namespace_model"):
            writer.execute(note.format(extra="", model=other, value=""), (6, "caf\u00e9!"))
        # Write time, running statistics and who gave feedback come from the database.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute(
                note.format(extra=", created_at", model="model_id", value=", '2001-01-01'"), (6, "caf\u00e9!")
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute("INSERT INTO pgmem.namespaces (namespace, model_id, note_count) VALUES ('a2', 1, 1e9)")
        target = writer.execute("SELECT note_id FROM pgmem.notes").fetchone()[0]
        feedback = (
            "INSERT INTO pgmem.feedback (namespace, note_id, family, helpful, weight{extra})"
            " VALUES ('a', %s, %s, true, 1000{value})"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute(feedback.format(extra=", given_by", value=", 'someone'"), (target, "fa"))
        # Feedback credits the note's own family, on a note the writer can see.
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            writer.execute(feedback.format(extra="", value=""), (target, "fb"))
        hidden = tenants.execute("SELECT note_id FROM pgmem.notes WHERE namespace = 'b'").fetchone()[0]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            writer.execute(feedback.format(extra="", value=""), (hidden, "fa"))
        # The honest forms still work.
        writer.execute(note.format(extra="", model="model_id", value=""), (6, "caf\u00e9!"))
        writer.execute(feedback.format(extra="", value=""), (target, "fa"))
        # Links may name any id (they dangle after forget by design), but reads follow
        # them inside the session's namespace only: a link into 'b' pulls nothing in.
        writer.execute(
            "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
            " confidence, model_id, embedding, links) SELECT 'a', gen_random_uuid(), 'raw', 0, 12, 'launch plans',"
            " 'fa', 'fact', 0.5, model_id, embedding, ARRAY[%s::uuid] FROM pgmem.notes WHERE note_id = %s",
            (hidden, target),
        )
        texts = {i.text for i in pgmem.pack(writer, "launch plans vault", namespace="a", embedder=hashing).items}
        assert texts and not any("Beta" in text for text in texts)
    # A vector of another dimension than its model's, even for a model and a namespace
    # bound by hand (no register_namespace_v1): the model's HNSW index exists at once.
    tenants.execute("SELECT pgmem.grant_namespace_v1(%s, 'fresh')", (roles["writer"],))
    tiny = tenants.execute(
        "INSERT INTO pgmem.embedding_models (name, dimension) VALUES ('tiny', 3) RETURNING model_id"
    ).fetchone()[0]
    with _login(dsn, roles["writer"], "fresh") as writer:
        writer.execute("INSERT INTO pgmem.namespaces (namespace, model_id) VALUES ('fresh', %s)", (tiny,))
        with pytest.raises(psycopg.errors.DataException, match="expected 3 dimensions, not 5"):
            writer.execute(
                "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
                " confidence, model_id, embedding) VALUES ('fresh', gen_random_uuid(), 'raw', 0, 3, 'abc', 'f',"
                " 'fact', 0.5, %s, '[1, 2, 3, 4, 5]')",
                (tiny,),
            )
    assert tenants.execute("SELECT count(*) FROM pgmem.notes WHERE namespace = 'a'").fetchone() == (3,)
    stats_are_consistent(tenants)


def test_an_admin_supersedes_in_the_namespace_its_session_selects(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    corrected = make_spans(["Beta tenant secret: the vault code is 0000."], family="fb")
    with _login(dsn, roles["admin"], None) as admin, pytest.raises(pgmem.DatabaseError, match="row-level security"):
        pgmem.supersede(admin, corrected, namespace="b", reason="no session namespace", embedder=hashing)
    with _login(dsn, roles["admin"], "b") as admin:
        assert len(pgmem.supersede(admin, corrected, namespace="b", reason="fix", embedder=hashing).superseded) == 1
    with _login(dsn, roles["reader"], "a") as reader:
        old = reader.execute("SELECT note_id FROM pgmem.notes").fetchone()[0]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            reader.execute(
                "INSERT INTO pgmem.supersede_audit (namespace, old_note_id, new_note_id, document_id, span_start,"
                " span_end, reason) VALUES ('a', %s, gen_random_uuid(), 'doc', 0, 45, 'r')",
                (old,),
            )
    assert tenants.execute("SELECT namespace, requested_by FROM pgmem.supersede_audit").fetchall() == [
        ("b", roles["admin"])
    ]
    stats_are_consistent(tenants)
