"""Closed-form provenance-family calibration (DESIGN §3.2) and the degraded switch (§3.3).

A family's support in the pool (the sum of its base scores, ``R_f``) is compared with
what its size alone predicts (``m_f`` draws from the pool), shrunk towards zero for
small families, squashed by ``tanh`` and blended with the family's write-time
confidence. The resulting regulariser is a bounded nudge of at most ``gamma`` pool
standard deviations, and it is switched off entirely when the pool is too small, too
flat or too one-sided to say anything.

Pure numpy over the per-family aggregates of :class:`~pgmem.retrieval.pool.Pool`: no
I/O, no database imports, deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pgmem.errors import InputError
from pgmem.params import CalibrationParams, Mode, check_mode
from pgmem.retrieval.alarm import family_signals
from pgmem.retrieval.pool import Pool
from pgmem.types import FamilyAggregate, FamilyCalibration, frozen_from_fields

POOL_TOO_SMALL = "pool_too_small"
POOL_TOO_FLAT = "pool_too_flat"
POOL_ONE_SIDED = "pool_one_sided"
DEGRADED_REASONS: tuple[str, ...] = (POOL_TOO_SMALL, POOL_TOO_FLAT, POOL_ONE_SIDED)

_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Calibration:
    """The outcome of :func:`calibrate` for one pool.

    Attributes
    ----------
    mode : str
        The ablation mode the regularisers were computed for.
    degraded : bool
        True when the pool was too small, too flat or too one-sided; every
        regulariser is then 0.
    degraded_reasons : tuple of str
        The conditions that tripped, in the order ``pool_too_small``,
        ``pool_too_flat``, ``pool_one_sided``; empty when not degraded.
    families : tuple of FamilyCalibration
        One record per family in the pool, sorted by family name.
    eps : float
        The numerical floor used, so the packer normalises scores with the same value.
    """

    mode: str
    degraded: bool
    degraded_reasons: tuple[str, ...]
    families: tuple[FamilyCalibration, ...]
    eps: float
    #: At most this many notes of a quarantined family are packed ...
    quarantine_cap: int = 1
    #: ... and of a colluding one (which never refills a pack); None: collusion does not alarm.
    collusion_cap: int | None = None
    #: Notes (ids) of unbound families held back for restating the question, for being
    #: near-copies of a family colluding outside a late burst, or for being newcomers past
    #: the pool's best: picked after every other candidate (unless their family is
    #: quarantined: then as a quarantine).
    held: frozenset[str] = frozenset()
    #: Families no rule may reward: quarantined, or near-copies of each other outside a late
    #: burst (the packer's question coverage gives their notes nothing).
    unrewarded: frozenset[str] = frozenset()
    _regularizers: Mapping[str, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        regularizers = {record.family: record.regularizer for record in self.families}
        object.__setattr__(self, "_regularizers", regularizers)

    @property
    def regularizers(self) -> Mapping[str, float]:
        """Each family's regulariser ``reg_f``, by family name."""
        return self._regularizers

    @property
    def quarantined(self) -> frozenset[str]:
        """The families the alarm quarantined in this pool."""
        return frozenset(record.family for record in self.families if record.quarantined)

    @property
    def colluding(self) -> frozenset[str]:
        """The quarantined families whose collusion alone reached the threshold."""
        return frozenset(record.family for record in self.families if record.quarantined and record.colluding)

    def regularizer(self, family: str) -> float:
        """Return the regulariser ``reg_f`` of ``family``.

        Raises
        ------
        KeyError
            If ``family`` is not one of the pool's families.
        """
        try:
            return self._regularizers[family]
        except KeyError:
            raise KeyError(f"family {family!r} is not in the calibrated pool") from None

    def family(self, name: str) -> FamilyCalibration:
        """Return the calibration record of family ``name`` (KeyError if not in the pool)."""
        for record in self.families:
            if record.family == name:
                return record
        raise KeyError(f"family {name!r} is not in the calibrated pool")


def degraded_reasons(pool: Pool, params: CalibrationParams) -> tuple[str, ...]:
    """Return the degraded-mode conditions (DESIGN §3.3) that ``pool`` trips.

    Parameters
    ----------
    pool : Pool
        Reads ``size``, ``variance`` and ``entropy``.
    params : CalibrationParams
        Reads ``n_min``, ``var_min`` and ``h_min``.

    Returns
    -------
    tuple of str
        Reason codes in the fixed order ``pool_too_small`` (N < n_min),
        ``pool_too_flat`` (var_b < var_min), ``pool_one_sided`` (H < h_min). An empty
        pool reports only ``pool_too_small``: flatness and one-sidedness say nothing
        about a pool with no candidates.
    """
    if pool.size == 0:
        return (POOL_TOO_SMALL,)
    reasons: list[str] = []
    if pool.size < params.n_min:
        reasons.append(POOL_TOO_SMALL)
    if pool.variance < params.var_min:
        reasons.append(POOL_TOO_FLAT)
    if pool.entropy < params.h_min:
        reasons.append(POOL_ONE_SIDED)
    return tuple(reasons)


