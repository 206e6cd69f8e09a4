"""Span → immutable note: validate, enrich, embed, link, then write in one transaction.

One document span holds one note. Re-ingesting a span with exactly what is stored is a
no-op; with other text or other caller-given fields it is refused (InputError naming
the span and the fields), unless the caller supersedes it (audited, in
``pgmem.supersede_audit``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb

from pgmem.db.errors import database_errors
from pgmem.db.queries import Statement
from pgmem.db.steps import Begin, Commit, Compute, Copy, Execute, Fetch, Steps
from pgmem.embeddings import Embedder, embed_unique
from pgmem.errors import InputError, SchemaError
from pgmem.ingestion.enricher import Enricher, Enrichment, RuleEnricher, SpanInput
from pgmem.ingestion.parallel import EnrichPool
from pgmem.ingestion.spans import MAX_CONTEXT_CHARS, MAX_SPAN_BYTES, ValidSpan, validate_span
from pgmem.params import ROLES
from pgmem.types import Span
from pgmem.validate import (
    CONFIDENCE_RULE,
    check_namespace,
    check_text,
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
#: The staging table's column types, in :func:`note_row`'s order, for the binary COPY
#: (the embedding's is the database's vector oid, read before the copy).
STAGING_TYPES: tuple[str, ...] = (
    "text", "uuid", "text", "text", "int4", "int4", "text", "text", "text", "text", "float4", "timestamptz",
    "int4", "vector", "jsonb", "jsonb", "text[]", "text[]", "uuid[]", "jsonb",
)  # fmt: skip


def staging_types(vector_oid: int, *extra: str) -> tuple[str | int, ...]:
    """:data:`STAGING_TYPES` with the vector oid, then the ``extra`` columns' types."""
    return tuple(vector_oid if name == "vector" else name for name in STAGING_TYPES) + extra


#: Entities weaker than this are not used to link notes.
LINK_ENTITY_CONFIDENCE = 0.6
#: Longest supersede reason kept in the audit table.
MAX_REASON_CHARS = 1_000
#: Conflicting spans named in one error message (the count of the rest follows).
NAMED_CONFLICTS = 5


@dataclass(frozen=True)
class IngestResult:
    """What an ingest call did: note ids in input order, and how many were new.

    ``superseded`` lists the note ids a :func:`pgmem.supersede` call replaced (empty
    for :func:`pgmem.ingest`).
    """

    note_ids: tuple[str, ...]
    inserted: int
    skipped: int
    superseded: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredNote:
    """The note stored on a span, as re-ingest compares it (its text as a digest)."""

    document_id: str
    span_start: int
    span_end: int
    note_id: str
    text_sha256: bytes
    family: str
    source_ts: datetime | None
    metadata: Any
    external_id: str | None
    context: str
    role: str
    confidence: float


SpanKey = tuple[str, int, int]


def _key(item: ValidSpan) -> SpanKey:
    return (item.span.document_id, item.span.start, item.span.end)


def _where(item: ValidSpan) -> str:
    return f"span {item.index} (document {item.span.document_id!r}, bytes {item.span.start}-{item.span.end})"


def dedupe(valid: list[ValidSpan], seen: dict[SpanKey, ValidSpan] | None = None) -> list[ValidSpan]:
    """Drop exact repeats of a span; refuse one document span given twice with different content.

    ``seen`` carries the spans of earlier chunks of the same batch (it is updated).
    """
    seen = {} if seen is None else seen
    unique: list[ValidSpan] = []
    for item in valid:
        first = seen.get(_key(item))
        if first is None:
            seen[_key(item)] = item
            unique.append(item)
        elif first.note_id != item.note_id:
            raise InputError(
                f"{_where(item)} covers the same document span as span {first.index} with different text;"
                " a span holds one note"
            )
        elif first.span != item.span:
            fields = [
                f.name for f in dataclasses.fields(Span) if getattr(first.span, f.name) != getattr(item.span, f.name)
            ]
            raise InputError(
                f"span {item.index} has the same note id as span {first.index} (same namespace, document,"
                f" offsets and text) but a different {', '.join(fields)}; a note is written once"
            )
    return unique


