"""Span → immutable note: validate, enrich, embed, link, then write in one transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from pgmem.db.errors import database_errors
from pgmem.db.queries import query
from pgmem.db.vectors import vector_literal
from pgmem.embeddings import Embedder, embed_unique
from pgmem.errors import InputError, SchemaError
from pgmem.ingest.enricher import Enricher, Enrichment, RuleEnricher, SpanInput
from pgmem.ingest.spans import MAX_CONTEXT_CHARS, MAX_SPAN_BYTES, ValidSpan, validate_span
from pgmem.params import ROLES
from pgmem.types import Span
from pgmem.validate import (
    CONFIDENCE_RULE,
    check_namespace,
    describe_value,
    invalid_confidence,
    text_problem,
    timestamp_problem,
)

#: Spans embedded and copied per chunk; a batch of any size is still one transaction.
CHUNK = 256
#: A handle or entity carried by at most this many notes of a namespace is rare enough
#: to link the notes that share it; a common one ("Monday", a company's own name) is not.
RARE_KEY_NOTES = 5
#: At most this many links per note through shared rare keys (lowest note ids first).
MAX_KEY_LINKS = 3
#: Entities weaker than this are not used to link notes.
LINK_ENTITY_CONFIDENCE = 0.6


@dataclass(frozen=True)
class IngestResult:
    """What an ingest call did: note ids in input order, and how many were new."""

    note_ids: tuple[str, ...]
    inserted: int
    skipped: int


def _dedupe(valid: list[ValidSpan]) -> list[ValidSpan]:
    """Drop exact repeats of a span; refuse one note id carried by different content."""
    seen: dict[str, ValidSpan] = {}
    unique: list[ValidSpan] = []
    for item in valid:
        first = seen.get(item.note_id)
        if first is None:
            seen[item.note_id] = item
            unique.append(item)
        elif first.span != item.span:
            raise InputError(
                f"span {item.index} has the same note id as span {first.index} (same namespace,"
                " document, offsets and text) but different family, role, confidence, context,"
                " source_ts, external_id or metadata; a note is written once"
            )
    return unique


def _checked(item: ValidSpan, facets: Enrichment) -> Enrichment:
    """An enricher's output, checked before it reaches the database (a custom enricher
    is caller code: its mistakes get the same clear errors as a bad span)."""
    where = f"span {item.index}: the enricher returned"
    if facets.role not in ROLES:
        raise InputError(f"{where} role {describe_value(facets.role)}; roles are {', '.join(ROLES)}")
    c = facets.confidence
    if invalid_confidence(c):
        raise InputError(f"{where} confidence {describe_value(c)}; it {CONFIDENCE_RULE}")
    if not isinstance(facets.context, str) or text_problem(facets.context, max_chars=MAX_CONTEXT_CHARS, optional=True):
        raise InputError(f"{where} an invalid context (a string of at most {MAX_CONTEXT_CHARS} characters, no NUL)")
    for entity in facets.entities:
        text, confidence = entity.text, entity.confidence
        text_ok = isinstance(text, str) and not text_problem(text, max_chars=MAX_SPAN_BYTES, optional=True)
        if not text_ok or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
            raise InputError(
                f"{where} entity {describe_value(text)} with confidence {describe_value(confidence)}: it must be"
                " valid text with a confidence in [0, 1]"
            )
    for tag in facets.time_tags:
        bounds = (tag.start, tag.end)
        if (
            not all(isinstance(bound, datetime) and not timestamp_problem(bound) for bound in bounds)
            or tag.end <= tag.start
            or not isinstance(tag.confidence, int | float)
            or not 0 <= tag.confidence <= 1
        ):
            raise InputError(
                f"{where} an invalid time tag {describe_value(tag.text)} (aware datetimes PostgreSQL can store,"
                " end after start, confidence in [0, 1])"
            )
    for value in (*facets.keywords, *facets.handles):
        if not isinstance(value, str) or text_problem(value, max_chars=MAX_SPAN_BYTES, optional=True):
            raise InputError(f"{where} a keyword or handle that is not valid text: {describe_value(value)}")
    return facets


def _local_links(conn: psycopg.Connection[Any], namespace: str, batch: list[ValidSpan]) -> dict[str, list[str]]:
    """Previous and next span of the same document, among the batch and the store."""
    documents = sorted({v.span.document_id for v in batch})
    positions: dict[str, dict[str, int]] = {doc: {} for doc in documents}
    rows = conn.execute(query("document_neighbours"), {"namespace": namespace, "document_ids": documents})
    for document_id, start, existing_id in rows:
        positions[document_id][str(existing_id)] = start
    for item in batch:
        positions[item.span.document_id][item.note_id] = item.span.start
    links: dict[str, list[str]] = {}
    for members in positions.values():
        ordered = sorted(members, key=lambda nid: (members[nid], nid))
        for i, nid in enumerate(ordered):
            links[nid] = [ordered[j] for j in (i - 1, i + 1) if 0 <= j < len(ordered)]
    return links


def _link_keys(facets: Enrichment) -> set[tuple[str, str]]:
    keys = {("handle", h) for h in facets.handles}
    keys |= {("entity", e.text) for e in facets.entities if e.confidence >= LINK_ENTITY_CONFIDENCE}
    return keys


def _shared_key_links(
    conn: psycopg.Connection[Any], namespace: str, batch: list[ValidSpan], facets: list[Enrichment]
) -> dict[str, list[str]]:
    """Notes of the namespace (stored or in the batch) sharing a rare handle or entity."""
    keys_of = {item.note_id: _link_keys(facet) for item, facet in zip(batch, facets, strict=True)}
    holders: dict[tuple[str, str], set[str]] = {}
    for note_id, keys in keys_of.items():
        for key in keys:
            holders.setdefault(key, set()).add(note_id)
    for kind, statement in (("handle", "handle_holders"), ("entity", "entity_holders")):
        wanted = sorted(key for k, key in holders if k == kind)
        if not wanted:
            continue
        rows = conn.execute(query(statement), {"namespace": namespace, "keys": wanted, "limit": RARE_KEY_NOTES + 1})
        for key, note_id in rows:
            holders[(kind, key)].add(str(note_id))
    links: dict[str, list[str]] = {}
    for note_id, keys in keys_of.items():
        partners = set()
        for key in keys:
            if len(holders[key]) <= RARE_KEY_NOTES:
                partners |= holders[key]
        partners.discard(note_id)
        links[note_id] = sorted(partners)[:MAX_KEY_LINKS]
    return links


def _row(
    namespace: str,
    model_id: int,
    item: ValidSpan,
    facets: Enrichment,
    vector: np.ndarray,
    links: list[str],
) -> tuple[Any, ...]:
    span = item.span
    return (
        namespace,
        item.note_id,
        span.external_id,
        span.document_id,
        span.start,
        span.end,
        span.text,
        facets.context,
        span.family,
        facets.role,
        facets.confidence,
        item.source_ts,
        model_id,
        vector_literal(vector),
        Jsonb([{"text": e.text, "confidence": e.confidence} for e in facets.entities]),
        Jsonb(
            [
                {
                    "text": t.text,
                    "start": t.start.isoformat(),
                    "end": t.end.isoformat(),
                    "granularity": t.granularity,
                    "confidence": t.confidence,
                }
                for t in facets.time_tags
            ]
        ),
        list(facets.keywords),
        list(facets.handles),
        links,
        Jsonb(item.metadata),
    )


def ingest(
    conn: psycopg.Connection[Any],
    spans: Iterable[Span],
    *,
    namespace: str,
    embedder: Embedder,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Write spans as immutable notes; the whole batch is one transaction.

    See :func:`pgmem.ingest` for the public documentation.
    """
    check_namespace(namespace)
    batch = list(spans)
    checked = [validate_span(i, span, namespace) for i, span in enumerate(batch)]
    valid = _dedupe(checked)
    if not valid:
        return IngestResult((), 0, 0)
    with database_errors("ingest"):
        # Notes already stored are skipped before the expensive part (enrich, embed):
        # re-ingesting a corpus costs one indexed lookup, not a re-embedding.
        stored = {
            str(row[0])
            for row in conn.execute(
                query("existing_note_ids"),
                {"namespace": namespace, "note_ids": [v.note_id for v in valid]},
            )
        }
    fresh = [v for v in valid if v.note_id not in stored]
    if not fresh:
        return IngestResult(note_ids=tuple(v.note_id for v in checked), inserted=0, skipped=len(valid))
    enricher = enricher or RuleEnricher()
    facets = [
        _checked(
            v,
            enricher.enrich(
                SpanInput(
                    text=v.span.text,
                    family=v.span.family,
                    source_ts=v.source_ts,
                    role=v.span.role,
                    confidence=v.span.confidence,
                    context=v.span.context,
                    metadata=v.metadata,
                ),
            ),
        )
        for v in fresh
    ]
    chunks: list[np.ndarray] = []
    for start in range(0, len(fresh), CHUNK):
        chunks.append(embed_unique(embedder, [v.span.text for v in fresh[start : start + CHUNK]]))
        if progress is not None:
            progress(len(chunks[-1]))
    vectors = np.concatenate(chunks)

    with database_errors("ingest"):
        # A read first: on a non-autocommit connection it opens the caller's transaction,
        # so the block below becomes a savepoint inside it and the commit stays theirs.
        # On an autocommit connection the block is the batch's own transaction.
        links = _local_links(conn, namespace, fresh)
        for note_id, partners in _shared_key_links(conn, namespace, fresh, facets).items():
            links[note_id] = links[note_id] + [p for p in partners if p not in links[note_id]]
        with conn.transaction():
            model_row = conn.execute(
                query("register_namespace"),
                {"namespace": namespace, "model": embedder.name, "dimension": embedder.dimension},
            ).fetchone()
            if model_row is None:
                raise SchemaError("pgmem.register_namespace_v1 returned no model id")
            model_id = int(model_row[0])
            conn.execute(query("create_staging"))
            with conn.cursor().copy(query("copy_staging")) as copy:
                for item, facet, vector in zip(fresh, facets, vectors, strict=True):
                    copy.write_row(_row(namespace, model_id, item, facet, vector, links[item.note_id]))
            inserted = conn.execute(query("insert_from_staging")).rowcount
            conn.execute(query("drop_staging"))
    return IngestResult(note_ids=tuple(v.note_id for v in checked), inserted=inserted, skipped=len(valid) - inserted)
