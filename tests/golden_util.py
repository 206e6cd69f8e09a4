"""Golden-file loader and an independent scalar reference of DESIGN §3.1-3.3.

The reference below uses only :mod:`math` and :mod:`re`, one scalar at a time, and
never imports :mod:`pgmem.retrieval`: it is a second, deliberately plain reading of
the design. The golden tests check that the numpy modules reproduce the numbers
stored in ``tests/golden/*.json`` *and* that this reference reproduces them too, so
neither the modules nor the stored values can drift silently.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from pgmem.params import CalibrationParams, PackParams
from pgmem.types import Candidate

GOLDEN_DIR = Path(__file__).parent / "golden"
TOLERANCE = 1e-9

_CANDIDATE_DEFAULTS: dict[str, Any] = {
    "external_id": None,
    "context": "",
    "source_ts": None,
    "dense_score": 0.0,
    "lexical_score": 0.0,
    "facet_boost": 0.0,
    "link_boost": 0.0,
}


def recorder_main(description: str, target: str, record: Callable[[], None]) -> None:
    """The ``--record`` command line of a module that writes golden files from the tree it runs on."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--record", action="store_true", help=f"write {target}")
    if not parser.parse_args().record:
        parser.print_help()
        sys.exit(2)
    record()


def golden_paths() -> list[Path]:
    return sorted(GOLDEN_DIR.glob("*.json"))


def load_case(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        case: dict[str, Any] = json.load(handle)
    return case


def candidate_from_json(row: dict[str, Any]) -> Candidate:
    return Candidate(**{**_CANDIDATE_DEFAULTS, **row})


def candidates_of(case: dict[str, Any]) -> list[Candidate]:
    return [candidate_from_json(row) for row in case["pool"]]


def feedback_of(case: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """The case's feedback: family -> (helpful, unhelpful) summed weights (may be empty)."""
    return {family: (float(h), float(u)) for family, (h, u) in case.get("feedback", {}).items()}


# ---------------------------------------------------------------------------------
# Scalar reference: stage-one aggregates (§3.1), calibration (§3.2), pack (§3.3).
# ---------------------------------------------------------------------------------


def reference_pool(
    rows: list[dict[str, Any]], feedback: dict[str, tuple[float, float]] | None = None
) -> dict[str, Any]:
    feedback = feedback or {}
    totals = (math.fsum(h for h, _ in feedback.values()), math.fsum(u for _, u in feedback.values()))
    size = len(rows)
    if size == 0:
        return {"size": 0, "mean": 0.0, "variance": 0.0, "entropy": 0.0, "families": [], "feedback": totals}
    mean = math.fsum(row["base_score"] for row in rows) / size
    variance = math.fsum((row["base_score"] - mean) ** 2 for row in rows) / size
    names = sorted({row["family"] for row in rows})
    families = []
    entropy = 0.0
    for name in names:
        members = [row for row in rows if row["family"] == name]
        count = len(members)
        families.append(
            {
                "family": name,
                "count": count,
                "score_sum": math.fsum(row["base_score"] for row in members),
                "mean_confidence": math.fsum(row["confidence"] for row in members) / count,
                "feedback_helpful": feedback.get(name, (0.0, 0.0))[0],
                "feedback_unhelpful": feedback.get(name, (0.0, 0.0))[1],
            }
        )
        share = count / size
        entropy -= share * math.log(share)
    return {
        "size": size,
        "mean": mean,
        "variance": variance,
        "entropy": max(entropy, 0.0),
        "families": families,
        "feedback": totals,
    }


def reference_calibration(pool: dict[str, Any], params: dict[str, Any], mode: str) -> dict[str, Any]:
    size = pool["size"]
    if size == 0:
        return {"degraded": True, "degraded_reasons": ["pool_too_small"], "families": []}
    reasons = []
    if size < params["n_min"]:
        reasons.append("pool_too_small")
    if pool["variance"] < params["var_min"]:
        reasons.append("pool_too_flat")
    if pool["entropy"] < params["h_min"]:
        reasons.append("pool_one_sided")
    degraded = bool(reasons)
    largest = max(f["count"] for f in pool["families"])
    helpful_total, unhelpful_total = pool["feedback"]
    base_rate = (helpful_total + 1) / (helpful_total + unhelpful_total + 2)
    kappa = params.get("feedback_prior", CalibrationParams().feedback_prior)
    records = []
    for family in pool["families"]:
        m = family["count"]
        mu = m * pool["mean"]
        spread = m * pool["variance"] * (1 - m / size)
        sigma2 = spread + params["var_floor"]
        z = (family["score_sum"] - mu) / math.sqrt(sigma2 + params["eps"])
        evidence = m / (m + params["shrinkage"])
        shrunk = z * evidence
        c = math.tanh(shrunk / params["tau"])
        alpha = params["alpha_prior"]
        r = min(1.0, max(0.0, alpha * family["mean_confidence"] + (1 - alpha) * (c + 1) / 2))
        v = max(0.0, sigma2 - params["var_floor"]) / (sigma2 + params["eps"])
        u = min(1.0, max(0.0, 0.5 * v + 0.5 * (1 - evidence)))
        a = kappa * base_rate + family["feedback_helpful"]
        b = kappa * (1 - base_rate) + family["feedback_unhelpful"]
        q = a / (a + b)
        zq = (q - base_rate) / math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)) + params["eps"])
        if degraded or mode == "relevance":
            reg = 0.0
        elif mode == "raw_bonus":
            reg = params["gamma"] * m / largest
        elif mode == "beta":
            reg = params["gamma"] * math.tanh(zq / params["tau"])
        else:
            reg = params["gamma"] * (2 * r - 1) * (1 - u)
        records.append(
            {
                **family,
                "expected_sum": mu,
                "expected_variance": sigma2,
                "z": z,
                "shrunk_z": shrunk,
                "corroboration": c,
                "reliability": r,
                "uncertainty": u,
                "regularizer": reg,
                "variance_floor_dominated": params["var_floor"] > spread,
                "feedback_reliability": q,
                "feedback_z": zq,
            }
        )
    return {"degraded": degraded, "degraded_reasons": reasons, "families": records}


