"""Stage one: one call of ``pgmem.stage_one_v1`` (with the feedback totals the beta mode
reads, joined in the same statement), its rows turned into a :class:`Pool`."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from pgmem.db.errors import database_errors, deadline
from pgmem.db.queries import column_names, run_tuples
from pgmem.db.vectors import vector_literal
from pgmem.errors import SchemaError
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
        cursor = run_tuples(conn, "stage_one", arguments, prepare=False, binary=True)
        rows = cursor.fetchall()
        columns = column_names(cursor)
    return pool_from_tuples(columns, rows, query=str(arguments["query"]))


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


#: The stage_one columns a candidate is read from, in the order :func:`_candidate` unpacks them.
CANDIDATE_COLUMNS = (
    "note_id",
    "external_id",
    "document_id",
    "span_start",
    "span_end",
    "text",
    "context",
    "family",
    "role",
    "confidence",
    "source_ts",
    "dense_score",
    "lexical_score",
    "facet_boost",
    "link_boost",
    "base_score",
    "boost_entity",
    "boost_time",
    "boost_keyword",
    "boost_handle",
    "note_age_seconds",
    "word_hashes",
)
#: The columns of a family's window aggregates (the same on each of its rows), in :func:`_family`'s order.
FAMILY_COLUMNS = (
    "family",
    "family_count",
    "family_score_sum",
    "family_mean_confidence",
    "family_feedback_helpful",
    "family_feedback_unhelpful",
    "family_namespace_count",
    "family_age_seconds",
    "family_bound",
)
#: The pool's and namespace's aggregates (the same on every row), in :func:`pool_from_tuples`' order.
POOL_COLUMNS = (
    "pool_size",
    "pool_mean",
    "pool_variance",
    "pool_entropy",
    "namespace_feedback_helpful",
    "namespace_feedback_unhelpful",
    "namespace_note_count",
    "namespace_age_seconds",
)

#: Every column a pool is read from.
_READ_COLUMNS = tuple(dict.fromkeys(CANDIDATE_COLUMNS + FAMILY_COLUMNS + POOL_COLUMNS))


def pool_from_rows(rows: Sequence[Mapping[str, Any]], *, query: str) -> Pool:
    """:func:`pool_from_tuples` of rows read by column name (``dict_row``)."""
    if not rows:
        return Pool((), 0, 0.0, 0.0, 0.0, (), query=query)
    values = operator.itemgetter(*_READ_COLUMNS)
    return pool_from_tuples(_READ_COLUMNS, [values(row) for row in rows], query=query)


def pool_from_tuples(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, query: str) -> Pool:
    """A :class:`Pool` whose aggregates are the SQL window functions' values; ``columns``
    names the values of each row (the statement's column names, in order: every value is
    found by its name); ``query`` is the question searched for (the family alarm measures
    echo against it)."""
    if not rows:
        return Pool((), 0, 0.0, 0.0, 0.0, (), query=query)
    position = {name: index for index, name in enumerate(columns)}
    # Each row's values in the order the readers below unpack them: one C call per row.
    candidate_values = _values(position, CANDIDATE_COLUMNS)
    family_values = _values(position, FAMILY_COLUMNS)
    # A family's window aggregates are the same on each of its rows: read from one.
    family = position["family"]
    by_family = {row[family]: row for row in rows}
    size, mean, variance, entropy, helpful, unhelpful, notes, age = _values(position, POOL_COLUMNS)(rows[0])
    return Pool(
        candidates=tuple(map(_candidate, map(candidate_values, rows))),
        size=int(size),
        mean=float(mean),
        # var_pop can come back a hair below zero from floating-point cancellation.
        variance=max(float(variance), 0.0),
        entropy=float(entropy) + 0.0,  # + 0.0 turns SQL's -0 into 0
        families=tuple(_family(family_values(by_family[name])) for name in sorted(by_family)),
        feedback_helpful=float(helpful),
        feedback_unhelpful=float(unhelpful),
        query=query,
        namespace_notes=int(notes),
        namespace_age_seconds=_seconds(age),
    )


def _values(position: Mapping[str, int], names: Sequence[str]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A row's values of the columns ``names``, in that order (``position``: column -> index)."""
    missing = [name for name in names if name not in position]
    if missing:
        raise SchemaError(f"stage one returned no column {missing[0]!r}: is the schema up to date?")
    return operator.itemgetter(*[position[name] for name in names])


def _candidate(values: Sequence[Any]) -> Candidate:
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
        dense_score,
        lexical_score,
        facet_boost,
        link_boost,
        base_score,
        entity_boost,
        time_boost,
        keyword_boost,
        handle_boost,
        age_seconds,
        word_hashes,
    ) = values
    # frozen_from_fields: one dict for the record's __dict__ instead of 22 frozen
    # __setattr__ calls, 128 times per pack (tests/test_pool_words.py checks the fields).
    # float(): a caller's connection may load float8 as Decimal.
    return frozen_from_fields(
        Candidate,
        {
            "note_id": _uuid_text(note_id),
            "external_id": external_id,
            "document_id": document_id,
            "span_start": span_start,
            "span_end": span_end,
            "text": text,
            "context": context,
            "family": family,
            "role": role,
            "confidence": float(confidence),
            "source_ts": source_ts,
            "dense_score": float(dense_score),
            "lexical_score": float(lexical_score),
            "facet_boost": float(facet_boost),
            "link_boost": float(link_boost),
            "base_score": float(base_score),
            "entity_boost": float(entity_boost),
            "time_boost": float(time_boost),
            "keyword_boost": float(keyword_boost),
            "handle_boost": float(handle_boost),
            "age_seconds": _seconds(age_seconds),
            "word_hashes": word_hashes,
        },
    )


def _uuid_text(value: Any) -> str:
    """``str(value)``: the pack's statement returns note ids as text (0022); a ``uuid.UUID``
    comes only from ``stage_one_v1`` called directly (tests, benchmarks)."""
    return value if type(value) is str else str(value)


def _family(values: Sequence[Any]) -> FamilyAggregate:
    name, count, score_sum, mean_confidence, helpful, unhelpful, namespace_count, age, bound = values
    return frozen_from_fields(
        FamilyAggregate,
        {
            "family": name,
            "count": int(count),
            "score_sum": float(score_sum),
            "mean_confidence": float(mean_confidence),
            "feedback_helpful": float(helpful),
            "feedback_unhelpful": float(unhelpful),
            "namespace_count": int(namespace_count),
            "age_seconds": _seconds(age),
            "bound": bool(bound),
        },
    )
