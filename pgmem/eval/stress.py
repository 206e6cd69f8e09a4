"""Stress conditions: pure, seeded transformations of an evaluation corpus.

Each condition takes an :class:`~pgmem.eval.datasets.EvalCorpus` and returns a new one
(the input is never mutated): family labels shuffled, relabelled, merged or split;
adversarial notes injected (provenance spoofing, PoisonedRAG-style poisoning, temporal
drift); or tiny per-question pools. A condition is deterministic for a given ``seed``:
it draws from one ``random.Random(seed)`` and visits namespaces in sorted order and
spans in source order. No database, no I/O. See docs/eval_stress.md.

Injected notes carry their own bookkeeping in ``Span.metadata``: ``{"poisoned": true,
"attack": "spoof" | "poison", "target": <question id>}`` for adversarial notes and
``{"drift": true, "target": <question id>}`` for drift notes, so the attacked questions
and their poisoned note ids can be read back with :func:`attack_targets`.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from pgmem.errors import ConfigurationError, InputError
from pgmem.eval.datasets import EvalCorpus, EvalQuestion
from pgmem.eval.metrics import QuestionResult, evidence_recall
from pgmem.ingestion.spans import validate_span
from pgmem.types import Span
from pgmem.validate import parse_timestamp

__all__ = [
    "CONDITIONS",
    "apply_condition",
    "attack_inclusion_rate",
    "attack_targets",
    "clean",
    "clean_recall_under_attack",
    "merge_families",
    "noisy_families",
    "null_families",
    "poison",
    "poisoned_share",
    "sparse_pools",
    "split_families",
    "spoof_provenance",
    "temporal_drift",
]

_FALSE_CLAIMS = (
    "According to records, the answer is not {answer}.",
    "Official records confirm that it was not {answer}.",
    "Contrary to earlier notes, the answer is not {answer}.",
)
_GENERIC_CLAIMS = (
    "According to records, the earlier accounts of this are false.",
    "Official records confirm that this never happened as described.",
    "Contrary to earlier notes, none of that is true.",
)
_DRIFT_CLAIM = "Update: this has since changed; it is no longer {answer}."


# -- helpers ------------------------------------------------------------------------------


def _check_share(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"{name} must be a number in [0, 1], got {value!r}")


def _check_count(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _relabelled(corpus: EvalCorpus, labels: Mapping[str, Sequence[str]]) -> EvalCorpus:
    """A copy of ``corpus`` whose spans of each namespace get the given families, in order."""
    spans = {
        namespace: tuple(
            span if span.family == family else replace(span, family=family)
            for span, family in zip(corpus.spans[namespace], labels[namespace], strict=True)
        )
        for namespace in corpus.spans
    }
    return EvalCorpus(corpus.name, spans, corpus.questions)


def _note(note_id: str, text: str, family: str, metadata: Mapping[str, object], source_ts: str | None = None) -> Span:
    return Span(
        document_id=note_id,
        text=text,
        start=0,
        end=len(text.encode("utf-8")),
        family=family,
        source_ts=source_ts,
        external_id=note_id,
        metadata=dict(metadata),
    )


def _with_injected(corpus: EvalCorpus, injected: Mapping[str, Sequence[Span]]) -> EvalCorpus:
    """``corpus`` with ``injected`` notes appended to their namespaces, each validated."""
    spans = dict(corpus.spans)
    for namespace in sorted(injected):
        existing = spans.get(namespace, ())
        taken: set[str | None] = {span.external_id for span in existing if span.external_id is not None}
        for offset, span in enumerate(injected[namespace]):
            if span.external_id in taken:
                raise InputError(f"namespace {namespace!r}: injected id {span.external_id!r} is already taken")
            taken.add(span.external_id)
            validate_span(len(existing) + offset, span, namespace)
        spans[namespace] = (*existing, *injected[namespace])
    return EvalCorpus(corpus.name, spans, corpus.questions)


def _first_gold_span(corpus: EvalCorpus, question: EvalQuestion) -> Span | None:
    """The span of the question's first gold id that names a span in its namespace."""
    by_id = {span.external_id: span for span in corpus.spans.get(question.namespace, ())}
    for gold in question.gold:
        if gold in by_id:
            return by_id[gold]
    return None


