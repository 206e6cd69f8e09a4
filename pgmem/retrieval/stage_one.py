"""Stage one: one call of ``pgmem.stage_one_v1`` (with the feedback totals the beta mode
reads, joined in the same statement), its rows turned into a :class:`Pool`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from pgmem.db.errors import database_errors, deadline
from pgmem.db.queries import run
from pgmem.db.vectors import vector_literal
from pgmem.params import StageOneParams
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate, FamilyAggregate, frozen_from_fields


@dataclass(frozen=True)
class Hints:
    """Facets the question is about; stage one adds bounded boosts for notes matching them."""

    entities: tuple[str, ...] = ()
    time_from: datetime | None = None
    time_to: datetime | None = None
    keywords: tuple[str, ...] = ()
    handles: tuple[str, ...] = ()
    roles: tuple[str, ...] | None = None
    #: The metadata filter as compiled by pgmem.retrieval.filters (its JSON tree).
    filter_tree: dict[str, Any] | None = None
    filter_text: str | None = None
    #: What was derived from the question itself (for the diagnostics).
    derived: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "entities": list(self.entities),
            "time_from": self.time_from.isoformat() if self.time_from else None,
            "time_to": self.time_to.isoformat() if self.time_to else None,
            "keywords": list(self.keywords),
            "handles": list(self.handles),
            "roles": list(self.roles) if self.roles is not None else None,
            "where": self.filter_text,
            "derived": self.derived,
        }


def stage_one_arguments(
    namespace: str,
    model: str,
    query_vector: np.ndarray,
    question: str,
    hints: Hints,
    params: StageOneParams,
) -> dict[str, Any]:
    """The bind parameters of the ``stage_one`` statement."""
    return {
        "namespace": namespace,
        "model": model,
        "query_embedding": vector_literal(query_vector),
        "query": question,
        **params.as_dict(),
        "entity_hints": list(hints.entities),
        "time_from": hints.time_from,
        "time_to": hints.time_to,
        "keyword_hints": [k.lower() for k in hints.keywords],
        "handle_hints": list(hints.handles),
        "roles": list(hints.roles) if hints.roles is not None else None,
        "filter": Jsonb(hints.filter_tree) if hints.filter_tree is not None else None,
    }


def run_stage_one(conn: psycopg.Connection[Any], arguments: dict[str, Any], timeout: float | None = None) -> Pool:
    """Execute stage one (exactly one statement) and build the pool from its rows.

    ``timeout`` (seconds) cancels the statement when it runs longer.
    """
    with database_errors("pack"), deadline(conn, timeout, "pack"):
        # prepare=False: a server-side prepare would add a round trip on the Nth call,
        # and the dynamic SQL inside stage_one_v1 is planned per call anyway. Binary rows:
        # a pool is ~100 rows of 30 columns, mostly floats.
        rows = run(conn, "stage_one", arguments, prepare=False, binary=True).fetchall()
    return pool_from_rows(rows, query=str(arguments["query"]))


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def pool_from_rows(rows: list[dict[str, Any]], *, query: str) -> Pool:
    """A :class:`Pool` whose aggregates are the SQL window functions' values; ``query`` is
    the question searched for (the family alarm measures echo against it)."""
    if not rows:
        return Pool((), 0, 0.0, 0.0, 0.0, (), query=query)
    # A family's window aggregates are the same on each of its rows: read from one.
    by_family = {row["family"]: row for row in rows}
    first = rows[0]
    return Pool(
        candidates=tuple(map(_candidate, rows)),
        size=int(first["pool_size"]),
        mean=float(first["pool_mean"]),
        # var_pop can come back a hair below zero from floating-point cancellation.
        variance=max(float(first["pool_variance"]), 0.0),
        entropy=float(first["pool_entropy"]) + 0.0,  # + 0.0 turns SQL's -0 into 0
        families=tuple(_family(name, by_family[name]) for name in sorted(by_family)),
        feedback_helpful=float(first["namespace_feedback_helpful"]),
        feedback_unhelpful=float(first["namespace_feedback_unhelpful"]),
        query=query,
        namespace_notes=int(first["namespace_note_count"]),
        namespace_age_seconds=_seconds(first["namespace_age_seconds"]),
    )


def _candidate(row: dict[str, Any]) -> Candidate:
    # frozen_from_fields: one dict for the record's __dict__ instead of 22 frozen
    # __setattr__ calls, 128 times per pack (tests/test_pool_words.py checks the fields).
    return frozen_from_fields(
        Candidate,
        {
            "note_id": row["note_id"],  # text: the stage_one statement casts it
            "external_id": row["external_id"],
            "document_id": row["document_id"],
            "span_start": row["span_start"],
            "span_end": row["span_end"],
            "text": row["text"],
            "context": row["context"],
            "family": row["family"],
            "role": row["role"],
            "confidence": float(row["confidence"]),
            "source_ts": row["source_ts"],
            "dense_score": float(row["dense_score"]),
            "lexical_score": float(row["lexical_score"]),
            "facet_boost": float(row["facet_boost"]),
            "link_boost": float(row["link_boost"]),
            "base_score": float(row["base_score"]),
            "entity_boost": float(row["boost_entity"]),
            "time_boost": float(row["boost_time"]),
            "keyword_boost": float(row["boost_keyword"]),
            "handle_boost": float(row["boost_handle"]),
            "age_seconds": _seconds(row["note_age_seconds"]),
            "word_hashes": row["word_hashes"],
        },
    )


def _family(name: str, row: dict[str, Any]) -> FamilyAggregate:
    return FamilyAggregate(
        name,
        int(row["family_count"]),
        float(row["family_score_sum"]),
        float(row["family_mean_confidence"]),
        float(row["family_feedback_helpful"]),
        float(row["family_feedback_unhelpful"]),
        int(row["family_namespace_count"]),
        _seconds(row["family_age_seconds"]),
        bool(row["family_bound"]),
    )
