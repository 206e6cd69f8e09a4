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
  (``exp(-age_f / window) - exp(-age_ns / window)``, clipped; 0 when unknown);
* ``collusion``: how alike the family's notes are to *each other* across documents: for
  each of its pool notes the highest word Jaccard with a note of the same family and
  another document; the :data:`ALARM_GROUP`-th highest of these (0 for a family with
  fewer pool notes). It reads nothing of the question.

The score is bounded in [0, 1]::

    echo_score = echo * duplicate_density ** 0.5 * (0.5 + 0.5 * max(support, concentration, newness))
    score      = max(echo_score, collusion)   # with collusion opted in, else echo_score

Echo and near-duplication are both required by the echo score (a relevant article echoes
the question but its sentences are not near-copies of each other; a chatty family
repeats itself but not the question); support, concentration or newness make it
stronger. Collusion, when opted in (``CalibrationParams.collusion_cap``), suffices:
several notes of one family, written as separate documents, that are near-copies of each
other are what an attacker writing variants of its claim looks like, whichever question
the pool is for (genuine families on the evaluation slices stay below 0.25;
docs/security.md) — and also what a genuine family writing templated notes (release
notes, status lines) looks like, which is why it is measured and reported always but
alarms only when opted in. A family alarms when
``score >= alarm_threshold``. Pure numpy over the pool's texts: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pgmem.retrieval.pool import Pool

#: How many of a family's notes the alarm reads: the ones that echo the question most.
ALARM_GROUP = 3
_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class FamilySignals:
    """What the alarm read for the families of a pool, one list entry per family (all in [0, 1]).

    The lists follow the order of the ``families`` given to :func:`family_signals`.
    """

    namespace_count: list[int]
    pool_share: list[float]
    namespace_share: list[float]
    concentration: list[float]
    newness: list[float]
    duplicate_density: list[float]
    question_echo: list[float]
    support: list[float]
    collusion: list[float]
    score: list[float]


def family_signals(
    pool: Pool,
    families: Sequence[str],
    shrunk_z: _Array,
    tau: float,
    recency_window: float,
    use_collusion: bool = False,
) -> FamilySignals:
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
    use_collusion : bool
        Whether the collusion input counts in the score (it is reported either way).
    """
    aggregates = {aggregate.family: aggregate for aggregate in pool.families}
    duplicates, echoes, collusions = _group_means(pool, families)
    size = max(pool.size, 1)
    notes = pool.namespace_notes
    namespace_age = pool.namespace_age_seconds
    signals = FamilySignals([], [], [], [], [], [], [], [], [], [])
    ages_known = namespace_age is not None and recency_window > 0
    for name, z, duplicate, question_echo, collusion in zip(
        families, shrunk_z.tolist(), duplicates, echoes, collusions, strict=True
    ):
        aggregate = aggregates[name]
        pool_share = aggregate.count / size
        namespace_share = aggregate.namespace_count / notes if notes > 0 else 0.0
        # min(1.0, max(0.0, x)) is _clip, written out: this loop runs once per family and pack.
        concentration = min(1.0, max(0.0, 1.0 - namespace_share / pool_share)) if notes > 0 else 0.0
        newness = _newness(aggregate.age_seconds, namespace_age, recency_window) if ages_known else 0.0
        support = min(1.0, max(0.0, math.tanh(z / tau)))
        strength = max(support, concentration, newness)
        signals.namespace_count.append(aggregate.namespace_count)
        signals.pool_share.append(pool_share)
        signals.namespace_share.append(namespace_share)
        signals.concentration.append(concentration)
        signals.newness.append(newness)
        signals.duplicate_density.append(duplicate)
        signals.question_echo.append(question_echo)
        signals.support.append(support)
        signals.collusion.append(collusion)
        echo_score = min(1.0, max(0.0, question_echo * math.sqrt(duplicate) * (0.5 + 0.5 * strength)))
        signals.score.append(max(echo_score, collusion) if use_collusion else echo_score)
    return signals


def _group_means(pool: Pool, families: Sequence[str]) -> tuple[list[float], list[float], list[float]]:
    """Per family, the mean near-duplicate density and echo of its group (0 without notes),
    and its collusion: the :data:`ALARM_GROUP`-th highest Jaccard of its notes with a note
    of the same family in another document (0 with fewer notes).

    A family's group is its (at most :data:`ALARM_GROUP`) most question-like notes, ties
    by pool order: an attacker writing for many questions has many notes in a pool, and
    only the group aimed at this question repeats it.
    """
    words = pool.words
    echo = words.echo()
    number = {name: index for index, name in enumerate(families)}
    family_of = np.fromiter(
        map(number.__getitem__, [candidate.family for candidate in pool.candidates]),
        dtype=np.int64,
        count=len(pool.candidates),
    )
    # Stable: within a family and an echo value, pool order.
    order = np.lexsort((-echo, family_of))
    grouped = family_of[order]
    rank = np.arange(len(grouped)) - np.searchsorted(grouped, grouped)
    chosen = order[rank < ALARM_GROUP]
    # Every note is read: a family with fewer than a group's worth of notes has all of them
    # in its group, and collusion reads every note of the others.
    nearest, within = words.nearest_duplicates(
        [candidate.document_id for candidate in pool.candidates],
        families=[candidate.family for candidate in pool.candidates],
    )
    grouped_members = np.bincount(family_of[chosen], minlength=len(families))
    # bincount adds each family's values in group order, as a sum over the group would.
    sums = np.stack(
        [
            np.bincount(family_of[chosen], weights=nearest[chosen], minlength=len(families)),
            np.bincount(family_of[chosen], weights=echo[chosen], minlength=len(families)),
        ]
    )
    means = np.divide(sums, grouped_members, out=np.zeros_like(sums), where=grouped_members > 0)
    duplicates: list[float] = means[0].tolist()
    echoes: list[float] = means[1].tolist()
    # The ALARM_GROUP-th highest within-family duplicate: one near-copied pair (an article
    # republished) is not collusion, a group of near-copies is.
    by_within = np.lexsort((-within, family_of))
    ranked = family_of[by_within]
    kth = by_within[np.arange(len(ranked)) - np.searchsorted(ranked, ranked) == ALARM_GROUP - 1]
    collusion = np.zeros(len(families))
    collusion[family_of[kth]] = within[kth]
    collusions: list[float] = collusion.tolist()
    return duplicates, echoes, collusions


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def _newness(family_age: float | None, namespace_age: float | None, window: float) -> float:
    if family_age is None or namespace_age is None or window <= 0:
        return 0.0
    return _clip(math.exp(-max(family_age, 0.0) / window) - math.exp(-max(namespace_age, 0.0) / window))
