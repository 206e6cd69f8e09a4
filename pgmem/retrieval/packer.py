"""Deterministic greedy rank-and-pack (DESIGN §3.3).

Candidates are ranked by ``final = b_norm + reg_family`` (ties by note id); each next
pick is either the remaining candidate with the best overlap-decayed score given what is
already packed (``order="decayed"``, MMR-like) or simply the next in that ranking
(``order="final"``, the seed's single scan). Each pick is accepted or rejected with a
named reason. Pure Python and numpy over at most a few hundred rows: no I/O, no database
imports.
"""

from __future__ import annotations

import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pgmem.errors import InputError
from pgmem.params import MULTI_ENTITY, PackParams
from pgmem.retrieval.calibrate import Calibration
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.words import PoolWords, content_words, word_list
from pgmem.types import Candidate, PackItem, Rejection, frozen_from_fields

OVERLAP = "overlap"
BELOW_MINIMUM = "below_minimum"
ROLE_QUOTA = "role_quota"
FAMILY_CAP = "family_cap"
TOKEN_BUDGET = "token_budget"
QUARANTINE = "quarantine"
REJECTION_REASONS: tuple[str, ...] = (OVERLAP, BELOW_MINIMUM, ROLE_QUOTA, FAMILY_CAP, TOKEN_BUDGET, QUARANTINE)

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


#: A re-ordering of the scan: (candidates, final scores, scan order) -> (pick order, pick scores).
_Scores = npt.NDArray[np.float64]
Reorder = Callable[[tuple[Candidate, ...], _Scores, list[int]], tuple[list[int], _Scores]]


@dataclass(frozen=True)
class PackResult:
    """The selected notes in selection order, and every scanned candidate refused."""

    items: tuple[PackItem, ...]
    rejections: tuple[Rejection, ...]


