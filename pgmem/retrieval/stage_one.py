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
from pgmem.db.queries import query
from pgmem.db.vectors import vector_literal
from pgmem.params import StageOneParams
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate, FamilyAggregate


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
        # and the dynamic SQL inside stage_one_v1 is planned per call anyway.
        rows = conn.execute(query("stage_one"), arguments, prepare=False).fetchall()
    return pool_from_rows(rows)


def pool_from_rows(rows: list[tuple[Any, ...]]) -> Pool:
    """A :class:`Pool` whose aggregates are the SQL window functions' values."""
    if not rows:
        return Pool((), 0, 0.0, 0.0, 0.0, ())
    candidates: list[Candidate] = []
    families: dict[str, FamilyAggregate] = {}
    for row in rows:
        (
            note_id,
            external_id,
            document_id,
            span_start,
            span_end,
            text,
            context,
            family,
            role,
            confidence,
            source_ts,
            dense,
            lexical,
            facet,
            link,
            base,
            _size,
            _mean,
            _variance,
            _entropy,
            family_count,
            family_sum,
            family_confidence,
            entity_boost,
            time_boost,
            keyword_boost,
            handle_boost,
            family_helpful,
            family_unhelpful,
            _namespace_helpful,
            _namespace_unhelpful,
        ) = row
        candidates.append(
            Candidate(
                note_id=str(note_id),
                external_id=external_id,
                document_id=document_id,
                span_start=span_start,
                span_end=span_end,
                text=text,
                context=context,
                family=family,
                role=role,
                confidence=float(confidence),
                source_ts=source_ts,
                dense_score=float(dense),
                lexical_score=float(lexical),
                facet_boost=float(facet),
                link_boost=float(link),
                base_score=float(base),
                entity_boost=float(entity_boost),
                time_boost=float(time_boost),
                keyword_boost=float(keyword_boost),
                handle_boost=float(handle_boost),
            )
        )
        families[family] = FamilyAggregate(
            family,
            int(family_count),
            float(family_sum),
            float(family_confidence),
            float(family_helpful),
            float(family_unhelpful),
        )
    first = rows[0]
    return Pool(
        candidates=tuple(candidates),
        size=int(first[16]),
        mean=float(first[17]),
        # var_pop can come back a hair below zero from floating-point cancellation.
        variance=max(float(first[18]), 0.0),
        entropy=float(first[19]) + 0.0,  # + 0.0 turns SQL's -0 into 0
        families=tuple(families[name] for name in sorted(families)),
        feedback_helpful=float(first[29]),
        feedback_unhelpful=float(first[30]),
    )
