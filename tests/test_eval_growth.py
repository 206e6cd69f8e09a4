"""Growth curves: distractor padding, the growth run on a tiny corpus, and the plots."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgmem.cli import main
from pgmem.embeddings import HashingEmbedder
from pgmem.errors import ConfigurationError, InputError
from pgmem.eval.datasets import EvalCorpus, EvalQuestion
from pgmem.eval.growth import distractor_spans, render_growth_markdown, run_growth, write_growth
from pgmem.eval.plots import plot_growth, plot_recall, system_order
from pgmem.eval.runner import RunConfig
from pgmem.ingestion.spans import validate_span
from pgmem.types import Span

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

ALPHA = [
    ("a1", "Ada Lovelace founded Acme Corp in Paris in 1843.", "wire"),
    ("a2", "Acme Corp makes analytical engines for banks.", "wire"),
    ("a3", "The river Seine flows through Paris and Rouen.", "atlas"),
    ("a4", "Cheese and wine pair well at a long dinner.", "blog"),
    ("a5", "Rockets need a lot of fuel to reach orbit.", "blog"),
    ("distractor-0", "Lighthouses warn ships away from rocky coasts.", "atlas"),
]
BETA = [
    ("b1", "The orchestra rehearsed the symphony on Tuesday.", "club"),
    ("b2", "Violins and cellos tuned before the concert began.", "club"),
    ("b3", "The conductor praised the brass section afterwards.", "press"),
    ("b4", "Tickets for the spring season sold out within a day.", "press"),
    ("b5", "A new oboist joined the ensemble last month.", "club"),
    ("b6", "The hall's acoustics were restored in 2019.", "press"),
    ("b7", "Children attended a free matinee on Sunday.", "club"),
    ("b8", "The choir sang two pieces by Fauré.", "club"),
]


def _spans(rows: list[tuple[str, str, str]], timestamp: str) -> tuple[Span, ...]:
    return tuple(
        Span(
            document_id=f"doc-{note_id}",
            text=text,
            start=0,
            end=len(text.encode("utf-8")),
            family=family,
            external_id=note_id,
            source_ts=timestamp,
        )
        for note_id, text, family in rows
    )


@pytest.fixture
def corpus() -> EvalCorpus:
    # A gold id that looks like a distractor's: padding must never reuse it.
    questions = (
        EvalQuestion("q1", "alpha", "Who founded Acme Corp?", ("a1",), ("Ada Lovelace",), "who"),
        EvalQuestion("q2", "alpha", "What warns ships?", ("distractor-0",), ("Lighthouses",), "what"),
        EvalQuestion("q3", "beta", "When did the orchestra rehearse?", ("b1",), ("Tuesday",), "when"),
        EvalQuestion("q4", "beta", "Who wrote the symphony?", (), (), "adversarial", adversarial=True),
    )
    return EvalCorpus(
        "tiny",
        {
            "alpha": _spans(ALPHA, "2023-05-08T13:56:00+00:00"),
            "beta": _spans(BETA, "2024-01-02T09:00:00+00:00"),
        },
        questions,
    )


def test_distractors_are_deterministic_and_a_longer_list_extends_a_shorter(corpus: EvalCorpus) -> None:
    first = distractor_spans(corpus, "alpha", 20, seed=3)
    assert first == distractor_spans(corpus, "alpha", 20, seed=3)
    assert len(first) == 20
    assert distractor_spans(corpus, "alpha", 7, seed=3) == first[:7]
    assert distractor_spans(corpus, "alpha", 20, seed=4) != first
    assert distractor_spans(corpus, "alpha", 0) == []


def test_distractors_take_other_namespaces_first_then_distinct_recombinations(corpus: EvalCorpus) -> None:
    spans = distractor_spans(corpus, "alpha", 30, seed=0)
    real_texts = {span.text for group in corpus.spans.values() for span in group}
    assert {span.text for span in spans[: len(BETA)]} == {text for _, text, _ in BETA}
    recombined = [span.text for span in spans[len(BETA) :]]
    assert len(set(recombined)) == len(recombined)
    assert not set(recombined) & real_texts
    # Recombined from the other namespace only: no half of a padded namespace's own note.
    halves = [" ".join(text.split()[: max(1, len(text.split()) // 2)]) for _, text, _ in BETA]
    assert all(any(text.startswith(half + " ") for half in halves) for text in recombined)
    assert all(span.metadata is not None and span.metadata["distractor"] is True for span in spans)


def test_distractors_keep_the_namespace_families_and_times_and_never_a_gold_id(corpus: EvalCorpus) -> None:
    spans = distractor_spans(corpus, "alpha", 40, seed=1)
    own = {family for _, _, family in ALPHA}
    families = Counter(span.family for span in spans)
    assert set(families) <= own
    # Weighted by span counts (atlas 2, blog 2, wire 2 of 6): every family is drawn.
    assert set(families) == own
    assert {span.source_ts for span in spans} == {"2023-05-08T13:56:00+00:00"}
    gold = {g for question in corpus.questions for g in question.gold}
    ids = {span.external_id for group in corpus.spans.values() for span in group} | gold
    assert not {span.external_id for span in spans} & ids
    assert not {span.document_id for span in spans} & {span.document_id for span in corpus.spans["alpha"]}
    assert len({span.external_id for span in spans}) == len(spans)
    for index, span in enumerate(spans):
        validate_span(index, span, "growth-alpha")
        assert span.start == 0 and span.end == len(span.text.encode("utf-8"))


def test_distractor_arguments_are_checked(corpus: EvalCorpus) -> None:
    with pytest.raises(ConfigurationError, match="namespace"):
        distractor_spans(corpus, "gamma", 3)
    with pytest.raises(ConfigurationError, match="count"):
        distractor_spans(corpus, "alpha", -1)
    # Eight short texts recombine into a few dozen distinct ones, not hundreds.
    with pytest.raises(InputError, match="count: 8 span texts recombine into no more than"):
        distractor_spans(corpus, "alpha", 500)


class _Recorder:
    def __init__(self) -> None:
        self.steps: list[tuple[int, int, int]] = []
        self.spans = 0
        self.questions = 0

    def step(self, factor: int, spans: int, questions: int) -> None:
        self.steps.append((factor, spans, questions))

    def ingested(self, spans: int) -> None:
        self.spans += spans

    def answered(self, questions: int) -> None:
        self.questions += questions


def _counts(conn: psycopg.Connection[Any], prefix: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT namespace, count(*) FROM pgmem.notes WHERE namespace LIKE %s GROUP BY namespace", (prefix + "%",)
    )
    return {str(name): int(count) for name, count in rows}


def test_a_growth_run_triples_the_store_and_reports_every_factor(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, corpus: EvalCorpus, tmp_path: Path
) -> None:
    config = RunConfig(budget=4, namespace_prefix="growth-test-")
    recorder = _Recorder()
    growth = run_growth(conn, corpus, hashing, config, factors=(3, 1), progress=recorder)

    assert _counts(conn, "growth-test-") == {"growth-test-alpha": 18, "growth-test-beta": 24}
    assert [step["factor"] for step in growth["factors"]] == [1, 3]
    assert [step["notes"] for step in growth["factors"]] == [14, 42]
    # ×3: alpha takes beta's 8 real spans and 4 recombinations, beta alpha's 6 and 10.
    assert [step["recombined_distractors"] for step in growth["factors"]] == [0, 14]
    assert growth["recombined_own_texts"] == []
    assert growth["factors"][1]["notes_by_namespace"] == {"growth-test-alpha": 18, "growth-test-beta": 24}
    assert [(factor, spans) for factor, spans, _ in recorder.steps] == [(1, 14), (3, 28)]
    assert recorder.spans == 42
    assert recorder.questions == sum(questions for _, _, questions in recorder.steps)
    for step in growth["factors"]:
        assert step["questions"] == 3  # the adversarial question is run, not averaged
        assert set(step["stage_one_ms"]) == {"p50", "p95", "mean"}
        assert step["ingest_seconds"] >= 0 and step["evaluate_seconds"] >= 0
        assert set(step["systems"]) == set(growth["systems"])
        for summary in step["systems"].values():
            assert summary["n"] == 3 and 0 <= summary["recall"] <= 100
    json.dumps(growth, allow_nan=True)  # plain data only

    markdown = render_growth_markdown(growth)
    assert "| ×1 | 14 |" in markdown and "| ×3 | 42 |" in markdown
    paths = write_growth(growth, tmp_path / "growth")
    assert [path.name for path in paths] == ["growth.md", "growth.json", "growth.png"]
    assert paths[2].read_bytes().startswith(PNG_SIGNATURE)
    assert json.loads(paths[1].read_text())["factors"][1]["notes"] == 42

    # The store only grows: asking for a smaller factor on it is refused.
    with pytest.raises(ConfigurationError, match="already holds 18 notes"):
        run_growth(conn, corpus, hashing, config, factors=(2,), systems=("relevance",))


def test_growth_refuses_bad_factors(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, corpus: EvalCorpus
) -> None:
    for factors in ((), (0, 2), (1.5,)):
        with pytest.raises(ConfigurationError, match="factors"):
            run_growth(conn, corpus, hashing, RunConfig(namespace_prefix="growth-bad-"), factors=factors)  # type: ignore[arg-type]


def test_the_growth_command_writes_its_files(dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "tiny.jsonl"
    records: list[dict[str, Any]] = [
        {"type": "note", "namespace": ns, "id": note_id, "text": text, "family": family}
        for ns, rows in (("alpha", ALPHA[:5]), ("beta", BETA))
        for note_id, text, family in rows
    ]
    records += [
        {"type": "question", "namespace": "alpha", "id": "q1", "question": "Who founded Acme?", "gold": ["a1"]},
        {"type": "question", "namespace": "beta", "id": "q2", "question": "Who rehearsed?", "gold": ["b1"]},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    scale = tmp_path / "scale.json"
    scale.write_text(
        json.dumps({"points": [{"notes": 10_000, "stage_one_ms": {"p50": 15.0, "p95": 21.0, "mean": 16.0}}]}),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    common = ["--dsn", dsn, "--embedder", "hashing", "--out", str(out), "--systems", "relevance", "dense"]
    assert (
        main(
            ["eval-growth", str(data), "--factors", "1", "2", "--namespaces", "1", "--scale-json", str(scale), *common]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "| ×2 | 10 |" in printed
    growth = json.loads((out / "growth.json").read_text())
    assert growth["corpus"]["namespaces"] == 1 and growth["corpus"]["questions"] == 1
    assert growth["scale"]["points"][0]["notes"] == 10_000
    assert (out / "growth.png").read_bytes().startswith(PNG_SIGNATURE)

    assert main(["eval-growth", str(data), "--factors", "0", *common]) == 1
    assert "factors" in capsys.readouterr().err


def _report(name: str, condition: str, recalls: dict[str, float], family_cap: int | None = None) -> dict[str, Any]:
    return {
        "corpus": {"name": name},
        "condition": condition,
        "config": {"budget": 8, "packing": {"family_cap": family_cap}},
        "systems": {system: {"recall": recall} for system, recall in recalls.items()},
    }


def test_plots_write_png_files(tmp_path: Path) -> None:
    reports = [
        _report("locomo", "poison-one", {"rrf": 8.2, "calibrated": 27.5, "relevance": 31.2, "novel": 12.0}),
        _report("locomo", "clean", {"rrf": 59.9, "calibrated": 71.4, "relevance": 70.7, "beta": 70.9}),
        _report("locomo", "clean", {"calibrated": 67.3, "relevance": 66.9}, family_cap=3),
        _report("multihop", "clean", {"calibrated": 86.9, "dense": 78.0}),
    ]
    recall = plot_recall(reports, tmp_path / "recall.png")
    assert recall.read_bytes().startswith(PNG_SIGNATURE) and recall.stat().st_size > 5_000
    assert system_order({"rrf", "novel", "beta", "calibrated", "dense"}) == [
        "calibrated",
        "beta",
        "dense",
        "rrf",
        "novel",
    ]

    growth = {
        "corpus": {"name": "locomo"},
        "systems": ["relevance", "calibrated"],
        "factors": [
            {
                "factor": factor,
                "notes": 419 * factor,
                "stage_one_ms": {"p50": 10.0 + factor, "p95": 20.0 + factor, "mean": 12.0},
                "systems": {"calibrated": {"recall": 70.0 - factor / 10}, "relevance": {"recall": None}},
            }
            for factor in (1, 10, 100)
        ],
    }
    scale = {
        "machine": "test",
        "points": [{"notes": n, "stage_one_ms": {"p50": 15.0, "p95": 30.0}} for n in (1e4, 1e6)],
    }
    for name, overlay in (("growth.png", None), ("growth-scale.png", scale)):
        path = plot_growth(growth, tmp_path / name, scale=overlay)
        assert path.read_bytes().startswith(PNG_SIGNATURE) and path.stat().st_size > 5_000
