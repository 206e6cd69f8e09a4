"""Write path: spans become immutable notes, atomically and idempotently."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
from helpers import make_spans

import pgmem
from pgmem.embeddings import HashingEmbedder


def _count(conn: psycopg.Connection[Any], table: str = "pgmem.notes") -> int:
    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # test-only, fixed names
    assert row is not None
    return int(row[0])


def test_ingest_writes_notes_with_grounding_and_facets(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    spans = make_spans(
        [
            "Ada Lovelace founded Acme Corp in Paris on 2023-05-08.",
            "See https://acme.example/about for ACME-1234.",
        ],
        family="wiki",
        source_ts="2023-05-09T12:00:00+00:00",
        external_id=None,
    )
    result = pgmem.ingest(conn, spans, embedder=hashing)
    assert result.inserted == 2 and result.skipped == 0
    row = conn.execute(
        "SELECT document_id, span_start, span_end, text, family, role, confidence, source_ts,"
        " entities, time_tags, handles, links, vector_dims(embedding), lexeme_count"
        " FROM pgmem.notes WHERE note_id = %s",
        (result.note_ids[0],),
    ).fetchone()
    assert row is not None
    (
        document_id,
        start,
        end,
        text,
        family,
        role,
        confidence,
        source_ts,
        entities,
        times,
        _handles,
        links,
        dims,
        lexemes,
    ) = row
    assert (document_id, start, end, text, family) == (
        "doc",
        0,
        len(spans[0].text.encode()),
        spans[0].text,
        "wiki",
    )
    assert role in pgmem.ROLES and 0 <= confidence <= 1
    assert source_ts.isoformat() == "2023-05-09T12:00:00+00:00"
    assert {"Ada Lovelace", "Acme Corp"} <= {e["text"] for e in entities}
    assert times[0]["granularity"] == "day" and times[0]["start"].startswith("2023-05-08")
    assert [str(x) for x in links] == [result.note_ids[1]]
    assert dims == hashing.dimension and lexemes > 0
    second = conn.execute("SELECT handles FROM pgmem.notes WHERE note_id = %s", (result.note_ids[1],)).fetchone()
    assert second is not None and {"https://acme.example/about", "ACME-1234"} <= set(second[0])


def test_reingest_is_a_noop_and_ids_are_deterministic(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    spans = make_spans(["one fact", "another fact"])
    first = pgmem.ingest(conn, spans, embedder=hashing)
    again = pgmem.ingest(conn, spans, embedder=hashing)
    assert first.note_ids == again.note_ids
    assert (again.inserted, again.skipped) == (0, 2)
    assert _count(conn) == 2
    stats = conn.execute("SELECT note_count FROM pgmem.namespaces WHERE namespace = 'default'").fetchone()
    assert stats == (2,)


def test_a_bad_span_fails_the_whole_batch_and_writes_nothing(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    spans = make_spans(["good one", "good two"])
    bad = pgmem.Span(document_id="doc", text="wrong offsets", start=0, end=3, family="f", external_id="turn-7")
    with pytest.raises(pgmem.InputError, match=r"span 2 \('turn-7'\): start/end must cover exactly"):
        pgmem.ingest(conn, [*spans, bad], embedder=hashing)
    assert _count(conn) == 0
    assert _count(conn, "pgmem.namespaces") == 0


def test_same_id_with_different_content_is_refused(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    a = pgmem.Span(document_id="d", text="same text", start=0, end=9, family="one")
    b = pgmem.Span(document_id="d", text="same text", start=0, end=9, family="two")
    with pytest.raises(pgmem.InputError, match="same note id as span 0"):
        pgmem.ingest(conn, [a, b], embedder=hashing)
    assert pgmem.ingest(conn, [a, a], embedder=hashing).inserted == 1


def test_a_database_failure_mid_batch_rolls_everything_back(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.ingest(conn, make_spans(["existing note"]), embedder=hashing)
    conn.execute("ALTER TABLE pgmem.notes ADD CONSTRAINT no_boom CHECK (text <> 'boom')")
    with pytest.raises(pgmem.DatabaseError, match="no_boom"):
        pgmem.ingest(conn, make_spans(["fine", "boom"], document_id="other"), embedder=hashing)
    assert _count(conn) == 1
    stats = conn.execute("SELECT sum(document_frequency) FROM pgmem.lexeme_stats WHERE lexeme = 'fine'").fetchone()
    assert stats == (None,)


def test_notes_are_immutable_even_from_raw_sql(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.ingest(conn, make_spans(["a fact that stays"]), embedder=hashing)
    for statement in (
        "UPDATE pgmem.notes SET text = 'changed'",
        "DELETE FROM pgmem.notes",
        "TRUNCATE pgmem.notes CASCADE",
    ):
        with pytest.raises(psycopg.Error, match="immutable") as caught:
            conn.execute(statement)
        assert caught.value.sqlstate == "PM001"
    assert _count(conn) == 1


def test_ingest_inside_a_callers_transaction_is_not_committed(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn) as conn:
        pgmem.ingest(conn, make_spans(["uncommitted"]), embedder=hashing)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
        assert _count(conn) == 0


def test_links_reach_notes_written_by_earlier_batches(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    first, second, third = make_spans(["turn one", "turn two", "turn three"])
    a = pgmem.ingest(conn, [first, third], embedder=hashing).note_ids
    b = pgmem.ingest(conn, [second], embedder=hashing).note_ids
    row = conn.execute("SELECT links FROM pgmem.notes WHERE note_id = %s", (b[0],)).fetchone()
    assert row is not None and sorted(str(x) for x in row[0]) == sorted(a)


def test_a_namespace_is_bound_to_one_embedding_model(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.ingest(conn, make_spans(["written with 384 dimensions"]), embedder=hashing)
    other = HashingEmbedder(dimension=64)
    with pytest.raises(pgmem.EmbeddingMismatchError, match="written with embedding model hashing-v1-384"):
        pgmem.ingest(conn, make_spans(["another"], document_id="x"), embedder=other)
    with pytest.raises(pgmem.EmbeddingMismatchError, match="not hashing-v1-64"):
        pgmem.pack(conn, "written", embedder=other)
    pgmem.ingest(conn, make_spans(["fine elsewhere"]), embedder=other, namespace="small")
    assert pgmem.pack(conn, "fine", embedder=other, namespace="small").items[0].text == "fine elsewhere"


def test_invalid_namespace_is_refused(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    with pytest.raises(pgmem.InputError, match="namespace must be"):
        pgmem.ingest(conn, make_spans(["x"]), embedder=hashing, namespace="bad name; drop")


def test_notes_sharing_a_rare_handle_or_entity_are_linked(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    first = pgmem.ingest(
        conn, make_spans(["Ticket ACME-1234 was opened by Priya Raman."], document_id="a"), embedder=hashing
    ).note_ids
    common = [f"Status report {i} mentions ACME-9999." for i in range(7)]
    pgmem.ingest(conn, make_spans(common, document_id="b"), embedder=hashing)
    later = pgmem.ingest(
        conn,
        make_spans(["ACME-1234 is fixed.", "Another ACME-9999 mention."], document_id="c"),
        embedder=hashing,
    ).note_ids
    links = {str(r[0]): {str(x) for x in r[1]} for r in conn.execute("SELECT note_id, links FROM pgmem.notes")}
    assert first[0] in links[later[0]]  # the rare id links across documents
    stored_common = {str(r[0]) for r in conn.execute("SELECT note_id FROM pgmem.notes WHERE document_id = 'b'")}
    assert not (links[later[1]] & stored_common)  # ACME-9999 is in 8 notes: too common to link by


def _snapshot(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return sorted(conn.execute("SELECT note_id::text, family, text FROM pgmem.notes").fetchall())


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        ({"text": "same span, new text", "end": 19}, "text"),
        ({"family": "other"}, "family"),
        ({"source_ts": "2024-01-01T00:00:00+00:00"}, "source_ts"),
        ({"metadata": {"v": 2}}, "metadata"),
        ({"external_id": "turn-8"}, "external_id"),
        ({"context": "a new title"}, "context"),
        ({"role": "claim"}, "role"),
        ({"confidence": 0.9}, "confidence"),
        ({"family": "other", "metadata": {"v": 2}}, "family, metadata"),
    ],
)
def test_a_span_holding_another_note_is_refused_naming_it(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, change: dict[str, Any], fields: str
) -> None:
    first = pgmem.Span(
        document_id="d", text="same span, old text", start=0, end=19, family="f", metadata={"v": 1},
        source_ts="2023-05-08T10:00:00+00:00", external_id="turn-7", role="fact", confidence=0.3, context="a title",
    )  # fmt: skip
    pgmem.ingest(conn, [first], embedder=hashing)
    before = _snapshot(conn)
    fresh = make_spans(["an unrelated new note"], document_id="other")[0]
    changed = pgmem.Span(**(dataclasses.asdict(first) | change))
    with pytest.raises(pgmem.InputError) as caught:
        pgmem.ingest(conn, [fresh, changed], embedder=hashing)
    message = str(caught.value)
    assert (
        f"span 1 (document 'd', bytes 0-19): namespace 'default' holds note {before[0][0]} with a different {fields}"
        in message
    )
    assert "nothing written" in message and "pgmem.supersede" in message
    assert _snapshot(conn) == before  # the good span of the batch was not written either


def test_an_exact_reingest_compares_only_what_the_caller_gave(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    given = make_spans(["derived role and confidence"], metadata={"k": [1, 2.5]}, confidence=0.3)
    pgmem.ingest(conn, given, embedder=hashing)
    # Role and context were derived (not given): not compared. Confidence 0.3 is stored
    # as a real, and still equal. Metadata round-trips through JSON.
    again = pgmem.ingest(conn, given, embedder=hashing)
    assert (again.inserted, again.skipped) == (0, 1)
    as_tuple = [dataclasses.replace(given[0], metadata={"k": (1, 2.5)})]
    assert pgmem.ingest(conn, as_tuple, embedder=hashing).skipped == 1


def test_one_batch_may_not_give_one_span_two_texts(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    a = pgmem.Span(document_id="d", text="first text", start=0, end=10, family="f")
    b = pgmem.Span(document_id="d", text="other text", start=0, end=10, family="f")
    with pytest.raises(pgmem.InputError, match=r"span 1 \(document 'd', bytes 0-10\) covers the same document span"):
        pgmem.ingest(conn, [a, b], embedder=hashing)
    assert _count(conn) == 0


def test_the_database_refuses_a_second_note_on_a_span_and_offsets_that_lie(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    from pgmem.db.errors import database_errors

    note = pgmem.ingest(conn, make_spans(["stored text"]), embedder=hashing).note_ids[0]
    copy = (
        "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
        " confidence, model_id, embedding)"
        " SELECT namespace, %s, document_id, span_start, span_end + %s, %s, family, role, confidence, model_id,"
        " embedding FROM pgmem.notes WHERE note_id = %s"
    )
    span_taken = r"ingest: one note per document span.*\(default, doc, 0, 11\)"
    with pytest.raises(pgmem.InputError, match=span_taken), database_errors("ingest"):
        conn.execute(copy, (str(uuid.uuid4()), 0, "other text!", note))
    length = "span_end - span_start must equal the UTF-8 byte length"
    with pytest.raises(pgmem.InputError, match=length), database_errors("ingest"):
        conn.execute(copy, (str(uuid.uuid4()), 5, "caf\u00e9 and more text", note))
    assert _count(conn) == 1


def _waiting(dsn: str, pid: int) -> bool:
    with psycopg.connect(dsn, autocommit=True) as watcher:
        row = watcher.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


@pytest.mark.parametrize(
    ("theirs", "fields"),
    [({"text": "their text!", "end": 11}, "text"), ({"family": "theirs"}, "family")],
)
def test_a_concurrent_writer_of_the_same_span_is_refused(
    dsn: str, hashing: HashingEmbedder, theirs: dict[str, Any], fields: str
) -> None:
    mine = pgmem.Span(document_id="d", text="my text ok!", start=0, end=11, family="mine")
    outcome: dict[str, BaseException] = {}
    with psycopg.connect(dsn) as first, psycopg.connect(dsn, autocommit=True) as second:
        pgmem.ingest(first, [mine], embedder=hashing)  # not committed yet

        def race() -> None:
            try:
                pgmem.ingest(second, [pgmem.Span(**(dataclasses.asdict(mine) | theirs))], embedder=hashing)
            except BaseException as exc:  # handed to the test thread
                outcome["error"] = exc

        worker = threading.Thread(target=race)
        worker.start()
        deadline = time.monotonic() + 30
        while not _waiting(dsn, second.info.backend_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        first.commit()
        worker.join(30)
        error = outcome.get("error")
        assert isinstance(error, pgmem.InputError), error
        assert "span 0 (document 'd', bytes 0-11): note" in str(error)
        assert f"with a different {fields} was written concurrently" in str(error)
        rows = second.execute("SELECT text, family FROM pgmem.notes").fetchall()
    assert rows == [("my text ok!", "mine")]


def test_neighbour_lookups_still_use_an_index(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.ingest(conn, make_spans([f"turn {i}" for i in range(50)], document_id="s"), embedder=hashing)
    conn.execute("SET enable_seqscan = off")
    plan = "\n".join(
        row[0]
        for row in conn.execute(
            "EXPLAIN SELECT n.note_id FROM pgmem.notes AS n WHERE n.namespace = 'default' AND n.document_id = 's'"
            " AND n.span_start < 100 ORDER BY n.span_start DESC LIMIT 1"
        )
    )
    assert "notes_span" in plan and "Sort" not in plan


def test_a_note_id_squatted_on_another_span_is_refused_not_skipped(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    from pgmem.ingestion.spans import note_id

    honest = make_spans(["the honest text"], document_id="d")[0]
    squatter = make_spans(["a squatter"], document_id="elsewhere")[0]
    pgmem.ingest(conn, [squatter], embedder=hashing)
    # Raw SQL can store a note under the id another span will have (the id is not
    # checked against the content in the database): ingest must not take it for that span.
    conn.execute(
        "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
        " confidence, model_id, embedding) SELECT namespace, %s, document_id, 100, 110, text, family, role,"
        " confidence, model_id, embedding FROM pgmem.notes",
        (note_id("default", "d", honest.start, honest.end, honest.text),),
    )
    with pytest.raises(pgmem.InputError, match=r"span 0 \(document 'd', bytes 0-15\): its note id .* is already taken"):
        pgmem.ingest(conn, [honest], embedder=hashing)
    assert _count(conn) == 2
