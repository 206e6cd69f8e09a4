"""The evaluation metrics, their summary and the paired bootstrap, on hand-checked cases."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgmem.errors import InputError
from pgmem.eval.metrics import (
    Difference,
    QuestionResult,
    answer_containment,
    contains_answer,
    evidence_precision,
    evidence_recall,
    full_support,
    normalise_answer,
    paired_bootstrap,
    summarise,
    token_f1,
)


def result(
    question_id: str = "q",
    *,
    category: str = "c",
    gold: tuple[str, ...] = (),
    packed: tuple[str, ...] = (),
    packed_texts: tuple[str, ...] = (),
    answers: tuple[object, ...] = (),
    latency_ms: dict[str, float] | None = None,
) -> QuestionResult:
    return QuestionResult(
        question_id=question_id,
        category=category,
        gold=gold,
        packed=packed,
        packed_texts=packed_texts,
        answers=answers,  # type: ignore[arg-type]  # LoCoMo answers may be ints
        latency_ms=latency_ms or {},
    )


# --- evidence metrics -------------------------------------------------------------


def test_recall_counts_distinct_gold_ids_once() -> None:
    r = result(gold=("g1", "g2", "g2"), packed=("g1", "x", "g1"))
    assert evidence_recall(r) == 0.5
    assert evidence_recall(result(gold=("g1", "g2"), packed=("g2", "g1"))) == 1.0


def test_recall_of_an_empty_pack_is_zero_and_without_gold_undefined() -> None:
    assert evidence_recall(result(gold=("g1",), packed=())) == 0.0
    assert evidence_recall(result(gold=(), packed=("x",))) is None


def test_precision_counts_every_packed_item() -> None:
    r = result(gold=("g1", "g2"), packed=("g1", "x", "g1", "y"))
    assert evidence_precision(r) == 0.5
    assert evidence_precision(result(gold=("g1",), packed=("x", "y", "z", "g1"))) == 0.25


def test_precision_is_undefined_without_gold_or_without_a_pack() -> None:
    assert evidence_precision(result(gold=(), packed=("x",))) is None
    assert evidence_precision(result(gold=("g1",), packed=())) is None


def test_full_support() -> None:
    assert full_support(result(gold=("g1", "g2", "g1"), packed=("g2", "x", "g1"))) == 1.0
    assert full_support(result(gold=("g1", "g2"), packed=("g1", "g1"))) == 0.0
    assert full_support(result(gold=("g1",), packed=())) == 0.0
    assert full_support(result(gold=(), packed=("g1",))) is None


# --- answers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  A  cat,\tan apple\n", "cat apple"),
        ("7 May, 2023", "7 may 2023"),
        ("“Quoted” — text…", "quoted text"),
        ("Then theatre", "then theatre"),
        ("the", ""),
        (7, "7"),
        (2023, "2023"),
    ],
)
def test_normalise_answer(raw: object, normalised: str) -> None:
    assert normalise_answer(raw) == normalised


def test_containment_matches_after_normalisation() -> None:
    r = result(answers=("The Louvre.",), packed_texts=("We visited the LOUVRE, yesterday",))
    assert answer_containment(r) == 1.0
    assert answer_containment(result(answers=("Rome", "Paris"), packed_texts=("a", "paris!"))) == 1.0
    assert answer_containment(result(answers=("Rome",), packed_texts=("Paris",))) == 0.0


def test_containment_of_int_answers_matches_whole_tokens() -> None:
    assert answer_containment(result(answers=(7,), packed_texts=("It took 7 years.",))) == 1.0
    assert answer_containment(result(answers=(7,), packed_texts=("She was 17.",))) == 0.0


def test_containment_joins_texts_with_a_space() -> None:
    assert answer_containment(result(answers=("in Paris",), packed_texts=("we met in", "Paris"))) == 1.0
    assert answer_containment(result(answers=("Paris",), packed_texts=("Par", "is"))) == 0.0


def test_containment_is_undefined_without_usable_answers() -> None:
    assert answer_containment(result(answers=(), packed_texts=("anything",))) is None
    assert answer_containment(result(answers=("the", "?!"), packed_texts=("the",))) is None
    assert answer_containment(result(answers=("x",), packed_texts=())) == 0.0


def test_a_model_answer_contains_the_gold_answer_as_whole_tokens() -> None:
    assert contains_answer("She moved to Boston in 2019.", ("boston",)) == 1.0
    assert contains_answer("She was 17.", (7,)) == 0.0
    assert contains_answer("anything", ("the",)) is None


def test_token_f1_by_hand() -> None:
    # predicted "caroline went to boston" (4 tokens), gold "boston" (1): P 1/4, R 1, F1 0.4
    assert token_f1("Caroline went to Boston.", ("Boston",)) == pytest.approx(0.4)
    assert token_f1("7 May 2023", ("7 May 2023", "May")) == 1.0  # the best gold answer counts
    assert token_f1("unknown", ("Boston",)) == 0.0
    assert token_f1("", ("Boston",)) == 0.0
    assert token_f1("x", ("a", "?")) is None
    # Bags of tokens: a repeated word is matched once per occurrence in the gold answer.
    assert token_f1("art art", ("art show",)) == pytest.approx(0.5)


# --- summarise --------------------------------------------------------------------


def test_summarise_two_categories_by_hand() -> None:
    results = [
        # recall .5, precision .5, full 0, containment 1
        result(
            "q1",
            category="single",
            gold=("a", "b"),
            packed=("a", "x"),
            packed_texts=("alpha text", "x"),
            answers=("Alpha",),
            latency_ms={"stage_one": 10.0},
        ),
        # recall 1, precision 1, full 1, containment undefined
        result(
            "q2",
            category="single",
            gold=("c",),
            packed=("c",),
            packed_texts=("c",),
            latency_ms={"stage_one": 20.0, "pack": 1.0},
        ),
        # evidence metrics undefined, containment 0
        result(
            "q3",
            category="multi",
            packed=("z",),
            packed_texts=("gamma",),
            answers=("beta",),
            latency_ms={"stage_one": 30.0, "pack": 3.0},
        ),
        # recall 0, precision undefined, full 0, containment 0
        result("q4", category="multi", gold=("d", "e"), answers=("delta",), latency_ms={"stage_one": 40.0}),
    ]
    summary = summarise(results)
    assert summary.n == 4
    assert summary.recall == pytest.approx(50.0)
    assert summary.precision == pytest.approx(75.0)
    assert summary.full_support == pytest.approx(100 / 3)
    assert summary.answer_containment == pytest.approx(100 / 3)
    assert list(summary.by_category) == ["multi", "single"]

    single = summary.by_category["single"]
    assert single.n == 2
    assert (single.recall, single.precision, single.full_support) == pytest.approx((75.0, 75.0, 50.0))
    assert single.answer_containment == pytest.approx(100.0)
    assert single.by_category == {}
    assert single.latency_ms == {
        "stage_one": {"p50": 15.0, "p95": pytest.approx(19.5)},
        "pack": {"p50": 1.0, "p95": 1.0},
    }

    multi = summary.by_category["multi"]
    assert (multi.n, multi.recall, multi.full_support, multi.answer_containment) == (2, 0.0, 0.0, 0.0)
    assert math.isnan(multi.precision)
    assert multi.by_category == {}

    # stage_one [10, 20, 30, 40]: p50 = 25, p95 at rank 2.85 = 30 + 0.85 * 10; pack [1, 3].
    assert summary.latency_ms["stage_one"] == {"p50": 25.0, "p95": pytest.approx(38.5)}
    assert summary.latency_ms["pack"] == {"p50": 2.0, "p95": pytest.approx(2.9)}


def test_latency_percentiles_on_a_known_list() -> None:
    results = [result(f"q{i}", latency_ms={"stage_one": float(i)}) for i in range(1, 101)]
    latency = summarise(results).latency_ms["stage_one"]
    assert latency["p50"] == pytest.approx(50.5)
    assert latency["p95"] == pytest.approx(95.05)


def test_summarise_nothing_is_nan() -> None:
    summary = summarise([])
    assert summary.n == 0
    assert all(math.isnan(v) for v in (summary.recall, summary.precision, summary.full_support))
    assert math.isnan(summary.answer_containment)
    assert summary.by_category == {}
    assert summary.latency_ms == {}


# --- paired bootstrap -------------------------------------------------------------


Metric = Callable[[QuestionResult], float | None]


def two_systems(
    values_a: Sequence[float | None], values_b: Sequence[float | None]
) -> tuple[list[QuestionResult], list[QuestionResult], Metric]:
    """Results of systems A and B plus a metric that reads back the given per-question values."""
    a = [result(f"q{i}", category="a") for i in range(len(values_a))]
    b = [result(f"q{i}", category="b") for i in range(len(values_b))]

    def metric(r: QuestionResult) -> float | None:
        values = values_a if r.category == "a" else values_b
        return values[int(r.question_id[1:])]

    return a, b, metric


def test_identical_systems_differ_by_exactly_zero() -> None:
    results = [result(f"q{i}", gold=("g",), packed=("g",) if i % 3 else ("x",), packed_texts=()) for i in range(50)]
    difference = paired_bootstrap(results, results, evidence_recall, name="recall")
    assert difference == Difference(metric="recall", mean=0.0, low=0.0, high=0.0, n=50)


@pytest.mark.parametrize("k", [1.0, 0.5, 0.25])
def test_a_constant_advantage_gives_a_degenerate_interval(k: float) -> None:
    a, b, metric = two_systems([k] * 40, [0.0] * 40)
    difference = paired_bootstrap(a, b, metric, name="m")
    assert (difference.mean, difference.low, difference.high, difference.n) == (100 * k, 100 * k, 100 * k, 40)


def test_full_support_better_on_every_question() -> None:
    a = [result(f"q{i}", gold=("g",), packed=("g",)) for i in range(30)]
    b = [result(f"q{i}", gold=("g",), packed=("x",)) for i in range(30)]
    assert paired_bootstrap(a, b, full_support, name="full_support") == Difference(
        "full_support", 100.0, 100.0, 100.0, 30
    )
    assert paired_bootstrap(b, a, full_support, name="full_support") == Difference(
        "full_support", -100.0, -100.0, -100.0, 30
    )


def test_pairs_by_question_id_not_by_position() -> None:
    a = [result("q1", gold=("g",), packed=("g",)), result("q2", gold=("g",), packed=())]
    b = [result("q2", gold=("g",), packed=()), result("q1", gold=("g",), packed=("g",))]
    assert paired_bootstrap(a, b, evidence_recall, name="recall") == Difference("recall", 0.0, 0.0, 0.0, 2)


def test_two_questions_span_the_whole_range() -> None:
    a = [result("q1", gold=("g",), packed=("g",)), result("q2", gold=("g",), packed=())]
    b = [result("q1", gold=("g",), packed=()), result("q2", gold=("g",), packed=())]
    difference = paired_bootstrap(a, b, evidence_recall, name="recall")
    assert (difference.mean, difference.low, difference.high, difference.n) == (50.0, 0.0, 100.0, 2)


def test_keeps_only_questions_defined_for_both() -> None:
    a = [result("q1", gold=("g",), packed=("g",)), result("q2", gold=(), packed=()), result("q3", gold=("g",))]
    b = [result("q1", gold=("g",)), result("q2", gold=("g",), packed=("g",)), result("q3", gold=("g",))]
    difference = paired_bootstrap(a, b, evidence_recall, name="recall")
    assert difference.n == 2
    assert difference.mean == 50.0


def test_nothing_defined_for_both_is_nan() -> None:
    a = [result("q1", gold=())]
    difference = paired_bootstrap(a, a, evidence_recall, name="recall")
    assert difference.n == 0
    assert math.isnan(difference.mean) and math.isnan(difference.low) and math.isnan(difference.high)


def test_a_fixed_seed_gives_a_fixed_interval() -> None:
    a, b, metric = two_systems([(i * 7 % 11) / 10 for i in range(200)], [(i * 5 % 13) / 12 for i in range(200)])
    first = paired_bootstrap(a, b, metric, name="m", seed=7)
    assert paired_bootstrap(a, b, metric, name="m", seed=7) == first
    other = paired_bootstrap(a, b, metric, name="m", seed=8)
    assert other.mean == first.mean
    assert (other.low, other.high) != (first.low, first.high)
    assert first.low < first.mean < first.high


def test_mismatched_question_sets_are_refused() -> None:
    a = [result("q1"), result("q2")]
    with pytest.raises(InputError, match="same question ids"):
        paired_bootstrap(a, [result("q1"), result("q3")], full_support, name="m")
    with pytest.raises(InputError, match="same question ids"):
        paired_bootstrap(a, [result("q1")], full_support, name="m")
    with pytest.raises(InputError, match="more than once"):
        paired_bootstrap(a, [result("q1"), result("q2"), result("q1")], full_support, name="m")


@pytest.mark.parametrize(("option", "value"), [("resamples", 0), ("resamples", 2.5), ("confidence", 1.0)])
def test_out_of_range_options_are_refused(option: str, value: float) -> None:
    a = [result("q1", gold=("g",))]
    with pytest.raises(InputError, match=option):
        paired_bootstrap(a, a, full_support, name="m", **{option: value})  # type: ignore[arg-type]


metric_value = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0.0, 0.5, 1.0]))


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(metric_value, metric_value), min_size=1, max_size=40),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    resamples=st.integers(min_value=200, max_value=1000),
    confidence=st.floats(min_value=0.5, max_value=0.99),
)
def test_the_interval_contains_the_observed_mean(
    pairs: list[tuple[float | None, float | None]], seed: int, resamples: int, confidence: float
) -> None:
    a, b, metric = two_systems([x for x, _ in pairs], [y for _, y in pairs])
    difference = paired_bootstrap(a, b, metric, name="m", seed=seed, resamples=resamples, confidence=confidence)
    defined = [(x, y) for x, y in pairs if x is not None and y is not None]
    assert difference.n == len(defined)
    if not defined:
        assert math.isnan(difference.mean)
        return
    assert difference.mean == pytest.approx(100 * sum(x - y for x, y in defined) / len(defined))
    assert difference.low <= difference.high
    assert difference.low <= difference.mean <= difference.high
