"""pgmem on ``psycopg.AsyncConnection``: the same operations as :mod:`pgmem`, awaited.

Every function takes the arguments of its sync namesake (:func:`pgmem.pack`,
:func:`pgmem.ingest`, ...) and returns the same result types, raising the same
:class:`pgmem.PgmemError` subclasses. The logic is not copied: validation, hints,
calibration, packing and result building are the pure steps the sync driver runs
(:mod:`pgmem.retrieval.pipeline`, :mod:`pgmem.operations`, :mod:`pgmem.ingestion.writer`);
only the statements are awaited here. Embedding and enrichment are CPU-bound and run in
a worker thread (:func:`asyncio.to_thread`), so the event loop keeps serving other tasks
meanwhile; so does a pack's finish when it calls a caller's re-ranker. As with the
sync API, the connection is used as it is (any row factory, autocommit or not, inside
the caller's transaction, from a ``psycopg_pool.AsyncConnectionPool``, with or without
prepared statements) and never committed or closed.

>>> import pgmem.aio
>>> async with await pgmem.aio.connect(dsn) as aconn:             # doctest: +SKIP
...     await pgmem.aio.ingest(aconn, spans, embedder="hashing")
...     evidence = await pgmem.aio.pack(aconn, "Who founded Acme?", embedder="hashing")
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg

from pgmem.db.connection import bind_namespace, given_dsn
from pgmem.db.errors import database_errors, deadline_async
from pgmem.db.queries import column_names, fetch_async, run_async, run_tuples_async
from pgmem.db.steps import drive_async
from pgmem.embeddings import Embedder, resolve_embedder
from pgmem.errors import ConfigurationError
from pgmem.ingestion.bulk import BulkLoadResult, bulk_load_steps
from pgmem.ingestion.enricher import Enricher
from pgmem.ingestion.writer import IngestResult, check_reason
from pgmem.ingestion.writer import write as write_spans
from pgmem.operations import (
    FeedbackResult,
    ForgetResult,
    bind_family_result,
    bind_family_statement,
    feedback_result,
    feedback_statement,
    forget_result,
    forget_statement,
    register_model_result,
    register_model_statement,
    reset_feedback_result,
    reset_feedback_statement,
    unbind_family_result,
    unbind_family_statement,
)
from pgmem.params import CalibrationParams, Mode, PackParams, StageOneParams
from pgmem.retrieval.pipeline import PackRequest, Stopwatch, embed_question, finish_pack, log_document, prepare_pack
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.rerank import Reranker
from pgmem.retrieval.stage_one import pool_from_tuples
from pgmem.types import Pack, Span

__all__ = [
    "bind_family",
    "bulk_load",
    "connect",
    "feedback",
    "fetch_pool",
    "forget",
    "ingest",
    "pack",
    "register_model",
    "reset_feedback",
    "supersede",
    "unbind_family",
]


async def connect(
    dsn: str | None = None,
    *,
    autocommit: bool = True,
    namespace: str | None = None,
) -> psycopg.AsyncConnection[Any]:
    """Open an async connection to pgmem's database (:func:`pgmem.connect`, awaited).

    ``dsn`` is a libpq connection string (``""`` is libpq's defaults), else
    ``$PGMEM_DSN``. The embedded server is not started from here: start it with
    :func:`pgmem.connect` (sync, once per process) and pass its DSN. The schema is not
    migrated: run ``pgmem migrate`` or :func:`pgmem.migrate` first. ``namespace``
    binds the session as :func:`pgmem.connect` does. The caller closes the connection
    (``async with``).
    """
    conninfo = given_dsn(dsn)
    if conninfo is None:
        raise ConfigurationError(
            "pgmem.aio.connect needs a DSN (or $PGMEM_DSN); the embedded server is started by pgmem.connect()"
        )
    if namespace is not None:
        conninfo = bind_namespace(conninfo, namespace)
    with database_errors("connect"):
        return await psycopg.AsyncConnection.connect(conninfo, autocommit=autocommit)


async def fetch_pool(conn: psycopg.AsyncConnection[Any], request: PackRequest) -> Pool:
    """The pack's one I/O step on an async connection: the stage-one statement, its rows a pool."""
    with database_errors("pack"):
        async with deadline_async(conn, request.timeout, "pack"):
            # prepare=False as in the sync driver: the dynamic SQL is planned per call anyway.
            cursor = await run_tuples_async(
                conn, "stage_one", request.stage_one_arguments(), prepare=False, binary=True
            )
            rows = await cursor.fetchall()
            columns = column_names(cursor)
    return pool_from_tuples(columns, rows, query=request.question)


async def log_pack(conn: psycopg.AsyncConnection[Any], evidence: Pack) -> Pack:
    """Persist ``evidence`` and its diagnostics (one statement); returns it with its ``pack_id``."""
    logged, arguments = log_document(evidence)
    with database_errors("log pack"):
        # prepare=False: a server-side prepare would cost a round trip of its own.
        await run_async(conn, "log_pack", arguments, prepare=False)
    return logged


async def pack(
    conn: psycopg.AsyncConnection[Any],
    question: str,
    *,
    budget: int | None = None,
    namespace: str = "default",
    mode: Mode | str = "calibrated",
    token_budget: int | None = None,
    roles: Sequence[str] | None = None,
    role_quotas: Mapping[str, int] | None = None,
    family_cap: int | None = None,
    entities: Sequence[str] | None = None,
    time_range: tuple[datetime | str | None, datetime | str | None] | None = None,
    keywords: Sequence[str] | None = None,
    handles: Sequence[str] | None = None,
    where: str | None = None,
    derive_hints: bool = True,
    stage_one: StageOneParams | None = None,
    calibration: CalibrationParams | None = None,
    packing: PackParams | None = None,
    embedder: Embedder | str | None = None,
    log: bool = False,
    timeout: float | None = None,
    reranker: Reranker | None = None,
) -> Pack:
    """Select a fixed-budget evidence pack for ``question``: :func:`pgmem.pack` on an async connection.

    Same arguments, same result, same errors, same single stage-one statement. The
    question is embedded in a worker thread; ``timeout`` cancels the statement through
    the event loop. A ``reranker`` is called in a worker thread too (the finish runs
    there when one is given).
    """
    # Resolving a named embedder may load its model from disk: not on the event loop.
    model = await asyncio.to_thread(resolve_embedder, embedder)
    request = prepare_pack(
        question,
        budget=budget,
        namespace=namespace,
        mode=mode,
        token_budget=token_budget,
        roles=roles,
        role_quotas=role_quotas,
        family_cap=family_cap,
        entities=entities,
        time_range=time_range,
        keywords=keywords,
        handles=handles,
        where=where,
        derive_hints=derive_hints,
        stage_one=stage_one,
        calibration=calibration,
        packing=packing,
        embedder=model,
        log=log,
        timeout=timeout,
        reranker=reranker,
    )
    clock = Stopwatch(request.started)
    request = await asyncio.to_thread(embed_question, request)
    clock.lap("embed")
    pool = await fetch_pool(conn, request)
    clock.lap("stage_one")
    if request.reranker is None:
        evidence = finish_pack(request, pool, clock.laps)
    else:
        # The caller's model is CPU- or I/O-bound: not on the event loop.
        evidence = await asyncio.to_thread(finish_pack, request, pool, clock.laps)
    return await log_pack(conn, evidence) if request.log else evidence


async def ingest(
    conn: psycopg.AsyncConnection[Any],
    spans: Iterable[Span],
    *,
    namespace: str = "default",
    embedder: Embedder | str | None = None,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Write spans as immutable notes: :func:`pgmem.ingest` on an async connection.

    Same validation, enrichment, statements and single transaction (a savepoint inside
    the caller's); enrichment and embedding run in a worker thread, so ``progress`` is
    called from that thread.
    """
    model = await asyncio.to_thread(resolve_embedder, embedder)
    steps = write_spans(spans, namespace=namespace, embedder=model, enricher=enricher, progress=progress)
    return await drive_async(conn, steps)


async def bulk_load(
    conn: psycopg.AsyncConnection[Any],
    spans: Iterable[Span],
    *,
    namespace: str = "default",
    embedder: Embedder | str | None = None,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
    maintenance_work_mem: int | None = None,
    enrich_workers: int = 0,
) -> BulkLoadResult:
    """First load of a new namespace: :func:`pgmem.bulk_load` on an async connection.

    The same checks (the tables' owner only, a namespace without notes, the table to
    itself or a refusal at once), statements and single transaction; enrichment and
    embedding run in a worker thread, so ``progress`` is called from that thread.
    """
    model = await asyncio.to_thread(resolve_embedder, embedder)
    steps = bulk_load_steps(
        spans,
        namespace=namespace,
        embedder=model,
        enricher=enricher,
        progress=progress,
        maintenance_work_mem=maintenance_work_mem,
        enrich_workers=enrich_workers,
    )
    return await drive_async(conn, steps)


async def supersede(
    conn: psycopg.AsyncConnection[Any],
    spans: Iterable[Span],
    *,
    namespace: str,
    reason: str,
    embedder: Embedder | str | None = None,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Write spans, replacing the note on each same document span, audited:
    :func:`pgmem.supersede` on an async connection."""
    reason = check_reason(reason)
    model = await asyncio.to_thread(resolve_embedder, embedder)
    steps = write_spans(
        spans, namespace=namespace, embedder=model, enricher=enricher, progress=progress, supersede_reason=reason
    )
    return await drive_async(conn, steps)


async def forget(
    conn: psycopg.AsyncConnection[Any],
    *,
    namespace: str,
    reason: str,
    note_ids: Sequence[str] | None = None,
    document_id: str | None = None,
    family: str | None = None,
) -> ForgetResult:
    """Erase notes for good, with a reason: :func:`pgmem.forget` on an async connection."""
    statement = forget_statement(
        namespace=namespace, reason=reason, note_ids=note_ids, document_id=document_id, family=family
    )
    return forget_result(await fetch_async(conn, statement))


async def feedback(
    conn: psycopg.AsyncConnection[Any],
    *,
    namespace: str = "default",
    helpful: Iterable[str] | None = None,
    unhelpful: Iterable[str] | None = None,
    weight: float = 1.0,
    pack_id: str | None = None,
) -> FeedbackResult:
    """Record which packed notes helped: :func:`pgmem.feedback` on an async connection."""
    statement = feedback_statement(
        namespace=namespace, helpful=helpful, unhelpful=unhelpful, weight=weight, pack_id=pack_id
    )
    return feedback_result(statement, await fetch_async(conn, statement))


async def reset_feedback(
    conn: psycopg.AsyncConnection[Any], *, namespace: str, families: Sequence[str] | None = None
) -> int:
    """Forget the feedback of ``namespace``: :func:`pgmem.reset_feedback` on an async connection."""
    return reset_feedback_result(
        await fetch_async(conn, reset_feedback_statement(namespace=namespace, families=families))
    )


async def register_model(conn: psycopg.AsyncConnection[Any], embedder: Embedder | str | None = None) -> int:
    """Register an embedding model: :func:`pgmem.register_model` on an async connection."""
    model = await asyncio.to_thread(resolve_embedder, embedder)  # may load a model from disk
    return register_model_result(await fetch_async(conn, register_model_statement(model)))


async def bind_family(conn: psycopg.AsyncConnection[Any], *, namespace: str, family: str, roles: Sequence[str]) -> int:
    """Bind a family to writer roles: :func:`pgmem.bind_family` on an async connection."""
    return bind_family_result(
        await fetch_async(conn, bind_family_statement(namespace=namespace, family=family, roles=roles))
    )


async def unbind_family(
    conn: psycopg.AsyncConnection[Any], *, namespace: str, family: str, roles: Sequence[str] | None = None
) -> int:
    """Take writer roles off a family: :func:`pgmem.unbind_family` on an async connection."""
    return unbind_family_result(
        await fetch_async(conn, unbind_family_statement(namespace=namespace, family=family, roles=roles))
    )
