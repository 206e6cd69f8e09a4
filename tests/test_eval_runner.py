"""A tiny evaluation end to end: every system on one shared pool, a report with known answers."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import psycopg

from pgmem.embeddings import HashingEmbedder
from pgmem.eval.datasets import load_jsonl
from pgmem.eval.report import build_report, render_markdown, write_report
from pgmem.eval.runner import SYSTEMS, RunConfig, baseline_pack, evaluate
from pgmem.params import CalibrationParams
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate


def _corpus(tmp_path: Path) -> Path:
    notes = [
        ("n1", "Ada Lovelace founded Acme Corp in Paris.", "wire"),
        ("n2", "Acme Corp makes analytical engines.", "wire"),
        ("n3", "Cheese and wine pair well.", "blog"),
        ("n4", "The river Seine flows through Paris.", "atlas"),
        ("n5", "Rockets need a lot of fuel.", "blog"),
    ]
    lines = [json.dumps({"type": "note", "id": i, "text": t, "family": f}) for i, t, f in notes]
    lines += [
        json.dumps(
            {
                "type": "question",
                "id": "q1",
                "question": "Who founded Acme Corp?",
                "gold": ["n1"],
                "answers": ["Ada Lovelace"],
                "category": "who",
            }
        ),
        json.dumps(
            {
                "type": "question",
                "id": "q2",
                "question": "Which river flows through Paris?",
                "gold": ["n4"],
                "answers": ["the Seine"],
                "category": "where",
            }
        ),
    ]
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_tiny_evaluation_reports_known_figures(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, tmp_path: Path
) -> None:
    corpus = load_jsonl(_corpus(tmp_path))
    config = RunConfig(budget=5)  # the whole store fits: every system packs every gold note
    run = evaluate(conn, corpus, hashing, config)
    assert set(run.results) == set(SYSTEMS)
    assert all(len(results) == 2 for results in run.results.values())
    report = build_report(corpus, run, config)
    for system in ("calibrated", "relevance", "raw_bonus", "dense", "rrf"):
        summary = report["systems"][system]
        assert summary["recall"] == 100.0 and summary["full_support"] == 100.0
        assert summary["answer_containment"] == 100.0
        assert math.isclose(summary["precision"], 20.0)  # 1 gold note of 5 packed
    assert set(report["systems"]["calibrated"]["by_category"]) == {"who", "where"}
    assert report["fallback"]["pools"] == 2 and report["fallback"]["degraded_rate"] == 1.0  # 5 notes < N_min
    assert {d["metric"] for d in report["differences"]} >= {"calibrated − relevance: recall"}
    markdown, data = write_report(report, tmp_path / "out")
    text = markdown.read_text()
    assert "| calibrated | 2 | 100.0 |" in text and "Differences (paired bootstrap" in text
    assert json.loads(data.read_text())["corpus"]["spans"] == 5
    assert render_markdown(report) == text
    # The evaluation wrote only into its own namespace.
    namespaces = {row[0] for row in conn.execute("SELECT namespace FROM pgmem.namespaces")}
    assert namespaces == {"eval-default"}


def _candidate(note_id: str, dense: float, lexical: float) -> Candidate:
    return Candidate(note_id, note_id, "d", 0, 1, note_id, "", "f", "fact", 0.5, None, dense, lexical, 0.0, 0.0, dense)


def test_baselines_rank_the_shared_pool() -> None:
    pool = Pool.from_candidates([_candidate("a", 0.9, 0.0), _candidate("b", 0.5, 1.0), _candidate("c", 0.8, 0.6)])
    assert [c.note_id for c in baseline_pack(pool, "dense", 2)] == ["a", "c"]
    assert [c.note_id for c in baseline_pack(pool, "lexical", 3)] == ["b", "c"]  # a has no lexical match
    # RRF: c is 2nd in both lists (1/62 + 1/62) and beats a (1/61) and b (1/63 + 1/61).
    assert [c.note_id for c in baseline_pack(pool, "rrf", 3)] == ["b", "c", "a"]


def test_a_poisoned_run_reports_the_attack(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, tmp_path: Path
) -> None:
    from pgmem.eval.stress import apply_condition

    corpus = apply_condition(load_jsonl(_corpus(tmp_path)), "poison-one", seed=0)
    config = RunConfig(budget=3, namespace_prefix="eval-poison-")
    run = evaluate(conn, corpus, hashing, config, systems=("calibrated", "relevance"))
    report = build_report(corpus, run, config, condition="poison-one")
    attack = report["attack"]
    assert attack["attacked_questions"] == 2 and attack["poisoned_notes"] == 10
    for figures in attack["systems"].values():
        assert 0.0 <= figures["poisoned_share"] <= 1.0
    # The poison repeats the question: relevance alone always packs it; the calibrated
    # mode packs none (its five notes are near-copies in five documents: collusion).
    assert attack["systems"]["relevance"]["attack_inclusion_rate"] == 1.0
    assert attack["systems"]["calibrated"]["attack_inclusion_rate"] == 0.0
    assert "## Under attack: 2 questions, 10 poisoned notes" in render_markdown(report)


def _spam_corpus(tmp_path: Path) -> Path:
    """Twelve questions; for each, an atlas note answers it and a 'spam' note only
    repeats the question's words (more relevant on words alone, never gold)."""
    places = ["Arvia", "Belmar", "Corsa", "Dunmere", "Elbany", "Forlan", "Gavros", "Hesket", "Ilvan", "Jorra"]
    places += ["Kestrel", "Lunmar"]
    lines = []
    for i, place in enumerate(places):
        lines.append(
            json.dumps(
                {"type": "note", "id": f"a{i}", "text": f"{place} has its capital at Port {i}.", "family": "atlas"}
            )
        )
        lines.append(
            json.dumps(
                {
                    "type": "note",
                    "id": f"s{i}",
                    "text": f"What is the capital of {place}? The capital of {place}, click here!",
                    "family": "spam",
                }
            )
        )
        lines.append(
            json.dumps(
                {
                    "type": "question",
                    "id": f"q{i}",
                    "question": f"What is the capital of {place}?",
                    "gold": [f"a{i}"],
                    "answers": [f"Port {i}"],
                }
            )
        )
    path = tmp_path / "spam.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_folds_are_stable_and_all_used() -> None:
    from pgmem.eval.runner import fold_of

    ids = [f"q{i}" for i in range(200)]
    assert [fold_of(i, 3, seed=1) for i in ids] == [fold_of(i, 3, seed=1) for i in ids]
    assert {fold_of(i, 3) for i in ids} == {0, 1, 2}
    assert [fold_of(i, 2, seed=0) for i in ids] != [fold_of(i, 2, seed=1) for i in ids]