def _float32(value: float) -> float:
    return float(np.float32(value))


def _differences(item: ValidSpan, stored: StoredNote) -> list[str]:
    """The fields in which a span differs from the note stored on its span.

    Text, family, source_ts, metadata and external_id always count; role, confidence
    and context only when the caller gave them (derived values are not compared).
    """
    span = item.span
    given = {
        "text": hashlib.sha256(span.text.encode("utf-8")).digest() == bytes(stored.text_sha256),
        "family": span.family == stored.family,
        "source_ts": item.source_ts == stored.source_ts,
        # As the database holds it: JSON round-trips tuples to lists, numbers exactly.
        "metadata": json.loads(json.dumps(dict(item.metadata))) == stored.metadata,
        "external_id": span.external_id == stored.external_id,
        "context": span.context is None or span.context == stored.context,
        "role": span.role is None or span.role == stored.role,
        # real in the database: compare at single precision.
        "confidence": span.confidence is None or _float32(span.confidence) == _float32(stored.confidence),
    }
    return [name for name, same in given.items() if not same]


def _stored_notes(action: str, namespace: str, items: Sequence[ValidSpan]) -> Steps[dict[SpanKey, StoredNote]]:
    """The notes stored on the spans of ``items``, by span (one statement)."""
    arguments = {
        "namespace": namespace,
        "document_ids": [i.span.document_id for i in items],
        "starts": [i.span.start for i in items],
        "ends": [i.span.end for i in items],
    }
    rows = yield Fetch(Statement(action, "stored_spans", arguments))
    notes = [StoredNote(**row) for row in rows]
    return {(r.document_id, r.span_start, r.span_end): r for r in notes}


def _refusal(action: str, conflicts: list[str]) -> InputError:
    named = "; ".join(conflicts[:NAMED_CONFLICTS])
    more = f"; and {len(conflicts) - NAMED_CONFLICTS} more" if len(conflicts) > NAMED_CONFLICTS else ""
    return InputError(
        f"{action}: {len(conflicts)} span(s) refused, nothing written: {named}{more}. Re-ingest never changes a"
        " stored note; replace it with pgmem.supersede(conn, spans, namespace=..., reason=...) (audited)"
    )


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


def _local_links(action: str, namespace: str, batch: list[ValidSpan], gone: set[str]) -> Steps[dict[str, list[str]]]:
    """Previous and next span of the same document, among the batch and the store
    (except the notes in ``gone``, which the batch replaces)."""
    documents = sorted({v.span.document_id for v in batch})
    positions: dict[str, dict[str, int]] = {doc: {} for doc in documents}
    rows = yield Fetch(Statement(action, "document_neighbours", {"namespace": namespace, "document_ids": documents}))
    for row in rows:
        if str(row["note_id"]) not in gone:
            positions[row["document_id"]][str(row["note_id"])] = row["span_start"]
    for item in batch:
        positions[item.span.document_id][item.note_id] = item.span.start
    links: dict[str, list[str]] = {}
    for members in positions.values():
        ordered = sorted(members, key=lambda nid: (members[nid], nid))
        for i, nid in enumerate(ordered):
            links[nid] = [ordered[j] for j in (i - 1, i + 1) if 0 <= j < len(ordered)]
    return links


def link_keys(facets: Enrichment) -> set[tuple[str, str]]:
    """A note's rare-key link candidates: ("handle", h) and ("entity", text) of its confident entities."""
    keys = {("handle", h) for h in facets.handles}
    keys |= {("entity", e.text) for e in facets.entities if e.confidence >= LINK_ENTITY_CONFIDENCE}
    return keys