def calibrate(pool: Pool, params: CalibrationParams, mode: Mode) -> Calibration:
    """Calibrate every provenance family of ``pool`` (DESIGN §3.2-3.3).

    For each family ``f`` with ``m_f`` candidates, score sum ``R_f`` and mean
    confidence ``p_f``, in a pool of ``N`` candidates with mean ``mean_b`` and
    population variance ``var_b``::

        mu_f     = m_f * mean_b
        sigma2_f = m_f * var_b * (1 - m_f / N) + var_floor
        z_f      = (R_f - mu_f) / sqrt(sigma2_f + eps)
        z'_f     = z_f * m_f / (m_f + lambda)
        c_f      = tanh(z'_f / tau)
        r_f      = clip(alpha_prior * p_f + (1 - alpha_prior) * (c_f + 1) / 2, 0, 1)
        v_f      = max(0, sigma2_f - var_floor) / (sigma2_f + eps)
        e_f      = m_f / (m_f + lambda)
        u_f      = clip(0.5 * v_f + 0.5 * (1 - e_f), 0, 1)

    The beta mode's persistent reliability comes from the feedback on the family's
    notes (summed weights ``h_f`` helpful, ``n_f`` unhelpful; ``H``, ``U`` over the
    whole namespace)::

        p0       = (H + 1) / (H + U + 2)               namespace helpful rate
        a_f      = kappa * p0 + h_f,   b_f = kappa * (1 - p0) + n_f
        q_f      = a_f / (a_f + b_f)                   posterior mean
        s2_f     = a_f b_f / ((a_f + b_f)^2 (a_f + b_f + 1))
        zq_f     = (q_f - p0) / sqrt(s2_f + eps)

    The regulariser depends on ``mode``: ``calibrated`` uses
    ``gamma * (2 r_f - 1) * (1 - u_f)``; ``relevance`` uses 0; ``raw_bonus`` uses the
    uncalibrated count bonus ``gamma * m_f / max_g m_g``; ``beta`` uses
    ``gamma * tanh(zq_f / tau)``, 0 for a family without feedback. In every mode it is 0
    when the pool is degraded, and every quantity is computed and reported regardless.

    Parameters
    ----------
    pool : Pool
        Reads ``size``, ``mean``, ``variance``, ``entropy`` and ``families`` (the
        per-family aggregates computed by stage one); the candidates are not read.
    params : CalibrationParams
        Thresholds, floors and shape parameters.
    mode : {"calibrated", "relevance", "raw_bonus", "beta"}
        The ablation mode (DESIGN §3.6).

    Returns
    -------
    Calibration
        The degraded flag and reasons, and one :class:`~pgmem.types.FamilyCalibration`
        per family, sorted by family name.

    Raises
    ------
    ConfigurationError
        If ``mode`` is not a known mode.
    InputError
        If the pool aggregates are inconsistent (non-finite, or family counts that do
        not add up to the pool size).
    """
    mode = check_mode(mode)
    _check_pool(pool)
    reasons = degraded_reasons(pool, params)
    degraded = bool(reasons)
    families = sorted(pool.families, key=lambda aggregate: aggregate.family)
    if not families:
        return Calibration(mode, degraded, reasons, (), params.eps, params.quarantine_cap, params.collusion_cap)

    # The aggregates' columns as one array (one conversion, not five).
    count, score_sum, confidence, helpful, unhelpful = np.array(
        [(f.count, f.score_sum, f.mean_confidence, f.feedback_helpful, f.feedback_unhelpful) for f in families],
        dtype=np.float64,
    ).T
    size = float(pool.size)

    expected_sum = count * pool.mean
    spread = count * pool.variance * (1.0 - count / size)
    expected_variance = spread + params.var_floor
    z = (score_sum - expected_sum) / np.sqrt(expected_variance + params.eps)
    evidence = count / (count + params.shrinkage)
    shrunk_z = z * evidence
    corroboration = np.tanh(shrunk_z / params.tau)
    reliability = np.clip(
        params.alpha_prior * confidence + (1.0 - params.alpha_prior) * (corroboration + 1.0) / 2.0,
        0.0,
        1.0,
    )
    variance_share = np.maximum(0.0, expected_variance - params.var_floor) / (expected_variance + params.eps)
    uncertainty = np.clip(0.5 * variance_share + 0.5 * (1.0 - evidence), 0.0, 1.0)
    if not params.use_uncertainty:
        uncertainty = np.zeros_like(uncertainty)
    feedback_reliability, feedback_z = _beta_reliability(pool, params, helpful, unhelpful)
    if mode == "beta":
        signal = params.gamma * np.tanh(feedback_z / params.tau)
    else:
        signal = params.gamma * (2.0 * reliability - 1.0) * (1.0 - uncertainty)
    regularizer = _regularizer(mode, degraded, params.gamma, count, signal)
    floor_dominated = params.var_floor > spread
    names = [aggregate.family for aggregate in families]
    use_collusion = params.collusion_cap is not None
    threshold = params.alarm_threshold
    signals = family_signals(
        pool,
        names,
        shrunk_z,
        params.tau,
        params.recency_window,
        threshold,
        use_collusion,
        params.burst_window,
        params.newcomer_share,
    )
    alarmed = [threshold is not None and score >= threshold for score in signals.score]
    colluding = signals.colluding
    # The alarm is a defence, not a calibration: it quarantines in every mode but the
    # relevance-only ablation, degraded pool or not, so no mode ever rewards a flagged family.
    # A family alarmed only for a note restating the question is not quarantined: that
    # note is held back, the family's other notes (its evidence, when the note is an
    # archived question) are not.
    guarding = mode != "relevance" and threshold is not None
    quarantined = [guarding and threshold is not None and score >= threshold for score in signals.family_score]
    held = frozenset(pool.candidates[row].note_id for row in signals.restating) if guarding else frozenset()
    # The near-copies of a family colluding outside a late burst: its best ones (as many as
    # quarantine_cap) stay in the running, the others are held like a restating note.
    if guarding and signals.near_copy_rows:
        held |= _past_best(pool, signals.near_copy_rows, params.quarantine_cap, per_family=True)
    # Newcomer families together keep their best newcomer_quota notes in the running; the
    # others are held: a spread attacker's fresh families crowd no pack, and a genuine new
    # source's best note still competes (the rest is packed if the budget has room).
    if mode != "relevance" and any(signals.newcomer):
        newcomers = {name for name, flag in zip(names, signals.newcomer, strict=True) if flag}
        rows = [row for row, candidate in enumerate(pool.candidates) if candidate.family in newcomers]
        held |= _past_best(pool, rows, params.newcomer_quota, per_family=False)
    unrewarded = frozenset(
        name
        for name, flag, near in zip(names, quarantined, signals.near_copies, strict=True)
        if flag or (guarding and near)
    )
    for i, flag in enumerate(quarantined):
        if flag:
            regularizer[i] = -params.quarantine_penalty * signals.score[i]
        elif guarding and signals.near_copies[i]:
            # Near-copies of one writer are one piece of evidence, not corroboration: the
            # family is never rewarded, and is demoted by the share of its pool notes that
            # are near-copies (its other notes stay packable; the near-copies are held).
            demotion = -params.quarantine_penalty * signals.score[i] * signals.near_copy_share[i]
            regularizer[i] = min(float(regularizer[i]), demotion)

    # Each column turned into Python values once (tolist), named in FamilyCalibration's
    # field order; then one record per family, its __dict__ filled at once
    # (frozen_from_fields: 33 fields, one record per family).
    columns = {
        "family": names,
        "count": [aggregate.count for aggregate in families],
        "score_sum": [aggregate.score_sum for aggregate in families],
        "mean_confidence": [aggregate.mean_confidence for aggregate in families],
        "expected_sum": expected_sum.tolist(),
        "expected_variance": expected_variance.tolist(),
        "z": z.tolist(),
        "shrunk_z": shrunk_z.tolist(),
        "corroboration": corroboration.tolist(),
        "reliability": reliability.tolist(),
        "uncertainty": uncertainty.tolist(),
        "regularizer": regularizer.tolist(),
        "variance_floor_dominated": floor_dominated.tolist(),
        "feedback_helpful": [aggregate.feedback_helpful for aggregate in families],
        "feedback_unhelpful": [aggregate.feedback_unhelpful for aggregate in families],
        "feedback_reliability": feedback_reliability.tolist(),
        "feedback_z": feedback_z.tolist(),
        "namespace_count": signals.namespace_count,
        "pool_share": signals.pool_share,
        "namespace_share": signals.namespace_share,
        "newness": signals.newness,
        "duplicate_density": signals.duplicate_density,
        "question_echo": signals.question_echo,
        "question_restatement": signals.question_restatement,
        "alarm_score": signals.score,
        "alarm_threshold": [threshold] * len(families),
        "alarmed": alarmed,
        "quarantined": quarantined,
        "collusion": signals.collusion,
        "colluding": colluding,
        "burst_span": signals.burst_span,
        "burst_lateness": signals.burst_lateness,
        "bound": signals.bound,
        "newcomer": signals.newcomer,
    }
    records = tuple(
        frozen_from_fields(FamilyCalibration, dict(zip(columns, values, strict=True)))
        for values in zip(*columns.values(), strict=True)
    )
    return Calibration(
        mode, degraded, reasons, records, params.eps, params.quarantine_cap, params.collusion_cap, held, unrewarded
    )