def _false_claim(question: EvalQuestion, index: int) -> str:
    if question.answers:
        claim = _FALSE_CLAIMS[index % len(_FALSE_CLAIMS)].format(answer=question.answers[0])
    else:
        claim = _GENERIC_CLAIMS[index % len(_GENERIC_CLAIMS)]
    return f"{question.question.strip()} {claim}"


def _attackable(corpus: EvalCorpus) -> list[EvalQuestion]:
    return [question for question in corpus.questions if question.gold]


# -- family conditions --------------------------------------------------------------------


def clean(corpus: EvalCorpus, *, seed: int = 0) -> EvalCorpus:
    """The identity condition: a shallow copy of ``corpus`` (``seed`` is ignored)."""
    del seed
    return EvalCorpus(corpus.name, dict(corpus.spans), corpus.questions)


def null_families(corpus: EvalCorpus, *, seed: int = 0) -> EvalCorpus:
    """Shuffle the family labels among the spans of each namespace.

    Each namespace keeps the same multiset of labels, but a label no longer says where a
    span came from: the null model of provenance.
    """
    rng = random.Random(seed)
    labels: dict[str, list[str]] = {}
    for namespace in sorted(corpus.spans):
        families = [span.family for span in corpus.spans[namespace]]
        rng.shuffle(families)
        labels[namespace] = families
    return _relabelled(corpus, labels)


def noisy_families(corpus: EvalCorpus, *, rate: float, seed: int = 0) -> EvalCorpus:
    """Relabel ``round(rate * n)`` spans of each namespace to another of its families.

    The spans are drawn without replacement, and each gets a family of the same namespace
    other than its own, drawn uniformly. A namespace with a single family is unchanged.
    """
    _check_share("rate", rate)
    rng = random.Random(seed)
    labels: dict[str, list[str]] = {}
    for namespace in sorted(corpus.spans):
        families = [span.family for span in corpus.spans[namespace]]
        distinct = sorted(set(families))
        if len(distinct) >= 2:
            for index in sorted(rng.sample(range(len(families)), round(rate * len(families)))):
                families[index] = rng.choice([family for family in distinct if family != families[index]])
        labels[namespace] = families
    return _relabelled(corpus, labels)


def merge_families(corpus: EvalCorpus, *, share: float = 0.5, seed: int = 0) -> EvalCorpus:
    """Merge pairs of families into one label ``"merged:<a>+<b>"`` (``a < b``).

    In each namespace with ``k`` families, ``round(share * k) // 2`` disjoint pairs,
    drawn at random, are merged, so the namespace ends with ``k - round(share * k) // 2``
    labels.
    """
    _check_share("share", share)
    rng = random.Random(seed)
    labels: dict[str, list[str]] = {}
    for namespace in sorted(corpus.spans):
        spans = corpus.spans[namespace]
        distinct = sorted({span.family for span in spans})
        pairs = round(share * len(distinct)) // 2
        chosen = rng.sample(distinct, 2 * pairs)
        mapping: dict[str, str] = {}
        for a, b in zip(chosen[0::2], chosen[1::2], strict=True):
            low, high = sorted((a, b))
            mapping[a] = mapping[b] = f"merged:{low}+{high}"
        labels[namespace] = [mapping.get(span.family, span.family) for span in spans]
    return _relabelled(corpus, labels)


def split_families(corpus: EvalCorpus, *, parts: int = 2, seed: int = 0) -> EvalCorpus:
    """Split each family into labels ``"<f>#1"`` .. ``"<f>#<parts>"`` assigned at random.

    The assignment is balanced: a family's spans are shuffled and dealt round-robin, so a
    family of ``m`` spans becomes exactly ``min(m, parts)`` labels.
    """
    _check_count("parts", parts, 1)
    rng = random.Random(seed)
    labels: dict[str, list[str]] = {}
    for namespace in sorted(corpus.spans):
        families = [span.family for span in corpus.spans[namespace]]
        new = list(families)
        for family in sorted(set(families)):
            members = [index for index, label in enumerate(families) if label == family]
            rng.shuffle(members)
            for position, index in enumerate(members):
                new[index] = f"{family}#{position % parts + 1}"
        labels[namespace] = new
    return _relabelled(corpus, labels)


