"""Per-question retrieval metrics, their summaries and a paired bootstrap.

Everything here reads :class:`QuestionResult` records built by the harness and
returns numbers: no database, no I/O, numpy only. A metric returns ``None`` when it
is not defined for a question (no gold evidence, nothing packed, no gold answer);
summaries average over the questions where it is defined. See
``docs/eval_metrics.md`` for the definitions.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pgmem.errors import InputError

__all__ = [
    "Difference",
    "QuestionResult",
    "Summary",
    "answer_containment",
    "contains_answer",
    "evidence_precision",
    "evidence_recall",
    "full_support",
    "normalise_answer",
    "paired_bootstrap",
    "summarise",
    "token_f1",
]

_PERCENTILES = {"p50": 50.0, "p95": 95.0}

# Bounds the resample-index matrix to about 32 MB whatever the question count.
_BOOTSTRAP_BLOCK_CELLS = 4_000_000

_ARTICLES = re.compile(r"\b(a|an|the)\b")


@dataclass(frozen=True)
class QuestionResult:
    """What one system packed for one question, with the question's gold labels.

    Parameters
    ----------
    question_id : str
        The question's id, unique within a question set; pairs systems in
        :func:`paired_bootstrap`.
    category : str
        The question's category (e.g. LoCoMo's multi-hop, temporal, …).
    gold : tuple of str
        Gold evidence ids (external ids of the spans that support the answer).
    packed : tuple of str
        External ids of the packed notes, in pack order (may repeat when several
        notes come from one span).
    packed_texts : tuple of str
        The texts of the packed notes, in the same order.
    answers : tuple of str
        Gold answers; may be empty. Non-string answers are accepted and turned into
        text by :func:`normalise_answer`.
    latency_ms : mapping of str to float
        Wall time per stage, e.g. ``{"stage_one": 5.1, "calibrate_and_pack": 0.4}``.
    gold_documents : tuple of str
        The documents (sessions, articles) of the gold evidence; empty when unknown.
    packed_documents : tuple of str
        The document of each packed note, in pack order (same length as ``packed``, or
        empty when unknown). The session-level metrics read these two.
    """

    question_id: str
    category: str
    gold: tuple[str, ...]
    packed: tuple[str, ...]
    packed_texts: tuple[str, ...]
    answers: tuple[str, ...]
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    gold_documents: tuple[str, ...] = ()
    packed_documents: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summary:
    """One system's metrics over a question set.

    Metric means are percentages in [0, 100] over the questions where the metric is
    defined, NaN when it is defined for none.

    Parameters
    ----------
    n : int
        Number of questions summarised.
    recall, precision, full_support, answer_containment : float
        Means of :func:`evidence_recall`, :func:`evidence_precision`,
        :func:`full_support` and :func:`answer_containment`, times 100.
    by_category : mapping of str to Summary
        The same summary per category, sorted by category name; the inner summaries
        have an empty ``by_category``.
    latency_ms : mapping of str to mapping of str to float
        Per stage, the ``p50`` and ``p95`` of the latencies reported for that stage
        (linear interpolation between order statistics).
    published : mapping of str to float
        The metrics other memory tools publish (:data:`PUBLISHED_METRICS`), in percent:
        easier than ours, reported so figures can be compared with theirs.
    """

    n: int
    recall: float
    precision: float
    full_support: float
    answer_containment: float
    by_category: Mapping[str, Summary] = field(default_factory=dict)
    latency_ms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    published: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Difference:
    """System A minus system B on one metric, in percentage points.

    Parameters
    ----------
    metric : str
        The metric's name, as given to :func:`paired_bootstrap`.
    mean : float
        Observed mean paired difference (NaN when ``n`` is 0).
    low, high : float
        Percentile bootstrap confidence interval of the mean difference.
    n : int
        Number of questions where the metric is defined for both systems.
    """

    metric: str
    mean: float
    low: float
    high: float
    n: int


def evidence_recall(result: QuestionResult) -> float | None:
    """Share of the distinct gold evidence ids that were packed.

    Parameters
    ----------
    result : QuestionResult
        Reads ``gold`` and ``packed``.

    Returns
    -------
    float or None
        In [0, 1]; ``None`` when the question has no gold evidence.
    """
    gold = set(result.gold)
    if not gold:
        return None
    return len(gold & set(result.packed)) / len(gold)


def evidence_precision(result: QuestionResult) -> float | None:
    """Share of the packed items whose id is a gold evidence id.

    Every packed item counts, so two notes from one gold span count twice.

    Parameters
    ----------
    result : QuestionResult
        Reads ``gold`` and ``packed``.

    Returns
    -------
    float or None
        In [0, 1]; ``None`` when the question has no gold evidence or nothing was packed.
    """
    gold = set(result.gold)
    if not gold or not result.packed:
        return None
    return sum(1 for item in result.packed if item in gold) / len(result.packed)


def full_support(result: QuestionResult) -> float | None:
    """Whether every gold evidence id was packed.

    Parameters
    ----------
    result : QuestionResult
        Reads ``gold`` and ``packed``.

    Returns
    -------
    float or None
        1.0 or 0.0; ``None`` when the question has no gold evidence.
    """
    gold = set(result.gold)
    if not gold:
        return None
    return 1.0 if gold <= set(result.packed) else 0.0


def normalise_answer(text: object) -> str:
    """SQuAD-style normalisation of an answer or a passage.

    Lower-cases, deletes punctuation (any Unicode punctuation character), drops the
    articles *a*, *an*, *the* and collapses whitespace; digits are kept. Non-string
    values (LoCoMo has integer answers) are first turned into text with ``str``.

    Parameters
    ----------
    text : object
        The answer or passage.

    Returns
    -------
    str
        The normalised text (may be empty).
    """
    lowered = str(text).lower()
    without_punctuation = "".join(ch for ch in lowered if not unicodedata.category(ch).startswith("P"))
    without_articles = _ARTICLES.sub(" ", without_punctuation)
    return " ".join(without_articles.split())


def answer_containment(result: QuestionResult) -> float | None:
    """Whether a gold answer occurs in the packed text, after normalisation.

    The packed texts are joined with spaces and normalised; an answer occurs when
    its normalised tokens appear there as a run of whole tokens (so ``7`` does not
    occur in ``17``). Answers that normalise to nothing (``"the"``, ``"?"``) are
    ignored.

    Parameters
    ----------
    result : QuestionResult
        Reads ``answers`` and ``packed_texts``.

    Returns
    -------
    float or None
        1.0 or 0.0; ``None`` when the question has no answer that survives normalisation.
    """
    return contains_answer(" ".join(result.packed_texts), result.answers)


def contains_answer(text: str, answers: Sequence[object]) -> float | None:
    """Whether a gold answer occurs in ``text`` as a run of whole normalised tokens.

    The rule of :func:`answer_containment`, for any text (a model's answer, say).

    Returns
    -------
    float or None
        1.0 or 0.0; ``None`` when no answer survives normalisation.
    """
    normalised = [answer for answer in map(normalise_answer, answers) if answer]
    if not normalised:
        return None
    passage = f" {normalise_answer(text)} "
    return 1.0 if any(f" {answer} " in passage for answer in normalised) else 0.0


def token_f1(prediction: str, answers: Sequence[object]) -> float | None:
    """SQuAD token F1 of ``prediction`` against the best-matching gold answer.

    Both sides are normalised with :func:`normalise_answer` and compared as bags of
    tokens: F1 = 2PR / (P + R) with P the share of predicted tokens in the answer and R
    the share of answer tokens predicted.

    Returns
    -------
    float or None
        In [0, 1]; ``None`` when no answer survives normalisation.
    """
    golds = [answer.split() for answer in map(normalise_answer, answers) if answer]
    if not golds:
        return None
    predicted = normalise_answer(prediction).split()
    best = 0.0
    for gold in golds:
        common = sum((Counter(predicted) & Counter(gold)).values())
        if common:
            precision, recall = common / len(predicted), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


# -- the metrics other memory tools publish ---------------------------------------------


def _first_distinct(items: Sequence[str], k: int) -> list[str]:
    """The first ``k`` distinct items, in order."""
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
            if len(seen) == k:
                break
    return seen


def session_any_hit(result: QuestionResult, k: int = 5) -> float | None:
    """Whether a gold document (session) is among the first ``k`` distinct packed documents.

    The metric behind figures such as "94 % on LoCoMo" that memory tools publish: one
    gold *session* anywhere in the top five sessions counts as a hit, however many gold
    turns the question needs and whether any of them was retrieved.

    Returns
    -------
    float or None
        1.0 or 0.0; ``None`` when the question's gold documents are unknown.
    """
    gold = set(result.gold_documents)
    if not gold:
        return None
    return 1.0 if gold & set(_first_distinct(result.packed_documents, k)) else 0.0


def recall_any(result: QuestionResult, k: int) -> float | None:
    """LongMemEval's ``recall_any@k`` at turn level: a gold id among the first ``k`` packed ids."""
    gold = set(result.gold)
    if not gold:
        return None
    return 1.0 if gold & set(_first_distinct(result.packed, k)) else 0.0


def recall_all(result: QuestionResult, k: int) -> float | None:
    """LongMemEval's ``recall_all@k`` at turn level: every gold id among the first ``k`` packed ids."""
    gold = set(result.gold)
    if not gold:
        return None
    return 1.0 if gold <= set(_first_distinct(result.packed, k)) else 0.0


def _dcg(relevances: Sequence[float]) -> float:
    # LongMemEval's DCG: the first two ranks both weigh 1, rank i >= 2 weighs 1 / log2(i).
    if not relevances:
        return 0.0
    return float(relevances[0]) + sum(r / math.log2(i) for i, r in enumerate(relevances[1:], start=2))


def ndcg_any(result: QuestionResult, k: int) -> float | None:
    """LongMemEval's ``ndcg_any@k`` at turn level: binary-relevance NDCG of the first ``k`` packed ids.

    The ideal ranking puts ``min(len(gold), k)`` gold ids first, as LongMemEval's does
    over the whole haystack.
    """
    gold = set(result.gold)
    if not gold:
        return None
    ranked = _first_distinct(result.packed, k)
    ideal = _dcg([1.0] * min(len(gold), k))
    return _dcg([1.0 if item in gold else 0.0 for item in ranked]) / ideal


#: Name → metric of what other tools publish (LongMemEval reports k = 5 and 10; a pack of
#: 8 makes @10 the whole pack).
PUBLISHED_METRICS: dict[str, Callable[[QuestionResult], float | None]] = {
    "session_any@5": session_any_hit,
    "recall_any@5": lambda r: recall_any(r, 5),
    "recall_all@5": lambda r: recall_all(r, 5),
    "ndcg_any@5": lambda r: ndcg_any(r, 5),
    "recall_any@10": lambda r: recall_any(r, 10),
    "recall_all@10": lambda r: recall_all(r, 10),
    "ndcg_any@10": lambda r: ndcg_any(r, 10),
}


def summarise(results: Sequence[QuestionResult]) -> Summary:
    """Summarise one system over a question set, overall and per category.

    Parameters
    ----------
    results : sequence of QuestionResult
        One record per question.

    Returns
    -------
    Summary
        Metric means in percent, latency percentiles per stage, and one inner
        summary per category.
    """
    categories: dict[str, list[QuestionResult]] = {}
    for result in results:
        categories.setdefault(result.category, []).append(result)
    overall = _summarise_flat(results)
    by_category = {name: _summarise_flat(categories[name]) for name in sorted(categories)}
    return Summary(
        n=overall.n,
        recall=overall.recall,
        precision=overall.precision,
        full_support=overall.full_support,
        answer_containment=overall.answer_containment,
        by_category=by_category,
        latency_ms=overall.latency_ms,
        published=overall.published,
    )


def _summarise_flat(results: Sequence[QuestionResult]) -> Summary:
    stages: dict[str, list[float]] = {}
    for result in results:
        for stage, milliseconds in result.latency_ms.items():
            stages.setdefault(stage, []).append(milliseconds)
    return Summary(
        n=len(results),
        recall=_mean_percent(evidence_recall(result) for result in results),
        precision=_mean_percent(evidence_precision(result) for result in results),
        full_support=_mean_percent(full_support(result) for result in results),
        answer_containment=_mean_percent(answer_containment(result) for result in results),
        latency_ms={stage: _percentiles(stages[stage]) for stage in sorted(stages)},
        published={name: _mean_percent(map(metric, results)) for name, metric in PUBLISHED_METRICS.items()},
    )


def _mean_percent(values: Iterable[float | None]) -> float:
    defined = [value for value in values if value is not None]
    if not defined:
        return math.nan
    return 100.0 * float(np.mean(defined))


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=np.float64)
    return {name: float(np.percentile(array, q)) for name, q in _PERCENTILES.items()}


