"""The family alarm: telling collusion from corroboration in a pool (issue 13).

Pool calibration rewards a family whose notes score above what its size predicts. A
PoisonedRAG-style attacker looks exactly like that: a handful of notes that all repeat
the question, all written under one family. What corroboration does *not* look like is
the rest of the attacker's signature, and the alarm reads it from the pool alone:

* ``support``: the calibrator's shrunk z, squashed to [0, 1] (``max(0, tanh(z'/tau))``);
* ``question_echo``: how much of the question each note repeats (the share of the
  question's content words it contains), averaged over the family's group: its (at
  most :data:`ALARM_GROUP`) pool notes that echo the question most;
* ``question_restatement``: how nearly the family's most question-like pool note restates
  the question: ``echo ** 4 * precision * min(1, q / 5)``, its share of the question's
  ``q`` content words to the fourth times the share of its own content words that are
  the question's, scaled down for questions of fewer than five content words (which any
  note on their topic restates; :meth:`PoolWords.restatement`). A note written to answer
  one question repeats all of it and adds a short claim; a genuine note built into the
  question (part of it), or one mentioning every question word among many others, stays
  lower;
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
* the burst gate on collusion: ``burst_span`` and ``burst_lateness``, the write-time span
  of the :data:`ALARM_GROUP` colluding notes (Jaccard with a same-family note of another
  document at least the threshold) written closest together, and how long after the
  namespace's creation the first of them was written (a group written ``burst_window``
  or more after it is preferred); ``bound``, whether the family is bound to writer roles.

The score is bounded in [0, 1]::

    echo_score   = echo * duplicate_density ** 0.5 * (0.5 + 0.5 * max(support, concentration, newness))
    late_burst   = burst_span <= burst_window <= burst_lateness
    family_score = max(echo_score, collusion) if late_burst and not bound else echo_score
    near_copies  = collusion >= threshold and not late_burst and not bound
    score        = max(family_score, question_restatement, collusion if near_copies else 0)
                   if not bound else family_score

Echo and near-duplication are both required by the echo score (a relevant article echoes
the question but its sentences are not near-copies of each other; a chatty family
repeats itself but not the question); support, concentration or newness make it
stronger. One note that restates the question suffices (``question_restatement``): an
attacker writing one note per question leaves no near-copies to read, but that note
still restates its question, which few genuine notes do (docs/security.md, "Small
families": an archived question, a FAQ entry, a short answer holding a short question
do). So a restatement alone does not quarantine the family: each note whose own
restatement reaches the threshold is *held* (``FamilySignals.restating``; packed after
every other candidate, never ahead of one), the family's other notes are untouched; the
family is quarantined when ``family_score`` reaches the threshold. A family bound to writer
roles is exempt, as from collusion: only its writers can write it, so its restating note
is an archived question or a direct answer, never an outsider's poison. Collusion (unless
``CalibrationParams.collusion_cap`` is None) suffices: several notes of one family,
written as separate documents, that are near-copies of each other are what an attacker
writing variants of its claim looks like, whichever question the pool is for (genuine
families on the evaluation slices stay below 0.25; docs/security.md) — and also what a
genuine family writing templated notes (release notes, status lines) or holding archived
questions that resemble each other looks like. The write times decide how it acts: an
attacker writing its variants at once into an established namespace is a *late burst*,
and the family is quarantined as ``colluding`` (the packer's ``collusion_cap``, 0 by
default, no refill); near-copies written over time (a templated writer; a patient
attacker spacing its variants, whose variants aimed at *other* questions crowd a pool's
best ranks: docs/security.md, "The patient attacker's crowding") are ``near_copies``:
each note with a same-family near-copy in another document is held, as a restating note
is, the family is never rewarded and is demoted by the share of its pool notes held
(``near_copy_share``), and its other notes stay packable. Near-copies of one writer are
one piece of evidence written several times, not corroboration. A family bound to writer
roles is exempt (nobody else can write under it). A family alarms when ``score >=
alarm_threshold``.

Besides the score, :func:`family_signals` marks *newcomers* (:func:`newcomers`): families
that arrived after the namespace's first load, recently, with far fewer notes than the
pool's established families — what a spread attacker minting one fresh family per note
looks like, and what no per-family signal can read (a one-note family has no near-copy,
no concentration, no size for the calibrator). They are not alarms: the calibrator holds
all but the best ``newcomer_quota`` of their notes (``CalibrationParams.newcomer_share``).
Pure numpy over the pool's texts and write times: no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pgmem.retrieval.pool import Pool
from pgmem.retrieval.words import label_codes
from pgmem.types import FamilyAggregate

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
    question_restatement: list[float]
    support: list[float]
    collusion: list[float]
    burst_span: list[float | None]
    burst_lateness: list[float | None]
    bound: list[bool]
    #: Collusion reached the threshold in a late burst of an unbound family (quarantined:
    #: the packer's ``collusion_cap``, no refill); it counts in ``score`` for every unbound family.
    colluding: list[bool]
    score: list[float]
    #: The score without ``question_restatement``: what quarantines the whole family.
    family_score: list[float]
    #: The candidates (pool positions) of unbound families whose own restatement reaches
    #: the threshold: held back one by one, their families' other notes untouched (empty
    #: without a threshold).
    restating: list[int]
    #: Collusion reached the threshold outside a late burst (an unbound family): it is
    #: never rewarded, and its near-copies are held (past the ``quarantine_cap`` best).
    near_copies: list[bool]
    #: The pool positions of those families' near-copies: notes with a same-family
    #: near-copy in another document at the threshold or above.
    near_copy_rows: list[int]
    #: The share of the family's pool notes that are such near-copies (0 unless ``near_copies``).
    near_copy_share: list[float]
    #: The family is a newcomer (:func:`newcomers`): unbound, written late and recently,
    #: far smaller than the pool's established families (all False when not asked).
    newcomer: list[bool]


def family_signals(
    pool: Pool,
    families: Sequence[str],
    shrunk_z: _Array,
    tau: float,
    recency_window: float,
    threshold: float | None = None,
    use_collusion: bool = False,
    burst_window: float = 3_600.0,
    newcomer_share: float | None = None,
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
    threshold : float or None
        The alarm threshold: a note whose same-family near-copy Jaccard reaches it is a
        colluding note (the burst gate reads their write times; None: no gate, no burst).
    use_collusion : bool
        Whether the collusion input may count in the score (it is reported either way);
        it counts for every unbound family, and marks a late burst as ``colluding``.
    burst_window : float
        Seconds: the burst gate's window (``CalibrationParams.burst_window``).
    newcomer_share : float or None
        ``CalibrationParams.newcomer_share``: marks the newcomers (None: none marked).
    """
    aggregates = {aggregate.family: aggregate for aggregate in pool.families}
    ordered = [aggregates[name] for name in families]
    duplicates, echoes, restated, collusions, within, family_of = _group_means(pool, families)
    # A family's restatement is its most question-like note's: one such note is enough.
    highest = np.zeros(len(families))
    np.maximum.at(highest, family_of, restated)
    restatements: list[float] = highest.tolist()
    spans, latenesses = _bursts(pool, len(families), within, family_of, threshold, burst_window)
    notes = pool.namespace_notes
    namespace_age = pool.namespace_age_seconds
    namespace_count = [aggregate.namespace_count for aggregate in ordered]
    bound = [aggregate.bound for aggregate in ordered]
    # Column by column over the families (each value as the scalar formula gives it: the
    # divisions, products and square roots are the same IEEE operations, and no value
    # clipped here can be -0.0, where np.clip and min/max would differ).
    pool_share = np.array([aggregate.count for aggregate in ordered], dtype=np.float64) / max(pool.size, 1)
    if notes > 0:
        namespace_share = np.array(namespace_count, dtype=np.float64) / notes
        concentration = np.clip(1.0 - namespace_share / pool_share, 0.0, 1.0)
    else:
        namespace_share = concentration = np.zeros(len(ordered))
    if namespace_age is not None and recency_window > 0:
        newness = [_newness(aggregate.age_seconds, namespace_age, recency_window) for aggregate in ordered]
    else:
        newness = [0.0] * len(ordered)
    # math.tanh, one family at a time: np.tanh may differ from it in the last bit.
    support = [min(1.0, max(0.0, math.tanh(z))) for z in (shrunk_z / tau).tolist()]
    strength = np.maximum(np.maximum(support, concentration), newness)
    echo_score: list[float] = np.clip(
        np.array(echoes) * np.sqrt(duplicates) * (0.5 + 0.5 * strength), 0.0, 1.0
    ).tolist()
    # Collusion reads one family's near-copies across documents. In a late burst of an
    # unbound family it is colluding: the family is quarantined (collusion_cap, no refill).
    # Written over time (a patient attacker spacing its variants, a templated writer, a
    # family holding archived questions that resemble each other) the near-copies past the
    # family's best are held one by one (calibrate), as a restating note is, and its other
    # notes stay packable.
    counts = [use_collusion and not bound_f for bound_f in bound]
    bursts = [
        counts_f and span is not None and lateness is not None and span <= burst_window <= lateness
        for span, lateness, counts_f in zip(spans, latenesses, counts, strict=True)
    ]
    family_score = [
        max(echo, collusion) if burst else echo
        for echo, collusion, burst in zip(echo_score, collusions, bursts, strict=True)
    ]
    near_copies = [
        counts_f and not burst and threshold is not None and collusion >= threshold
        for counts_f, burst, collusion in zip(counts, bursts, collusions, strict=True)
    ]
    restating = np.zeros(len(family_of), dtype=bool)
    copies = np.zeros(len(family_of), dtype=bool)
    near_copy_share = np.zeros(len(families))
    if threshold is not None:
        restating = (restated >= threshold) & ~np.array(bound, dtype=bool)[family_of]
        copies = (within >= threshold) & np.array(near_copies, dtype=bool)[family_of]
        members = np.bincount(family_of, minlength=len(families))
        near_copy_share = np.bincount(family_of[copies], minlength=len(families)) / np.maximum(members, 1)
    newcomer = newcomers(ordered, namespace_age, burst_window, recency_window, newcomer_share)
    # A bound family's notes are its writers': its restatement is reported, never held.
    scores = [
        score if bound_f else max(score, restatement, collusion if near else 0.0)
        for score, restatement, collusion, near, bound_f in zip(
            family_score, restatements, collusions, near_copies, bound, strict=True
        )
    ]
    return FamilySignals(
        namespace_count=namespace_count,
        pool_share=pool_share.tolist(),
        namespace_share=namespace_share.tolist(),
        concentration=concentration.tolist(),
        newness=newness,
        duplicate_density=duplicates,
        question_echo=echoes,
        question_restatement=restatements,
        support=support,
        collusion=collusions,
        burst_span=spans,
        burst_lateness=latenesses,
        bound=bound,
        colluding=[
            burst and threshold is not None and collusion >= threshold
            for burst, collusion in zip(bursts, collusions, strict=True)
        ],
        score=scores,
        family_score=family_score,
        restating=np.flatnonzero(restating).tolist(),
        near_copy_rows=np.flatnonzero(copies).tolist(),
        near_copies=near_copies,
        near_copy_share=near_copy_share.tolist(),
        newcomer=newcomer,
    )


