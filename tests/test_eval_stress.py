"""Stress conditions on a small hand-made corpus: determinism, purity, invariants, metrics."""

from __future__ import annotations

import copy
import math
from collections import Counter

import pytest

from pgmem.errors import ConfigurationError, InputError
from pgmem.eval.datasets import EvalCorpus, EvalQuestion
from pgmem.eval.metrics import QuestionResult
from pgmem.eval.stress import (
    CONDITIONS,
    apply_condition,
    attack_inclusion_rate,
    attack_targets,
    clean_recall_under_attack,
    merge_families,
    noisy_families,
    null_families,
    poison,
    poisoned_share,
    question_notes,
    sparse_pools,
    split_families,
    spoof_provenance,
    temporal_drift,
)
from pgmem.ingestion.spans import validate_span
from pgmem.types import Span


def _span(ident: str, family: str, day: int | None = None) -> Span:
    text = f"Note {ident} from {family}: caf\u00e9 details."
    return Span(
        document_id=f"doc-{ident}",
        text=text,
        start=0,
        end=len(text.encode("utf-8")),
        family=family,
        source_ts=None if day is None else f"2023-05-{day:02d}T10:00:00+00:00",
        external_id=ident,
    )


def make_corpus() -> EvalCorpus:
    # Namespace "a": 12 notes over 4 families, dated; namespace "b": 9 notes over 3 families, undated.
    a = tuple(_span(f"a{i}", f"fam{i % 4}", day=i + 1) for i in range(12))
    b = tuple(_span(f"b{i}", f"src{i % 3}") for i in range(9))
    questions = (
        EvalQuestion("q1", "a", "Where did Ada go?", ("a1", "a5"), ("Paris",), "multi-hop"),
        EvalQuestion("q2", "a", "When did Bob move?", ("a2",), ("2021",), "temporal"),
        EvalQuestion("q3", "a", "Who owns the cat?", ("a7",), (), "adversarial", adversarial=True),
        EvalQuestion("q4", "b", "What did Cy buy?", ("b0", "b4"), ("a bike",), "single-hop"),
        EvalQuestion("q5", "b", "Is there a null answer?", (), ("none",), "null"),
        EvalQuestion("q6", "b", "Which team won?", ("b8",), ("Reds",), "single-hop"),
    )
    return EvalCorpus("toy", {"b": b, "a": a}, questions)


RANDOM = ["null", "noisy-10", "noisy-30", "merge", "split", "spoof", "poison-one", "drift", "sparse"]


def _injected(before: EvalCorpus, after: EvalCorpus) -> dict[str, list[Span]]:
    return {
        namespace: [span for span in spans if span not in before.spans.get(namespace, ())]
        for namespace, spans in after.spans.items()
    }


def _check_valid(corpus: EvalCorpus) -> None:
    for namespace, spans in corpus.spans.items():
        ids = [span.external_id for span in spans]
        assert len(ids) == len(set(ids)), namespace
        for index, span in enumerate(spans):
            validate_span(index, span, namespace)


# -- registry, determinism, purity ------------------------------------------------------


def test_registry_names() -> None:
    assert set(CONDITIONS) == {
        "clean",
        "null",
        "noisy-10",
        "noisy-30",
        "merge",
        "split",
        "spoof",
        "poison-one",
        "poison-spread",
        "poison-one-3",
        "poison-one-1",
        "poison-quarter",
        "poison-quarter-para",
        "poison-para",
        "poison-echo",
        "poison-lookalike",
        "poison-fresh",
        "poison-quarter-fresh",
        "poison-spread-para",
        "poison-fresh-para",
        "poison-pair-para",
        "drift",
        "asked-before",
        "sparse",
    }


def test_unknown_condition_lists_choices() -> None:
    with pytest.raises(ConfigurationError, match="poison-spread"):
        apply_condition(make_corpus(), "bogus")


@pytest.mark.parametrize("name", sorted(CONDITIONS))
def test_deterministic_pure_and_valid(name: str) -> None:
    corpus = make_corpus()
    snapshot = copy.deepcopy(corpus)
    first = apply_condition(corpus, name, seed=3)
    assert first == apply_condition(corpus, name, seed=3)
    assert corpus == snapshot
    assert first.spans is not corpus.spans
    _check_valid(first)