def reference_overlap(a: dict[str, Any], b: dict[str, Any]) -> float:
    if a["document_id"] == b["document_id"]:
        len_a = a["span_end"] - a["span_start"]
        len_b = b["span_end"] - b["span_start"]
        shared = min(a["span_end"], b["span_end"]) - max(a["span_start"], b["span_start"])
        if shared <= 0 or min(len_a, len_b) <= 0:
            return 0.0
        return float(shared / min(len_a, len_b))
    words_a = set(re.findall(r"\w+", a["text"].lower()))
    words_b = set(re.findall(r"\w+", b["text"].lower()))
    if not words_a and not words_b:
        return 0.0
    return len(words_a & words_b) / len(words_a | words_b)


def reference_tokens(text: str) -> int:
    return sum(math.ceil(len(piece) / 4) for piece in re.findall(r"\w+|[^\w\s]", text))


def reference_pack(
    rows: list[dict[str, Any]],
    pool: dict[str, Any],
    calibration: dict[str, Any],
    calibration_params: dict[str, Any],
    pack_params: dict[str, Any],
) -> dict[str, Any]:
    regs = {f["family"]: f["regularizer"] for f in calibration["families"]}
    scale = math.sqrt(pool["variance"] + calibration_params["eps"])
    scored = []
    for row in rows:
        normalized = (row["base_score"] - pool["mean"]) / scale
        scored.append((normalized + regs[row["family"]], normalized, row))
    scored.sort(key=lambda entry: (-entry[0], entry[2]["note_id"]))

    pack: list[dict[str, Any]] = []
    rejections: list[dict[str, Any]] = []
    chosen: list[dict[str, Any]] = []
    quotas = pack_params["role_quotas"]
    cap = pack_params["family_cap"]
    minimum = pack_params["minimum_effective_score"]
    tokens_left = pack_params["token_budget"]

    def largest_overlap(row: dict[str, Any]) -> tuple[float, str | None]:
        max_overlap, overlaps = 0.0, None
        for other in chosen:
            overlap = reference_overlap(row, other)
            if overlap > max_overlap:
                max_overlap, overlaps = overlap, other["note_id"]
        return max_overlap, overlaps

    remaining = list(scored)
    while remaining:
        if len(pack) >= pack_params["budget"] or tokens_left == 0:
            break
        position = 0
        if pack_params.get("order", "final") == "decayed":
            # Recomputed from scratch every pick: the best decayed score, ties to the scan order.
            decays = [entry[0] - pack_params["overlap_decay"] * largest_overlap(entry[2])[0] for entry in remaining]
            position = decays.index(max(decays))
        final, normalized, row = remaining.pop(position)
        max_overlap, overlaps = largest_overlap(row)
        decayed = final - pack_params["overlap_decay"] * max_overlap
        tokens = reference_tokens(row["text"])
        if max_overlap > pack_params["overlap_hard_threshold"]:
            reason = "overlap"
        elif minimum is not None and decayed < minimum:
            reason = "below_minimum"
        elif row["role"] in quotas and (sum(1 for c in chosen if c["role"] == row["role"]) >= quotas[row["role"]]):
            reason = "role_quota"
        elif cap is not None and sum(1 for c in chosen if c["family"] == row["family"]) >= cap:
            reason = "family_cap"
        elif tokens_left is not None and tokens > tokens_left:
            reason = "token_budget"
        else:
            reason = None
        if reason is not None:
            rejections.append(
                {
                    "note_id": row["note_id"],
                    "reason": reason,
                    "final_score": final,
                    "decayed_score": decayed,
                    "max_overlap": max_overlap,
                    "overlaps_note_id": overlaps,
                }
            )
            continue
        chosen.append(row)
        if tokens_left is not None:
            tokens_left -= tokens
        pack.append(
            {
                "rank": len(pack) + 1,
                "note_id": row["note_id"],
                "normalized_score": normalized,
                "regularizer": regs[row["family"]],
                "final_score": final,
                "decayed_score": decayed,
                "max_overlap": max_overlap,
            }
        )
    return {"pack": pack, "rejections": rejections}


