"""Recorded finish_pack outputs: pools in, whole packs and diagnostics out.

``tests/golden_finish/*.json`` hold pools (up to 128 rows: repeated and near-duplicate
notes, question echoes, colluding families, same-document spans, non-ASCII words,
stop-word-only and empty texts) with the request they were packed for, and what
``finish_pack`` returned for them. They were written by this module's ``--record`` run
against the implementation before the read path was vectorised (issue 12)::

    PYTHONPATH=/path/to/old/tree python tests/finish_golden.py --record

so ``test_finish_golden.py`` pins every later implementation to the same packs,
scores, alarm values and diagnostics. Pools are generated from a seeded
:class:`random.Random`, then stored whole: the files do not depend on the generator.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from golden_util import recorder_main

from pgmem.embeddings import HashingEmbedder
from pgmem.params import CalibrationParams, PackParams
from pgmem.retrieval.pipeline import finish_pack, prepare_pack
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate, Pack

FINISH_DIR = Path(__file__).parent / "golden_finish"
_CANDIDATE_DEFAULTS: dict[str, Any] = {
    "external_id": None,
    "context": "",
    "source_ts": None,
    "facet_boost": 0.0,
    "link_boost": 0.0,
}

_VOCABULARY = (
    "harbour", "ferry", "terminal", "authority", "storm", "pier", "quay", "engineers", "repairs",
    "passengers", "march", "tuesday", "council", "budget", "vote", "school", "teacher", "museum",
    "painting", "caroline", "melanie", "jon", "gina", "dance", "studio", "adoption", "support",
    "group", "pottery", "camping", "hike", "lake", "sunrise", "book", "guitar", "concert",
    "parser", "review", "release", "checklist", "launch", "team", "owner", "v2", "3", "1", "2021",
    "paris", "acme", "corp", "naïve", "café", "über", "straße", "東京", "données",
)  # fmt: skip
_STOP = (
    "the", "a", "an", "of", "to", "and", "in", "on", "at", "is", "was", "it", "i", "you", "we",
    "they", "my", "your", "that", "this", "for", "with", "but", "so",
)  # fmt: skip
_ROLES = ("fact", "event", "claim", "dialogue")


def _sentence(rng: random.Random, length: int) -> str:
    words = [rng.choice(_VOCABULARY) if rng.random() < 0.55 else rng.choice(_STOP) for _ in range(length)]
    text = " ".join(words)
    punctuation = rng.choice((".", "!", "?", "...", " :)", ""))
    return (text[:1].upper() + text[1:] + punctuation) if text else text


def _near_copy(rng: random.Random, text: str) -> str:
    words = text.split()
    for _ in range(rng.randint(0, 2)):
        if words:
            words[rng.randrange(len(words))] = rng.choice(_VOCABULARY)
    return " ".join(words).upper() if rng.random() < 0.2 else " ".join(words)


def _candidates(rng: random.Random, rows: int, question: str, families: int) -> list[dict[str, Any]]:
    names = [f"family-{k:02d}" for k in range(families)]
    attacker = names[-1]
    texts: list[str] = []
    records: list[dict[str, Any]] = []
    for index in range(rows):
        family = attacker if (families > 2 and rng.random() < 0.08) else rng.choice(names)
        roll = rng.random()
        if family == attacker:
            text = question + " " + _sentence(rng, rng.randint(2, 6))
        elif texts and roll < 0.2:
            text = _near_copy(rng, rng.choice(texts))
        elif roll < 0.25:
            text = rng.choice(("", "...", "the of and", "I was, you know, at the"))
        else:
            text = _sentence(rng, rng.randint(3, 24))
        texts.append(text)
        document = f"doc-{rng.randrange(max(rows // 4, 1))}"
        start = rng.randrange(0, 400)
        dense = round(rng.uniform(0.1, 0.9), 6)
        lexical = round(rng.uniform(0.0, 1.0), 6)
        records.append(
            {
                "note_id": f"{rng.getrandbits(32):08x}-0000-4000-8000-{index:012x}",
                "external_id": f"n{index}",
                "document_id": document,
                "span_start": start,
                "span_end": start + rng.randint(1, 200),
                "text": text,
                "family": family,
                "role": rng.choice(_ROLES),
                "confidence": round(rng.uniform(0.0, 1.0), 3),
                "dense_score": dense,
                "lexical_score": lexical,
                "base_score": round(0.7 * dense + 0.3 * lexical, 9),
            }
        )
    return records


def pool_from_record(record: dict[str, Any]) -> Pool:
    """The pool a golden file stores (candidates, question, namespace counts, ages)."""
    candidates = [Candidate(**{**_CANDIDATE_DEFAULTS, **row}) for row in record["candidates"]]
    pool = Pool.from_candidates(
        candidates,
        record.get("feedback") and {k: tuple(v) for k, v in record["feedback"].items()},
        query=record["query"],
        namespace_counts=record.get("namespace_counts"),
    )
    ages = record.get("family_ages")
    if ages is not None:
        families = tuple(dataclasses.replace(f, age_seconds=ages.get(f.family)) for f in pool.families)
        pool = dataclasses.replace(pool, families=families, namespace_age_seconds=record["namespace_age_seconds"])
    return pool


def finish(record: dict[str, Any], change: Callable[[Pool], Pool] | None = None) -> Pack:
    """Pack the stored pool (passed through ``change`` if given) for the stored request, as
    pgmem.pack() would after stage one."""
    request = prepare_pack(
        record["query"],
        embedder=HashingEmbedder(),
        mode=record["mode"],
        calibration=CalibrationParams(**record["calibration"]),
        packing=PackParams(**record["packing"]),
    )
    pool = pool_from_record(record)
    return finish_pack(request, change(pool) if change is not None else pool)


def outcome(pack: Pack) -> dict[str, Any]:
    """What a golden file expects: the whole pack, without the timings (they vary)."""
    document = pack.to_dict()
    del document["diagnostics"]["timings_ms"]
    return document


_CASES: tuple[tuple[str, int, int, str, dict[str, Any], dict[str, Any]], ...] = (
    # name, rows, families, mode, calibration overrides, packing overrides
    ("128_sessions_calibrated", 128, 25, "calibrated", {}, {}),
    ("128_few_families_decayed", 128, 6, "calibrated", {}, {"order": "decayed", "budget": 12}),
    ("128_alarm_low_threshold", 128, 12, "calibrated", {"alarm_threshold": 0.05}, {"family_cap": 3}),
    ("128_raw_bonus_token_budget", 128, 18, "raw_bonus", {}, {"token_budget": 120, "role_quotas": {"claim": 1}}),
    ("128_beta_feedback", 128, 10, "beta", {}, {"minimum_effective_score": -0.5}),
    ("128_relevance", 128, 30, "relevance", {"alarm_threshold": 0.1}, {"order": "decayed"}),
    ("96_alarm_off", 96, 8, "calibrated", {"alarm_threshold": None}, {"budget": 20}),
    ("64_ages_newness", 64, 9, "calibrated", {"alarm_threshold": 0.2, "recency_window": 3600.0}, {}),
    ("9_small", 9, 3, "calibrated", {"n_min": 4}, {}),
    ("2_pair", 2, 2, "calibrated", {}, {}),
    ("1_single", 1, 1, "calibrated", {}, {}),
    ("0_empty", 0, 1, "calibrated", {}, {}),
)
_QUESTIONS = (
    "When did the harbour authority close the northern ferry terminal?",
    "What did Caroline say about the adoption support group?",
    "Who owns the release checklist for v2.3.1 at Acme Corp?",
    "Où est le café naïve à Paris?",
    "...?",  # no words: no echo
)


def record_cases() -> None:
    rng = random.Random(12)
    FINISH_DIR.mkdir(exist_ok=True)
    for number, (name, rows, families, mode, calibration, packing) in enumerate(_CASES, start=1):
        question = _QUESTIONS[number % len(_QUESTIONS)]
        record: dict[str, Any] = {
            "query": question,
            "candidates": _candidates(rng, rows, question, families),
            "namespace_counts": {f"family-{k:02d}": rng.randint(1, 400) for k in range(families)},
            "mode": mode,
            "calibration": calibration,
            "packing": packing,
        }
        if mode == "beta":
            record["feedback"] = {f"family-{k:02d}": [rng.randint(0, 6), rng.randint(0, 6)] for k in range(families)}
        if "ages" in name:
            record["family_ages"] = {f"family-{k:02d}": rng.uniform(0, 20_000) for k in range(families)}
            record["namespace_age_seconds"] = 30_000.0
        record["expected"] = outcome(finish(record))
        path = FINISH_DIR / f"{number:02d}_{name}.json"
        path.write_text(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    recorder_main(__doc__.splitlines()[0], "tests/golden_finish/*.json", record_cases)
