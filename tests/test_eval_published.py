"""The metrics other memory tools publish, and LongMemEval's record format."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgmem.embeddings import HashingEmbedder
from pgmem.errors import InputError
from pgmem.eval.datasets import load_dataset, load_jsonl
from pgmem.eval.longmemeval import load_longmemeval
from pgmem.eval.metrics import (
    QuestionResult,
    ndcg_any,
    recall_all,
    recall_any,
    session_any_hit,
    summarise,
)
from pgmem.eval.report import build_report, render_markdown
from pgmem.eval.runner import RunConfig, RunResult, evaluate, gold_documents


def _result(
    gold: tuple[str, ...], packed: tuple[str, ...], gold_docs: tuple[str, ...] = (), packed_docs: tuple[str, ...] = ()
) -> QuestionResult:
    return QuestionResult(
        question_id="q",
        category="c",
        gold=gold,
        packed=packed,
        packed_texts=tuple("x" for _ in packed),
        answers=(),
        gold_documents=tuple(gold_docs),
        packed_documents=tuple(packed_docs),
    )


def test_session_any_hit_counts_the_first_five_distinct_sessions() -> None:
    docs = ("s1", "s1", "s2", "s3", "s3", "s4", "s5", "s6")
    packed = tuple(f"t{i}" for i in range(len(docs)))
    # s6 is the sixth distinct session: outside the top five, however early its note would be by count.
    assert session_any_hit(_result(("g",), packed, ("s6",), docs)) == 0.0
    assert session_any_hit(_result(("g",), packed, ("s5",), docs)) == 1.0
    # The hit needs no gold turn at all: the easier metric peers publish.
    assert session_any_hit(_result(("g",), packed, ("s2", "s9"), docs)) == 1.0
    assert session_any_hit(_result(("g",), packed, (), docs)) is None


def test_recall_any_and_all_at_k() -> None:
    result = _result(("a", "b"), ("x", "a", "y", "z", "w", "b"))
    assert recall_any(result, 5) == 1.0
    assert recall_all(result, 5) == 0.0  # b is sixth
    assert recall_all(result, 6) == 1.0
    # Repeated ids (two notes of one span) count once in the ranking.
    assert recall_all(_result(("a", "b"), ("a", "a", "a", "a", "a", "b")), 2) == 1.0
    assert recall_any(_result((), ("a",)), 5) is None


def test_ndcg_any_matches_longmemeval_definition() -> None:
    # LongMemEval's DCG: rel[0] + sum(rel[i] / log2(i + 1)) for i >= 1 (0-based).
    result = _result(("a", "b"), ("x", "a", "y", "b"))
    actual = 1 / math.log2(2) + 1 / math.log2(4)
    ideal = 1 + 1 / math.log2(2)
    assert ndcg_any(result, 5) == pytest.approx(actual / ideal)
    assert ndcg_any(_result(("a",), ("a", "x")), 5) == pytest.approx(1.0)
    assert ndcg_any(_result(("a",), ("x", "y")), 5) == 0.0
    # More gold than k: the ideal has k relevant ranks.
    assert ndcg_any(_result(("a", "b", "c"), ("a", "b")), 2) == pytest.approx(1.0)


def test_summary_and_report_carry_the_published_metrics() -> None:
    results = [
        _result(("a",), ("a", "x"), ("s1",), ("s1", "s2")),
        _result(("b",), ("x", "y"), ("s3",), ("s1", "s2")),
    ]
    summary = summarise(results)
    assert summary.published["session_any@5"] == pytest.approx(50.0)
    assert summary.published["recall_any@5"] == pytest.approx(50.0)
    assert summary.by_category["c"].published["ndcg_any@10"] == pytest.approx(50.0)


def _record(question_id: str = "q1", **overrides: object) -> dict[str, object]:
    record: dict[str, object] = {
        "question_id": question_id,
        "question_type": "single-session-user",
        "question": "Where did I buy my bike?",
        "answer": "Decathlon",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["sess_a", "sess_b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 10:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I bought my bike at Decathlon.", "has_answer": True},
                {"role": "assistant", "content": "Nice, enjoy the rides!"},
            ],
            [{"role": "user", "content": "What should I cook tonight?"}, {"role": "assistant", "content": ""}],
        ],
        "answer_session_ids": ["sess_a"],
    }
    record.update(overrides)
    return record


def test_longmemeval_json_list_becomes_one_namespace_per_question(tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([_record("q1"), _record("q2_abs")]), encoding="utf-8")
    corpus = load_dataset(str(path), tmp_path)
    assert sorted(corpus.spans) == ["lme-q1", "lme-q2_abs"]
    spans = corpus.spans["lme-q1"]
    # The empty assistant turn is no note; the others keep their session and role.
    assert [s.external_id for s in spans] == ["sess_a:0", "sess_a:1", "sess_b:0"]
    assert spans[0].text == "user: I bought my bike at Decathlon."
    assert spans[0].document_id == "lme-q1/sess_a"
    assert spans[0].source_ts is not None and spans[0].source_ts.isoformat() == "2023-05-20T02:21:00+00:00"
    q1, q2 = corpus.questions
    assert q1.gold == ("sess_a:0",) and q1.answers == ("Decathlon",) and q1.category == "single-session-user"
    assert q2.adversarial and q2.gold == () and q2.answers == ()
    assert gold_documents(corpus)["q1"] == ("lme-q1/sess_a",)


def test_longmemeval_jsonl_through_the_generic_adapter(tmp_path: Path) -> None:
    path = tmp_path / "lme.jsonl"
    # Without has_answer marks, every turn of the answer sessions is gold.
    unmarked = _record("q3")
    sessions = unmarked["haystack_sessions"]
    assert isinstance(sessions, list)
    for turn in sessions[0]:
        turn.pop("has_answer", None)
    path.write_text(json.dumps(_record("q1")) + "\n" + json.dumps(unmarked) + "\n", encoding="utf-8")
    corpus = load_jsonl(path)
    assert [q.id for q in corpus.questions] == ["q1", "q3"]
    assert corpus.questions[1].gold == ("sess_a:0", "sess_a:1")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"haystack_dates": ["2023/05/20 (Sat) 02:21"]}, "one entry per session"),
        ({"haystack_dates": ["May 20", "2023/05/21 (Sun) 10:00"]}, "must look like"),
        ({"haystack_dates": ["2023/02/30 (Sat) 02:21", "2023/05/21 (Sun) 10:00"]}, "no calendar date"),
        ({"haystack_sessions": [[{"role": "user"}], []]}, "'role' and 'content' must be strings"),
        ({"haystack_sessions": [[{"role": "user", "content": "x", "has_answer": "yes"}], []]}, "has_answer"),
        ({"question": ""}, "field 'question'"),
        ({"question_id": "bad id with spaces"}, "valid namespace"),
    ],
)
def test_longmemeval_errors_name_the_record_and_field(
    tmp_path: Path, overrides: dict[str, object], message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{**_record("q1"), **overrides}]), encoding="utf-8")
    with pytest.raises(InputError, match=message) as raised:
        load_longmemeval(path)
    assert str(path) in str(raised.value)


def test_longmemeval_repeated_question_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.json"
    path.write_text(json.dumps([_record("q1"), _record("q1")]), encoding="utf-8")
    with pytest.raises(InputError, match="repeated"):
        load_longmemeval(path)


def test_eval_on_longmemeval_reports_published_metrics(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, tmp_path: Path
) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([_record("q1")]), encoding="utf-8")
    corpus = load_longmemeval(path)
    config = RunConfig(namespace_prefix="pub-")
    run: RunResult = evaluate(conn, corpus, hashing, config, systems=["relevance", "dense"])
    result = run.results["relevance"][0]
    assert result.gold_documents == ("lme-q1/sess_a",)
    assert set(result.packed_documents) <= {"lme-q1/sess_a", "lme-q1/sess_b"}
    assert len(result.packed_documents) == len(result.packed)
    markdown = render_markdown(build_report(corpus, run, config))
    assert "## The metrics other memory tools publish" in markdown
    assert "session_any@5" in markdown
