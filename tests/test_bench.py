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


def test_two_writers_grow_the_store_to_each_size_once(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    points = run_bench(conn, [60, 130], QUESTIONS[:1], SENTENCES, hashing, namespace="bench-w", batch=20, writers=2)
    assert [(p["notes"], p["ingested"], p["ingest_writers"]) for p in points] == [(60, 60, 2), (130, 70, 2)]
    # Every recombined text written once, as one writer would write them.
    rows = conn.execute(
        "SELECT count(*), count(DISTINCT document_id), min(document_id), max(document_id) FROM pgmem.notes"
        " WHERE namespace = 'bench-w'"
    ).fetchone()
    assert rows is not None and rows[0] == rows[1] == 130
    # The writers' connections are closed: only this test's connection is left on the database.
    assert conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
    ).fetchone() == (1,)


@pytest.mark.parametrize("writers", [0, -1])
def test_writers_must_be_positive(conn: psycopg.Connection[Any], hashing: HashingEmbedder, writers: int) -> None:
    with pytest.raises(ConfigurationError, match="--writers"):
        run_bench(conn, [10], QUESTIONS, SENTENCES, hashing, writers=writers)


def test_conninfo_of_puts_the_password_back(dsn: str) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from pgmem.db.connection import conninfo_of

    with psycopg.connect(make_conninfo(dsn, password="s3cret"), autocommit=True) as given:
        again = conninfo_of(given)
        assert conninfo_to_dict(again)["password"] == "s3cret"
        with psycopg.connect(again) as other:
            assert other.info.dbname == given.info.dbname and other.info.user == given.info.user
