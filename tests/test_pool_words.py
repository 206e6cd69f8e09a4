"""The pool's word memo and its shortcuts give what the plain readings give.

``tests/test_finish_golden.py`` pins whole packs; these tests pin the pieces the read
path now takes shortcuts through: batch tokenising, word ids for the packer's overlap,
near-duplicates of only some notes, and records built by filling their ``__dict__``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from finish_golden import FINISH_DIR, finish
from golden_util import candidate_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from pgmem.ingestion.entities import STOPWORDS
from pgmem.retrieval import words as words_module
from pgmem.retrieval.words import PoolWords, word_hashes, word_list
from pgmem.types import FamilyCalibration, PackItem, Rejection

_WORD = re.compile(r"\w+")

TEXTS = [
    "",
    "  ...  ",
    "Plain ASCII, with punctuation: yes!",
    "Café NAÏVE",
    "ΑΣ ΣΑΣ. Ὀδυσσεύς",
    "ǅemal İstanbul",
    "\u212aelvin",
    "東京 données",
    "tab\there\x1fsep\x1c",
    "nul\x00inside",
    "it’s — fine 🌟",
    "x-ray_v2 3.14 a__b",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(TEXTS), max_size=12))
def test_batch_tokenising_is_word_list_of_each_text(texts: list[str]) -> None:
    assert words_module._word_lists(texts) == [word_list(text) for text in texts]


def _content(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower())) - STOPWORDS


@settings(max_examples=100, deadline=None)
@given(candidate_rows(max_size=30), st.data())
def test_word_ids_count_what_words_count_and_rows_pick_nearest_duplicates(rows: list[Any], data: Any) -> None:
    texts = [row.text for row in rows]
    documents = [row.document_id for row in rows]
    words = PoolWords(texts, "the harbour?")
    for i in range(len(texts)):
        assert len(words.word_ids(i)) == len(words.words(i))
        for j in range(i):
            assert len(words.word_ids(i) & words.word_ids(j)) == len(words.words(i) & words.words(j))
    assert words.content_sizes.tolist() == [float(len(_content(text))) for text in texts]
    every = words.nearest_duplicate(documents).tolist()
    picked = data.draw(st.lists(st.integers(0, len(texts) - 1), max_size=10)) if texts else []
    assert words.nearest_duplicate(documents, picked).tolist() == [every[row] for row in picked]


def test_a_memo_cleared_between_pools_gives_the_same_ids_relations() -> None:
    texts = ["Caroline: the harbour ferry", "Melanie: a ferry at the pier", "the the the", ""]
    before = PoolWords(texts, "ferry")
    memo = words_module._WORD_HASHES
    memo.clear()
    after = PoolWords(list(reversed(texts)), "ferry")
    assert after.content_sizes.tolist() == list(reversed(before.content_sizes.tolist()))
    assert after.echo().tolist() == list(reversed(before.echo().tolist()))
    # Stop words are told apart by id alone: a text of stop words has no content word.
    assert before.content_sizes[2] == 0 and len(before.word_ids(2)) == 1


@pytest.mark.parametrize("path", sorted(FINISH_DIR.glob("*.json"))[:6], ids=lambda path: path.stem)
def test_records_built_from_fields_equal_constructed_ones(path: Any) -> None:
    record = json.loads(path.read_text(encoding="utf-8"))
    evidence = finish(record)
    built: list[Any] = [*evidence.diagnostics.families, *evidence.items, *evidence.diagnostics.rejections]
    for kind in (FamilyCalibration, PackItem, Rejection):
        assert not hasattr(kind, "__post_init__")
    for instance in built:
        names = [field.name for field in dataclasses.fields(instance)]
        assert list(vars(instance)) == names  # every field, in field order
        assert type(instance)(**vars(instance)) == instance


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(TEXTS) | st.text(max_size=40), max_size=12))
def test_the_memo_hashes_texts_as_the_database_stores_them(texts: list[str]) -> None:
    words_module._WORD_HASHES.clear()
    found = words_module._WORD_HASHES.lookup(texts)
    for text, hashes in zip(texts, found, strict=True):
        # The memo keeps set order; word_hashes (what the database stores) is sorted by word.
        assert sorted(words_module._unpacked(hashes)) == sorted(words_module._unpacked(word_hashes(text)))
        assert len(hashes) == len(word_hashes(text))
