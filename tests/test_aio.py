"""pgmem.aio: the same operations on psycopg.AsyncConnection, with the same results and errors."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import psycopg
import pytest
from helpers import make_spans
from psycopg import sql
from psycopg.rows import dict_row, namedtuple_row, tuple_row

import pgmem
import pgmem.aio
from pgmem.db.connection import bind_namespace
from pgmem.embeddings import HashingEmbedder

T = TypeVar("T")

FACTORIES: dict[str, Callable[..., Any]] = {"tuple": tuple_row, "dict": dict_row, "namedtuple": namedtuple_row}
TEXTS = [
    "The launch moved to Friday after the review.",
    "Maria owns the release checklist for v2.3.1.",
    "The review found two blocking bugs in the parser.",
]
QUESTION = "who owns the release checklist?"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def _same(got: pgmem.Pack, expected: pgmem.Pack) -> None:
    assert [i.note_id for i in got.items] == [i.note_id for i in expected.items]
    assert [i.final_score for i in got.items] == [i.final_score for i in expected.items]
    assert got.diagnostics.rejections == expected.diagnostics.rejections
    assert got.diagnostics.families == expected.diagnostics.families
    assert got.diagnostics.hints == expected.diagnostics.hints
    assert list(got.diagnostics.timings_ms) == list(expected.diagnostics.timings_ms)


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("autocommit", [True, False])
def test_async_pack_equals_the_sync_pack(dsn: str, hashing: HashingEmbedder, factory: str, autocommit: bool) -> None:
    with psycopg.connect(dsn, autocommit=True) as plain:
        pgmem.ingest(plain, make_spans(TEXTS), embedder=hashing)
        expected = pgmem.pack(plain, QUESTION, embedder=hashing, family_cap=2, keywords=["checklist"])

    async def main() -> pgmem.Pack:
        async with await psycopg.AsyncConnection.connect(
            dsn, autocommit=autocommit, row_factory=FACTORIES[factory]
        ) as aconn:
            return await pgmem.aio.pack(aconn, QUESTION, embedder=hashing, family_cap=2, keywords=["checklist"])

    got = run(main())
    assert got.items
    _same(got, expected)


def test_async_pack_inside_the_callers_transaction_commits_nothing(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn, autocommit=True) as plain:
        pgmem.ingest(plain, make_spans(TEXTS), embedder=hashing)

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, row_factory=dict_row) as aconn:
            async with aconn.transaction(force_rollback=True):
                evidence = await pgmem.aio.pack(aconn, QUESTION, embedder=hashing, log=True)
                assert evidence.pack_id and evidence.items
                assert aconn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
                cursor = await aconn.execute("SELECT count(*) AS n FROM pgmem.pack_log")
                assert await cursor.fetchone() == {"n": 1}
            cursor = await aconn.execute("SELECT count(*) AS n FROM pgmem.pack_log")
            assert await cursor.fetchone() == {"n": 0}

    run(main())


def test_async_pool_without_prepared_statements(dsn: str, hashing: HashingEmbedder) -> None:
    """As behind pgbouncer in transaction mode: an async pool, no server-side prepares."""
    from psycopg_pool import AsyncConnectionPool

    with psycopg.connect(dsn, autocommit=True) as plain:
        pgmem.ingest(plain, make_spans(TEXTS), embedder=hashing)

    async def main() -> None:
        options = {"autocommit": True, "prepare_threshold": None, "row_factory": dict_row}
        async with AsyncConnectionPool(dsn, min_size=1, max_size=2, kwargs=options, open=False) as pool:
            packs = []
            for _ in range(8):  # past psycopg's default prepare threshold of 5
                async with pool.connection() as aconn:
                    packs.append(await pgmem.aio.pack(aconn, QUESTION, embedder=hashing, log=True))

            # Concurrent packs on two pooled connections.
            async def one() -> pgmem.Pack:
                async with pool.connection() as aconn:
                    return await pgmem.aio.pack(aconn, QUESTION, embedder=hashing)

            concurrent = await asyncio.gather(one(), one(), one())
            assert all(p.items for p in packs + list(concurrent))
            async with pool.connection() as aconn:
                cursor = await aconn.execute("SELECT count(*) AS n FROM pg_prepared_statements")
                assert await cursor.fetchone() == {"n": 0}

    run(main())


def test_async_errors_are_the_sync_errors(dsn: str, hashing: HashingEmbedder) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            with pytest.raises(pgmem.InputError, match="question"):
                await pgmem.aio.pack(aconn, "", embedder=hashing)
            with pytest.raises(pgmem.ConfigurationError, match="timeout must be > 0"):
                await pgmem.aio.pack(aconn, "note", embedder=hashing, timeout=0)
            with pytest.raises(pgmem.InputError, match="where"):
                await pgmem.aio.pack(aconn, "note", embedder=hashing, where="pg_sleep(1) = 1")
            with pytest.raises(pgmem.InputError, match="feedback: helpful"):
                await pgmem.aio.feedback(aconn, helpful=["not-a-uuid"])
            with pytest.raises(pgmem.InputError, match="forget needs exactly one"):
                await pgmem.aio.forget(aconn, namespace="default", reason="r")
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            await aconn.execute("DROP SCHEMA pgmem CASCADE")
            with pytest.raises(pgmem.SchemaError, match="pack: the pgmem schema is missing"):
                await pgmem.aio.pack(aconn, "note", embedder=hashing)

    run(main())


def test_an_async_pack_past_its_timeout_is_cancelled_with_a_clear_error(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn, autocommit=True) as plain:
        pgmem.ingest(plain, make_spans(["a note to wait for"]), embedder=hashing)

    async def main() -> None:
        async with (
            await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn,
            await psycopg.AsyncConnection.connect(dsn) as locker,
        ):
            await locker.execute("LOCK TABLE pgmem.notes IN ACCESS EXCLUSIVE MODE")  # stage one now blocks
            with pytest.raises(pgmem.DatabaseError, match=r"pack: exceeded its timeout of 0.3 s"):
                await pgmem.aio.pack(aconn, "note", embedder=hashing, timeout=0.3)
            await locker.rollback()
            assert (await pgmem.aio.pack(aconn, "note", embedder=hashing, timeout=30)).items

    run(main())


def test_embedding_runs_off_the_event_loop(dsn: str, hashing: HashingEmbedder) -> None:
    """While a pack embeds its question, the loop keeps running other tasks."""
    import threading

    loop_threads: set[int] = set()
    embed_threads: set[int] = set()

    class Watched(HashingEmbedder):
        def embed(self, texts: Any) -> Any:
            embed_threads.add(threading.get_ident())
            return super().embed(texts)

    async def main() -> None:
        loop_threads.add(threading.get_ident())
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            await pgmem.aio.pack(aconn, QUESTION, embedder=Watched())

    run(main())
    assert embed_threads and not (embed_threads & loop_threads)


@pytest.mark.parametrize("factory", FACTORIES)
def test_every_async_operation_works_whatever_the_row_factory(dsn: str, hashing: HashingEmbedder, factory: str) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, row_factory=FACTORIES[factory]) as aconn:
            written = await pgmem.aio.ingest(aconn, make_spans(TEXTS), embedder=hashing)
            assert written.inserted == 3
            assert (await pgmem.aio.ingest(aconn, make_spans(TEXTS), embedder=hashing)).skipped == 3
            assert await pgmem.aio.register_model(aconn, hashing) > 0
            corrected = make_spans(["The launch moved to Monday after the review."])
            with pytest.raises(pgmem.InputError, match="1 span\\(s\\) refused, nothing written"):
                await pgmem.aio.ingest(aconn, corrected, embedder=hashing)
            replaced = await pgmem.aio.supersede(
                aconn, corrected, namespace="default", reason="date fixed", embedder=hashing
            )
            assert len(replaced.superseded) == 1
            evidence = await pgmem.aio.pack(aconn, "when is the launch?", embedder=hashing, log=True)
            assert evidence.items[0].text == "The launch moved to Monday after the review."
            given = await pgmem.aio.feedback(aconn, helpful=[evidence.items[0].note_id], pack_id=evidence.pack_id)
            assert given.families == {"f": (1.0, 0.0)}
            assert await pgmem.aio.reset_feedback(aconn, namespace="default") == 1
            removed = await pgmem.aio.forget(aconn, namespace="default", note_ids=[written.note_ids[1]], reason="t")
            assert removed.notes_removed == 1
            assert await pgmem.aio.bind_family(aconn, namespace="default", family="f", roles=["pgmem_writer"]) == 2
            assert await pgmem.aio.unbind_family(aconn, namespace="default", family="f") == 1
            loaded = await pgmem.aio.bulk_load(aconn, make_spans(TEXTS), namespace="bulk", embedder=hashing)
            assert loaded.inserted == 3 and set(loaded.seconds) >= {"write", "indexes", "total"}

    run(main())
    with psycopg.connect(dsn, autocommit=True) as plain:
        texts = [
            r[0] for r in plain.execute("SELECT text FROM pgmem.notes WHERE namespace = 'default' ORDER BY span_start")
        ]
    assert texts == ["The launch moved to Monday after the review.", TEXTS[2]]


def test_async_ingest_is_the_sync_ingest(dsn: str, hashing: HashingEmbedder) -> None:
    spans = make_spans(TEXTS, document_id="d", source_ts="2024-03-01T10:00:00+00:00")
    with psycopg.connect(dsn, autocommit=True) as plain:
        pgmem.ingest(plain, spans, namespace="sync", embedder=hashing)

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            await pgmem.aio.ingest(aconn, spans, namespace="async", embedder=hashing)

    run(main())
    columns = "text, context, role, confidence, entities, time_tags, keywords, handles, cardinality(links), embedding"
    with psycopg.connect(dsn, autocommit=True) as plain:
        rows = {
            ns: plain.execute(
                f"SELECT {columns} FROM pgmem.notes WHERE namespace = %s ORDER BY span_start", (ns,)
            ).fetchall()
            for ns in ("sync", "async")
        }
    # Note ids (and so links) depend on the namespace; everything derived from the text is equal.
    assert rows["sync"] == rows["async"] and len(rows["sync"]) == 3


def test_async_ingest_inside_the_callers_transaction_rolls_back_with_it(dsn: str, hashing: HashingEmbedder) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as aconn:  # not autocommit
            async with aconn.transaction(force_rollback=True):
                await pgmem.aio.ingest(aconn, make_spans(TEXTS), embedder=hashing)
                assert aconn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
                bad = make_spans(["The launch moved to Sunday after the review."])
                with pytest.raises(pgmem.InputError):
                    await pgmem.aio.ingest(aconn, bad, embedder=hashing)
                # The refused batch left the caller's transaction usable.
                assert (await pgmem.aio.pack(aconn, QUESTION, embedder=hashing)).items
            cursor = await aconn.execute("SELECT count(*) FROM pgmem.notes")
            assert await cursor.fetchone() == (0,)

    run(main())


def test_async_connect_binds_the_namespace_and_needs_a_dsn(
    dsn: str, monkeypatch: pytest.MonkeyPatch, hashing: HashingEmbedder
) -> None:
    async def main() -> None:
        async with await pgmem.aio.connect(dsn, namespace="tenant-7") as aconn:
            assert aconn.autocommit
            cursor = await aconn.execute("SELECT current_setting('pgmem.namespace')")
            assert await cursor.fetchone() == ("tenant-7",)
        monkeypatch.setenv("PGMEM_DSN", dsn)
        async with await pgmem.aio.connect(autocommit=False) as aconn:
            assert not aconn.autocommit
        monkeypatch.delenv("PGMEM_DSN")
        with pytest.raises(pgmem.ConfigurationError, match="needs a DSN"):
            await pgmem.aio.connect()
        with pytest.raises(pgmem.InputError):
            await pgmem.aio.connect(dsn, namespace="bad namespace!")

    run(main())


@pytest.mark.parametrize("autocommit", [True, False])
def test_an_async_write_refused_inside_its_transaction_leaves_the_connection_usable(
    dsn: str, tenants: psycopg.Connection[Any], roles: dict[str, str], autocommit: bool
) -> None:
    """A writer ingesting with a model no admin registered: refused inside the write's
    transaction block (register_namespace), which rolls back; the caller goes on."""
    tenants.execute("SELECT pgmem.grant_namespace_v1(%s, 'other-model')", (roles["writer"],))
    other = HashingEmbedder(dimension=48)

    async def main() -> None:
        conninfo = bind_namespace(dsn, "other-model")
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=autocommit) as aconn:
            await aconn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(roles["writer"])))
            with pytest.raises(pgmem.ConfigurationError, match=r"is not registered.*register_model"):
                await pgmem.aio.ingest(aconn, make_spans(["needs a model"]), namespace="other-model", embedder=other)
            expected = psycopg.pq.TransactionStatus.IDLE if autocommit else psycopg.pq.TransactionStatus.INTRANS
            assert aconn.info.transaction_status == expected  # not INERROR: the block rolled back
            cursor = await aconn.execute("SELECT count(*) FROM pgmem.notes")
            assert await cursor.fetchone() == (0,)

    run(main())


def test_every_public_operation_has_an_async_namesake() -> None:
    # migrate runs alembic once before the application starts and get_embedder builds a
    # model: neither talks to a connection the application awaits on.
    sync_only = {"get_embedder", "migrate"}
    operations = {name for name in pgmem.__all__ if name[0].islower() and callable(getattr(pgmem, name))}
    assert operations - sync_only <= set(pgmem.aio.__all__)
    for name in operations - sync_only:
        assert asyncio.iscoroutinefunction(getattr(pgmem.aio, name)), name
