"""What every integration shares: borrowing a connection, item metadata, notes by id,
and framework documents as spans. Imports no framework."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

import psycopg

from pgmem.aio import pack as async_pack
from pgmem.api import pack
from pgmem.db.errors import database_errors
from pgmem.db.queries import run
from pgmem.errors import ConfigurationError, InputError
from pgmem.ingestion.sources import SplitConfig, spans_from_text
from pgmem.ingestion.spans import MAX_ID_CHARS
from pgmem.operations import _note_ids
from pgmem.types import Citation, Pack, PackItem, Span, jsonable
from pgmem.validate import check_namespace, check_text, describe_value, whole

#: Most notes one read returns (a recall names a few; a reader loads a document).
MAX_READ_NOTES = 10_000

#: pack() keywords a retriever sets itself, so its pack options may not.
_OWN_KEYWORDS = frozenset({"conn", "question", "namespace", "budget"})
PACK_OPTIONS = frozenset(inspect.signature(pack).parameters) - _OWN_KEYWORDS


@contextmanager
def borrow(source: Any) -> Iterator[psycopg.Connection[Any]]:
    """A connection from ``source``: a psycopg Connection (used as it is, never closed)
    or a psycopg_pool ConnectionPool (one connection for the block, then returned)."""
    if isinstance(source, psycopg.Connection):
        yield source
    elif not isinstance(source, psycopg.AsyncConnection) and callable(getattr(source, "connection", None)):
        with source.connection() as conn:
            yield conn
    else:
        raise ConfigurationError(
            f"connection must be a psycopg.Connection or a psycopg_pool.ConnectionPool, got {type(source).__name__}"
        )


@asynccontextmanager
async def aborrow(source: Any) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """As :func:`borrow`, for a psycopg AsyncConnection or a psycopg_pool AsyncConnectionPool."""
    if isinstance(source, psycopg.AsyncConnection):
        yield source
    elif not isinstance(source, psycopg.Connection) and callable(getattr(source, "connection", None)):
        async with source.connection() as conn:
            yield conn
    else:
        raise ConfigurationError(
            "async_connection must be a psycopg.AsyncConnection or a psycopg_pool.AsyncConnectionPool,"
            f" got {type(source).__name__}"
        )


@dataclass(frozen=True)
class Packer:
    """What a retriever packs with: its connections, namespace, budget and other
    :func:`pgmem.pack` keywords; checked once, when the retriever is built.

    Without an async connection, :meth:`apack` runs the sync pack in a worker thread.
    """

    connection: Any
    async_connection: Any
    namespace: str
    budget: int
    options: Mapping[str, Any]

    def __post_init__(self) -> None:
        check_namespace(self.namespace)
        whole("budget", self.budget, 1, 1000)  # PackParams' range, checked before the first call
        if self.connection is None and self.async_connection is None:
            raise ConfigurationError("a pgmem retriever needs a connection (or an async_connection)")
        if not isinstance(self.options, Mapping):
            raise ConfigurationError(
                f"pack_options must be a dict of pgmem.pack keywords, got {describe_value(self.options)}"
            )
        unknown = sorted(set(self.options) - PACK_OPTIONS)
        if unknown:
            raise ConfigurationError(
                f"pack_options has {describe_value(unknown)}, which pgmem.pack does not take here;"
                f" namespace and budget are the retriever's own, the others are {sorted(PACK_OPTIONS)}"
            )

    def pack(self, question: str) -> Pack:
        if self.connection is None:
            raise ConfigurationError("this pgmem retriever has no connection for sync calls, only an async_connection")
        with borrow(self.connection) as conn:
            return pack(conn, question, namespace=self.namespace, budget=self.budget, **self.options)

    async def apack(self, question: str) -> Pack:
        if self.async_connection is None:
            return await asyncio.to_thread(self.pack, question)
        async with aborrow(self.async_connection) as aconn:
            return await async_pack(aconn, question, namespace=self.namespace, budget=self.budget, **self.options)


def item_scores(item: PackItem) -> dict[str, float]:
    """Every score pgmem computed for a packed note (DESIGN §3), by name."""
    return {
        "final": item.final_score,
        "decayed": item.decayed_score,
        "base": item.base_score,
        "normalized": item.normalized_score,
        "regularizer": item.regularizer,
        "dense": item.dense_score,
        "lexical": item.lexical_score,
        "facet_boost": item.facet_boost,
        "link_boost": item.link_boost,
        "max_overlap": item.max_overlap,
        **{f"{name}_boost": value for name, value in item.boosts.items() if name != "link"},
    }


def pack_summary(evidence: Pack) -> dict[str, Any]:
    """The pack-level diagnostics every retrieved document carries (JSON-ready)."""
    d = evidence.diagnostics
    summary: dict[str, Any] = jsonable(
        {
            "query": evidence.query,
            "pack_id": evidence.pack_id,
            "namespace": d.namespace,
            "mode": d.mode,
            "degraded": d.degraded,
            "degraded_reasons": list(d.degraded_reasons),
            "pool_size": d.pool_size,
            "pool_mean": d.pool_mean,
            "pool_variance": d.pool_variance,
            "entropy": d.entropy,
            "embedding_model": d.embedding_model,
            "items": len(evidence.items),
            "rejections": len(d.rejections),
        }
    )
    return summary


def item_metadata(item: PackItem, evidence: Pack) -> dict[str, Any]:
    """A packed note's grounding, scores and diagnostics as JSON-ready metadata.

    ``citation`` is ``document_id[start:end]`` (UTF-8 byte offsets); ``scores`` holds
    every score of :class:`pgmem.PackItem`; ``pack`` the pack's diagnostics
    (:func:`pack_summary`); ``family_calibration`` the calibration record of the
    note's family (absent when the family was not calibrated).
    """
    families = {record.family: record for record in evidence.diagnostics.families}
    metadata: dict[str, Any] = {
        "note_id": item.note_id,
        "external_id": item.external_id,
        "document_id": item.document_id,
        "citation": str(item.citation),
        "span_start": item.citation.start,
        "span_end": item.citation.end,
        "family": item.family,
        "role": item.role,
        "confidence": item.confidence,
        "context": item.context,
        "source_ts": item.source_ts,
        "rank": item.rank,
        "score": item.final_score,
        "scores": item_scores(item),
        "pack": pack_summary(evidence),
    }
    if item.family in families:
        metadata["family_calibration"] = asdict(families[item.family])
    ready: dict[str, Any] = jsonable(metadata)
    return ready


@dataclass(frozen=True)
class StoredNote:
    """A note read back by id or document (the integrations' recall and readers)."""

    note_id: str
    external_id: str | None
    document_id: str
    citation: Citation
    text: str
    context: str
    family: str
    role: str
    confidence: float
    source_ts: datetime | None
    metadata: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, the citation as ``document_id[start:end]``."""
        fields = asdict(self)
        fields["citation"] = str(self.citation)
        ready: dict[str, Any] = jsonable(fields)
        return ready


def read_notes(
    conn: psycopg.Connection[Any],
    *,
    namespace: str,
    note_ids: Sequence[str] = (),
    document_ids: Sequence[str] = (),
    limit: int = MAX_READ_NOTES,
) -> list[StoredNote]:
    """The notes of ``namespace`` with these ids or from these documents, in document order.

    Unknown ids are simply absent; a malformed id raises :class:`pgmem.InputError`.
    """
    check_namespace(namespace)
    ids = _note_ids("note_ids", note_ids)
    documents = [check_text(f"document_ids[{i}]", d, max_chars=MAX_ID_CHARS) for i, d in enumerate(document_ids)]
    if len(ids) + len(documents) > MAX_READ_NOTES:
        raise InputError(f"name at most {MAX_READ_NOTES} note ids and documents in all")
    with database_errors("read notes"):
        rows = run(
            conn,
            "read_notes",
            {"namespace": namespace, "note_ids": ids, "document_ids": documents, "limit": limit},
        ).fetchall()
    return [
        StoredNote(
            note_id=r["note_id"],
            external_id=r["external_id"],
            document_id=r["document_id"],
            citation=Citation(r["document_id"], r["span_start"], r["span_end"]),
            text=r["text"],
            context=r["context"],
            family=r["family"],
            role=r["role"],
            confidence=float(r["confidence"]),
            source_ts=r["source_ts"],
            metadata=r["metadata"] or {},
        )
        for r in rows
    ]


def content_id(text: str, prefix: str | None = None) -> str:
    """A document id for text that came without one: its digest, after ``prefix``."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{prefix}#{digest}" if prefix else f"sha256:{digest}"


def text_spans(
    where: str,
    text: object,
    *,
    document_id: object,
    family: object,
    metadata: Mapping[str, Any] | None,
    split: SplitConfig,
) -> list[Span]:
    """The spans of one framework document: its text cut by pgmem's splitter, each span
    carrying the document's metadata. ``where`` names the document in errors."""
    check_text(f"{where}: text", text, max_chars=2**31 - 1)
    check_text(f"{where}: document id", document_id, max_chars=MAX_ID_CHARS)
    if family is None:
        raise InputError(f"{where} has no family: pass family=... or set the family metadata key")
    check_text(f"{where}: family", family, max_chars=MAX_ID_CHARS)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InputError(f"{where}: metadata must be a mapping, got {describe_value(metadata)}")
    spans = spans_from_text(text, document_id=document_id, family=family, split=split)  # type: ignore[arg-type]
    shared = dict(metadata) if metadata else None
    return [replace(span, metadata=shared) for span in spans]