def _past_best(pool: Pool, rows: list[int], cap: int, *, per_family: bool) -> frozenset[str]:
    """The notes of ``rows`` (pool positions) past the ``cap`` best by base score (ties:
    pool order), of each family or of them all together. Near-copies keep as many as a
    quarantine packs (a templated writer whose notes answer the question keeps its best
    one); newcomers keep the pool's best ``newcomer_quota`` together."""
    candidates = pool.candidates

    def group(row: int) -> str:
        return candidates[row].family if per_family else ""

    seen: dict[str, int] = {}
    held: set[str] = set()
    for row in sorted(rows, key=lambda row: (group(row), -candidates[row].base_score, row)):
        seen[group(row)] = seen.get(group(row), 0) + 1
        if seen[group(row)] > cap:
            held.add(candidates[row].note_id)
    return frozenset(held)


def _beta_reliability(
    pool: Pool, params: CalibrationParams, helpful: _Array, unhelpful: _Array
) -> tuple[_Array, _Array]:
    """Posterior mean of each family's Beta reliability and its z against the base rate."""
    base_rate = (pool.feedback_helpful + 1.0) / (pool.feedback_helpful + pool.feedback_unhelpful + 2.0)
    a = params.feedback_prior * base_rate + helpful
    b = params.feedback_prior * (1.0 - base_rate) + unhelpful
    total = a + b
    mean = a / total
    variance = a * b / (total * total * (total + 1.0))
    return mean, (mean - base_rate) / np.sqrt(variance + params.eps)