# -- injected notes -----------------------------------------------------------------------


def spoof_provenance(corpus: EvalCorpus, *, per_question: int = 3, seed: int = 0) -> EvalCorpus:
    """Inject adversarial notes that claim the family of each question's first gold note.

    For each question with a gold id naming a span of its namespace, ``per_question``
    notes ``spoof-<question id>-<i>`` (``i`` from 0) whose text is the question followed by
    a false claim (PoisonedRAG black-box style), family = the first such gold span's
    family; metadata ``{"poisoned": true, "attack": "spoof", "target": <question id>}``.
    The seed picks the claim wordings.
    """
    _check_count("per_question", per_question, 1)
    rng = random.Random(seed)
    injected: dict[str, list[Span]] = {}
    for question in _attackable(corpus):
        trusted = _first_gold_span(corpus, question)
        if trusted is None:
            continue
        offset = rng.randrange(len(_FALSE_CLAIMS))
        for i in range(per_question):
            note_id = f"spoof-{question.id}-{i}"
            metadata = {"poisoned": True, "attack": "spoof", "target": question.id}
            span = _note(note_id, _false_claim(question, offset + i), trusted.family, metadata)
            injected.setdefault(question.namespace, []).append(span)
    return _with_injected(corpus, injected)


def poison(
    corpus: EvalCorpus,
    *,
    share: float = 1.0,
    per_question: int = 5,
    families: str = "one",
    style: str = "verbatim",
    seed: int = 0,
) -> EvalCorpus:
    """PoisonedRAG-style poisoning of a random ``share`` of the questions with gold ids.

    ``round(share * q)`` of the ``q`` questions with gold evidence are drawn; each gets
    ``per_question`` notes ``poison-<question id>-<i>`` (``i`` from 0) in its namespace.

    ``families`` names the attacker's families: ``"one"`` (every note in family
    ``"attacker"``), ``"spread"`` (``"attacker-1"`` .. ``"attacker-<per_question>"``, one
    note each, the same names for every question), ``"fresh"`` (one note per family never
    seen before: ``"src-<question id>-<i>"``), ``"pair"`` (fresh families of two notes:
    note ``i`` of a namespace's first and second attacked question share
    ``"src-<first question id>-<i>"``, the third and fourth the next, ...; a family just
    past one note) or ``"lookalike"`` (one family per namespace
    imitating the namespace's largest family: its name with ``o`` written ``0`` and ``l``
    written ``1``, or ``"<name>."`` when it has neither letter).

    ``style`` is the text: ``"verbatim"`` (the question followed by a false claim),
    ``"paraphrase"`` (the question's content words, reordered and thinned by the seed,
    in a sentence of their own, then the false claim: echoes less of the question) or
    ``"echo"`` (the question's content words repeated twice and no claim: keyword
    stuffing that only wins retrieval).

    Metadata ``{"poisoned": true, "attack": "poison", "target": <question id>}``. Read the
    attacked questions back with :func:`attack_targets`.
    """
    _check_share("share", share)
    _check_count("per_question", per_question, 1)
    if families not in _POISON_FAMILIES:
        raise ConfigurationError(f"families must be one of {', '.join(_POISON_FAMILIES)}, got {families!r}")
    if style not in _POISON_STYLES:
        raise ConfigurationError(f"style must be one of {', '.join(_POISON_STYLES)}, got {style!r}")
    rng = random.Random(seed)
    candidates = _attackable(corpus)
    chosen = set(rng.sample(range(len(candidates)), round(share * len(candidates))))
    injected: dict[str, list[Span]] = {}
    # For "pair": per namespace, the first question of the pair being written.
    pair_of: dict[str, EvalQuestion] = {}
    for index, question in enumerate(candidates):
        if index not in chosen:
            continue
        offset = rng.randrange(len(_FALSE_CLAIMS))
        first = pair_of.pop(question.namespace, None)
        if first is None:
            pair_of[question.namespace] = first = question
        for i in range(per_question):
            note_id = f"poison-{question.id}-{i}"
            family = _attacker_family(corpus, first if families == "pair" else question, families, i)
            metadata = {"poisoned": True, "attack": "poison", "target": question.id}
            injected.setdefault(question.namespace, []).append(
                _note(note_id, _poison_text(question, style, offset + i, rng), family, metadata)
            )
    return _with_injected(corpus, injected)


