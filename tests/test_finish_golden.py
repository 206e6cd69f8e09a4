"""finish_pack (calibrate + alarm + pack + diagnostics) reproduces recorded packs exactly.

The recorded outputs come from the implementation before the read path was vectorised
(see tests/finish_golden.py); the alarm's vectorised near-duplicate and echo counts are
also checked against a plain frozenset reference on random pools.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from finish_golden import FINISH_DIR, finish, outcome, pool_from_record
from golden_util import assert_matches, candidate_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from pgmem.ingestion.entities import STOPWORDS
from pgmem.retrieval import words as words_module
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.words import PoolWords, hashed_by_database, word_hashes, word_list

PATHS = sorted(FINISH_DIR.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return record


def test_there_are_recorded_pools_of_128_rows() -> None:
    sizes = [len(_load(path)["candidates"]) for path in PATHS]
    assert sizes.count(128) >= 5 and 0 in sizes and 1 in sizes


@pytest.mark.parametrize("path", PATHS, ids=[path.stem for path in PATHS])
def test_finish_reproduces_the_recorded_pack(path: Path) -> None:
    record = _load(path)
    assert_matches(outcome(finish(record)), record["expected"])


def _stored_hashes(which: str) -> Callable[[Pool], Pool]:
    """Candidates carrying word hashes as stage one returns them: for the texts
    pgmem.word_hashes_v1 hashes, for every text, or for every other row (a pool of notes
    written before and after migration 0016)."""

    def keep(row: int, text: str) -> bool:
        return {"database": hashed_by_database(text), "every": True, "alternate": row % 2 == 0}[which]

    def change(pool: Pool) -> Pool:
        candidates = tuple(
            dataclasses.replace(c, word_hashes=word_hashes(c.text) if keep(row, c.text) else None)
            for row, c in enumerate(pool.candidates)
        )
        return dataclasses.replace(pool, candidates=candidates)

    return change


@pytest.mark.parametrize("which", ["database", "every", "alternate"])
@pytest.mark.parametrize("path", PATHS, ids=[path.stem for path in PATHS])
def test_stored_word_hashes_give_the_recorded_pack(path: Path, which: str) -> None:
    record = _load(path)
    words_module._WORD_HASHES.clear()
    assert_matches(outcome(finish(record, _stored_hashes(which))), record["expected"])
    if which == "every":  # nothing was tokenised: every note came with its hashes
        assert not words_module._WORD_HASHES._texts


def test_recorded_pools_exercise_the_alarm_and_every_order() -> None:
    records = [_load(path) for path in PATHS]
    families = [f for record in records for f in record["expected"]["diagnostics"]["families"]]
    assert any(f["quarantined"] for f in families) and any(not f["alarmed"] for f in families)
    assert any(0 < f["duplicate_density"] < 1 for f in families)
    assert {record["packing"].get("order", "final") for record in records} == {"final", "decayed"}
    reasons = {r["reason"] for record in records for r in record["expected"]["diagnostics"]["rejections"]}
    assert {"quarantine", "token_budget"} <= reasons


# A second, plain reading of the alarm's word statistics: frozensets, one pair at a time.
_WORD = re.compile(r"\w+")


def _content(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower())) - STOPWORDS


def _reference_nearest(texts: list[str], documents: list[str]) -> list[float]:
    words = [_content(text) for text in texts]
    nearest = []
    for i, mine in enumerate(words):
        best = 0.0
        for j, other in enumerate(words):
            union = len(mine | other)
            if documents[i] != documents[j] and union:
                best = max(best, len(mine & other) / union)
        nearest.append(best)
    return nearest


QUERIES = ("", "alpha", "Alpha beta gamma?", "naïve paris 42", "the of and")


@settings(max_examples=150, deadline=None)
@given(candidate_rows(max_size=40), st.sampled_from(QUERIES))
def test_word_statistics_match_a_pairwise_reference(rows: list[Any], query: str) -> None:
    texts = [row.text for row in rows]
    documents = [row.document_id for row in rows]
    words = PoolWords(texts, query)
    question = _content(query)
    echo = words.echo().tolist()
    expected_echo = [len(question & _content(text)) / len(question) if question else 0.0 for text in texts]
    assert echo == expected_echo
    assert words.nearest_duplicate(documents).tolist() == _reference_nearest(texts, documents)
    for row, text in enumerate(texts):
        assert words.words(row) == frozenset(_WORD.findall(text.lower()))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  ...  ",
        "Café NAÏVE",
        "x-ray_v2 3.14 a__b",
        "tab\there\x1fsep\x1c",
        "ǅemal İstanbul ΑΣ",
        "\u212aelvin",
        "東京 données",
    ],
)
def test_word_list_is_the_regex_on_lowered_text(text: str) -> None:
    assert word_list(text) == _WORD.findall(text.lower())


def test_word_list_splits_every_ascii_character_as_the_regex_does() -> None:
    every = "".join(map(chr, range(128)))
    for text in (every, every[::-1], " ".join(every), "a".join(every)):
        assert word_list(text) == _WORD.findall(text.lower())


def test_a_pool_tokenises_its_notes_once() -> None:
    record = _load(PATHS[0])
    pool = pool_from_record(record)
    assert pool.words is pool.words
    assert isinstance(Pool.from_candidates(pool.candidates).words, PoolWords)
    assert math.isclose(float(pool.words.content_sizes.sum()), sum(len(_content(c.text)) for c in pool.candidates))


def test_echo_of_a_long_question_matches_the_reference() -> None:
    # More question words than echo compares one by one: the np.isin route.
    vocabulary = [f"word{k}" for k in range(40)]
    texts = [" ".join(vocabulary[k : k + 12]) for k in range(0, 40, 3)] + ["", "the and word3 word3"]
    question = "Which of " + " ".join(vocabulary[5:35]) + " and zebra?"
    echo = PoolWords(texts, question).echo().tolist()
    asked = _content(question)
    assert echo == [len(asked & _content(text)) / len(asked) for text in texts]


def test_the_word_memo_forgets_when_full_without_changing_results(monkeypatch: pytest.MonkeyPatch) -> None:
    small = words_module._WordHashes(max_characters=200, max_words=30)
    monkeypatch.setattr(words_module, "_WORD_HASHES", small)
    record = _load(PATHS[0])
    expected = record["expected"]
    for _ in range(3):  # every call overflows the bounds, so the memo is emptied in between
        assert_matches(outcome(finish(record)), expected)
        assert small._characters > 200
    small.clear()
    assert not small._texts and not small._vocabulary


def test_near_duplicates_of_pools_full_of_common_words_match_the_reference() -> None:
    # More words in >= 16 notes than one bitmask holds: the rest are counted as pairs.
    texts = [" ".join(f"w{k}" for k in range(70) if (k * 7 + row) % 5) for row in range(60)] + ["w1 w2", ""]
    documents = [f"d{row % 9}" for row in range(len(texts))]
    words = PoolWords(texts, "w1 w3 w99?")
    assert words.nearest_duplicate(documents).tolist() == _reference_nearest(texts, documents)
