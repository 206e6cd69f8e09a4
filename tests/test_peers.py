"""`pgmem bench --peers`: the comparison's own machinery, and the peers on a small store when installed.

The peers (LangChain and LlamaIndex PGVectorStore) are the optional ``peers`` extra, which
CI does not install: the tests that drive them skip without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest
from conftest import SHARED_DATA

from pgmem.embeddings import HashingEmbedder
from pgmem.errors import ConfigurationError
from pgmem.eval.metrics import QuestionResult, evidence_recall
from pgmem.eval.peers import (
    PeerQuestion,
    VectorLookup,
    build_store,
    interleave,
    locomo_store,
    plot_peers,
    recall_at,
    spread,
    sqlalchemy_url,
    stored_notes,
)

LOCOMO = SHARED_DATA / "locomo" / "locomo_dev5.json"


def _question(number: int, gold: tuple[str, ...]) -> PeerQuestion:
    return PeerQuestion(id=f"q{number}", question=f"question {number}?", gold=gold, category="category 1")


def test_the_lookup_gives_back_known_vectors_and_refuses_anything_else() -> None:
    lookup = VectorLookup(3)
    lookup.add("known", np.array([0.1, 0.2, 0.3]))
    assert lookup("known") == pytest.approx([0.1, 0.2, 0.3])
    with pytest.raises(ConfigurationError, match="no precomputed vector"):
        lookup("never embedded")
    with pytest.raises(ConfigurationError, match="dimensions"):
        lookup.add("short", np.array([0.1, 0.2]))


def test_every_system_answers_every_question_and_the_order_rotates() -> None:
    calls: list[str] = []

    def system(name: str) -> Any:
        def search(question: str, vector: Any) -> list[str]:
            calls.append(name)
            return [f"{name}:{question}"]

        return search

    questions = [_question(i, ("t",)) for i in range(4)]
    vectors = {q.id: np.zeros(2, dtype=np.float32) for q in questions}
    timed = interleave({"a": system("a"), "b": system("b"), "c": system("c")}, questions, vectors, warmup=1)
    assert calls[:3] == ["a", "b", "c"]  # the untimed warm-up question
    assert calls[3:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    for name, run in timed.items():
        assert len(run.latency_ms) == len(questions) and min(run.latency_ms) >= 0
        assert run.answers == {q.id: [f"{name}:{q.question}"] for q in questions}
    with pytest.raises(ConfigurationError, match="no system"):
        interleave({}, questions, vectors)


def test_recall_is_pgmem_evals_gold_turn_recall_at_the_budget() -> None:
    questions = [_question(1, ("a", "b")), _question(2, ("c",)), _question(3, ())]
    answers = {"q1": ["x", "a", "y", "b"], "q2": [*(["z"] * 8), "c"], "q3": ["a"]}
    expected = [
        evidence_recall(QuestionResult("q1", "", ("a", "b"), ("x", "a", "y", "b"), (), ())),
        evidence_recall(QuestionResult("q2", "", ("c",), ("z",) * 8, (), ())),
    ]
    assert expected == [1.0, 0.0]  # the ninth answer is past the budget of 8
    assert recall_at(questions, answers) == 50.0  # the question without gold does not count


def test_the_locomo_store_has_unique_turn_ids_that_the_gold_names() -> None:
    spans, questions = locomo_store(LOCOMO)
    ids = [s.external_id for s in spans]
    assert len(ids) == len(set(ids))
    known = set(ids)
    # A few gold ids in the published data name no turn (docs/eval_data.md); nearly all do.
    gold = [g for q in questions for g in q.gold]
    assert sum(g in known for g in gold) >= 0.98 * len(gold)
    assert all(q.gold and not q.category.endswith("5") for q in questions)
    assert [q.id for q in spread(questions, 4)] == [questions[i * len(questions) // 4].id for i in range(4)]
    assert spread(questions[:3], 10) == questions[:3]


def test_the_url_points_at_the_same_database(conn: psycopg.Connection[Any]) -> None:
    url = sqlalchemy_url(conn, "psycopg")
    assert url.startswith("postgresql+psycopg://")
    assert conn.info.dbname in url and str(conn.info.port) in url


def test_the_store_grows_with_real_turns_first_and_gives_back_its_vectors(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    spans, _ = locomo_store(LOCOMO)
    real = spans[:30]
    distractors = ["a recombined sentence about the lake", "another one about the library", "and a third"]
    added, _ = build_store(conn, "peers-test", 32, real, distractors, hashing)
    assert added == 32
    notes = stored_notes(conn, "peers-test")
    assert len(notes) == 32
    assert {n.external_id for n in notes} >= {s.external_id for s in real}
    note = notes[0]
    assert np.allclose(note.vector, hashing.embed([note.text])[0], atol=1e-6)
    assert build_store(conn, "peers-test", 33, real, distractors, hashing)[0] == 1
    assert build_store(conn, "peers-test", 33, real, distractors, hashing)[0] == 0  # reused
    assert len(stored_notes(conn, "peers-test")) == 33
    with pytest.raises(ConfigurationError, match="--notes"):
        build_store(conn, "peers-test-2", 10, real, distractors, hashing)


def test_the_peers_index_pgmems_notes_and_answer_on_the_same_vectors(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pytest.importorskip("langchain_postgres")
    pytest.importorskip("llama_index.vector_stores.postgres")
    from pgmem.eval.peers import run_peers

    spans, questions = locomo_store(LOCOMO)
    real = spans[:60]
    known = {s.external_id for s in real}
    asked = [q for q in questions if set(q.gold) <= known][:4]
    assert asked
    reported: list[dict[str, Any]] = []
    result = run_peers(
        conn,
        [60, 70],
        real,
        asked,
        [f"distractor sentence number {i} about nothing" for i in range(10)],
        hashing,
        namespace="peers-run",
        sweep=False,
        warmup=1,
        report=reported.append,
    )
    assert [p["notes"] for p in result["points"]] == [60, 70]
    assert len(reported) == 2
    first, second = result["points"]
    assert first["ingest"]["langchain"]["added"] == first["ingest"]["llamaindex"]["added"] == 60
    assert second["ingest"]["langchain"]["added"] == second["ingest"]["llamaindex"]["added"] == 10
    for point in result["points"]:
        assert point["systems"]["pgmem"]["pgmem_over_system"]["p50"] == 1.0
        for row in point["systems"].values():
            assert 0 <= row["recall_at_8"] <= 100
            assert 0 < row["latency_ms"]["p50"] <= row["latency_ms"]["p95"]
    # The same vectors: LangChain's dense search on a note's own stored vector finds that note first.
    from pgmem.eval.peers import LangChainPeer

    notes = stored_notes(conn, "peers-run")
    lookup = VectorLookup(hashing.dimension)
    peer = LangChainPeer(conn, "peers-run", lookup)
    try:
        assert peer.sync(notes) == 0  # already there: nothing added twice
        dense = peer.dense()
        vectors = {note.external_id or note.note_id: note.vector for note in notes}
        for note in notes[:5]:
            assert np.allclose(vectors[dense("", note.vector)[0]], note.vector)
    finally:
        peer.close()


def test_the_plot_shows_latency_and_the_ratio_against_store_size(tmp_path: Any) -> None:
    def row(p50: float, ratio: float) -> dict[str, Any]:
        latency = {"p50": p50, "p95": 2 * p50, "p99": 3 * p50, "mean": p50}
        return {"recall_at_8": 50.0, "latency_ms": latency, "pgmem_over_system": {"p50": ratio}}

    points = [
        {"notes": n, "systems": {"pgmem": row(10.0 * f, 1.0), "peer": row(2.0 * f, 5.0)}}
        for n, f in ((3000, 1), (9000, 2))
    ]
    path = plot_peers(points, tmp_path / "peers.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_peers_without_the_extra_names_it_before_starting_a_server(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from pgmem.eval.peers import peer_versions

    if peer_versions()["langchain-postgres"] and peer_versions()["llama-index-vector-stores-postgres"]:
        pytest.skip("the peers extra is installed here")
    from pgmem.cli import main

    assert main(["bench", "--peers", "--home", str(tmp_path / "home"), "--out", str(tmp_path / "out")]) == 1
    assert "--peers needs the 'peers' extra" in capsys.readouterr().err
    assert not (tmp_path / "home").exists()
