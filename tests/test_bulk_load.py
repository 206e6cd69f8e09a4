"""pgmem.bulk_load writes what one pgmem.ingest call writes (notes, links, postings,
statistics, stage-one rows), rebuilds the indexes it dropped exactly, refuses what it
must (a namespace with notes, bad input, a busy table, a caller who does not own the
table) and leaves nothing behind when it refuses."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from helpers import FailingEnricher, PidEnricher, as_role, make_spans, stats_are_consistent
from psycopg import sql
from psycopg.rows import dict_row

import pgmem
import pgmem.aio
from pgmem.api import build_hints
from pgmem.db.queries import run
from pgmem.embeddings import HashingEmbedder
from pgmem.ingestion.enricher import RuleEnricher
from pgmem.retrieval.stage_one import stage_one_arguments

NAMESPACE = "bulk"
PEOPLE = ["Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra", "Barbara Liskov", "Ken Thompson"]
QUESTIONS = [
    "What did Ada Lovelace write about ticket ACME-1042?",
    "Where did Grace Hopper meet Alan Turing?",
    "Who paid $120 for the lamp?",
    "What is at https://example.org/notes?",
]


def _texts() -> list[str]:
    """Notes with rare shared keys (a name or ticket held by 2-5 notes) and common ones."""
    texts = []
    for i in range(90):
        person = PEOPLE[i % len(PEOPLE)] if i % 4 else PEOPLE[0]  # Ada: common; the others: rarer
        ticket = f"ACME-{1000 + i // 3}"  # each ticket id shared by 3 notes: a rare key
        extra = " It cost $120." if i % 7 == 0 else ""
        link = " See https://example.org/notes for the minutes." if i % 11 == 0 else ""
        texts.append(f"On day {i} {person} reviewed ticket {ticket} about the lamp {i % 5}.{extra}{link}")
    return texts


def _spans() -> list[pgmem.Span]:
    """Documents of several spans (local links), families, one span given twice."""
    spans: list[pgmem.Span] = []
    texts = _texts()
    for doc in range(9):
        spans += make_spans(texts[doc * 10 : doc * 10 + 10], document_id=f"doc-{doc}", family=f"fam-{doc % 3}")
    return spans + spans[:2]


NOTE_COLUMNS = (
    "namespace, note_id, external_id, document_id, span_start, span_end, text, context, family, role,"
    " confidence, source_ts, model_id, embedding::text, entities, time_tags, keywords, handles, links, metadata,"
    " lexemes, lexeme_count"
)


def _state(conn: psycopg.Connection[Any]) -> dict[str, list[Any]]:
    """Everything a load writes, in a comparable order."""
    queries = {
        "notes": f"SELECT {NOTE_COLUMNS} FROM pgmem.notes ORDER BY namespace, note_id",
        "postings": "SELECT * FROM pgmem.lexeme_postings ORDER BY namespace, lexeme, note_id",
        "lexeme_stats": "SELECT * FROM pgmem.lexeme_stats ORDER BY namespace, lexeme",
        "namespaces": "SELECT namespace, model_id, note_count, lexeme_total FROM pgmem.namespaces ORDER BY 1",
        "family_stats": "SELECT namespace, family, note_count FROM pgmem.family_stats ORDER BY 1, 2",
    }
    return {name: conn.execute(text).fetchall() for name, text in queries.items()}


def _indexes(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index AS i JOIN pg_class AS c"
        " ON c.oid = i.indexrelid WHERE i.indrelid = 'pgmem.notes'::regclass ORDER BY 1"
    ).fetchall()
    return [(str(name), str(definition)) for name, definition in rows]


def _stage_one(conn: psycopg.Connection[Any], embedder: HashingEmbedder) -> list[list[tuple[Any, ...]]]:
    params = pgmem.StageOneParams()
    pools = []
    for question, vector in zip(QUESTIONS, embedder.embed(QUESTIONS), strict=True):
        arguments = stage_one_arguments(NAMESPACE, embedder.name, vector, question, build_hints(question), params)
        rows = run(conn, "stage_one", arguments, prepare=False).fetchall()
        # Every column but the write times and ages of the notes, families and namespace
        # (the two stores were written moments apart).
        pools.append(
            sorted(
                tuple(str(v) for k, v in row.items() if not k.endswith("_age_seconds") and k != "created_at")
                for row in rows
            )
        )
    return pools


def test_bulk_load_writes_what_one_ingest_call_writes(
    conn: psycopg.Connection[Any], other_dsn: str, hashing: HashingEmbedder
) -> None:
    spans = _spans()
    result = pgmem.bulk_load(conn, iter(spans), namespace=NAMESPACE, embedder=hashing)
    with psycopg.connect(other_dsn, autocommit=True) as reference:
        expected = pgmem.ingest(reference, spans, namespace=NAMESPACE, embedder=hashing)
        assert result.note_ids == expected.note_ids
        assert result.inserted == expected.inserted == len(spans) - 2
        state = _state(conn)
        assert state == _state(reference)
        # The fixture really has links of both kinds, and common keys that link nothing.
        links = [row[18] for row in state["notes"]]
        assert sum(len(link) > 2 for link in links) > 10
        assert _stage_one(conn, hashing) == _stage_one(reference, hashing)
        assert all(_stage_one(conn, hashing))
        # The indexes it dropped are back, exactly as the reference store has them.
        indexes = _indexes(reference)
        assert _indexes(conn) == indexes
    assert set(result.indexes) == {name for name, definition in indexes if "UNIQUE INDEX" not in definition}
    stats_are_consistent(conn)
    analyzed = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'pgmem.lexeme_postings'::regclass").fetchone()
    assert analyzed is not None and analyzed[0] > 0


def _bad_spans() -> Iterator[pgmem.Span]:
    good = _spans()
    yield from good[:25]
    yield pgmem.Span(document_id="doc-x", text="broken", start=0, end=99, family="f")


def test_refusals_leave_nothing_written(conn: psycopg.Connection[Any], dsn: str, hashing: HashingEmbedder) -> None:
    before = _indexes(conn)
    empty = _state(conn)
    with pytest.raises(pgmem.InputError, match="span 25"):
        pgmem.bulk_load(conn, _bad_spans(), namespace=NAMESPACE, embedder=hashing)
    with pytest.raises(pgmem.ConfigurationError, match="maintenance_work_mem"):
        pgmem.bulk_load(conn, _spans(), namespace=NAMESPACE, embedder=hashing, maintenance_work_mem=1000)
    with pytest.raises(pgmem.InputError, match="namespace"):
        pgmem.bulk_load(conn, _spans(), namespace="bad namespace!", embedder=hashing)
    assert _state(conn) == empty
    assert _indexes(conn) == before

    # Another session with the table open: refused at once, not waited for.
    with psycopg.connect(dsn) as other:
        other.execute("SELECT count(*) FROM pgmem.notes")
        with pytest.raises(pgmem.DatabaseError, match="other sessions"):
            pgmem.bulk_load(conn, _spans(), namespace=NAMESPACE, embedder=hashing)
    assert _state(conn) == empty

    # A namespace that holds notes is never bulk loaded (other namespaces may hold notes).
    pgmem.ingest(conn, _spans()[:3], namespace=NAMESPACE, embedder=hashing)
    registered = _indexes(conn)
    with pytest.raises(pgmem.InputError, match="already holds notes"):
        pgmem.bulk_load(conn, _spans()[3:], namespace=NAMESPACE, embedder=hashing)
    result = pgmem.bulk_load(conn, _spans()[3:], namespace="bulk2", embedder=hashing, maintenance_work_mem=3 << 20)
    assert result.inserted == len(_spans()) - 3
    assert result.maintenance_work_mem == "3MB"
    assert _indexes(conn) == registered
    stats_are_consistent(conn)


def test_only_the_owner_may_bulk_load(
    tenants: psycopg.Connection[Any], dsn: str, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    """Login roles of each kind are refused: a bulk load drops indexes every namespace shares."""
    before = _indexes(tenants)
    state = _state(tenants)
    for kind in ("writer", "admin", "reader", "stranger"):
        with as_role(dsn, roles[kind], "a") as attacker:
            attacker.autocommit = True
            with pytest.raises(pgmem.DatabaseError, match=r"does not own pgmem\.notes"):
                pgmem.bulk_load(attacker, _spans(), namespace=f"evil-{kind}", embedder=hashing)
            # Nor can they do by hand what the load does.
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                attacker.execute("DROP INDEX pgmem.notes_lexemes_gin")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                attacker.execute("ALTER TABLE pgmem.notes DISABLE TRIGGER notes_post_new")
    assert _indexes(tenants) == before
    assert _state(tenants) == state


def test_vector_text_is_exact(conn: psycopg.Connection[Any]) -> None:
    """The text form of a vector parses back to the very same float32 values."""
    from pgmem.db.vectors import vector_literal

    vectors = np.random.default_rng(5).standard_normal((50, 384)).astype(np.float32)
    vectors[0, :4] = [1e-38, -3.4028235e38, 1.1754944e-38, -0.0]
    vectors[1] = np.nextafter(vectors[1], np.float32(np.inf))
    for vector in vectors:
        row = conn.execute("SELECT (%s::vector)::real[]", (vector_literal(vector),)).fetchone()
        assert row is not None
        assert np.array_equal(np.asarray(row[0], dtype=np.float32), vector)


def test_enrich_workers_write_what_one_process_writes(
    conn: psycopg.Connection[Any], other_dsn: str, hashing: HashingEmbedder
) -> None:
    """Enrichment in worker processes (sync and async drivers) gives the same notes, links,
    postings and statistics as enrichment in the caller's process."""
    spans = _spans()
    expected = pgmem.bulk_load(conn, iter(spans), namespace=NAMESPACE, embedder=hashing)

    async def load_async(aconn_dsn: str) -> pgmem.BulkLoadResult:
        async with await psycopg.AsyncConnection.connect(aconn_dsn, autocommit=True) as aconn:
            return await pgmem.aio.bulk_load(
                aconn, iter(spans), namespace="async-workers", embedder=hashing, enrich_workers=1
            )

    with psycopg.connect(other_dsn, autocommit=True) as other:
        got = pgmem.bulk_load(other, iter(spans), namespace=NAMESPACE, embedder=hashing, enrich_workers=2)
        assert (got.note_ids, got.inserted) == (expected.note_ids, expected.inserted)
        assert _state(other) == _state(conn)
        assert _stage_one(other, hashing) == _stage_one(conn, hashing)
    in_async = asyncio.run(load_async(other_dsn))
    assert in_async.inserted == expected.inserted