_POISON_FAMILIES = ("one", "spread", "fresh", "pair", "lookalike")
_POISON_STYLES = ("verbatim", "paraphrase", "echo")
_QUESTION_WORDS = frozenset(
    [
        "what",
        "when",
        "where",
        "who",
        "whom",
        "whose",
        "which",
        "why",
        "how",
        "did",
        "does",
        "do",
        "is",
        "was",
        "were",
        "are",
        "the",
        "a",
        "an",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "by",
        "with",
        "at",
        "from",
        "that",
        "this",
    ]
)


def _content_words(question: EvalQuestion) -> list[str]:
    words = [word.strip("?.,!;:'\"") for word in question.question.split()]
    return [word for word in words if word and word.lower() not in _QUESTION_WORDS]


def _poison_text(question: EvalQuestion, style: str, index: int, rng: random.Random) -> str:
    if style == "verbatim":
        return _false_claim(question, index)
    words = _content_words(question) or [question.question.strip()]
    if style == "echo":
        return " ".join(words + words)
    kept = [word for word in words if rng.random() >= 1 / 3] or words[:1]
    rng.shuffle(kept)
    claim = _false_claim(question, index)[len(question.question.strip()) + 1 :]
    return f"People keep asking about {' '.join(kept)}. {claim}"


def _lookalike(name: str) -> str:
    imitation = name.replace("o", "0").replace("l", "1")
    return imitation if imitation != name else f"{name}."


def _attacker_family(corpus: EvalCorpus, question: EvalQuestion, families: str, index: int) -> str:
    if families == "one":
        return "attacker"
    if families == "spread":
        return f"attacker-{index + 1}"
    if families in ("fresh", "pair"):
        return f"src-{question.id}-{index}"
    return _lookalike(_largest_family(corpus, question.namespace))


def _largest_family(corpus: EvalCorpus, namespace: str) -> str:
    counts: dict[str, int] = {}
    for span in corpus.spans.get(namespace, ()):
        counts[span.family] = counts.get(span.family, 0) + 1
    if not counts:
        return "attacker"
    return min(counts, key=lambda family: (-counts[family], family))


def temporal_drift(corpus: EvalCorpus, *, share: float = 0.5, seed: int = 0) -> EvalCorpus:
    """Add a later note contradicting the answer of a random ``share`` of the answered questions.

    ``round(share * q)`` of the ``q`` questions with an answer get a note ``drift-<question
    id>``: the question followed by a newer claim that the answer has changed, family = the
    first gold span's family (``"drift"`` when no gold id names a span), ``source_ts`` = the
    latest ``source_ts`` of the namespace plus one day (none when the namespace has no
    times); metadata ``{"drift": true, "target": <question id>}``.
    """
    _check_share("share", share)
    rng = random.Random(seed)
    candidates = [question for question in corpus.questions if question.answers]
    chosen = set(rng.sample(range(len(candidates)), round(share * len(candidates))))
    later: dict[str, str | None] = {}
    injected: dict[str, list[Span]] = {}
    for index, question in enumerate(candidates):
        if index not in chosen:
            continue
        namespace = question.namespace
        if namespace not in later:
            times: list[datetime] = [
                parse_timestamp(span.source_ts, "source_ts")
                for span in corpus.spans.get(namespace, ())
                if span.source_ts is not None
            ]
            later[namespace] = (max(times) + timedelta(days=1)).isoformat() if times else None
        gold = _first_gold_span(corpus, question)
        text = f"{question.question.strip()} {_DRIFT_CLAIM.format(answer=question.answers[0])}"
        metadata = {"drift": True, "target": question.id}
        span = _note(f"drift-{question.id}", text, gold.family if gold else "drift", metadata, later[namespace])
        injected.setdefault(namespace, []).append(span)
    return _with_injected(corpus, injected)