def test_beta_learns_from_other_folds_feedback(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, tmp_path: Path
) -> None:
    from pgmem.eval.runner import evaluation_steps

    corpus = load_jsonl(_spam_corpus(tmp_path))
    # Budget 2: on words alone both slots go to spam notes (the question's and another's).
    config = RunConfig(budget=2, feedback_folds=3, namespace_prefix="e-")
    steps: list[int] = []
    run = evaluate(conn, corpus, hashing, config, systems=("relevance", "beta"), progress=steps.append)
    assert sum(steps) == evaluation_steps(corpus, ("relevance", "beta"), config) == 12 + 2 * 12
    assert run.feedback is not None
    assert run.feedback.folds == 3 and run.feedback.training_packs == 24
    assert run.feedback.helpful + run.feedback.unhelpful == 48  # budget 2: two judgements per pack
    report = build_report(corpus, run, config)
    relevance, beta = report["systems"]["relevance"]["recall"], report["systems"]["beta"]["recall"]
    assert relevance < 50.0  # on words alone the spam note wins most questions
    assert beta > relevance  # feedback on the other folds taught the beta mode to distrust 'spam'
    assert [r.question_id for r in run.results["beta"]] == [q.id for q in corpus.questions]
    assert "What the beta mode learned from" in render_markdown(report)
    # The last fold's feedback is what remains stored: only the other folds' judgements.
    stored = conn.execute("SELECT count(*) FROM pgmem.feedback WHERE namespace = 'e-default'").fetchone()
    assert stored is not None and 0 < stored[0] < 2 * 12


def test_feedback_noise_is_a_share() -> None:
    import pytest

    from pgmem.errors import ConfigurationError

    assert RunConfig(feedback_noise=0.3, adversarial_feedback=True).feedback_noise == 0.3
    with pytest.raises(ConfigurationError, match="feedback_noise"):
        RunConfig(feedback_noise=1.5)


def test_ablations_switch_one_ingredient_of_the_calibrated_regulariser() -> None:
    from pgmem.eval.runner import ABLATIONS
    from pgmem.retrieval.calibrate import calibrate
    from pgmem.retrieval.pool import Pool
    from pgmem.types import Candidate

    rows = [
        Candidate(
            note_id=f"00000000-0000-4000-8000-{i:012d}", external_id=None, document_id=f"d{i}", span_start=0,
            span_end=1, text=f"w{i}", context="", family="a" if i < 4 else "b", role="fact",
            confidence=0.9 if i < 4 else 0.2, source_ts=None, dense_score=0.0, lexical_score=0.0,
            facet_boost=0.0, link_boost=0.0, base_score=1.0 - i / 10,
        )
        for i in range(10)
    ]  # fmt: skip
    pool = Pool.from_candidates(rows)
    base = CalibrationParams(alarm_threshold=None)
    regularisers = {}
    for name, change in {"none": {}, **ABLATIONS}.items():
        calibration = calibrate(pool, dataclasses.replace(base, **change), "calibrated")
        regularisers[name] = {f.family: f.regularizer for f in calibration.families}
        if name == "calibrated-no-uncertainty":
            assert all(f.uncertainty == 0.0 for f in calibration.families)
    # Each switch moves the regulariser of a family, and none is the full mode.
    for name in ABLATIONS:
        assert regularisers[name] != regularisers["none"], name