def count_tokens(text: str) -> int:
    """Approximate the number of LLM tokens in ``text``.

    This is an approximation, not any model's tokenizer: every run of word characters
    and every single punctuation character is a piece, and a piece counts
    ``ceil(len / 4)`` tokens (so words of up to 4 characters count 1).

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    int
        The approximate token count (0 for blank text).
    """
    return sum(-(-len(piece) // 4) for piece in _TOKEN.findall(text))


def note_overlap(a: Candidate, b: Candidate) -> float:
    """Measure how much two notes say the same thing, in [0, 1].

    Parameters
    ----------
    a, b : Candidate
        Reads ``document_id``, ``span_start``, ``span_end`` and ``text``.

    Returns
    -------
    float
        For notes of the same document, the length of the intersection of their byte
        spans ``[start, end)`` divided by the shorter span's length (0 when disjoint).
        Otherwise the Jaccard similarity of their lower-cased word sets (words are
        ``\\w+`` runs); two notes without words have overlap 0.
    """
    if a.document_id == b.document_id:
        return _span_overlap(a, b)
    return _jaccard(_words(a.text), _words(b.text))


def rank_and_pack(
    pool: Pool,
    calibration: Calibration,
    params: PackParams,
    *,
    token_counter: Callable[[str], int] = count_tokens,
    reorder: Reorder | None = None,
    entities: int = 0,
) -> PackResult:
    """Rank the pool's candidates and pack the evidence budget greedily.

    Each candidate gets ``b_norm = (b - mean_b) / sqrt(var_b + eps)`` and
    ``final = b_norm + reg_family``; its ``max_overlap`` against the notes already
    selected gives ``decayed = final - overlap_decay * max_overlap``. The scan order is
    ``final`` descending, ties by ``note_id`` ascending. With ``params.order ==
    "final"`` candidates are picked in that order; with ``"decayed"`` each pick is the
    remaining candidate with the largest ``decayed`` (ties: the scan order), so a note
    repeating a packed one waits behind a fresh one. With ``params.coverage > 0`` each
    pick is the remaining candidate with the largest score (``final`` or ``decayed``)
    plus its coverage gain: ``coverage`` times the idf-weighted share of the question's
    content words it holds that no packed note holds yet (docs/algorithm.md). For each pick, the first rule that
    refuses it names the rejection: ``overlap`` (max_overlap above
    ``overlap_hard_threshold``), ``below_minimum`` (decayed below
    ``minimum_effective_score``), ``role_quota``, ``family_cap``, ``quarantine``
    (the note restates the question, ``calibration.held``: unless its family is
    quarantined it is picked again after all others and packed if the budget has room;
    or the family alarm quarantined its family and ``quarantine_cap`` of its notes are
    already packed, ``collusion_cap`` for a colluding family; when every candidate
    belongs to a quarantined family the non-colluding ones are picked again, in order,
    after all others and packed if the budget has room, so a false alarm of the echo
    score never empties a pack; a colluding family's are not), ``token_budget`` (its tokens exceed what remains;
    the picks go on, a shorter note may fit). Picking stops when ``budget`` notes are
    selected, the token budget is used up exactly, or the candidates run out;
    candidates never picked are neither packed nor rejected.

    Parameters
    ----------
    pool : Pool
        Reads the candidates, ``mean`` and ``variance``.
    calibration : Calibration
        The family regularisers and ``eps`` from :func:`~pgmem.retrieval.calibrate.calibrate`.
    params : PackParams
        Budget, quotas, caps and overlap rules.
    token_counter : callable, optional
        Counts a note text's tokens for the token budget (default :func:`count_tokens`).
    reorder : callable, optional
        ``reorder(candidates, final, scan_order) -> (pick_order, pick_scores)``: a new
        scan order and the scores picks are made by (a caller's re-ranker,
        :class:`pgmem.retrieval.rerank.TopReranking`). The reported ``final`` and
        ``decayed`` scores stay pgmem's, and every rule still applies to every pick.
    entities : int, optional
        How many entities the pack's hints name (default 0): from
        :data:`~pgmem.params.MULTI_ENTITY` on, the coverage weight is the larger of
        ``params.coverage`` and ``params.multi_entity_coverage``.

    Returns
    -------
    PackResult
        The packed items (``rank`` 1-based in selection order) and the rejections in
        pick order, the ``quarantine`` rejections last.

    Raises
    ------
    InputError
        If two candidates share a note id, a candidate's family is missing from the
        calibration, a score is not finite, or ``token_counter`` returns a negative count.
    """
    candidates = pool.candidates
    if not candidates:
        return PackResult((), ())
    note_ids = [c.note_id for c in candidates]
    if len(set(note_ids)) != len(note_ids):
        _check_unique_ids(candidates)
    families = [c.family for c in candidates]
    regularizer_of = calibration.regularizers  # one per calibrated family
    missing = sorted(set(families).difference(regularizer_of))
    if missing:
        raise InputError(f"candidate family {missing[0]!r} is missing from the calibration")
    regularizers = list(map(regularizer_of.__getitem__, families))
    base = np.array([c.base_score for c in candidates], dtype=np.float64)
    normalized = (base - pool.mean) / math.sqrt(pool.variance + calibration.eps)
    final = normalized + np.array(regularizers, dtype=np.float64)
    if not np.isfinite(final).all():
        raise InputError("candidate base scores and pool aggregates must be finite")
    normalized_scores: list[float] = normalized.tolist()
    final_scores: list[float] = final.tolist()
    order = _scan_order(final, note_ids)
    pick = final
    if reorder is not None:
        order, pick = reorder(candidates, final, order)
    pick_scores: list[float] = final_scores if pick is final else pick.tolist()
    overlaps = _Overlaps(candidates, pool.words.word_ids)
    quarantined = calibration.quarantined
    colluding = calibration.colluding
    items: list[PackItem] = []
    rejections: list[Rejection] = []
    per_role: Counter[str] = Counter()
    per_family: Counter[str] = Counter()
    tokens_left = params.token_budget
    # Notes of a quarantined family past its cap are deferred: when the pool holds
    # nothing but quarantined families (no other evidence to prefer), a second pass packs
    # them, so a false alarm on a one-family pool never empties the pack. Otherwise they
    # stay out, even if the pack ends short: an attacker crowding the pool must not get
    # in through the gap it made.
    deferred: list[int] = []
    held: dict[int, Rejection] = {}
    held_notes = calibration.held
    refill = quarantined.issuperset(families)

    def decayed_score(index: int) -> float:
        return pick_scores[index] - params.overlap_decay * overlaps.largest(index)

    weight = max(params.coverage, params.multi_entity_coverage if entities >= MULTI_ENTITY else 0.0)
    # A family the calibration never rewards (quarantined, or near-copies of each other)
    # gains nothing from coverage either.
    coverage = _Coverage(pool, weight, calibration.unrewarded) if weight > 0 else None

    def picks() -> Iterator[tuple[bool, int]]:
        """(second pass?, candidate) in pick order."""
        if coverage is not None and params.order != "decayed":
            # The final score plus the coverage gain, over the scan order with the picked
            # masked out: the first best is the earliest in the scan order, as below.
            ranked = np.array(order, dtype=np.int64)
            in_scan_order = pick[ranked]
            taken = np.zeros(len(ranked), dtype=bool)
            for _ in range(len(ranked)):
                gains = coverage.gains(overlaps.selected)
                if coverage.exhausted:
                    break  # no gain left: the rest in the scan order
                total = in_scan_order + gains[ranked]
                total[taken] = -np.inf
                position = int(np.argmax(total))
                taken[position] = True
                yield False, int(ranked[position])
            yield from ((False, index) for index in ranked[~taken].tolist())
            yield from second_pass()
            return
        remaining = list(order)
        while remaining:
            position = 0
            if params.order == "decayed":
                # The remaining candidate with the best decayed score plus its coverage
                # gain given what is packed (ties: the better final score, then the note
                # id — the scan order).
                scores = [decayed_score(index) for index in remaining]
                position = scores.index(max(scores))
                if coverage is not None:
                    gains = coverage.gains(overlaps.selected)[remaining]
                    position = int(np.argmax(np.array(scores) + gains))
            yield False, remaining.pop(position)
        yield from second_pass()

    def second_pass() -> Iterator[tuple[bool, int]]:
        """The deferred candidates picked again after all others."""
        if refill:
            # A colluding family never refills: near-copies of each other are no evidence.
            yield from ((True, index) for index in deferred if candidates[index].family not in colluding)
        elif held_notes:
            # A held note of a family not quarantined is only demoted: packed after every
            # other candidate if the budget has room (it may be a genuine answer).
            yield from (
                (True, index)
                for index in deferred
                if note_ids[index] in held_notes and candidates[index].family not in quarantined
            )

    for filling, index in picks():
        if len(items) >= params.budget or tokens_left == 0:
            break
        candidate = candidates[index]
        max_overlap, overlaps_with = overlaps.best(index)
        decayed = final_scores[index] - params.overlap_decay * max_overlap
        tokens = 0
        reason: str | None = None
        if max_overlap > params.overlap_hard_threshold:
            reason = OVERLAP
        elif params.minimum_effective_score is not None and (decayed < params.minimum_effective_score):
            reason = BELOW_MINIMUM
        elif candidate.role in params.role_quotas and per_role[candidate.role] >= params.role_quotas[candidate.role]:
            reason = ROLE_QUOTA
        elif params.family_cap is not None and per_family[candidate.family] >= params.family_cap:
            reason = FAMILY_CAP
        elif not filling and (
            candidate.note_id in held_notes
            or (
                candidate.family in quarantined
                and per_family[candidate.family]
                >= (
                    calibration.collusion_cap
                    if candidate.family in colluding and calibration.collusion_cap is not None
                    else calibration.quarantine_cap
                )
            )
        ):
            reason = QUARANTINE
        elif tokens_left is not None:
            tokens = token_counter(candidate.text)
            if tokens < 0:
                raise InputError(f"token_counter must return a count >= 0, got {tokens!r}")
            if tokens > tokens_left:
                reason = TOKEN_BUDGET
        if filling and reason is not None:
            continue  # it stays rejected for its quarantine
        if reason is not None:
            rejection = Rejection(
                note_id=candidate.note_id,
                family=candidate.family,
                role=candidate.role,
                reason=reason,
                final_score=final_scores[index],
                decayed_score=decayed,
                max_overlap=max_overlap,
                overlaps_note_id=overlaps_with,
            )
            if reason == QUARANTINE:
                deferred.append(index)
                held[index] = rejection
            else:
                rejections.append(rejection)
            continue
        held.pop(index, None)
        overlaps.select(index)
        per_role[candidate.role] += 1
        per_family[candidate.family] += 1
        if tokens_left is not None:
            tokens_left -= tokens
        items.append(
            frozen_from_fields(
                PackItem,
                {
                    "rank": len(items) + 1,
                    "note_id": candidate.note_id,
                    "external_id": candidate.external_id,
                    "document_id": candidate.document_id,
                    "family": candidate.family,
                    "role": candidate.role,
                    "confidence": candidate.confidence,
                    "text": candidate.text,
                    "context": candidate.context,
                    "source_ts": candidate.source_ts,
                    "citation": candidate.citation,
                    "base_score": candidate.base_score,
                    "normalized_score": normalized_scores[index],
                    "regularizer": regularizers[index],
                    "final_score": final_scores[index],
                    "decayed_score": decayed,
                    "max_overlap": max_overlap,
                    "dense_score": candidate.dense_score,
                    "lexical_score": candidate.lexical_score,
                    "facet_boost": candidate.facet_boost,
                    "link_boost": candidate.link_boost,
                    "boosts": candidate.boosts,
                },
            )
        )
    return PackResult(tuple(items), tuple(rejections) + tuple(held.values()))


def question_aspects(question: str) -> frozenset[str]:
    """The words of ``question`` a pack with coverage on tries to cover: its content words."""
    return content_words(question)


class _Coverage:
    """The coverage gain of each candidate: ``weight`` times the idf-weighted share of the
    question's content words (those found in the pool, in a note's context or text) that
    it holds and no packed note holds yet. A word's weight is ``ln(1 + N / df)`` over the
    pool's N notes, so a rare entity counts more than a word every candidate repeats.
    Notes of the ``unrewarded`` families (``Calibration.unrewarded``) gain nothing and cover
    nothing: no rule of the packer rewards a family the calibration never rewards."""

    def __init__(self, pool: Pool, weight: float, unrewarded: frozenset[str] = frozenset()) -> None:
        # A note's words include its context (a title, a session) as its lexemes do.
        question = sorted(question_aspects(pool.query))
        # Which notes hold which question word, from word hashes: the texts' (read once
        # per pool, shared with the alarm) and the contexts' (a speaker, a session, a
        # title: hashed once per process).
        contexts = PoolWords([candidate.context for candidate in pool.candidates])
        hits = pool.words.holding(question) | contexts.holding(question)
        self.hits = hits[:, hits.any(axis=0)]
        self.numeric = self.hits.astype(np.float64)
        found = self.hits.sum(axis=0)
        idf = np.log1p(len(pool.candidates) / np.maximum(found, 1))
        total = float(idf.sum())
        self.weights = weight * idf / total if total > 0 else idf
        if unrewarded:
            self.hits[[row for row, c in enumerate(pool.candidates) if c.family in unrewarded]] = False
            self.numeric = self.hits.astype(np.float64)
        self.current: npt.NDArray[np.float64] = np.round(self.numeric @ self.weights, 12)
        self.counted = 0
        self.covered = np.zeros(self.hits.shape[1], dtype=bool)
        #: Every question word is covered: every gain is 0 from now on.
        self.exhausted = not self.hits.any()

    def gains(self, selected: list[int]) -> npt.NDArray[np.float64]:
        """Every candidate's gain given the ``selected`` (packed) candidates."""
        if len(selected) > self.counted:
            newly = self.hits[selected[self.counted :]].any(axis=0)
            self.counted = len(selected)
            if (newly & ~self.covered).any():  # else no gain changes
                self.covered |= newly
                # Rounded so that equal gains are equal whatever the summation order.
                self.current = np.round(self.numeric @ np.where(self.covered, 0.0, self.weights), 12)
                self.exhausted = bool(self.covered.all())
        return self.current


def _scan_order(final: npt.NDArray[np.float64], note_ids: list[str]) -> list[int]:
    """Candidate indices by final score descending, ties by note id then index."""
    descending = np.argsort(-final, kind="stable")
    ordered = final[descending]
    if not (ordered[1:] == ordered[:-1]).any():
        # No two scores are equal (-0.0 == 0.0 counts as equal): the note ids are never read.
        scan: list[int] = descending.tolist()
        return scan
    # Sorting (-final, note id, index) tuples gives the scan order without a key function.
    ranked = sorted(zip((-final).tolist(), note_ids, range(len(note_ids)), strict=True))
    return list(map(operator.itemgetter(2), ranked))


class _Overlaps:
    """Each candidate's largest overlap with the notes selected so far, and with which.

    Updated once per selection; a candidate's overlaps are computed only when asked for,
    so the scan order never reads words of candidates it does not reach.
    """

    def __init__(self, candidates: tuple[Candidate, ...], words: Callable[[int], frozenset[int]]) -> None:
        self.candidates = candidates
        self.selected: list[int] = []
        self.seen: dict[int, int] = {}  # candidate -> how many selections it was compared with
        self.found: dict[int, tuple[float, str | None]] = {}
        self._words_of = words  # the pool's words of a candidate (as ids), tokenised once per process

    def select(self, index: int) -> None:
        self.selected.append(index)

    def _update(self, index: int) -> tuple[float, str | None]:
        best = self.found.get(index, (0.0, None))
        candidate = self.candidates[index]
        pending = self.selected[self.seen.get(index, 0) :]
        words = self._words_of(index) if pending else frozenset()
        for other in pending:
            chosen = self.candidates[other]
            if candidate.document_id == chosen.document_id:
                overlap = _span_overlap(candidate, chosen)
            else:
                overlap = _jaccard(words, self._words_of(other))
            if overlap > best[0]:
                best = (overlap, chosen.note_id)
        self.seen[index] = len(self.selected)
        self.found[index] = best
        return best

    def largest(self, index: int) -> float:
        return self._update(index)[0]

    def best(self, index: int) -> tuple[float, str | None]:
        """The largest overlap of ``index`` with a selected note, and that note's id."""
        return self._update(index)


def _words(text: str) -> frozenset[str]:
    return frozenset(word_list(text))


def _span_overlap(a: Candidate, b: Candidate) -> float:
    shorter = min(a.span_end - a.span_start, b.span_end - b.span_start)
    if shorter <= 0:
        return 0.0
    shared = min(a.span_end, b.span_end) - max(a.span_start, b.span_start)
    return max(0, shared) / shorter


def _jaccard(words_a: frozenset[Hashable], words_b: frozenset[Hashable]) -> float:
    shared = len(words_a & words_b)
    union = len(words_a) + len(words_b) - shared  # without building the union
    if union == 0:
        return 0.0
    return shared / union


def _check_unique_ids(candidates: tuple[Candidate, ...]) -> None:
    if len({candidate.note_id for candidate in candidates}) == len(candidates):
        return
    seen: set[str] = set()
    for candidate in candidates:
        if candidate.note_id in seen:
            raise InputError(f"pool has note_id {candidate.note_id!r} more than once")
        seen.add(candidate.note_id)