def test_the_enrich_pool_shares_the_slices_and_keeps_their_order() -> None:
    from pgmem.ingestion.enricher import SpanInput
    from pgmem.ingestion.parallel import SLICE_SPANS, EnrichPool

    inputs = [
        SpanInput(text=f"Note {i}: Ada met Grace in Paris on 8 May 2023.", family="f", source_ts=None, role=None,
                  confidence=None, context=None, metadata={})
        for i in range(SLICE_SPANS * 12)
    ]  # fmt: skip
    serial = [RuleEnricher().enrich(span) for span in inputs]
    with EnrichPool(PidEnricher(), 1) as pool:
        shared = pool.enrich(inputs)
    assert [dataclasses.replace(facet, context="") for facet in shared] == [
        dataclasses.replace(facet, context="") for facet in serial
    ]
    processes = {facet.context for facet in shared}
    assert str(os.getpid()) in processes and len(processes) == 2  # this process and the worker both enriched
    # Each slice is one process's: the process changes only at slice boundaries.
    changes = [i for i in range(1, len(shared)) if shared[i].context != shared[i - 1].context]
    assert all(i % SLICE_SPANS == 0 for i in changes)


@pytest.mark.parametrize("workers", [-1, 65, True, 1.5, "2"])
def test_enrich_workers_must_be_a_count(conn: psycopg.Connection[Any], hashing: HashingEmbedder, workers: Any) -> None:
    with pytest.raises(pgmem.ConfigurationError, match="enrich_workers"):
        pgmem.bulk_load(conn, iter(_spans()), namespace=NAMESPACE, embedder=hashing, enrich_workers=workers)
    assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (0,)