@pytest.mark.parametrize("name", RANDOM)
def test_seed_matters(name: str) -> None:
    corpus = make_corpus()
    results = [apply_condition(corpus, name, seed=seed) for seed in range(6)]
    assert any(result != results[0] for result in results[1:])


def test_clean_is_identity() -> None:
    assert apply_condition(make_corpus(), "clean") == make_corpus()


def test_bad_parameters() -> None:
    corpus = make_corpus()
    with pytest.raises(ConfigurationError):
        noisy_families(corpus, rate=1.5)
    with pytest.raises(ConfigurationError):
        split_families(corpus, parts=0)
    with pytest.raises(ConfigurationError):
        poison(corpus, families="many")
    with pytest.raises(ConfigurationError, match="style"):
        poison(corpus, style="shouting")


# -- family conditions ------------------------------------------------------------------


def test_null_keeps_label_multiset() -> None:
    corpus = make_corpus()
    shuffled = null_families(corpus, seed=1)
    for namespace, spans in corpus.spans.items():
        after = shuffled.spans[namespace]
        assert Counter(span.family for span in after) == Counter(span.family for span in spans)
        assert [span.external_id for span in after] == [span.external_id for span in spans]
    assert shuffled.questions == corpus.questions


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.3, 0.5, 1.0])
def test_noisy_relabels_exact_count(rate: float) -> None:
    corpus = make_corpus()
    noisy = noisy_families(corpus, rate=rate, seed=2)
    for namespace, spans in corpus.spans.items():
        families = {span.family for span in spans}
        changed = [
            (old, new) for old, new in zip(spans, noisy.spans[namespace], strict=True) if old.family != new.family
        ]
        assert len(changed) == round(rate * len(spans))
        assert all(new.family in families for _, new in changed)
        assert all(old.text == new.text and old.external_id == new.external_id for old, new in changed)


def test_merge_label_counts() -> None:
    corpus = make_corpus()
    merged = merge_families(corpus, share=0.5, seed=0)
    # "a": 4 families -> 1 pair -> 3 labels; "b": 3 families -> round(1.5)//2 = 1 pair -> 2 labels.
    assert len({span.family for span in merged.spans["a"]}) == 3
    assert len({span.family for span in merged.spans["b"]}) == 2
    labels = {span.family for span in merged.spans["a"]} | {span.family for span in merged.spans["b"]}
    assert sum(label.startswith("merged:") for label in labels) == 2
    full = merge_families(corpus, share=1.0, seed=0)
    assert len({span.family for span in full.spans["a"]}) == 2
    assert merge_families(corpus, share=0.0) == corpus


def test_split_label_counts() -> None:
    corpus = make_corpus()
    for parts, expected_a, expected_b in [(1, 4, 3), (2, 8, 6), (3, 12, 9), (4, 12, 9)]:
        split = split_families(corpus, parts=parts, seed=5)
        assert len({span.family for span in split.spans["a"]}) == expected_a
        assert len({span.family for span in split.spans["b"]}) == expected_b
        for old, new in zip(corpus.spans["a"], split.spans["a"], strict=True):
            base, _, part = new.family.rpartition("#")
            assert base == old.family and 1 <= int(part) <= parts


# -- injected notes ---------------------------------------------------------------------


def test_spoof_claims_trusted_family() -> None:
    corpus = make_corpus()
    spoofed = spoof_provenance(corpus, per_question=3, seed=0)
    injected = _injected(corpus, spoofed)
    assert sum(map(len, injected.values())) == 3 * 5  # q5 has no gold
    by_id = {span.external_id: span for spans in injected.values() for span in spans}
    assert set(by_id) == {f"spoof-{q}-{i}" for q in ("q1", "q2", "q3", "q4", "q6") for i in range(3)}
    assert by_id["spoof-q1-0"].family == "fam1"  # first gold a1
    assert by_id["spoof-q4-2"].family == "src0"  # first gold b0
    assert by_id["spoof-q1-1"].text.startswith("Where did Ada go? ")
    assert "Paris" in by_id["spoof-q1-1"].text
    assert all(
        span.metadata == {"poisoned": True, "attack": "spoof", "target": span.external_id.split("-")[1]}
        for span in by_id.values()
        if span.external_id is not None
    )
    assert spoofed.questions == corpus.questions
    assert attack_targets(spoofed)["q3"] == ("spoof-q3-0", "spoof-q3-1", "spoof-q3-2")