def newcomers(
    families: Sequence[FamilyAggregate],
    namespace_age: float | None,
    window: float,
    recency_window: float,
    share: float | None,
) -> list[bool]:
    """Which ``families`` are newcomers.

    A family arrived *late* when its first note was written ``window`` seconds or more
    after the namespace was created, and *recently* when less than ``recency_window``
    ago; the others are established (founded with the namespace's first load, or old
    enough to have a track record). A newcomer is a late, recent family that is not bound
    to writer roles and holds at most ``limit = max(1, floor(share * m))`` notes in the
    namespace, ``m`` the median namespace count of the pool's established families (1
    without any): a new source far smaller than the namespace's sources. All False when
    ``share`` is None or the ages are unknown; a family of unknown age or size is never a
    newcomer.
    """
    if share is None or namespace_age is None:
        return [False] * len(families)
    late = [
        family.age_seconds is not None
        and namespace_age - family.age_seconds >= window
        and family.age_seconds < recency_window
        for family in families
    ]
    established = [
        family.namespace_count
        for family, arrived_late in zip(families, late, strict=True)
        if family.age_seconds is not None and not arrived_late and family.namespace_count > 0
    ]
    # statistics.median: numpy's value for integer counts (below 2**53), without its overhead.
    limit = max(1, math.floor(share * float(statistics.median(established)))) if established else 1
    return [
        arrived_late and not family.bound and 0 < family.namespace_count <= limit
        for family, arrived_late in zip(families, late, strict=True)
    ]


