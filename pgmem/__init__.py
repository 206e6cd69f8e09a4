"""pgmem: memory for LLM agents inside PostgreSQL.

Write source text as immutable, span-grounded notes with :func:`ingest`; read a
small, fixed-budget evidence pack for a question with :func:`pack`. The same operations
on ``psycopg.AsyncConnection`` are in :mod:`pgmem.aio`; docs/architecture.md shows
where each step lives.

>>> import pgmem
>>> conn = pgmem.connect()            # embedded PostgreSQL, migrated
>>> result = pgmem.ingest(conn, [pgmem.Span(document_id="d1", text="Ada founded Acme.",
...                                         start=0, end=17, family="wiki")])
>>> pgmem.pack(conn, "Who founded Acme?").items[0].text
'Ada founded Acme.'
"""

from __future__ import annotations

from pgmem.api import (
    FeedbackResult,
    ForgetResult,
    bind_family,
    bulk_load,
    feedback,
    forget,
    ingest,
    pack,
    register_model,
    reset_feedback,
    supersede,
    unbind_family,
)
from pgmem.db.connection import connect
from pgmem.db.migrate import migrate
from pgmem.embeddings import Embedder, get_embedder
from pgmem.errors import (
    ConfigurationError,
    DatabaseError,
    EmbeddingError,
    EmbeddingMismatchError,
    FamilyRightsError,
    InputError,
    PgmemError,
    RerankError,
    SchemaError,
)
from pgmem.ingestion.bulk import BulkLoadResult
from pgmem.ingestion.enricher import Enricher, Enrichment, SpanInput
from pgmem.ingestion.writer import IngestResult
from pgmem.params import ROLES, CalibrationParams, PackParams, StageOneParams
from pgmem.replicas import ReplicaSet
from pgmem.retrieval.rerank import Reranker
from pgmem.types import Citation, Diagnostics, FamilyCalibration, Pack, PackItem, Rejection, Reranked, Reranking, Span

__version__ = "0.1.0"

__all__ = [
    "ROLES",
    "BulkLoadResult",
    "CalibrationParams",
    "Citation",
    "ConfigurationError",
    "DatabaseError",
    "Diagnostics",
    "Embedder",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "Enricher",
    "Enrichment",
    "FamilyCalibration",
    "FamilyRightsError",
    "FeedbackResult",
    "ForgetResult",
    "IngestResult",
    "InputError",
    "Pack",
    "PackItem",
    "PackParams",
    "PgmemError",
    "Rejection",
    "ReplicaSet",
    "RerankError",
    "Reranked",
    "Reranker",
    "Reranking",
    "SchemaError",
    "Span",
    "SpanInput",
    "StageOneParams",
    "bind_family",
    "bulk_load",
    "connect",
    "feedback",
    "forget",
    "get_embedder",
    "ingest",
    "migrate",
    "pack",
    "register_model",
    "reset_feedback",
    "supersede",
    "unbind_family",
]