def reference_expected(case: dict[str, Any], mode: str | None = None) -> dict[str, Any]:
    """Everything a golden case expects, recomputed by the scalar reference."""
    mode = case["mode"] if mode is None else mode
    pool = reference_pool(case["pool"], feedback_of(case))
    calibration = reference_calibration(pool, case["calibration_params"], mode)
    packed = reference_pack(case["pool"], pool, calibration, case["calibration_params"], case["pack_params"])
    return {
        "pool": {key: pool[key] for key in ("size", "mean", "variance", "entropy")},
        "degraded": calibration["degraded"],
        "degraded_reasons": calibration["degraded_reasons"],
        "families": calibration["families"],
        "pack": packed["pack"],
        "rejections": packed["rejections"],
    }


def assert_matches(actual: Any, expected: Any, where: str = "$") -> None:
    """Deep comparison: floats to ``TOLERANCE``, everything else exactly."""
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"
    elif isinstance(expected, int | float):
        assert isinstance(actual, int | float) and not isinstance(actual, bool), where
        assert math.isclose(actual, expected, rel_tol=0.0, abs_tol=TOLERANCE), f"{where}: {actual!r} != {expected!r}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: not a mapping"
        assert sorted(actual) == sorted(expected), f"{where}: keys {sorted(actual)}"
        for key in expected:
            assert_matches(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list | tuple):
        assert isinstance(actual, list | tuple), f"{where}: not a sequence"
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for index, (left, right) in enumerate(zip(actual, expected, strict=True)):
            assert_matches(left, right, f"{where}[{index}]")
    else:
        raise TypeError(f"{where}: cannot compare {type(expected).__name__}")


# ---------------------------------------------------------------------------------
# Hypothesis strategies shared by test_calibrate.py and test_packer.py.
# ---------------------------------------------------------------------------------

FAMILIES = ("blog", "forum", "misc", "wire")
ROLES_USED = ("claim", "dialogue", "event", "fact")
DOCUMENTS = ("doc-a", "doc-b", "doc-c")
# Short texts from a small vocabulary, so word overlaps (including full ones) are common.
PHRASES = (
    "",
    "...",
    "alpha",
    "alpha beta",
    "Alpha, beta!",
    "alpha beta gamma",
    "beta gamma delta",
    "gamma delta paris 42",
    "Paris 42",
    "x-ray naïve alpha",
    "naïve",
    "delta delta delta",
)
MODES_ALL = ("calibrated", "relevance", "raw_bonus", "beta")

