"""Rank-and-pack (DESIGN §3.3): golden files, overlap and token units, properties."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import asdict, fields, replace
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
    dyadic_confidences,
    dyadic_scores,
    feedback_of,
    golden_paths,
    load_case,
    pack_params,
    reference_expected,
    reference_pack,
    reference_pool,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pgmem.embeddings import HashingEmbedder
from pgmem.errors import ConfigurationError, InputError
from pgmem.params import CalibrationParams, PackParams
from pgmem.retrieval.calibrate import Calibration, calibrate
from pgmem.retrieval.packer import PackResult, count_tokens, note_overlap, rank_and_pack
from pgmem.retrieval.pipeline import finish_pack, prepare_pack
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate, PackItem

GOLDEN = golden_paths()
DEGRADED_GOLDEN = [path for path in GOLDEN if load_case(path)["expected"]["degraded"]]
PACK_KEYS = (
    "rank",
    "note_id",
    "normalized_score",
    "regularizer",
    "final_score",
    "decayed_score",
    "max_overlap",
)
REJECTION_KEYS = (
    "note_id",
    "reason",
    "final_score",
    "decayed_score",
    "max_overlap",
    "overlaps_note_id",
)


def _pack(case: dict[str, Any], mode: str | None = None) -> PackResult:
    pool = Pool.from_candidates(candidates_of(case), feedback_of(case))
    calibration = calibrate(
        pool,
        CalibrationParams(**case["calibration_params"]),
        case["mode"] if mode is None else mode,  # type: ignore[arg-type]
    )
    return rank_and_pack(pool, calibration, PackParams(**case["pack_params"]))


def _as_expected(result: PackResult) -> dict[str, Any]:
    return {
        "pack": [{key: getattr(item, key) for key in PACK_KEYS} for item in result.items],
        "rejections": [{key: getattr(r, key) for key in REJECTION_KEYS} for r in result.rejections],
    }


def _note(
    index: int,
    text: str = "",
    *,
    document_id: str | None = None,
    start: int = 0,
    end: int | None = None,
    family: str = "wire",
    role: str = "fact",
    score: float = 0.5,
) -> Candidate:
    return candidate_from_json(
        {
            "note_id": f"00000000-0000-4000-8000-{index:012d}",
            "document_id": f"doc-{index}" if document_id is None else document_id,
            "span_start": start,
            "span_end": start + max(1, len(text.encode())) if end is None else end,
            "text": text,
            "family": family,
            "role": role,
            "confidence": 0.5,
            "base_score": score,
        }
    )


# ------------------------------------------------------------------------ golden files


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_pack_matches_module(path: Path) -> None:
    case = load_case(path)
    result = _pack(case)
    expected = case["expected"]
    assert_matches(_as_expected(result), {"pack": expected["pack"], "rejections": expected["rejections"]})
    relevance_ids = [item.note_id for item in _pack(case, "relevance").items]
    assert relevance_ids == expected["relevance_pack_ids"]


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_pack_matches_scalar_reference(path: Path) -> None:
    case = load_case(path)
    recomputed = reference_expected(case)
    assert_matches(recomputed["pack"], case["expected"]["pack"])
    assert_matches(recomputed["rejections"], case["expected"]["rejections"])
    relevance = reference_expected(case, "relevance")
    assert [p["note_id"] for p in relevance["pack"]] == case["expected"]["relevance_pack_ids"]


@pytest.mark.parametrize("path", DEGRADED_GOLDEN, ids=lambda p: p.stem)
def test_golden_degraded_pack_equals_relevance_pack(path: Path) -> None:
    case = load_case(path)
    assert [p["note_id"] for p in case["expected"]["pack"]] == case["expected"]["relevance_pack_ids"]
    relevance = _pack(case, "relevance")
    for mode in MODES_ALL:
        assert _pack(case, mode) == relevance


def test_golden_cases_cover_every_rule() -> None:
    cases = [load_case(path) for path in GOLDEN]
    reasons = {reason for c in cases for reason in c["expected"]["degraded_reasons"]}
    assert reasons == {"pool_too_small", "pool_too_flat", "pool_one_sided"}
    rejected = {r["reason"] for c in cases for r in c["expected"]["rejections"]}
    assert rejected == {"overlap", "below_minimum", "role_quota", "family_cap", "token_budget"}
    assert {c["mode"] for c in cases} == set(MODES_ALL)
    promoted = load_case(GOLDEN[0])
    assert promoted["name"] == "01_corroborated_family_promoted"
    packed = [p["note_id"] for p in promoted["expected"]["pack"]]
    assert packed != promoted["expected"]["relevance_pack_ids"]


def test_pack_item_copies_every_candidate_field() -> None:
    case = load_case(GOLDEN[0])
    candidates = {c.note_id: c for c in candidates_of(case)}
    for item in _pack(case).items:
        candidate = candidates[item.note_id]
        for field in fields(Candidate):
            if field.name in {f.name for f in fields(PackItem)}:
                assert getattr(item, field.name) == getattr(candidate, field.name), field.name
        assert item.citation == candidate.citation


# ---------------------------------------------------------------------------- units


def test_note_overlap_same_document_uses_byte_spans() -> None:
    a = _note(1, "x", document_id="d", start=0, end=100)
    b = _note(2, "y", document_id="d", start=50, end=250)
    c = _note(3, "z", document_id="d", start=100, end=120)
    d = _note(4, "x", document_id="d", start=10, end=20)
    assert note_overlap(a, b) == pytest.approx(0.5)  # 50 shared bytes / shorter 100
    assert note_overlap(b, a) == note_overlap(a, b)
    assert note_overlap(a, c) == 0.0  # [0,100) and [100,120) touch but do not overlap
    assert note_overlap(a, d) == 1.0  # contained
    assert note_overlap(a, a) == 1.0


def test_note_overlap_other_documents_uses_word_jaccard() -> None:
    a = _note(1, "Reactor two tripped at noon")
    b = _note(2, "reactor TWO tripped, at dusk!")
    assert note_overlap(a, b) == pytest.approx(4 / 6)
    assert note_overlap(a, _note(3, "nothing shared here")) == 0.0
    assert note_overlap(a, _note(4, "noon noon at AT two reactor tripped")) == 1.0
    assert note_overlap(_note(5, "Café naïve"), _note(6, "café NAÏVE")) == 1.0
    assert note_overlap(_note(7, ""), _note(8, "  ...  ")) == 0.0
    assert note_overlap(_note(9, ""), a) == 0.0


def test_count_tokens_examples() -> None:
    assert count_tokens("") == 0
    assert count_tokens("   ") == 0
    assert count_tokens("the cat sat") == 3
    assert count_tokens("hello") == 2  # 5 characters -> ceil(5/4)
    assert count_tokens("abcdefgh") == 2
    assert count_tokens("abcdefghi") == 3
    assert count_tokens("Hello, world!") == 6  # 2 + 1 + 2 + 1
    assert count_tokens("Revenue rose eleven percent via subscriptions") == 12
    assert count_tokens("v1.2.3") == 5  # v1 . 2 . 3
    assert count_tokens("naïve") == 2


def test_token_budget_skips_long_notes_and_stops_when_used_exactly() -> None:
    rows = [
        _note(1, "aaaa bbbb cccc", score=0.9),  # 3 tokens
        _note(2, "dddd eeee", score=0.8),  # 2 tokens: does not fit in 1
        _note(3, "ffff", score=0.7),  # 1 token: fits exactly
        _note(4, "gggg", score=0.6),  # never scanned
    ]
    pool = Pool.from_candidates(rows)
    calibration = calibrate(pool, CalibrationParams(), "relevance")
    result = rank_and_pack(pool, calibration, PackParams(token_budget=4))
    assert [i.note_id[-1] for i in result.items] == ["1", "3"]
    assert [(r.note_id[-1], r.reason) for r in result.rejections] == [("2", "token_budget")]


def test_custom_token_counter_is_used() -> None:
    rows = [_note(i, f"word{i}", score=1.0 - i / 10) for i in range(1, 5)]
    pool = Pool.from_candidates(rows)
    calibration = calibrate(pool, CalibrationParams(), "relevance")
    result = rank_and_pack(pool, calibration, PackParams(token_budget=10), token_counter=lambda t: 5)
    assert len(result.items) == 2


def test_negative_token_count_is_an_input_error() -> None:
    pool = Pool.from_candidates([_note(1, "a")])
    calibration = calibrate(pool, CalibrationParams(), "relevance")
    with pytest.raises(InputError, match="token_counter"):
        rank_and_pack(pool, calibration, PackParams(token_budget=3), token_counter=lambda t: -1)


def test_ties_are_broken_by_note_id() -> None:
    rows = [_note(i, f"w{i}", score=0.5) for i in (3, 1, 2)]
    pool = Pool.from_candidates(rows)
    calibration = calibrate(pool, CalibrationParams(), "calibrated")
    result = rank_and_pack(pool, calibration, PackParams())
    assert [i.note_id[-1] for i in result.items] == ["1", "2", "3"]
    assert [i.rank for i in result.items] == [1, 2, 3]


def test_empty_pool_packs_nothing() -> None:
    pool = Pool.from_candidates([])
    calibration = calibrate(pool, CalibrationParams(), "calibrated")
    assert rank_and_pack(pool, calibration, PackParams()) == PackResult((), ())


def test_duplicate_note_ids_are_input_errors() -> None:
    pool = Pool.from_candidates([_note(1, "a"), _note(1, "b")])
    calibration = calibrate(pool, CalibrationParams(), "calibrated")
    with pytest.raises(InputError, match="more than once"):
        rank_and_pack(pool, calibration, PackParams())


def test_family_missing_from_calibration_is_an_input_error() -> None:
    pool = Pool.from_candidates([_note(1, "a"), _note(2, "b", family="blog")])
    other = Pool.from_candidates([_note(1, "a")])
    calibration = calibrate(other, CalibrationParams(), "calibrated")
    with pytest.raises(InputError, match="blog"):
        rank_and_pack(pool, calibration, PackParams())


def test_zero_role_quota_excludes_the_role() -> None:
    rows = [_note(1, "a", role="claim", score=0.9), _note(2, "b", role="fact", score=0.1)]
    pool = Pool.from_candidates(rows)
    calibration = calibrate(pool, CalibrationParams(), "calibrated")
    result = rank_and_pack(pool, calibration, PackParams(role_quotas={"claim": 0}))
    assert [i.role for i in result.items] == ["fact"]
    assert [r.reason for r in result.rejections] == ["role_quota"]


# ----------------------------------------------------------------------- properties


def _scan_order(pool: Pool, calibration: Calibration) -> list[str]:
    scale = math.sqrt(pool.variance + calibration.eps)
    keyed = [
        (-((c.base_score - pool.mean) / scale + calibration.regularizer(c.family)), c.note_id) for c in pool.candidates
    ]
    return [note_id for _, note_id in sorted(keyed)]


def _all_finite(values: list[float]) -> bool:
    return all(math.isfinite(v) for v in values)


@settings(deadline=None, max_examples=200)
@given(
    rows=candidate_rows(),
    cal=calibration_params(),
    params=pack_params(),
    mode=st.sampled_from(MODES_ALL),
)
def test_pack_respects_every_rule(rows: list[Candidate], cal: CalibrationParams, params: PackParams, mode: str) -> None:
    pool = Pool.from_candidates(rows)
    calibration = calibrate(pool, cal, mode)  # type: ignore[arg-type]
    result = rank_and_pack(pool, calibration, params)
    items, rejections = result.items, result.rejections
    by_id = {c.note_id: c for c in rows}

    assert len(items) <= params.budget
    assert [item.rank for item in items] == list(range(1, len(items) + 1))
    if params.family_cap is not None:
        assert max(Counter(i.family for i in items).values(), default=0) <= params.family_cap
    roles = Counter(item.role for item in items)
    for role, quota in params.role_quotas.items():
        assert roles[role] <= quota
    if params.token_budget is not None:
        assert sum(count_tokens(item.text) for item in items) <= params.token_budget
    for i, first in enumerate(items):
        for second in items[i + 1 :]:
            overlap = note_overlap(by_id[first.note_id], by_id[second.note_id])
            assert overlap <= params.overlap_hard_threshold
    packed = {item.note_id for item in items}
    refused = {r.note_id for r in rejections}
    assert not packed & refused
    assert len(packed) == len(items) and len(refused) == len(rejections)

    if params.order == "final":
        # The scan is one pass in (final desc, note_id asc) order: what was packed or
        # refused is exactly a prefix of that order.
        order = _scan_order(pool, calibration)
        assert set(order[: len(packed) + len(refused)]) == packed | refused
        finals = [item.final_score for item in items]
        assert finals == sorted(finals, reverse=True)
    else:
        # Each pick has the best decayed score left, and overlaps only grow: the decayed
        # scores of successive picks never rise.
        decays = [item.decayed_score for item in items]
        assert all(a >= b - 1e-12 for a, b in itertools.pairwise(decays))

    for item in items:
        assert abs(item.regularizer) <= cal.gamma + 1e-12
        assert item.final_score == item.normalized_score + item.regularizer
        expected_decay = item.final_score - params.overlap_decay * item.max_overlap
        assert item.decayed_score == expected_decay
        if params.minimum_effective_score is not None:
            assert item.decayed_score >= params.minimum_effective_score
        assert 0.0 <= item.max_overlap <= 1.0
        scores = [item.base_score, item.normalized_score, item.final_score, item.decayed_score]
        assert _all_finite([*scores, item.regularizer, item.max_overlap])
    for rejection in rejections:
        assert rejection.reason in {
            "overlap",
            "below_minimum",
            "role_quota",
            "family_cap",
            "token_budget",
        }
        assert 0.0 <= rejection.max_overlap <= 1.0
        assert (rejection.overlaps_note_id is None) == (rejection.max_overlap == 0.0)
        assert rejection.overlaps_note_id is None or rejection.overlaps_note_id in packed
        assert _all_finite([rejection.final_score, rejection.decayed_score])


@settings(deadline=None, max_examples=200)
@given(
    rows=candidate_rows(),
    cal=calibration_params(),
    params=pack_params(),
    mode=st.sampled_from(("calibrated", "raw_bonus")),
    trip=st.sampled_from(("n_min", "var_min", "h_min")),
)
def test_degraded_pack_is_the_relevance_pack(
    rows: list[Candidate], cal: CalibrationParams, params: PackParams, mode: str, trip: str
) -> None:
    pool = Pool.from_candidates(rows)
    calibration = calibrate(pool, cal, mode)  # type: ignore[arg-type]
    if not calibration.degraded:
        # Trip one threshold on purpose rather than discard the example.
        threshold: dict[str, Any] = {
            "n_min": pool.size + 1,
            "var_min": 2 * pool.variance + 1,
            "h_min": 2.0,
        }
        cal = replace(cal, **{trip: threshold[trip]})
        calibration = calibrate(pool, cal, mode)  # type: ignore[arg-type]
    assert calibration.degraded
    relevance = calibrate(pool, cal, "relevance")
    assert rank_and_pack(pool, calibration, params) == rank_and_pack(pool, relevance, params)


@settings(deadline=None, max_examples=200)
@given(
    data=st.data(),
    rows=candidate_rows(scores=dyadic_scores, confidences=dyadic_confidences),
    cal=calibration_params(),
    params=pack_params(),
    mode=st.sampled_from(MODES_ALL),
)
def test_pack_does_not_depend_on_candidate_order(
    data: st.DataObject,
    rows: list[Candidate],
    cal: CalibrationParams,
    params: PackParams,
    mode: str,
) -> None:
    shuffled = data.draw(st.permutations(rows))
    packs = []
    for order in (rows, shuffled):
        pool = Pool.from_candidates(order)
        packs.append(rank_and_pack(pool, calibrate(pool, cal, mode), params))  # type: ignore[arg-type]
    first, second = packs
    assert [i.note_id for i in first.items] == [i.note_id for i in second.items]
    assert [(r.note_id, r.reason) for r in first.rejections] == [(r.note_id, r.reason) for r in second.rejections]
    for left, right in zip(first.items, second.items, strict=True):
        for field in fields(PackItem):
            value, other = getattr(left, field.name), getattr(right, field.name)
            if isinstance(value, float):
                assert math.isclose(value, other, rel_tol=1e-9, abs_tol=1e-9), field.name
            else:
                assert value == other, field.name


def _near_repeat_pool() -> tuple[Pool, Calibration]:
    rows = [
        _note(1, "alice moved to lisbon in may and started a bakery there", score=2.0),
        _note(2, "alice moved to lisbon in may and opened a cafe", score=1.95),  # Jaccard 8/13 with 1
        _note(3, "bob sold his car to pay for the trip", score=1.9),
        *(_note(i, f"filler {i}", score=0.0) for i in range(4, 9)),
    ]
    pool = Pool.from_candidates(rows)
    return pool, calibrate(pool, CalibrationParams(), "relevance")


def test_decayed_order_packs_a_fresh_note_before_a_near_repeat() -> None:
    pool, calibration = _near_repeat_pool()
    params = PackParams(budget=2, overlap_decay=0.5)
    assert [i.note_id[-1] for i in rank_and_pack(pool, calibration, params).items] == ["1", "2"]
    decayed = rank_and_pack(pool, calibration, replace(params, order="decayed")).items
    assert [i.note_id[-1] for i in decayed] == ["1", "3"]
    assert decayed[1].max_overlap < 0.1  # shares only 'to' with note 1
    # Without decay the two orders are the same pack.
    no_decay = PackParams(budget=2, overlap_decay=0.0)
    assert rank_and_pack(pool, calibration, no_decay) == rank_and_pack(
        pool, calibration, replace(no_decay, order="decayed")
    )


def test_unknown_order_is_a_configuration_error() -> None:
    from pgmem.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="order must be one of decayed, final"):
        PackParams(order="mmr")  # type: ignore[arg-type]


@settings(deadline=None, max_examples=200)
@given(rows=candidate_rows(), cal=calibration_params(), params=pack_params(), mode=st.sampled_from(MODES_ALL))
def test_pack_matches_scalar_reference_in_both_orders(
    rows: list[Candidate], cal: CalibrationParams, params: PackParams, mode: str
) -> None:
    pool = Pool.from_candidates(rows)
    calibration = calibrate(pool, cal, mode)  # type: ignore[arg-type]
    # Two final scores a rounding error apart may be ordered either way by the vectorised
    # pack and the scalar reference (their sums round differently): not a disagreement.
    finals = sorted(
        (row.base_score - pool.mean) / math.sqrt(pool.variance + calibration.eps) + calibration.regularizer(row.family)
        for row in rows
    )
    assume(all(b - a == 0.0 or b - a > 1e-9 for a, b in itertools.pairwise(finals)))
    result = rank_and_pack(pool, calibration, params)
    json_rows = [asdict(row) for row in rows]
    reference = reference_pack(
        json_rows,
        reference_pool(json_rows),
        {"families": [{"family": f.family, "regularizer": f.regularizer} for f in calibration.families]},
        cal.as_dict(),
        params.as_dict(),
    )
    assert [i.note_id for i in result.items] == [p["note_id"] for p in reference["pack"]]
    assert [(r.note_id, r.reason) for r in result.rejections] == [
        (r["note_id"], r["reason"]) for r in reference["rejections"]
    ]


# ------------------------------------------------------------------------ coverage


def _two_aspects() -> tuple[str, Pool]:
    """Two notes on Caroline outscore the one on Melanie, for a question naming both."""
    question = "What do Caroline and Melanie enjoy?"
    rows = [
        _note(1, "Caroline went hiking in the mountains", score=0.9),
        _note(2, "Caroline likes hiking with friends", score=0.85),
        _note(3, "Melanie paints landscapes", score=0.6),
        _note(4, "The weather was nice", score=0.1),
    ]
    return question, Pool.from_candidates(rows, query=question)


def test_coverage_packs_a_note_for_each_of_the_question_s_aspects() -> None:
    # With coverage on, the second pick covers the question word still uncovered
    # (melanie) instead of repeating one.
    _, pool = _two_aspects()
    calibration = calibrate(pool, CalibrationParams(), "relevance")
    plain = rank_and_pack(pool, calibration, PackParams(budget=2))
    covered = rank_and_pack(pool, calibration, PackParams(budget=2, coverage=2.0))
    assert [i.note_id[-1] for i in plain.items] == ["1", "2"]
    assert [i.note_id[-1] for i in covered.items] == ["1", "3"]
    # Once every question word is covered the gains vanish: the rest follows the scan order.
    rest = rank_and_pack(pool, calibration, PackParams(budget=4, coverage=2.0))
    assert [i.note_id[-1] for i in rest.items] == ["1", "3", "2", "4"]


def test_coverage_is_off_by_default_and_checked() -> None:
    assert PackParams().coverage == 0.0
    with pytest.raises(ConfigurationError, match="coverage"):
        PackParams(coverage=-0.1)


def test_multi_entity_coverage_applies_from_two_entities_and_through_finish_pack() -> None:
    question, pool = _two_aspects()
    calibration = calibrate(pool, CalibrationParams(), "relevance")
    params = PackParams(budget=2)
    assert params.multi_entity_coverage == 2.0

    def packed(entities: int, **changes: Any) -> list[str]:
        chosen = rank_and_pack(pool, calibration, replace(params, **changes), entities=entities)
        return [i.note_id[-1] for i in chosen.items]

    # One entity named (or unknown): the plain scan; two: the default coverage weight.
    assert packed(0) == packed(1) == ["1", "2"]
    assert packed(2) == packed(3) == ["1", "3"]
    assert packed(2, multi_entity_coverage=0.0) == ["1", "2"]
    assert packed(1, coverage=2.0, multi_entity_coverage=0.0) == ["1", "3"]  # coverage applies whatever the count
    with pytest.raises(ConfigurationError, match="multi_entity_coverage"):
        PackParams(multi_entity_coverage=11.0)
    # The read path counts the hints' entities: the question's (derived) and the caller's.
    derived = prepare_pack(question, embedder=HashingEmbedder(), mode="relevance", budget=2)
    assert len(derived.hints.entities) >= 2
    assert [i.note_id[-1] for i in finish_pack(derived, pool).items] == ["1", "3"]
    single = prepare_pack(question, embedder=HashingEmbedder(), mode="relevance", budget=2, derive_hints=False)
    assert [i.note_id[-1] for i in finish_pack(single, pool).items] == ["1", "2"]
    given = prepare_pack(
        question,
        embedder=HashingEmbedder(),
        mode="relevance",
        budget=2,
        derive_hints=False,
        entities=["Caroline", "Melanie"],
    )
    assert [i.note_id[-1] for i in finish_pack(given, pool).items] == ["1", "3"]


def test_coverage_gives_a_family_flagged_for_itself_nothing() -> None:
    # The Melanie note's family is one the calibration never rewards (quarantined, or
    # near-copies of each other: Calibration.unrewarded, decided in calibrate and tested in
    # test_alarm.py): coverage must not lift it over the second Caroline note; otherwise
    # (flagged only for a note restating the question, or not at all) it still may.
    _, pool = _two_aspects()
    pool = Pool.from_candidates(
        [replace(c, family="tips") if c.note_id.endswith("3") else c for c in pool.candidates], query=pool.query
    )
    calibration = calibrate(pool, CalibrationParams(), "calibrated")
    assert not calibration.unrewarded

    def packed(unrewarded: frozenset[str]) -> list[str]:
        records = tuple(replace(r, regularizer=0.0) for r in calibration.families)
        flagged = replace(calibration, families=records, unrewarded=unrewarded)
        return [i.note_id[-1] for i in rank_and_pack(pool, flagged, PackParams(budget=2, coverage=2.0)).items]

    assert packed(frozenset({"tips"})) == ["1", "2"]
    assert packed(frozenset()) == ["1", "3"]


def test_coverage_without_question_words_keeps_the_scan_order() -> None:
    rows = [_note(i, f"note {i}", score=0.1 * i) for i in range(1, 5)]
    for question in ("", "What is it?", "Zebra?"):  # no words, stop words only, a word no note holds
        pool = Pool.from_candidates(rows, query=question)
        calibration = calibrate(pool, CalibrationParams(), "relevance")
        covered = rank_and_pack(pool, calibration, PackParams(coverage=2.0))
        assert covered.items == rank_and_pack(pool, calibration, PackParams()).items