def _shared_key_links(
    action: str, namespace: str, batch: list[ValidSpan], facets: list[Enrichment], gone: set[str]
) -> Steps[dict[str, list[str]]]:
    """Notes of the namespace (stored or in the batch, not in ``gone``) sharing a rare
    handle or entity."""
    keys_of = {item.note_id: link_keys(facet) for item, facet in zip(batch, facets, strict=True)}
    holders: dict[tuple[str, str], set[str]] = {}
    for note_id, keys in keys_of.items():
        for key in keys:
            holders.setdefault(key, set()).add(note_id)
    for kind, statement in (("handle", "handle_holders"), ("entity", "entity_holders")):
        wanted = sorted(key for k, key in holders if k == kind)
        if not wanted:
            continue
        rows = yield Fetch(
            Statement(action, statement, {"namespace": namespace, "keys": wanted, "limit": RARE_KEY_NOTES + 1})
        )
        for row in rows:
            if str(row["note_id"]) not in gone:
                holders[(kind, row["key"])].add(str(row["note_id"]))
    links: dict[str, list[str]] = {}
    for note_id, keys in keys_of.items():
        partners = set()
        for key in keys:
            if len(holders[key]) <= RARE_KEY_NOTES:
                partners |= holders[key]
        partners.discard(note_id)
        links[note_id] = sorted(partners)[:MAX_KEY_LINKS]
    return links


def register_namespace(action: str, namespace: str, embedder: Embedder) -> Steps[tuple[int, int]]:
    """Bind ``namespace`` to the embedder's model (created if new): the model's id, and the
    oid of the vector type the staging table takes (for the binary COPY)."""
    rows = yield Fetch(
        Statement(
            action,
            "register_namespace",
            {"namespace": namespace, "model": embedder.name, "dimension": embedder.dimension},
        )
    )
    if not rows:
        raise SchemaError(f"{action}: pgmem.register_namespace_v1 returned no model id")
    return int(rows[0]["model_id"]), int(rows[0]["vector_oid"])


def note_row(
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
        uuid.UUID(item.note_id),
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
        vector,
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
        [uuid.UUID(link) for link in links],
        Jsonb(item.metadata),
    )


def check_reason(reason: object) -> str:
    """A supersede reason as the audit table keeps it, else InputError."""
    return check_text("supersede: reason", reason, max_chars=MAX_REASON_CHARS)


def _verify_skipped(namespace: str, action: str, skipped: list[ValidSpan]) -> Steps[None]:
    """Spans the insert skipped were taken by a concurrent writer: they must now hold
    exactly what was given, else the batch is refused like any conflict."""
    if not skipped:
        return
    stored = yield from _stored_notes(action, namespace, skipped)
    conflicts = []
    for item in skipped:
        note = stored.get(_key(item))
        if note is None:
            conflicts.append(f"{_where(item)}: its note id {item.note_id} is already taken by a note on another span")
        elif fields := _differences(item, note):
            conflicts.append(
                f"{_where(item)}: note {note.note_id} with a different {', '.join(fields)} was written concurrently"
            )
    if conflicts:
        raise _refusal(action, conflicts)


def span_input(item: ValidSpan) -> SpanInput:
    """What the enricher sees of a validated span."""
    span = item.span
    return SpanInput(
        text=span.text,
        family=span.family,
        source_ts=item.source_ts,
        role=span.role,
        confidence=span.confidence,
        context=span.context,
        metadata=item.metadata,
    )


def enrich_and_embed(
    fresh: Sequence[ValidSpan],
    enricher: Enricher,
    embedder: Embedder,
    progress: Callable[[int], None] | None = None,
    pool: EnrichPool | None = None,
) -> tuple[list[Enrichment], np.ndarray]:
    """The CPU part of a write: each span's facets (checked) and its vector, in chunks;
    with ``pool``, the facets are computed by it (the enricher in several processes)."""
    inputs = [span_input(v) for v in fresh]
    enriched = pool.enrich(inputs) if pool is not None else [enricher.enrich(span) for span in inputs]
    facets = [_checked(v, facet) for v, facet in zip(fresh, enriched, strict=True)]
    chunks: list[np.ndarray] = []
    for start in range(0, len(fresh), CHUNK):
        chunks.append(embed_unique(embedder, [v.span.text for v in fresh[start : start + CHUNK]]))
        if progress is not None:
            progress(len(chunks[-1]))
    return facets, np.concatenate(chunks)