def test_enrich_workers_refuse_an_enricher_that_does_not_pickle(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    enricher = RuleEnricher()
    enricher.lock = threading.Lock()  # type: ignore[attr-defined]  # a lock does not pickle
    with pytest.raises(pgmem.ConfigurationError, match=r"enrich_workers=1 needs an enricher that pickles"):
        pgmem.bulk_load(
            conn, iter(_spans()), namespace=NAMESPACE, embedder=hashing, enricher=enricher, enrich_workers=1
        )
    pgmem.bulk_load(conn, iter(_spans()), namespace=NAMESPACE, embedder=hashing, enricher=enricher)  # in process: fine


def test_an_enricher_failing_in_a_worker_fails_the_load_and_writes_nothing(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    # The failing span comes first: the first slice of a part is always a worker's.
    spans = make_spans(["A note that will FAIL."], document_id="doc-fail") + _spans()[:-2]
    before = _indexes(conn)
    with pytest.raises(ValueError, match=r"the enricher failed on 'A note that will FAIL\.' in process") as failed:
        pgmem.bulk_load(
            conn, iter(spans), namespace=NAMESPACE, embedder=hashing, enricher=FailingEnricher(), enrich_workers=1
        )
    assert not str(failed.value).endswith(f" {os.getpid()}")  # raised in the worker, surfaced here
    assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (0,)
    assert _indexes(conn) == before


class _FixedVectors:
    """An embedder returning given float32 vectors, by text."""

    name = "fixed-vectors"
    dimension = 384

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[text] for text in texts])


