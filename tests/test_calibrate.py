"""Family calibration (DESIGN §3.2) and the degraded switch: golden files, units, properties."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
from golden_util import (
    MODES_ALL,
    assert_matches,
    calibration_params,
    candidate_from_json,
    candidate_rows,
    candidates_of,
    feedback_of,
    golden_paths,
    load_case,
    reference_expected,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from pgmem.errors import ConfigurationError, InputError
from pgmem.params import CalibrationParams
from pgmem.retrieval.calibrate import Calibration, calibrate
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate, FamilyAggregate

GOLDEN = golden_paths()
CALIBRATION_KEYS = ("degraded", "degraded_reasons", "families")


def _golden_calibration(case: dict[str, Any], mode: str | None = None) -> Calibration:
    pool = Pool.from_candidates(candidates_of(case), feedback_of(case))
    params = CalibrationParams(**case["calibration_params"])
    return calibrate(pool, params, case["mode"] if mode is None else mode)  # type: ignore[arg-type]


def _row(family: str, score: float, confidence: float = 0.5, index: int = 0) -> Candidate:
    return candidate_from_json(
        {
            "note_id": f"00000000-0000-4000-8000-{index:012d}",
            "document_id": f"doc-{index}",
            "span_start": 0,
            "span_end": 10,
            "text": f"note {index}",
            "family": family,
            "role": "fact",
            "confidence": confidence,
            "base_score": score,
        }
    )


def _pool(*rows: tuple[str, float]) -> Pool:
    return Pool.from_candidates(_row(f, b, index=i) for i, (f, b) in enumerate(rows))


# ------------------------------------------------------------------------ golden files

#: FamilyCalibration fields of the family alarm (pgmem.retrieval.alarm), not of DESIGN §3.2.
ALARM_FIELDS = frozenset(
    {
        "namespace_count",
        "pool_share",
        "namespace_share",
        "newness",
        "duplicate_density",
        "question_echo",
        "question_restatement",
        "collusion",
        "colluding",
        "burst_span",
        "burst_lateness",
        "bound",
        "newcomer",
        "alarm_score",
        "alarm_threshold",
        "alarmed",
        "quarantined",
    }
)


def test_there_are_enough_golden_cases() -> None:
    assert len(GOLDEN) >= 5


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_calibration_matches_module(path: Path) -> None:
    case = load_case(path)
    pool = Pool.from_candidates(candidates_of(case), feedback_of(case))
    assert_matches(
        {"size": pool.size, "mean": pool.mean, "variance": pool.variance, "entropy": pool.entropy},
        case["expected"]["pool"],
    )
    calibration = _golden_calibration(case)
    assert calibration.mode == case["mode"]
    # The golden files hold the numbers of DESIGN §3.2; the family alarm's inputs are
    # tested in test_alarm.py. No golden pool (no question to echo) raises an alarm.
    assert not any(record.alarmed or record.quarantined for record in calibration.families)
    actual = {
        "degraded": calibration.degraded,
        "degraded_reasons": list(calibration.degraded_reasons),
        "families": [
            {key: value for key, value in asdict(record).items() if key not in ALARM_FIELDS}
            for record in calibration.families
        ],
    }
    assert_matches(actual, {key: case["expected"][key] for key in CALIBRATION_KEYS})
    for record in calibration.families:
        assert calibration.regularizer(record.family) == record.regularizer


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_calibration_matches_scalar_reference(path: Path) -> None:
    case = load_case(path)
    recomputed = reference_expected(case)
    assert_matches(recomputed["pool"], case["expected"]["pool"])
    assert_matches(
        {key: recomputed[key] for key in CALIBRATION_KEYS},
        {key: case["expected"][key] for key in CALIBRATION_KEYS},
    )


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_diagnostics_do_not_depend_on_mode(path: Path) -> None:
    case = load_case(path)
    by_mode = {mode: _golden_calibration(case, mode) for mode in MODES_ALL}
    for calibration in by_mode.values():
        assert calibration.degraded_reasons == by_mode["calibrated"].degraded_reasons
        for record, reference in zip(calibration.families, by_mode["calibrated"].families, strict=True):
            assert replace(record, regularizer=0.0) == replace(reference, regularizer=0.0)


# ---------------------------------------------------------------------------- units


def test_empty_pool_is_degraded_with_no_families() -> None:
    for mode in MODES_ALL:
        calibration = calibrate(Pool.from_candidates([]), CalibrationParams(), mode)  # type: ignore[arg-type]
        assert calibration.degraded
        assert calibration.degraded_reasons == ("pool_too_small",)
        assert calibration.families == ()


def test_degraded_reasons_come_in_fixed_order() -> None:
    # One candidate: too small, zero variance and zero entropy all at once.
    calibration = calibrate(_pool(("wire", 0.5)), CalibrationParams(), "calibrated")
    assert calibration.degraded_reasons == ("pool_too_small", "pool_too_flat", "pool_one_sided")
    assert calibration.regularizer("wire") == 0.0


def test_thresholds_at_zero_never_trip() -> None:
    params = CalibrationParams(n_min=1, var_min=0.0, h_min=0.0)
    calibration = calibrate(_pool(("wire", 0.5)), params, "calibrated")
    assert not calibration.degraded
    assert calibration.degraded_reasons == ()


def test_healthy_pool_is_not_degraded_and_sorted_by_family() -> None:
    rows = [("wire", 0.9), ("wire", 0.8), ("wire", 0.85), ("blog", 0.2), ("blog", 0.3)]
    rows += [("forum", 0.5), ("forum", 0.4), ("misc", 0.1)]
    calibration = calibrate(_pool(*rows), CalibrationParams(), "calibrated")
    assert not calibration.degraded
    assert [f.family for f in calibration.families] == ["blog", "forum", "misc", "wire"]
    assert calibration.regularizer("wire") > 0 > calibration.regularizer("blog")


def test_relevance_mode_zeroes_regularizers_but_keeps_diagnostics() -> None:
    rows = [("wire", 0.9), ("wire", 0.8), ("wire", 0.85), ("blog", 0.2), ("blog", 0.3)]
    rows += [("forum", 0.5), ("forum", 0.4), ("misc", 0.1)]
    relevance = calibrate(_pool(*rows), CalibrationParams(), "relevance")
    calibrated = calibrate(_pool(*rows), CalibrationParams(), "calibrated")
    assert all(f.regularizer == 0.0 for f in relevance.families)
    assert [f.z for f in relevance.families] == [f.z for f in calibrated.families]


def test_raw_bonus_is_proportional_to_raw_count() -> None:
    rows = [("wire", 0.1)] * 4 + [("blog", 0.9)] * 2 + [("forum", 0.5)] * 2
    calibration = calibrate(_pool(*rows), CalibrationParams(gamma=0.8), "raw_bonus")
    assert calibration.regularizer("wire") == pytest.approx(0.8)
    assert calibration.regularizer("blog") == pytest.approx(0.4)
    assert calibration.regularizer("forum") == pytest.approx(0.4)


def test_raw_bonus_is_zero_when_degraded() -> None:
    rows = [("wire", 0.1)] * 4 + [("blog", 0.9)] * 2
    calibration = calibrate(_pool(*rows), CalibrationParams(n_min=8), "raw_bonus")
    assert calibration.degraded_reasons == ("pool_too_small",)
    assert all(f.regularizer == 0.0 for f in calibration.families)


def test_variance_floor_dominated_flag() -> None:
    rows = [("wire", 0.5), ("wire", 0.501), ("blog", 0.5), ("blog", 0.499)]
    calibration = calibrate(_pool(*rows), CalibrationParams(var_floor=1e-3), "calibrated")
    assert all(f.variance_floor_dominated for f in calibration.families)
    calibration = calibrate(_pool(*rows), CalibrationParams(var_floor=0.0), "calibrated")
    assert not any(f.variance_floor_dominated for f in calibration.families)


def test_unknown_mode_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="mode"):
        calibrate(_pool(("wire", 0.5)), CalibrationParams(), "bayes")  # type: ignore[arg-type]


def test_unknown_family_regularizer_is_a_key_error() -> None:
    calibration = calibrate(_pool(("wire", 0.5)), CalibrationParams(), "calibrated")
    with pytest.raises(KeyError, match="nope"):
        calibration.regularizer("nope")


def test_inconsistent_pool_aggregates_are_input_errors() -> None:
    pool = _pool(("wire", 0.5), ("blog", 0.7))
    short = replace(pool, families=pool.families[:1])
    with pytest.raises(InputError, match="add up"):
        calibrate(short, CalibrationParams(), "calibrated")
    with pytest.raises(InputError, match="mean"):
        calibrate(replace(pool, mean=math.nan), CalibrationParams(), "calibrated")
    empty_family = (FamilyAggregate("ghost", 0, 0.0, 0.5), *pool.families)
    with pytest.raises(InputError, match="count"):
        calibrate(replace(pool, families=empty_family), CalibrationParams(), "calibrated")


def test_pool_entropy_is_the_family_share_entropy() -> None:
    rows = [("wire", 0.1)] * 5 + [("blog", 0.2)] * 3 + [("forum", 0.3)] * 1
    pool = _pool(*rows)
    size = len(rows)
    expected = -sum((m / size) * math.log(m / size) for m in (5, 3, 1))
    assert pool.entropy == pytest.approx(expected, abs=1e-12)
    assert _pool(("wire", 0.1), ("wire", 0.2)).entropy == 0.0


# ----------------------------------------------------------------------- properties


@settings(deadline=None, max_examples=200)
@given(rows=candidate_rows(), params=calibration_params())
def test_regularizer_is_bounded_and_everything_is_finite(rows: list[Candidate], params: CalibrationParams) -> None:
    pool = Pool.from_candidates(rows)
    for mode in MODES_ALL:
        calibration = calibrate(pool, params, mode)  # type: ignore[arg-type]
        assert [f.family for f in calibration.families] == sorted({c.family for c in rows})
        for record in calibration.families:
            assert abs(record.regularizer) <= params.gamma + 1e-12
            assert 0.0 <= record.reliability <= 1.0
            assert 0.0 <= record.uncertainty <= 1.0
            assert -1.0 <= record.corroboration <= 1.0
            numbers = asdict(record).values()
            assert all(math.isfinite(v) for v in numbers if isinstance(v, float))
            if calibration.degraded:
                assert record.regularizer == 0.0


@settings(deadline=None, max_examples=100)
@given(rows=candidate_rows(), params=calibration_params(), mode=st.sampled_from(MODES_ALL))
def test_degraded_flag_matches_its_reasons(rows: list[Candidate], params: CalibrationParams, mode: str) -> None:
    pool = Pool.from_candidates(rows)
    calibration = calibrate(pool, params, mode)  # type: ignore[arg-type]
    assert calibration.degraded == bool(calibration.degraded_reasons)
    if pool.size:
        assert ("pool_too_small" in calibration.degraded_reasons) == (pool.size < params.n_min)
        assert ("pool_too_flat" in calibration.degraded_reasons) == (pool.variance < params.var_min)
        assert ("pool_one_sided" in calibration.degraded_reasons) == (pool.entropy < params.h_min)


# ------------------------------------------------------------------ beta mode (feedback)

_HEALTHY = (("wire", 0.9), ("wire", 0.7), ("blog", 0.8), ("blog", 0.4), ("forum", 0.6), ("forum", 0.3)) * 2


def _fed(feedback: dict[str, tuple[float, float]], params: CalibrationParams | None = None) -> Calibration:
    rows = [_row(f, b, index=i) for i, (f, b) in enumerate(_HEALTHY)]
    return calibrate(Pool.from_candidates(rows, feedback), params or CalibrationParams(), "beta")


def test_beta_without_feedback_changes_nothing() -> None:
    calibration = _fed({})
    assert not calibration.degraded
    for record in calibration.families:
        assert record.regularizer == 0.0
        assert record.feedback_z == 0.0
        assert record.feedback_reliability == pytest.approx(0.5)


def test_beta_demotes_unhelpful_and_promotes_helpful_families() -> None:
    calibration = _fed({"wire": (0.0, 30.0), "blog": (12.0, 18.0), "elsewhere": (3.0, 27.0)})
    # Base rate (15 + 1) / (90 + 2): wire is far below it, blog above, forum has no feedback.
    assert calibration.regularizer("wire") < -0.4
    assert calibration.regularizer("blog") > 0.2
    assert calibration.regularizer("forum") == 0.0
    assert calibration.family("blog").feedback_reliability > 15 / 90


def test_beta_nudge_grows_with_evidence_and_stays_bounded() -> None:
    gamma = 0.5
    few = _fed({"wire": (1.0, 4.0), "blog": (5.0, 5.0)}, CalibrationParams(gamma=gamma)).regularizer("wire")
    many = _fed({"wire": (100.0, 400.0), "blog": (500.0, 500.0)}, CalibrationParams(gamma=gamma)).regularizer("wire")
    huge = _fed({"wire": (0.0, 1e9), "blog": (1e9, 0.0)}, CalibrationParams(gamma=gamma))
    assert many < few < 0.0
    assert -gamma <= huge.regularizer("wire") < 0.0 < huge.regularizer("blog") <= gamma


def test_beta_is_off_in_a_degraded_pool() -> None:
    rows = [_row("wire", 0.5, index=i) for i in range(3)]
    calibration = calibrate(Pool.from_candidates(rows, {"wire": (0.0, 50.0)}), CalibrationParams(), "beta")
    assert calibration.degraded
    assert calibration.regularizer("wire") == 0.0
    assert calibration.family("wire").feedback_z < 0.0


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_bad_feedback_in_a_pool_is_an_input_error(bad: float) -> None:
    with pytest.raises(InputError, match="feedback_unhelpful"):
        _fed({"wire": (1.0, bad)})