@pytest.mark.parametrize("families", ["one", "spread"])
def test_poison_counts_and_families(families: str) -> None:
    corpus = make_corpus()
    poisoned = poison(corpus, share=1.0, per_question=4, families=families, seed=0)
    injected = [span for spans in _injected(corpus, poisoned).values() for span in spans]
    assert len(injected) == 4 * 5
    assert len({span.external_id for span in injected}) == len(injected)
    if families == "one":
        assert {span.family for span in injected} == {"attacker"}
    else:
        assert {span.family for span in injected} == {f"attacker-{i}" for i in range(1, 5)}
        for question_id in ("q1", "q4"):
            mine = [span.family for span in injected if span.metadata and span.metadata["target"] == question_id]
            assert len(set(mine)) == len(mine) == 4
    assert poisoned.questions == corpus.questions
    targets = attack_targets(poisoned)
    assert set(targets) == {"q1", "q2", "q3", "q4", "q6"}
    assert targets["q2"] == tuple(f"poison-q2-{i}" for i in range(4))


def test_poison_share_subset() -> None:
    corpus = make_corpus()
    poisoned = poison(corpus, share=0.4, per_question=2, seed=7)
    targets = attack_targets(poisoned)
    assert len(targets) == round(0.4 * 5)
    assert sum(map(len, targets.values())) == 2 * len(targets)
    assert attack_targets(corpus) == {}


def test_injecting_twice_is_refused() -> None:
    once = poison(make_corpus(), per_question=1)
    with pytest.raises(InputError, match="already taken"):
        poison(once, per_question=1)


def test_drift_later_contradicting_note() -> None:
    corpus = make_corpus()
    drifted = temporal_drift(corpus, share=1.0, seed=0)
    injected = {span.external_id: span for spans in _injected(corpus, drifted).values() for span in spans}
    assert set(injected) == {"drift-q1", "drift-q2", "drift-q4", "drift-q5", "drift-q6"}  # q3 has no answer
    assert injected["drift-q1"].source_ts == "2023-05-13T10:00:00+00:00"  # latest a11 (day 12) + 1 day
    assert injected["drift-q4"].source_ts is None
    assert injected["drift-q5"].family == "drift"  # no gold
    assert injected["drift-q2"].family == "fam2"
    assert "Paris" in injected["drift-q1"].text
    assert drifted.questions == corpus.questions
    assert attack_targets(drifted) == {}
    half = temporal_drift(corpus, share=0.5, seed=0)
    assert sum(map(len, _injected(corpus, half).values())) == round(0.5 * 5)


def test_asked_before_puts_each_question_into_its_evidence_family() -> None:
    corpus = make_corpus()
    asked = question_notes(corpus)
    injected = {span.external_id: span for spans in _injected(corpus, asked).values() for span in spans}
    with_gold = {q.id: q for q in corpus.questions if q.gold}
    assert set(injected) == {f"asked-{qid}" for qid in with_gold} - {"asked-q5"}  # q5's gold names no span
    for qid, question in with_gold.items():
        note = injected.get(f"asked-{qid}")
        if note is None:
            continue
        gold = next(s for s in corpus.spans[question.namespace] if s.external_id == question.gold[0])
        assert note.text == question.question.strip()
        assert (note.family, note.document_id) == (gold.family, note.external_id)
    assert attack_targets(asked) == {} and asked.questions == corpus.questions


@pytest.mark.parametrize("keep", [1, 3, 5])
def test_sparse_pools(keep: int) -> None:
    corpus = make_corpus()
    sparse = sparse_pools(corpus, keep=keep, seed=0)
    assert len(sparse.spans) == len(corpus.questions)
    for old, new in zip(corpus.questions, sparse.questions, strict=True):
        assert new.namespace == f"{old.namespace}/sparse-{old.id}"
        assert (new.id, new.gold, new.answers) == (old.id, old.gold, old.answers)
        pool = sparse.spans[new.namespace]
        ids = {span.external_id for span in pool}
        assert set(old.gold) <= ids
        assert len(pool) == max(keep, len(old.gold))
        assert all(span in corpus.spans[old.namespace] for span in pool)