def test_the_write_path_copies_vectors_exactly(conn: psycopg.Connection[Any], dsn: str) -> None:
    """ingest, pgmem.aio.ingest and bulk_load copy vectors in pgvector's binary form: every
    float32 arrives as it was (extremes, subnormals, -0.0, neighbours one ulp apart), and the
    caller's connection gains no adapter."""
    from pgmem.embeddings import embed_unique

    vectors = np.random.default_rng(7).standard_normal((6, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[0, :5] = [1e-38, 1.1754944e-38, -0.0, 1e-45, -1e-45]
    vectors[1] = np.nextafter(vectors[0], np.float32(np.inf))
    texts = [f"Note {i} about the lamp." for i in range(len(vectors))]
    embedder = _FixedVectors(dict(zip(texts, vectors, strict=True)))
    # What the write path stores: the embedder's vectors as embed_unique gives them (unit rows).
    expected = dict(zip(texts, embed_unique(embedder, texts), strict=True))
    assert expected[texts[0]][3] == 1e-45 and expected[texts[1]].tobytes() != expected[texts[0]].tobytes()
    before = conn.adapters.get_dumper_by_oid  # the caller's adapters map, as it was

    def stored(namespace: str) -> dict[str, np.ndarray]:
        rows = conn.execute(
            "SELECT text, embedding::real[] FROM pgmem.notes WHERE namespace = %s", (namespace,)
        ).fetchall()
        return {text: np.asarray(values, dtype=np.float32) for text, values in rows}

    async def aio_ingest() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            await pgmem.aio.ingest(aconn, make_spans(texts[2:4]), namespace="aio", embedder=embedder)

    pgmem.ingest(conn, make_spans(texts[:3]), namespace="sync", embedder=embedder)
    asyncio.run(aio_ingest())
    pgmem.bulk_load(conn, iter(make_spans(texts)), namespace="bulk-exact", embedder=embedder)
    for namespace, written in (("sync", texts[:3]), ("aio", texts[2:4]), ("bulk-exact", texts)):
        got = stored(namespace)
        assert sorted(got) == sorted(written)
        for text in written:
            assert got[text].tobytes() == expected[text].tobytes(), (namespace, text)
    oid = conn.execute("SELECT 'vector'::regtype::oid::integer").fetchone()
    assert oid is not None
    with pytest.raises(psycopg.ProgrammingError):  # no vector dumper left on the caller's connection
        conn.adapters.get_dumper_by_oid(oid[0], psycopg.pq.Format.BINARY)
    assert conn.adapters.get_dumper_by_oid == before


def test_async_bulk_load_is_the_sync_bulk_load(
    conn: psycopg.Connection[Any], other_dsn: str, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    """pgmem.aio.bulk_load runs the same steps: same notes, indexes and result; same refusals."""
    spans = _spans()
    expected = pgmem.bulk_load(conn, iter(spans), namespace=NAMESPACE, embedder=hashing)

    async def load(dsn: str, namespace: str, role: str | None = None) -> pgmem.BulkLoadResult:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, row_factory=dict_row) as aconn:
            if role is not None:
                await aconn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            return await pgmem.aio.bulk_load(aconn, iter(spans), namespace=namespace, embedder=hashing)

    with psycopg.connect(other_dsn, autocommit=True) as reference:
        before = _state(reference)
        # Another session with the table open: refused at once, nothing written.
        with psycopg.connect(other_dsn) as other:
            other.execute("SELECT count(*) FROM pgmem.notes")
            with pytest.raises(pgmem.DatabaseError, match="other sessions"):
                asyncio.run(load(other_dsn, NAMESPACE))
        assert _state(reference) == before
        got = asyncio.run(load(other_dsn, NAMESPACE))
        assert (got.note_ids, got.inserted) == (expected.note_ids, expected.inserted)
        assert set(got.indexes) == set(expected.indexes)
        assert _state(reference) == _state(conn)
        assert _indexes(reference) == _indexes(conn)
        assert _stage_one(reference, hashing) == _stage_one(conn, hashing)
    # A login role that does not own the table is refused, as by the sync driver.
    with pytest.raises(pgmem.DatabaseError, match=r"does not own pgmem\.notes"):
        asyncio.run(load(other_dsn, "evil", roles["writer"]))
