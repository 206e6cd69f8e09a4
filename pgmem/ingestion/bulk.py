"""Bulk first load: write a new namespace's notes with the table's indexes built once.

:func:`pgmem.bulk_load` writes what one :func:`pgmem.ingest` call with every span
would write (same notes, links, postings and statistics: the insert triggers fire once,
on one statement), but drops ``pgmem.notes``' secondary indexes that the load would
update row by row (the namespace model's HNSW index and the GIN and external-id
indexes) and builds them again at the end, in the same transaction. See
docs/performance.md ("Bulk first load") for what it costs and measures.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from psycopg import errors as pg_errors
from psycopg import sql

from pgmem.db.errors import database_errors
from pgmem.db.queries import Statement
from pgmem.db.steps import Begin, Commit, Compute, Copy, Execute, Fetch, Script, Steps
from pgmem.embeddings import Embedder
from pgmem.errors import DatabaseError, InputError, SchemaError
from pgmem.ingestion.enricher import Enricher, Enrichment, RuleEnricher
from pgmem.ingestion.parallel import EnrichPool, check_enrich_workers
from pgmem.ingestion.spans import ValidSpan, validate_span
from pgmem.ingestion.writer import (
    CHUNK,
    MAX_KEY_LINKS,
    RARE_KEY_NOTES,
    SpanKey,
    dedupe,
    enrich_and_embed,
    link_keys,
    note_row,
    register_namespace,
    staging_types,
)
from pgmem.types import Span
from pgmem.validate import check_namespace, whole

ACTION = "bulk_load"
#: Spans validated, enriched, embedded and copied per round (memory stays bounded).
BULK_CHUNK = 10_000
#: Bytes an HNSW graph element takes beyond its vector (pgvector's m = 16: neighbour
#: lists of two layers on average, tuple headers), for sizing maintenance_work_mem.
HNSW_ELEMENT_OVERHEAD = 400
#: maintenance_work_mem is raised to the HNSW graph's estimate times this margin.
HNSW_MEMORY_MARGIN = 1.25

__all__ = ["BulkLoadResult", "bulk_load_steps"]


@dataclass(frozen=True)
class BulkLoadResult:
    """What :func:`pgmem.bulk_load` wrote and where its time went.

    Attributes
    ----------
    note_ids : tuple of str
        Note ids in input order (a span given twice appears twice).
    inserted : int
        Notes written.
    seconds : dict
        Wall time per phase: ``prepare`` (checks, lock, dropping indexes), ``write``
        (validate, enrich, embed and copy to staging), ``insert`` (links, the insert
        and its triggers: postings and statistics), ``indexes`` (all rebuilds),
        ``analyze`` and ``total``.
    indexes : dict
        Seconds spent building each rebuilt index, by index name.
    maintenance_work_mem : str
        The setting the index builds ran with.
    """

    note_ids: tuple[str, ...]
    inserted: int
    seconds: dict[str, float] = field(default_factory=dict)
    indexes: dict[str, float] = field(default_factory=dict)
    maintenance_work_mem: str = ""


def _one(name: str, params: dict[str, Any] | None = None) -> Steps[Any]:
    """The first value of the one row statement ``name`` returns."""
    rows = yield Fetch(Statement(ACTION, name, params or {}))
    if not rows:
        raise SchemaError(f"{ACTION}: statement {name} returned no row")
    return next(iter(rows[0].values()))


def _check_owner() -> Steps[None]:
    """Refuse a caller who does not own pgmem.notes (the load drops and builds its indexes)."""
    rows = yield Fetch(Statement(ACTION, "bulk_load_owner", {}))
    if not rows:
        raise SchemaError(f"{ACTION}: pgmem.notes does not exist; run pgmem.migrate(conn) first")
    row = rows[0]
    if not row["is_owner"]:
        raise DatabaseError(
            f"{ACTION}: role {row['current_user']!r} does not own pgmem.notes (owner: {row['owner']!r}); a bulk"
            " load drops and rebuilds the table's indexes, which only its owner may do. Writers and admins"
            " write with pgmem.ingest"
        )


def _lock() -> Steps[None]:
    """Take pgmem.notes and its statistics tables exclusively, or refuse at once."""
    try:
        yield Execute(Statement(ACTION, "bulk_load_lock", {}))
    except pg_errors.LockNotAvailable as exc:
        raise DatabaseError(
            f"{ACTION}: other sessions are using pgmem.notes (an open transaction holds a lock on it); a bulk"
            " load needs the table to itself while it rebuilds the indexes every namespace shares. Retry when"
            " they are done, or write with pgmem.ingest"
        ) from exc


def _estimate_memory(rows: int, dimension: int) -> int:
    """Bytes of maintenance_work_mem an in-memory HNSW build of ``rows`` vectors needs."""
    return math.ceil(rows * (4 * dimension + HNSW_ELEMENT_OVERHEAD) * HNSW_MEMORY_MARGIN)


def _validated(
    spans: Iterable[Span], namespace: str, seen: dict[SpanKey, ValidSpan]
) -> Iterator[tuple[list[ValidSpan], list[ValidSpan]]]:
    """Chunks of validated spans, and of those among them not seen before (repeats dropped)."""
    chunk: list[ValidSpan] = []
    for index, span in enumerate(spans):
        chunk.append(validate_span(index, span, namespace))
        if len(chunk) == BULK_CHUNK:
            yield chunk, dedupe(chunk, seen)
            chunk = []
    if chunk:
        yield chunk, dedupe(chunk, seen)


def _staged_keys(facets: Enrichment) -> list[str]:
    """:func:`link_keys` as the staging table holds them ('h ' / 'e ' + text)."""
    return sorted(kind[0] + " " + text for kind, text in link_keys(facets))


def bulk_load_steps(
    spans: Iterable[Span],
    *,
    namespace: str,
    embedder: Embedder,
    enricher: Enricher | None,
    progress: Callable[[int], None] | None,
    maintenance_work_mem: int | None,
    enrich_workers: int = 0,
) -> Steps[BulkLoadResult]:
    """The body of :func:`pgmem.bulk_load` (documented there), as steps for either driver."""
    check_namespace(namespace)
    if maintenance_work_mem is not None:
        whole(f"{ACTION}: maintenance_work_mem", maintenance_work_mem, 1 << 20, 1 << 40)
    enricher = enricher or RuleEnricher()
    check_enrich_workers(enrich_workers, enricher)
    seconds: dict[str, float] = {}
    started = tick = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal tick
        now = time.perf_counter()
        seconds[phase] = round(now - tick, 3)
        tick = now

    with database_errors(ACTION):
        yield Begin()
        yield from _check_owner()
        yield from _lock()
        model_id, vector_oid = yield from register_namespace(ACTION, namespace, embedder)
        if (yield from _one("bulk_load_namespace_used", {"namespace": namespace})):
            raise InputError(
                f"{ACTION}: namespace {namespace!r} already holds notes; a bulk load writes a new namespace"
                " only (add to it with pgmem.ingest)"
            )
        dropped = yield Fetch(Statement(ACTION, "bulk_load_deferred_indexes", {"model_id": model_id}))
        for index in dropped:
            yield Script(sql.SQL("DROP INDEX pgmem.{}").format(sql.Identifier(index["name"])))
        yield Execute(Statement(ACTION, "create_staging", {}))
        yield Execute(Statement(ACTION, "bulk_load_staging_keys", {}))
        lap("prepare")

        seen: dict[SpanKey, ValidSpan] = {}
        order: list[str] = []
        # Worker processes, when asked for, enrich beside this one; stopped however the load ends.
        with EnrichPool(enricher, enrich_workers) if enrich_workers else nullcontext() as pool:
            for checked, fresh in _validated(spans, namespace, seen):
                order.extend(item.note_id for item in checked)
                for start in range(0, len(fresh), CHUNK * 8):
                    part = fresh[start : start + CHUNK * 8]
                    facets, vectors = yield Compute(enrich_and_embed, (part, enricher, embedder, progress, pool))
                    yield Copy(
                        "bulk_load_copy",
                        (
                            (*note_row(namespace, model_id, item, facet, vector, []), _staged_keys(facet))
                            for item, facet, vector in zip(part, facets, vectors, strict=True)
                        ),
                        staging_types(vector_oid, "text[]"),
                        vector_oid,
                    )
        lap("write")

        inserted = int((yield from _one("bulk_load_insert", {"rare": RARE_KEY_NOTES, "max_links": MAX_KEY_LINKS})))
        yield Execute(Statement(ACTION, "drop_staging", {}))
        lap("insert")

        # The caller's value as given; else the estimate, when it exceeds the server's.
        memory = maintenance_work_mem or _estimate_memory(inserted, embedder.dimension)
        if maintenance_work_mem is not None or memory > int((yield from _one("bulk_load_memory"))):
            yield Fetch(Statement(ACTION, "bulk_load_set_memory", {"setting": f"{memory // 1024}kB"}))
        setting = str((yield from _one("bulk_load_memory_setting")))
        built: dict[str, float] = {}
        for index in dropped:
            began = time.perf_counter()
            # The server's own pg_get_indexdef text, as it was before the load.
            yield Script(sql.SQL(index["definition"]))
            built[index["name"]] = round(time.perf_counter() - began, 3)
        lap("indexes")
        # The first-load ANALYZE of the insert trigger ran before the indexes existed;
        # the planner now needs the new row counts and the HNSW expression's statistics.
        yield Execute(Statement(ACTION, "bulk_load_analyze", {}))
        lap("analyze")
        yield Commit()
    seconds["total"] = round(time.perf_counter() - started, 3)
    return BulkLoadResult(
        note_ids=tuple(order), inserted=inserted, seconds=seconds, indexes=built, maintenance_work_mem=setting
    )