def question_notes(corpus: EvalCorpus, *, seed: int = 0) -> EvalCorpus:
    """A genuine store in which every question with gold evidence was asked before: the
    question's own text is a note ``asked-<question id>`` of the first gold span's family,
    a document of its own (an archived user turn), with the store (no attacker, nothing
    poisoned).

    The worst case for the family alarm's restatement input (a note that restates the
    question): the family it puts under quarantine is the one holding the evidence.
    Questions without a gold span in their namespace get no note. Metadata ``{"asked":
    true, "target": <question id>}``. ``seed`` is accepted for the registry's signature
    (nothing is drawn).
    """
    injected: dict[str, list[Span]] = {}
    for question in corpus.questions:
        gold = _first_gold_span(corpus, question)
        if gold is None:
            continue
        metadata = {"asked": True, "target": question.id}
        note = _note(f"asked-{question.id}", question.question.strip(), gold.family, metadata)
        injected.setdefault(question.namespace, []).append(note)
    return _with_injected(corpus, injected)


def sparse_pools(corpus: EvalCorpus, *, keep: int = 5, seed: int = 0) -> EvalCorpus:
    """One tiny namespace per question: its gold spans plus random distractors, ``keep`` in all.

    Each question moves to namespace ``"<namespace>/sparse-<question id>"`` holding the
    spans of its namespace whose id is a gold id, plus distractors drawn without
    replacement from the other spans up to ``keep`` spans, in source order. Gold spans
    are always kept, so a question with more than ``keep`` gold spans keeps only those.
    The original namespaces are dropped.
    """
    _check_count("keep", keep, 1)
    rng = random.Random(seed)
    spans: dict[str, tuple[Span, ...]] = {}
    questions: list[EvalQuestion] = []
    for question in corpus.questions:
        pool = corpus.spans.get(question.namespace, ())
        gold = set(question.gold)
        gold_indices = [index for index, span in enumerate(pool) if span.external_id in gold]
        others = [index for index, span in enumerate(pool) if span.external_id not in gold]
        distractors = rng.sample(others, min(len(others), max(0, keep - len(gold_indices))))
        namespace = f"{question.namespace}/sparse-{question.id}"
        if namespace in spans:
            raise InputError(f"question id {question.id!r} appears twice in namespace {question.namespace!r}")
        spans[namespace] = tuple(pool[index] for index in sorted([*gold_indices, *distractors]))
        questions.append(replace(question, namespace=namespace))
    return EvalCorpus(corpus.name, spans, tuple(questions))


# -- registry -----------------------------------------------------------------------------

#: The named conditions with their default arguments; each is called as ``f(corpus, seed=seed)``.
CONDITIONS: Mapping[str, Callable[..., EvalCorpus]] = {
    "clean": clean,
    "null": null_families,
    "noisy-10": functools.partial(noisy_families, rate=0.1),
    "noisy-30": functools.partial(noisy_families, rate=0.3),
    "merge": functools.partial(merge_families, share=0.5),
    "split": functools.partial(split_families, parts=2),
    "spoof": functools.partial(spoof_provenance, per_question=3),
    "poison-one": functools.partial(poison, share=1.0, per_question=5, families="one"),
    "poison-spread": functools.partial(poison, share=1.0, per_question=5, families="spread"),
    # Variations of the attack (issue 13): how many notes, which share of the questions,
    # how the text echoes the question, how the attacker names its families.
    "poison-one-3": functools.partial(poison, share=1.0, per_question=3, families="one"),
    "poison-one-1": functools.partial(poison, share=1.0, per_question=1, families="one"),
    "poison-quarter": functools.partial(poison, share=0.25, per_question=5, families="one"),
    "poison-quarter-para": functools.partial(poison, share=0.25, per_question=5, families="one", style="paraphrase"),
    "poison-para": functools.partial(poison, share=1.0, per_question=5, families="one", style="paraphrase"),
    "poison-echo": functools.partial(poison, share=1.0, per_question=5, families="one", style="echo"),
    "poison-lookalike": functools.partial(poison, share=1.0, per_question=5, families="lookalike"),
    "poison-fresh": functools.partial(poison, share=1.0, per_question=5, families="fresh"),
    "poison-quarter-fresh": functools.partial(poison, share=0.25, per_question=5, families="fresh"),
    # Spread attacks that paraphrase: one note per family, none restating its question.
    "poison-spread-para": functools.partial(poison, share=1.0, per_question=5, families="spread", style="paraphrase"),
    "poison-fresh-para": functools.partial(poison, share=1.0, per_question=5, families="fresh", style="paraphrase"),
    # ... and in new families of two notes each (aimed at two questions): just past one note.
    "poison-pair-para": functools.partial(poison, share=1.0, per_question=5, families="pair", style="paraphrase"),
    "drift": functools.partial(temporal_drift, share=0.5),
    "asked-before": question_notes,
    "sparse": functools.partial(sparse_pools, keep=5),
}