# -- poisoning metrics ------------------------------------------------------------------


def _result(question_id: str, gold: tuple[str, ...], packed: tuple[str, ...]) -> QuestionResult:
    return QuestionResult(question_id, "c", gold, packed, tuple(f"text {p}" for p in packed), ())


def test_poisoning_metrics_known_values() -> None:
    poisoned_ids = {"q1": ("p1a", "p1b"), "q2": ("p2a",), "q3": ("p3a",)}
    results = [
        _result("q1", ("g1", "g2"), ("p1a", "g1", "x", "p1b")),  # poisoned 2/4, recall 1/2
        _result("q2", ("g3",), ("g3", "x", "y", "p1a")),  # another question's poison counts: 1/4
        _result("q3", ("g4",), ("g4", "z")),  # clean pack: 0/2, recall 1
        _result("q4", ("g5",), ("p2a", "p2a")),  # not attacked: ignored
    ]
    assert attack_inclusion_rate(results, poisoned_ids) == pytest.approx(2 / 3)
    assert poisoned_share(results, poisoned_ids) == pytest.approx(3 / 10)
    assert clean_recall_under_attack(results, poisoned_ids) == pytest.approx((0.5 + 1 + 1) / 3)


def test_poisoning_metrics_undefined() -> None:
    assert math.isnan(attack_inclusion_rate([], {"q1": ("p",)}))
    assert math.isnan(poisoned_share([_result("q1", ("g",), ())], {"q1": ("p",)}))
    assert math.isnan(clean_recall_under_attack([_result("q1", (), ("p",))], {"q1": ("p",)}))


def test_metrics_on_poisoned_corpus_roundtrip() -> None:
    corpus = make_corpus()
    targets = attack_targets(apply_condition(corpus, "poison-spread"))
    results = [_result(q, (), (targets[q][0], "a1")) for q in sorted(targets)]
    assert attack_inclusion_rate(results, targets) == 1.0
    assert poisoned_share(results, targets) == 0.5


def test_poison_styles_and_attacker_families() -> None:
    corpus = make_corpus()
    question = next(q for q in corpus.questions if q.id == "q4")

    def texts(poisoned: EvalCorpus) -> dict[str, list[Span]]:
        return {
            target: [s for s in poisoned.spans["b"] if s.metadata and s.metadata.get("target") == target]
            for target in ("q4",)
        }

    verbatim = texts(poison(corpus, per_question=2, seed=1))["q4"]
    assert all(span.text.startswith(question.question) for span in verbatim)
    paraphrased = texts(poison(corpus, per_question=2, style="paraphrase", seed=1))["q4"]
    assert all(span.text.startswith("People keep asking about ") for span in paraphrased)
    assert all(question.question not in span.text and "not a bike" in span.text for span in paraphrased)
    echoed = texts(poison(corpus, per_question=2, style="echo", seed=1))["q4"]
    assert [span.text for span in echoed] == ["Cy buy Cy buy", "Cy buy Cy buy"]
    fresh = texts(poison(corpus, per_question=3, families="fresh"))["q4"]
    assert [span.family for span in fresh] == ["src-q4-0", "src-q4-1", "src-q4-2"]
    # "pair": a namespace's attacked questions two by two share fresh families (q4 and q6 in "b").
    paired = [
        s
        for s in poison(corpus, per_question=2, families="pair").spans["b"]
        if s.metadata and s.metadata.get("poisoned")
    ]
    assert [(s.metadata["target"], s.family) for s in paired if s.metadata] == [
        ("q4", "src-q4-0"),
        ("q4", "src-q4-1"),
        ("q6", "src-q4-0"),
        ("q6", "src-q4-1"),
    ]
    # The largest family of "b" is src0 (3 notes, ties broken by name): imitated as src0.
    lookalike = poison(corpus, per_question=2, families="lookalike")
    assert {s.family for s in lookalike.spans["b"] if s.metadata and s.metadata.get("poisoned")} == {"src0."}
    assert {s.family for s in lookalike.spans["a"] if s.metadata and s.metadata.get("poisoned")} == {"fam0."}