def _bursts(
    pool: Pool,
    family_count: int,
    within: _Array,
    family_of: npt.NDArray[np.int64],
    threshold: float | None,
    window: float,
) -> tuple[list[float | None], list[float | None]]:
    """Per family, the write-time span of its :data:`ALARM_GROUP` colluding notes written
    closest together, and how long after the namespace's creation the first was written.

    A colluding note is one whose same-family near-copy Jaccard (``within``) reaches
    ``threshold``. Among the groups of :data:`ALARM_GROUP` colluding notes consecutive in
    write time, the tightest of those written ``window`` or more after the namespace was
    created is taken, else the tightest of all (ties: the later). None for both when a
    family has fewer colluding notes with known write times, or the namespace's age is
    unknown. Only families with that many colluding notes cost a loop iteration.
    """
    spans: list[float | None] = [None] * family_count
    latenesses: list[float | None] = [None] * family_count
    namespace_age = pool.namespace_age_seconds
    if threshold is None or namespace_age is None or not len(within):
        return spans, latenesses
    colluding = within >= threshold
    if not (np.bincount(family_of[colluding], minlength=family_count) >= ALARM_GROUP).any():
        return spans, latenesses  # the common case: no family has a group of near-copies
    ages = np.array([math.nan if c.age_seconds is None else c.age_seconds for c in pool.candidates], dtype=np.float64)
    colluding &= ~np.isnan(ages)
    members = np.bincount(family_of[colluding], minlength=family_count)
    for family in np.flatnonzero(members >= ALARM_GROUP).tolist():
        # Seconds from the namespace's creation to each note's write (the same now() for both).
        written = np.sort(np.maximum(namespace_age - ages[colluding & (family_of == family)], 0.0))
        first = written[: len(written) - ALARM_GROUP + 1]
        span = written[ALARM_GROUP - 1 :] - first
        late = first >= window
        candidates = np.flatnonzero(late) if late.any() else np.arange(len(first))
        # The tightest group; among equally tight ones, the latest.
        best = candidates[np.lexsort((-first[candidates], span[candidates]))[0]]
        spans[family] = float(span[best])
        latenesses[family] = float(first[best])
    return spans, latenesses