def write(
    spans: Iterable[Span],
    *,
    namespace: str,
    embedder: Embedder,
    enricher: Enricher | None = None,
    progress: Callable[[int], None] | None = None,
    supersede_reason: str | None = None,
) -> Steps[IngestResult]:
    """Write spans as immutable notes; the whole batch is one transaction.

    A generator of I/O steps (:mod:`pgmem.db.steps`): :func:`pgmem.ingest` drives it on
    a connection, :func:`pgmem.aio.ingest` on an async one. With ``supersede_reason`` a
    span whose stored note differs replaces it (one audited request per note); without,
    such a span refuses the batch. See :func:`pgmem.ingest` and :func:`pgmem.supersede`
    for the public documentation.
    """
    action = "ingest" if supersede_reason is None else "supersede"
    check_namespace(namespace)
    if supersede_reason is not None:
        check_reason(supersede_reason)
    batch = list(spans)
    checked = [validate_span(i, span, namespace) for i, span in enumerate(batch)]
    valid = dedupe(checked)
    if not valid:
        return IngestResult((), 0, 0)
    with database_errors(action):
        # Spans already stored are decided before the expensive part (enrich, embed):
        # re-ingesting a corpus costs one indexed lookup per span, not a re-embedding.
        stored = yield from _stored_notes(action, namespace, valid)
    fresh: list[ValidSpan] = []
    replaced: dict[str, StoredNote] = {}
    conflicts: list[str] = []
    for item in valid:
        note = stored.get(_key(item))
        fields = [] if note is None else _differences(item, note)
        if note is not None and not fields:
            continue  # exactly what is stored: a no-op
        if note is not None and supersede_reason is None:
            conflicts.append(
                f"{_where(item)}: namespace {namespace!r} holds note {note.note_id}"
                f" with a different {', '.join(fields)}"
            )
            continue
        if note is not None:
            replaced[item.note_id] = note
        fresh.append(item)
    if conflicts:
        raise _refusal(action, conflicts)
    if not fresh:
        return IngestResult(note_ids=tuple(v.note_id for v in checked), inserted=0, skipped=len(valid))
    facets, vectors = yield Compute(enrich_and_embed, (fresh, enricher or RuleEnricher(), embedder, progress))
    # Notes being replaced are no neighbours or link partners of their replacements.
    gone = {note.note_id for note in replaced.values()} - {v.note_id for v in fresh}

    with database_errors(action):
        # A read first: on a non-autocommit connection it opens the caller's transaction,
        # so the block below becomes a savepoint inside it and the commit stays theirs.
        # On an autocommit connection the block is the batch's own transaction.
        links = yield from _local_links(action, namespace, fresh, gone)
        shared = yield from _shared_key_links(action, namespace, fresh, facets, gone)
        for note_id, partners in shared.items():
            links[note_id] = links[note_id] + [p for p in partners if p not in links[note_id]]
        yield Begin()
        model_id, vector_oid = yield from register_namespace(action, namespace, embedder)
        if replaced:
            requests = [(new_id, note) for new_id, note in replaced.items()]
            yield Execute(
                Statement(
                    action,
                    "request_supersede",
                    {
                        "namespace": namespace,
                        "reason": supersede_reason,
                        "old_note_ids": [note.note_id for _, note in requests],
                        "new_note_ids": [new_id for new_id, _ in requests],
                        "document_ids": [note.document_id for _, note in requests],
                        "starts": [note.span_start for _, note in requests],
                        "ends": [note.span_end for _, note in requests],
                    },
                )
            )
        yield Execute(Statement(action, "create_staging", {}))
        yield Copy(
            "copy_staging",
            (
                note_row(namespace, model_id, item, facet, vector, links[item.note_id])
                for item, facet, vector in zip(fresh, facets, vectors, strict=True)
            ),
            staging_types(vector_oid),
            vector_oid,
        )
        inserted = yield Fetch(Statement(action, "insert_from_staging", {}))
        written = {str(row["note_id"]) for row in inserted}
        yield from _verify_skipped(namespace, action, [v for v in fresh if v.note_id not in written])
        yield Execute(Statement(action, "drop_staging", {}))
        yield Commit()
    return IngestResult(
        note_ids=tuple(v.note_id for v in checked),
        inserted=len(written),
        skipped=len(valid) - len(written),
        superseded=tuple(note.note_id for note in replaced.values()),
    )
