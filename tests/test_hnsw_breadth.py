"""Migration 0025: stage one's HNSW breadth grows with the graph above ``ef_search_notes``.

The breadth (``pgmem.hnsw_breadth_v1``) is ``ef_search`` up to ``ef_search_notes`` notes
in the model's graph and grows in proportion to the graph's size above it, up to
pgvector's 1000, never below ``ef_search``; the graph is the model's index, every
namespace of the model in it. Checked: the arithmetic, the graph counted across
namespaces, that a search through the grown breadth finds the exact neighbours a narrow
one misses, the argument checks on both sides, and who may call the function.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import psycopg
import pytest
from helpers import as_role, make_spans, stage_one_call
from psycopg.rows import dict_row

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import HashingEmbedder
from pgmem.errors import ConfigurationError
from pgmem.retrieval.stage_one import stage_one_arguments

NO_INDEX = 2_000_000_000  # a model id with no index: the namespace's size alone counts


@pytest.mark.parametrize(
    ("namespace_notes", "ef_search", "ef_search_notes", "breadth"),
    [
        (50, 100, 200_000, 100),  # a small graph: ef_search
        (200_000, 100, 200_000, 100),  # at the threshold: ef_search
        (200_001, 100, 200_000, 101),  # above it: in proportion, rounded up
        (1_000_000, 100, 200_000, 500),
        (1_000_000, 40, 200_000, 200),
        (10_000_000, 100, 200_000, 1000),  # pgvector's limit
        (10_000_000, 1200, 200_000, 1200),  # never below ef_search
        (1_000_000, 100, None, 100),  # NULL: a fixed breadth
    ],
)
def test_the_breadth_grows_in_proportion_to_the_graph(
    conn: psycopg.Connection[Any], namespace_notes: int, ef_search: int, ef_search_notes: int | None, breadth: int
) -> None:
    row = conn.execute(
        "SELECT pgmem.hnsw_breadth_v1(%s, %s, %s, %s)", (NO_INDEX, namespace_notes, ef_search, ef_search_notes)
    ).fetchone()
    assert row == (breadth,)


def test_the_graph_holds_every_namespace_of_the_model(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    for namespace in ("one", "two"):
        texts = [f"{namespace} note number {i} about topic {i % 7}" for i in range(120)]
        pgmem.ingest(conn, make_spans(texts, document_id=namespace), namespace=namespace, embedder=hashing)
    # The catalog counts the index's rows when ANALYZE (or CREATE INDEX) last ran.
    conn.execute("ANALYZE pgmem.notes")
    (model_id, notes) = conn.execute(
        "SELECT model_id, note_count FROM pgmem.namespaces WHERE namespace = 'one'"
    ).fetchone()  # type: ignore[misc]
    assert notes == 120
    # 240 notes in the graph: 10 * 240 / 100 = 24, not 10 * 120 / 100 = 12.
    assert conn.execute("SELECT pgmem.hnsw_breadth_v1(%s, %s, 10, 100)", (model_id, notes)).fetchone() == (24,)
    # A namespace counted larger than the catalog's figure (written since) counts itself.
    assert conn.execute("SELECT pgmem.hnsw_breadth_v1(%s, 1000, 10, 100)", (model_id,)).fetchone() == (100,)


def _vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, 64)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class _Fixed:
    """Random 64-dimension vectors, one per text (HNSW on random vectors is far from exact
    at a small breadth)."""

    name = "random-64"
    dimension = 64

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self._rows = {text: row for row, text in enumerate(texts)}
        self._vectors = vectors

    def embed(self, texts: Any) -> np.ndarray:
        return self._vectors[[self._rows[text] for text in texts]]


def test_a_grown_breadth_finds_the_neighbours_a_narrow_one_misses(conn: psycopg.Connection[Any]) -> None:
    texts = [f"note {i}" for i in range(1500)]
    vectors = _vectors(len(texts), seed=3)
    pgmem.ingest(conn, make_spans(texts), namespace="graph", embedder=_Fixed(texts, vectors))
    conn.row_factory = dict_row  # type: ignore[assignment]
    conn.execute("SET pgmem.exact_dense_notes = 0")  # HNSW at this size, as above 6,500 notes
    queries = _vectors(20, seed=4)
    narrow = pgmem.StageOneParams(
        k_dense=5, k_lex=0, ef_search=5, ef_search_notes=None, neighbour_seeds=0, family_candidates=None
    )
    # 1,500 notes against a threshold of one note: the breadth reaches pgvector's 1000.
    grown = dataclasses.replace(narrow, ef_search_notes=1)
    found = {"narrow": 0, "grown": 0}
    for query in queries:
        exact = {f"note {i}" for i in np.argsort(-(vectors @ query))[:5]}
        for label, params in (("narrow", narrow), ("grown", grown)):
            arguments = stage_one_arguments("graph", "random-64", query, "?", build_hints("?"), params)
            call = stage_one_call("pgmem")
            rows = conn.execute(call, arguments).fetchall()
            assert len(rows) == 5
            found[label] += len({row["text"] for row in rows} & exact)
    assert found["grown"] == 5 * len(queries)
    assert found["narrow"] < found["grown"], found


def test_bad_breadth_arguments_are_refused(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    with pytest.raises(ConfigurationError, match="ef_search_notes"):
        pgmem.StageOneParams(ef_search_notes=0)
    pgmem.ingest(conn, make_spans(["a lonely note"]), namespace="n", embedder=hashing)
    arguments = stage_one_arguments(
        "n", hashing.name, hashing.embed(["lonely"])[0], "lonely", build_hints("lonely"), pgmem.StageOneParams()
    )
    arguments["ef_search_notes"] = 0
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="ef_search_notes must be >= 1"):
        conn.execute(stage_one_call("pgmem"), arguments)


def test_readers_may_ask_the_breadth_strangers_may_not(dsn: str, roles: dict[str, str]) -> None:
    with as_role(dsn, roles["reader"], None) as reader:
        assert reader.execute("SELECT pgmem.hnsw_breadth_v1(%s, 1000000, 100, 200000)", (NO_INDEX,)).fetchone() == (
            500,
        )
    with (
        as_role(dsn, roles["stranger"], None) as stranger,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="hnsw_breadth_v1"),
    ):
        stranger.execute("SELECT pgmem.hnsw_breadth_v1(%s, 1000000, 100, 200000)", (NO_INDEX,))


def test_a_deep_capped_search_stays_within_pgvectors_breadth(conn: psycopg.Connection[Any]) -> None:
    # One family crowds the nearest notes: the capped dense search goes 2, 4, 8 times as
    # deep as k_dense looking for the other families' notes, past pgvector's largest
    # ef_search (1000), to which the breadth is held (the iterative scan goes deeper).
    texts = [f"note {i}" for i in range(1500)]
    vectors = _vectors(len(texts), seed=5)
    spans = [
        dataclasses.replace(span, family="crowd" if i % 15 else f"small-{i // 15 % 10}")
        for i, span in enumerate(make_spans(texts))
    ]
    pgmem.ingest(conn, spans, namespace="deep", embedder=_Fixed(texts, vectors))
    conn.execute("SET pgmem.exact_dense_notes = 0")
    params = pgmem.StageOneParams(k_dense=200, k_lex=0, neighbour_seeds=0, family_candidates=12)
    arguments = stage_one_arguments("deep", "random-64", _vectors(1, seed=6)[0], "?", build_hints("?"), params)
    rows = conn.execute(stage_one_call("pgmem"), arguments).fetchall()
    # 100 notes of small families among 1,500: 800 deep finds about half, so it goes 1,600
    # deep, which finds every one of them.
    assert len(rows) == 200
    assert sum(row[7] != "crowd" for row in rows) == 100  # stage_one_v1's family column