def _regularizer(mode: Mode, degraded: bool, gamma: float, count: _Array, signal: _Array) -> _Array:
    # One switch for every mode, so an ablation isolates the calibration itself.
    if degraded or mode == "relevance":
        return np.zeros_like(count)
    if mode == "raw_bonus":
        return gamma * count / float(count.max())
    return signal


def _check_pool(pool: Pool) -> None:
    for name in ("mean", "variance", "entropy"):
        value = getattr(pool, name)
        if not math.isfinite(value):
            raise InputError(f"pool {name} must be finite, got {value!r}")
    for name in ("feedback_helpful", "feedback_unhelpful"):
        value = getattr(pool, name)
        if not (math.isfinite(value) and value >= 0):
            raise InputError(f"pool {name} must be finite and >= 0, got {value!r}")
    names = [aggregate.family for aggregate in pool.families]
    if len(set(names)) != len(names):
        raise InputError("pool families must be unique, got a repeated family name")
    if not _plainly_valid(pool.families):
        for aggregate in pool.families:
            _check_family(aggregate)
    total = sum(aggregate.count for aggregate in pool.families)
    if total != pool.size:
        raise InputError(f"pool family counts must add up to the pool size {pool.size}, got {total}")


def _plainly_valid(families: tuple[FamilyAggregate, ...]) -> bool:
    """True when every family passes :func:`_check_family`, read in a few passes over all.

    A sum is finite only when every term is (an inf or nan propagates); it may also
    overflow for huge finite terms, which then go through the family-by-family check.
    """
    if not families:
        return True
    scores = [aggregate.score_sum for aggregate in families]
    confidences = [aggregate.mean_confidence for aggregate in families]
    helpful = [aggregate.feedback_helpful for aggregate in families]
    unhelpful = [aggregate.feedback_unhelpful for aggregate in families]
    return (
        min(aggregate.count for aggregate in families) >= 1
        and math.isfinite(sum(scores) + sum(confidences) + sum(helpful) + sum(unhelpful))
        and min(helpful) >= 0
        and min(unhelpful) >= 0
    )


def _check_family(aggregate: FamilyAggregate) -> None:
    if aggregate.count < 1:
        raise InputError(f"family {aggregate.family!r} count must be >= 1, got {aggregate.count!r}")
    for name in ("score_sum", "mean_confidence"):
        value = getattr(aggregate, name)
        if not math.isfinite(value):
            raise InputError(f"family {aggregate.family!r} {name} must be finite, got {value!r}")
    for name in ("feedback_helpful", "feedback_unhelpful"):
        value = getattr(aggregate, name)
        if not (math.isfinite(value) and value >= 0):
            raise InputError(f"family {aggregate.family!r} {name} must be finite and >= 0, got {value!r}")