def paired_bootstrap(
    a: Sequence[QuestionResult],
    b: Sequence[QuestionResult],
    metric: Callable[[QuestionResult], float | None],
    *,
    name: str,
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Difference:
    """Mean difference A - B on a metric with a paired percentile-bootstrap interval.

    Questions are paired by ``question_id``; only those where the metric is defined
    for both systems are kept. Question indices are resampled with replacement
    (``numpy.random.default_rng(seed)``) and the interval is read off the
    percentiles of the resampled mean differences.

    Parameters
    ----------
    a, b : sequence of QuestionResult
        The two systems' results over the same question set.
    metric : callable
        A per-question metric returning a value in [0, 1] or ``None``.
    name : str
        The metric's name, copied to the result.
    resamples : int
        Number of bootstrap resamples (at least 1).
    seed : int
        Seed of the generator; a fixed seed gives a fixed interval.
    confidence : float
        Coverage of the interval, strictly between 0 and 1.

    Returns
    -------
    Difference
        Mean and interval in percentage points; all NaN when no question is defined
        for both systems.

    Raises
    ------
    InputError
        When the question ids of ``a`` and ``b`` differ or repeat, or when
        ``resamples`` or ``confidence`` is out of range.
    """
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise InputError(f"resamples must be an integer >= 1, got {resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be in (0, 1), got {confidence!r}")
    by_id_a = _by_question_id(a, "a")
    by_id_b = _by_question_id(b, "b")
    if by_id_a.keys() != by_id_b.keys():
        only_a = sorted(by_id_a.keys() - by_id_b.keys())
        only_b = sorted(by_id_b.keys() - by_id_a.keys())
        raise InputError(
            "a and b must cover the same question ids: "
            f"{len(only_a)} only in a (e.g. {only_a[:3]}), {len(only_b)} only in b (e.g. {only_b[:3]})"
        )

    differences: list[float] = []
    for question_id in sorted(by_id_a):
        value_a = metric(by_id_a[question_id])
        value_b = metric(by_id_b[question_id])
        if value_a is not None and value_b is not None:
            differences.append(100.0 * (value_a - value_b))
    if not differences:
        return Difference(metric=name, mean=math.nan, low=math.nan, high=math.nan, n=0)

    observed = np.asarray(differences, dtype=np.float64)
    resampled_means = _bootstrap_means(observed, resamples, np.random.default_rng(seed))
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(resampled_means, [tail, 100.0 - tail])
    return Difference(
        metric=name,
        mean=float(observed.mean()),
        low=float(low),
        high=float(high),
        n=len(differences),
    )


def _by_question_id(results: Sequence[QuestionResult], which: str) -> dict[str, QuestionResult]:
    by_id: dict[str, QuestionResult] = {}
    for result in results:
        if result.question_id in by_id:
            raise InputError(f"question_id {result.question_id!r} appears more than once in {which}")
        by_id[result.question_id] = result
    return by_id


def _bootstrap_means(
    observed: npt.NDArray[np.float64], resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    count = observed.shape[0]
    block = max(1, _BOOTSTRAP_BLOCK_CELLS // count)
    means = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, block):
        stop = min(start + block, resamples)
        indices = rng.integers(0, count, size=(stop - start, count))
        means[start:stop] = observed[indices].mean(axis=1)
    return means
