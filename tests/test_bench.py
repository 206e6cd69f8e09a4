"""`pgmem bench`: the store grows in place to each size and every stage is timed there."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from pgmem.embeddings import HashingEmbedder
from pgmem.errors import ConfigurationError
from pgmem.eval.bench import STAGES, percentiles, recombined, run_bench

SENTENCES = [
    "Caroline went to the support group on Tuesday evening with her friends",
    "Melanie painted a sunrise over the lake after her morning run",
    "The company was founded in Boston by two engineers in 1998",
    "A new library opened downtown and the children loved the reading room",
    "Jon lost his job at the bank and started a dance studio instead",
]
QUESTIONS = ["When did Caroline go to the support group?", "What did Melanie paint?", "Who founded the company?"]


def test_recombined_sentences_are_deterministic_halves() -> None:
    first, again = recombined(SENTENCES, 20, seed=3), recombined(SENTENCES, 20, seed=3)
    assert first == again and len(first) == 20
    words = {word for sentence in SENTENCES for word in sentence.split()}
    assert all(set(text.split()) <= words for text in first)


def test_percentiles_are_ordered() -> None:
    values = percentiles([float(v) for v in range(1, 101)])
    assert values["p50"] == pytest.approx(50.5)
    assert values["p50"] <= values["p95"] <= values["p99"] <= 100


def test_the_store_grows_in_place_and_every_stage_is_timed(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    reported: list[dict[str, Any]] = []
    points = run_bench(
        conn, [40, 90], QUESTIONS, SENTENCES, hashing, namespace="bench-test", batch=25, report=reported.append
    )
    assert reported == points
    assert [p["notes"] for p in points] == [40, 90]
    assert [p["ingested"] for p in points] == [40, 50]
    for point in points:
        assert point["questions"] == len(QUESTIONS)
        assert set(point["latency_ms"]) == set(STAGES)
        for values in point["latency_ms"].values():
            assert 0 <= values["p50"] <= values["p95"] <= values["p99"]
        assert point["bytes"]["hnsw index of the namespace's model"] > 0
        assert point["memory"]["shared_buffers"]
    # A second run reuses the namespace: nothing is ingested again.
    again = run_bench(conn, [90], QUESTIONS[:1], SENTENCES, hashing, namespace="bench-test")
    assert again[0]["ingested"] == 0 and again[0]["notes"] == 90
    # Sizes the namespace is already past are skipped, not measured at the wrong size.
    assert [
        p["notes"] for p in run_bench(conn, [50, 90], QUESTIONS[:1], SENTENCES, hashing, namespace="bench-test")
    ] == [90]


@pytest.mark.parametrize("sizes", [[], [0], [20, 10], [10, 10]])
def test_sizes_must_increase(conn: psycopg.Connection[Any], hashing: HashingEmbedder, sizes: list[int]) -> None:
    with pytest.raises(ConfigurationError, match="--notes"):
        run_bench(conn, sizes, QUESTIONS, SENTENCES, hashing)