# Dyadic scores and confidences add up exactly in any order, so a pool's sums do not
# depend on candidate order; the shuffle test then checks the packer, not floating
# point associativity. The general strategy adds arbitrary floats on top.
dyadic_scores = st.one_of(
    st.integers(-64, 64).map(lambda k: k / 32),
    st.integers(-8, 8).map(lambda k: 0.5 + k / 4096),  # tiny variance
    st.just(0.5),  # many equal scores
)
any_scores = st.one_of(dyadic_scores, st.floats(-3.0, 3.0, allow_nan=False))
dyadic_confidences = st.sampled_from((0.0, 0.25, 0.5, 0.75, 1.0))
any_confidences = st.one_of(dyadic_confidences, st.floats(0.0, 1.0))


@st.composite
def candidate_rows(
    draw: st.DrawFn,
    scores: st.SearchStrategy[float] = any_scores,
    confidences: st.SearchStrategy[float] = any_confidences,
    max_size: int = 60,
) -> list[Candidate]:
    size = draw(st.integers(0, max_size))
    families = draw(st.lists(st.sampled_from(FAMILIES), min_size=1, max_size=4, unique=True))
    # One integer encodes a row's document, span, text, family and role: hypothesis
    # pays per draw, and 60 rows of eight draws each made the tests slow.
    choices = (len(DOCUMENTS), 41, 30, len(PHRASES), len(families), len(ROLES_USED))
    rows = []
    for index in range(size):
        code = draw(st.integers(0, math.prod(choices) - 1))
        document, start, length, phrase, family, role = _decode(code, choices)
        rows.append(
            candidate_from_json(
                {
                    # Ids are unrelated to scores, so ties still break in random order.
                    "note_id": f"{index * 7919 % 1000:08x}-0000-4000-8000-{index:012x}",
                    "document_id": DOCUMENTS[document],
                    "span_start": start,
                    "span_end": start + 1 + length,
                    "text": PHRASES[phrase],
                    "family": families[family],
                    "role": ROLES_USED[role],
                    "confidence": draw(confidences),
                    "base_score": draw(scores),
                }
            )
        )
    return rows


def _decode(code: int, choices: tuple[int, ...]) -> list[int]:
    digits = []
    for base in choices:
        code, digit = divmod(code, base)
        digits.append(digit)
    return digits


@st.composite
def calibration_params(draw: st.DrawFn) -> CalibrationParams:
    return CalibrationParams(
        n_min=draw(st.integers(1, 12)),
        var_min=draw(st.sampled_from((0.0, 1e-6, 1e-4, 1e-2))),
        h_min=draw(st.sampled_from((0.0, 0.3, 1.0))),
        var_floor=draw(st.sampled_from((0.0, 1e-3, 0.1))),
        eps=draw(st.sampled_from((1e-12, 1e-9))),
        shrinkage=draw(st.sampled_from((0.0, 2.0, 5.0))),
        tau=draw(st.sampled_from((0.25, 2.0))),
        alpha_prior=draw(st.sampled_from((0.0, 0.3, 1.0))),
        gamma=draw(st.sampled_from((0.0, 0.5, 2.0))),
        # The scalar reference is DESIGN §3.2-3.3 without the family alarm (tests/test_alarm.py):
        # its collusion input reads no question, so random texts could set it off.
        alarm_threshold=None,
    )


@st.composite
def pack_params(draw: st.DrawFn) -> PackParams:
    quota_roles = draw(st.lists(st.sampled_from(ROLES_USED), max_size=3, unique=True))
    return PackParams(
        budget=draw(st.integers(1, 12)),
        token_budget=draw(st.one_of(st.none(), st.integers(1, 40))),
        role_quotas={role: draw(st.integers(0, 3)) for role in quota_roles},
        family_cap=draw(st.one_of(st.none(), st.integers(1, 4))),
        overlap_decay=draw(st.sampled_from((0.0, 0.5, 2.0))),
        overlap_hard_threshold=draw(st.sampled_from((0.0, 0.3, 0.9, 1.0))),
        minimum_effective_score=draw(st.one_of(st.none(), st.floats(-2.0, 1.0))),
        order=draw(st.sampled_from(("final", "decayed"))),
    )