def _group_means(
    pool: Pool, families: Sequence[str]
) -> tuple[list[float], list[float], _Array, list[float], _Array, npt.NDArray[np.int64]]:
    """Per family, the mean near-duplicate density and echo of its group (0 without notes)
    and its collusion; per candidate, its restatement of the question; collusion is the
    :data:`ALARM_GROUP`-th highest Jaccard of its notes with a note of the same family in
    another document (0 with fewer notes); per candidate, that Jaccard and its family's
    index.

    A family's group is its (at most :data:`ALARM_GROUP`) most question-like notes, ties
    by pool order: an attacker writing for many questions has many notes in a pool, and
    only the group aimed at this question repeats it.
    """
    words = pool.words
    echo = words.echo()
    family_of = label_codes([candidate.family for candidate in pool.candidates], families)
    document_of = label_codes([candidate.document_id for candidate in pool.candidates])
    # Stable: within a family and an echo value, pool order.
    order = np.lexsort((-echo, family_of))
    grouped = family_of[order]
    rank = np.arange(len(grouped)) - np.searchsorted(grouped, grouped)
    chosen = order[rank < ALARM_GROUP]
    # The near-duplicates of the groups' notes, and the same-family ones of the notes
    # whose family can collude: at least a group's worth of notes, in two documents or
    # more (any other family's notes have no same-family near-copy in another document,
    # or too few to count). No other note's value is read.
    colluders = _collusion_possible(family_of, document_of, len(families))
    measured = np.zeros(len(family_of), dtype=bool)
    measured[chosen] = True
    measured |= colluders[family_of]
    rows = np.flatnonzero(measured)
    can_collude = bool(colluders.any())
    nearest_of_rows, within_of_rows = words.nearest_duplicates(
        document_of, rows, families=family_of if can_collude else None
    )
    nearest = np.zeros(len(family_of))
    nearest[rows] = nearest_of_rows
    within = np.zeros(len(family_of))
    chosen_family = family_of[chosen]
    # A family without notes has sums of 0.0: divided by 1, its means are the 0 reported.
    grouped_members = np.maximum(np.bincount(chosen_family, minlength=len(families)), 1)
    # bincount adds each family's values in group order, as a sum over the group would.
    duplicates: list[float] = (
        np.bincount(chosen_family, weights=nearest[chosen], minlength=len(families)) / grouped_members
    ).tolist()
    echoes: list[float] = (
        np.bincount(chosen_family, weights=echo[chosen], minlength=len(families)) / grouped_members
    ).tolist()
    restated = words.restatement(echo)
    if not can_collude:
        return duplicates, echoes, restated, [0.0] * len(families), within, family_of
    within[rows] = within_of_rows
    within[~colluders[family_of]] = 0.0
    # The ALARM_GROUP-th highest within-family duplicate: one near-copied pair (an article
    # republished) is not collusion, a group of near-copies is.
    by_within = np.lexsort((-within, family_of))
    ranked = family_of[by_within]
    kth = by_within[np.arange(len(ranked)) - np.searchsorted(ranked, ranked) == ALARM_GROUP - 1]
    collusion = np.zeros(len(families))
    collusion[family_of[kth]] = within[kth]
    collusions: list[float] = collusion.tolist()
    return duplicates, echoes, restated, collusions, within, family_of


def _collusion_possible(
    family_of: npt.NDArray[np.int64], document_of: npt.NDArray[np.int64], family_count: int
) -> npt.NDArray[np.bool_]:
    """Per family: at least :data:`ALARM_GROUP` pool notes, in at least two documents."""
    members = np.bincount(family_of, minlength=family_count)
    # Each family's first document (the last of these writes to a family wins), and how
    # many of its notes are in another one.
    first = np.zeros(family_count, dtype=np.int64)
    first[family_of[::-1]] = document_of[::-1]
    elsewhere = np.bincount(family_of, weights=document_of != first[family_of], minlength=family_count)
    possible: npt.NDArray[np.bool_] = (members >= ALARM_GROUP) & (elsewhere > 0)
    return possible


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def _newness(family_age: float | None, namespace_age: float | None, window: float) -> float:
    if family_age is None or namespace_age is None or window <= 0:
        return 0.0
    return _clip(math.exp(-max(family_age, 0.0) / window) - math.exp(-max(namespace_age, 0.0) / window))
