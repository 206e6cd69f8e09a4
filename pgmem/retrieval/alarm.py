"""The family alarm: telling collusion from corroboration in a pool (issue 13).

Pool calibration rewards a family whose notes score above what its size predicts. A
PoisonedRAG-style attacker looks exactly like that: a handful of notes that all repeat
the question, all written under one family. What corroboration does *not* look like is
the rest of the attacker's signature, and the alarm reads it from the pool alone:

* ``support``: the calibrator's shrunk z, squashed to [0, 1] (``max(0, tanh(z'/tau))``);
* ``question_echo``: how much of the question each note repeats (the share of the
  question's content words it contains), averaged over the family's group: its (at
  most :data:`ALARM_GROUP`) pool notes that echo the question most;
* ``duplicate_density``: how alike the group's notes are to the pool's other notes (for
  each note, the highest word Jaccard with a pool note of another document; averaged);
* ``concentration``: how far the family's share of the pool exceeds its share of the
  namespace (``1 - namespace_share / pool_share``, clipped to [0, 1]; 0 when the
  namespace counts are unknown);
* ``newness``: how much more recently than the namespace the family first appeared
  (``exp(-age_f / window) - exp(-age_ns / window)``, clipped; 0 when unknown).

The score is bounded in [0, 1]::

    score = echo * duplicate_density ** 0.5 * (0.5 + 0.5 * max(support, concentration, newness))

Echo and near-duplication are both required (a relevant article echoes the question but
its sentences are not near-copies of each other; a chatty family repeats itself but not
the question); support, concentration or newness make it stronger. A family alarms when
``score >= alarm_threshold``. Pure numpy over the pool's texts: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pgmem.ingestion.entities import STOPWORDS
from pgmem.retrieval.pool import Pool

_WORD = re.compile(r"\w+", re.UNICODE)
#: How many of a family's notes the alarm reads: the ones that echo the question most.
ALARM_GROUP = 3
_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class FamilySignals:
    """What the alarm read for one family of a pool, and its score (all in [0, 1])."""

    namespace_count: int
    pool_share: float
    namespace_share: float
    concentration: float
    newness: float
    duplicate_density: float
    question_echo: float
    support: float
    score: float


def content_words(text: str) -> frozenset[str]:
    """Lower-cased ``\\w+`` words of ``text`` without stop words."""
    return frozenset(_WORD.findall(text.lower())).difference(STOPWORDS)


def family_signals(
    pool: Pool, families: Sequence[str], shrunk_z: _Array, tau: float, recency_window: float
) -> dict[str, FamilySignals]:
    """The alarm's inputs and score for each of ``families`` (the pool's, sorted).

    Parameters
    ----------
    pool : Pool
        Reads the candidates (texts, families, documents), ``query``, ``namespace_notes``,
        ``namespace_age_seconds`` and each family aggregate's ``namespace_count`` and
        ``age_seconds``.
    families : sequence of str
        The family names, in the order of ``shrunk_z``.
    shrunk_z : array
        The calibrator's ``z'_f`` per family.
    tau : float
        The calibrator's tanh temperature.
    recency_window : float
        Seconds over which a family stops counting as new.
    """
    aggregates = {aggregate.family: aggregate for aggregate in pool.families}
    candidates = pool.candidates
    words = [content_words(candidate.text) for candidate in candidates]
    echo = _echo(content_words(pool.query), words)
    nearest = _nearest_duplicate(words, [candidate.document_id for candidate in candidates])
    members: dict[str, list[int]] = {}
    for index, candidate in enumerate(candidates):
        members.setdefault(candidate.family, []).append(index)
    size = max(pool.size, 1)
    signals: dict[str, FamilySignals] = {}
    for position, name in enumerate(families):
        aggregate = aggregates[name]
        rows = members.get(name, [])
        pool_share = aggregate.count / size
        namespace_share = aggregate.namespace_count / pool.namespace_notes if pool.namespace_notes > 0 else 0.0
        concentration = _clip(1.0 - namespace_share / pool_share) if pool.namespace_notes > 0 else 0.0
        newness = _newness(aggregate.age_seconds, pool.namespace_age_seconds, recency_window)
        # The family's most question-like notes: an attacker writing for many questions
        # has many notes in a pool, and only the group aimed at this question colludes.
        group = sorted(rows, key=lambda row: (-echo[row], row))[:ALARM_GROUP]
        duplicate = float(np.mean(nearest[group])) if group else 0.0
        question_echo = float(np.mean(echo[group])) if group else 0.0
        support = _clip(math.tanh(float(shrunk_z[position]) / tau))
        strength = max(support, concentration, newness)
        score = _clip(question_echo * math.sqrt(duplicate) * (0.5 + 0.5 * strength))
        signals[name] = FamilySignals(
            namespace_count=aggregate.namespace_count,
            pool_share=pool_share,
            namespace_share=namespace_share,
            concentration=concentration,
            newness=newness,
            duplicate_density=duplicate,
            question_echo=question_echo,
            support=support,
            score=score,
        )
    return signals


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def _newness(family_age: float | None, namespace_age: float | None, window: float) -> float:
    if family_age is None or namespace_age is None or window <= 0:
        return 0.0
    return _clip(math.exp(-max(family_age, 0.0) / window) - math.exp(-max(namespace_age, 0.0) / window))


def _echo(question: frozenset[str], notes: list[frozenset[str]]) -> _Array:
    """Share of the question's content words each note contains (0 for an empty question)."""
    if not question:
        return np.zeros(len(notes))
    return np.array([len(question & note) / len(question) for note in notes], dtype=np.float64)


def _nearest_duplicate(notes: list[frozenset[str]], documents: list[str]) -> _Array:
    """For each note, the highest word Jaccard with a note of another document."""
    count = len(notes)
    if count < 2:
        return np.zeros(count)
    vocabulary: dict[str, int] = {}
    columns = [vocabulary.setdefault(word, len(vocabulary)) for note in notes for word in note]
    rows = np.repeat(np.arange(count), [len(note) for note in notes])
    # float32 counts are exact (far below 2**24) and make the product a single-precision
    # GEMM, about twice as fast; the division below is in float64 as before.
    incidence = np.zeros((count, max(len(vocabulary), 1)), dtype=np.float32)
    incidence[rows, columns] = 1.0
    shared = (incidence @ incidence.T).astype(np.float64)
    sizes = np.array([len(note) for note in notes], dtype=np.float64)
    union = sizes[:, None] + sizes[None, :] - shared
    jaccard = np.divide(shared, union, out=np.zeros_like(shared), where=union > 0)
    document = np.array(documents, dtype=object)
    jaccard[document[:, None] == document[None, :]] = 0.0
    return np.asarray(jaccard.max(axis=1), dtype=np.float64)