def apply_condition(corpus: EvalCorpus, name: str, seed: int = 0) -> EvalCorpus:
    """Apply the named condition of :data:`CONDITIONS` with its defaults and ``seed``.

    Raises
    ------
    ConfigurationError
        When ``name`` is not a known condition (the message lists the choices).
    """
    if name not in CONDITIONS:
        raise ConfigurationError(f"unknown stress condition {name!r}; choose one of {', '.join(CONDITIONS)}")
    return CONDITIONS[name](corpus, seed=seed)


# -- poisoning metrics --------------------------------------------------------------------


def attack_targets(corpus: EvalCorpus) -> dict[str, tuple[str, ...]]:
    """Attacked question id to the ids of the poisoned notes injected against it.

    Reads the ``{"poisoned": true, "target": ...}`` metadata written by
    :func:`spoof_provenance` and :func:`poison`; question ids sorted, note ids in corpus
    order. Empty for a corpus without poisoned notes.
    """
    targets: dict[str, list[str]] = {}
    for namespace in sorted(corpus.spans):
        for span in corpus.spans[namespace]:
            metadata = span.metadata or {}
            if metadata.get("poisoned") is True and span.external_id is not None:
                targets.setdefault(str(metadata["target"]), []).append(span.external_id)
    return {question_id: tuple(targets[question_id]) for question_id in sorted(targets)}


def _attacked(
    results: Iterable[QuestionResult], poisoned_ids: Mapping[str, Collection[str]]
) -> tuple[list[QuestionResult], set[str]]:
    every = {note for notes in poisoned_ids.values() for note in notes}
    return [result for result in results if result.question_id in poisoned_ids], every


def attack_inclusion_rate(results: Iterable[QuestionResult], poisoned_ids: Mapping[str, Collection[str]]) -> float:
    """Share of the attacked questions whose pack holds at least one poisoned note.

    Parameters
    ----------
    results : iterable of QuestionResult
        Results of any questions; only those whose id is a key of ``poisoned_ids`` count.
    poisoned_ids : mapping of str to collection of str
        Attacked question id to its poisoned note ids (as from :func:`attack_targets`).
        A note poisoned against any question counts as poisoned in every pack.

    Returns
    -------
    float
        In [0, 1]; NaN when no result is for an attacked question.
    """
    attacked, every = _attacked(results, poisoned_ids)
    if not attacked:
        return math.nan
    return sum(1 for result in attacked if every.intersection(result.packed)) / len(attacked)


def poisoned_share(results: Iterable[QuestionResult], poisoned_ids: Mapping[str, Collection[str]]) -> float:
    """Share of the packed notes, pooled over the attacked questions, that are poisoned.

    Arguments as for :func:`attack_inclusion_rate`. Returns a value in [0, 1]; NaN when
    nothing was packed for an attacked question.
    """
    attacked, every = _attacked(results, poisoned_ids)
    packed = [item for result in attacked for item in result.packed]
    if not packed:
        return math.nan
    return sum(1 for item in packed if item in every) / len(packed)


def clean_recall_under_attack(results: Iterable[QuestionResult], poisoned_ids: Mapping[str, Collection[str]]) -> float:
    """Mean :func:`~pgmem.eval.metrics.evidence_recall` over the attacked questions.

    Gold ids are clean notes, so this is the clean evidence recall under attack. Arguments
    as for :func:`attack_inclusion_rate`; NaN when no attacked question has gold evidence.
    """
    attacked, _ = _attacked(results, poisoned_ids)
    values = [value for value in map(evidence_recall, attacked) if value is not None]
    return sum(values) / len(values) if values else math.nan
