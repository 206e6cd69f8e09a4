"""The pool's word memo and its shortcuts give what the plain readings give.

``tests/test_finish_golden.py`` pins whole packs; these tests pin the pieces the read
path now takes shortcuts through: batch tokenising, word ids for the packer's overlap,
near-duplicates of only some notes, and records built by filling their ``__dict__``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from typing import Any

import pytest
from finish_golden import FINISH_DIR, finish
from golden_util import candidate_rows
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pgmem.errors import SchemaError
from pgmem.ingestion.entities import STOPWORDS
from pgmem.retrieval import words as words_module
from pgmem.retrieval.alarm import ALARM_GROUP, _group_means
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.stage_one import _uuid_text, pool_from_rows, pool_from_tuples
from pgmem.retrieval.words import PoolWords, word_hashes, word_list
from pgmem.types import Candidate, FamilyAggregate, FamilyCalibration, PackItem, Rejection

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


@settings(max_examples=150, deadline=None)
@given(candidate_rows(max_size=40))
def test_the_alarm_reads_the_near_duplicates_it_needs_as_if_it_read_them_all(rows: list[Candidate]) -> None:
    # _group_means measures only the groups' notes and the notes of families that can
    # collude (a group's worth of notes in two documents or more): what it reports is
    # what every note's values give. (calibrate reads no alarm for an empty pool.)
    assume(rows)
    pool = Pool.from_candidates(rows, query="the harbour at dawn?")
    names = [aggregate.family for aggregate in pool.families]
    duplicates, echoes, _, collusions, _, _ = _group_means(pool, names)
    families = [candidate.family for candidate in pool.candidates]
    nearest, within = pool.words.nearest_duplicates(
        [candidate.document_id for candidate in pool.candidates], families=families
    )
    echo = pool.words.echo()
    for index, name in enumerate(names):
        members = [row for row, family in enumerate(families) if family == name]
        group = sorted(members, key=lambda row: -echo[row])[:ALARM_GROUP]  # stable: pool order on ties
        assert duplicates[index] == pytest.approx(sum(nearest[group]) / len(group), abs=1e-12)
        assert echoes[index] == pytest.approx(sum(echo[group]) / len(group), abs=1e-12)
        ranked = sorted((within[row] for row in members), reverse=True)
        assert collusions[index] == (ranked[ALARM_GROUP - 1] if len(ranked) >= ALARM_GROUP else 0.0)


@settings(max_examples=50, deadline=None)
@given(candidate_rows(max_size=30))
def test_a_pool_read_from_stage_one_rows_holds_the_rows_candidates(rows: list[Candidate]) -> None:
    pool = Pool.from_candidates(rows, query="q")
    aggregates = {aggregate.family: aggregate for aggregate in pool.families}
    stage_one_rows = [_stage_one_row(pool, candidate, aggregates[candidate.family]) for candidate in rows]
    read = pool_from_rows(stage_one_rows, query="q")
    assert read.candidates == tuple(rows)
    names = [field.name for field in dataclasses.fields(Candidate)]
    for candidate, row in zip(read.candidates, rows, strict=True):
        assert list(vars(candidate)) == names  # every field, in field order (built from fields)
        assert candidate.word_hashes == row.word_hashes  # not compared by ==
    assert read.families == pool.families


@settings(max_examples=50, deadline=None)
@given(candidate_rows(max_size=30), st.randoms(use_true_random=False))
def test_a_pool_read_from_tuples_finds_each_value_by_its_column_name(rows: list[Candidate], order: Any) -> None:
    # psycopg's tuples come with the statement's column names: any column order (and
    # columns the pool does not read) gives the pool the dict rows give.
    pool = Pool.from_candidates(rows, query="q")
    aggregates = {aggregate.family: aggregate for aggregate in pool.families}
    stage_one_rows = [_stage_one_row(pool, candidate, aggregates[candidate.family]) for candidate in rows]
    columns = [*stage_one_rows[0], "unread"] if stage_one_rows else ["unread"]
    order.shuffle(columns)
    tuples = [tuple(row.get(column, "x") for column in columns) for row in stage_one_rows]
    read = pool_from_tuples(columns, tuples, query="q")
    assert read == pool_from_rows(stage_one_rows, query="q")
    assert [c.word_hashes for c in read.candidates] == [c.word_hashes for c in rows]
    names = [field.name for field in dataclasses.fields(FamilyAggregate)]
    assert all(list(vars(aggregate)) == names for aggregate in read.families)  # built from fields


def test_a_pool_read_from_tuples_names_a_missing_column() -> None:
    rows = [
        Candidate(
            "11111111-1111-1111-1111-111111111111",
            None,
            "d",
            0,
            1,
            "t",
            "",
            "f",
            "fact",
            1.0,
            None,
            1.0,
            0.0,
            0.0,
            0.0,
            1.0,
        )
    ]
    pool = Pool.from_candidates(rows, query="q")
    row = _stage_one_row(pool, rows[0], pool.families[0])
    del row["family_bound"]
    with pytest.raises(SchemaError, match="family_bound"):
        pool_from_tuples(list(row), [tuple(row.values())], query="q")


@settings(max_examples=100, deadline=None)
@given(st.uuids())
def test_note_ids_are_the_uuids_text(value: uuid.UUID) -> None:
    assert _uuid_text(value) == str(value)
    assert _uuid_text(str(value)) == str(value)


def _stage_one_row(pool: Pool, candidate: Candidate, family: FamilyAggregate) -> dict[str, Any]:
    """``candidate`` as a row of the stage_one statement (dict_row: values by column name)."""
    return {
        "note_id": candidate.note_id,
        "external_id": candidate.external_id,
        "document_id": candidate.document_id,
        "span_start": candidate.span_start,
        "span_end": candidate.span_end,
        "text": candidate.text,
        "context": candidate.context,
        "family": candidate.family,
        "role": candidate.role,
        "confidence": candidate.confidence,
        "source_ts": candidate.source_ts,
        "dense_score": candidate.dense_score,
        "lexical_score": candidate.lexical_score,
        "facet_boost": candidate.facet_boost,
        "link_boost": candidate.link_boost,
        "base_score": candidate.base_score,
        "boost_entity": candidate.entity_boost,
        "boost_time": candidate.time_boost,
        "boost_keyword": candidate.keyword_boost,
        "boost_handle": candidate.handle_boost,
        "note_age_seconds": candidate.age_seconds,
        "word_hashes": candidate.word_hashes,
        "pool_size": pool.size,
        "pool_mean": pool.mean,
        "pool_variance": pool.variance,
        "pool_entropy": pool.entropy,
        "family_count": family.count,
        "family_score_sum": family.score_sum,
        "family_mean_confidence": family.mean_confidence,
        "family_feedback_helpful": family.feedback_helpful,
        "family_feedback_unhelpful": family.feedback_unhelpful,
        "family_namespace_count": family.namespace_count,
        "family_age_seconds": family.age_seconds,
        "family_bound": family.bound,
        "namespace_feedback_helpful": pool.feedback_helpful,
        "namespace_feedback_unhelpful": pool.feedback_unhelpful,
        "namespace_note_count": pool.namespace_notes,
        "namespace_age_seconds": pool.namespace_age_seconds,
    }


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([*TEXTS, "Caroline went hiking", "Melanie paints; Caroline hikes"]), max_size=10),
    st.lists(
        st.sampled_from(["caroline", "melanie", "hiking", "café", "naïve", "東京", "3", "14", "absent"]), unique=True
    ),
    st.booleans(),
)
def test_holding_says_which_notes_hold_each_word(texts: list[str], words: list[str], stored: bool) -> None:
    # As stage one returns them (hashes where the database stores them) or tokenised here.
    hashes = [word_hashes(t) if words_module.hashed_by_database(t) else None for t in texts] if stored else None
    held = PoolWords(texts, hashes=hashes).holding(words)
    assert held.shape == (len(texts), len(words))
    assert held.tolist() == [[word in _content(text) for word in words] for text in texts]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([*TEXTS, "Caroline went hiking", "Melanie paints; Caroline hikes"]), max_size=10),
    st.sampled_from(["Did Caroline go hiking?", "caroline melanie café 東京 3 absent", "the and of", "...?", ""]),
    st.booleans(),
    st.booleans(),
)
def test_echo_is_each_notes_share_of_the_question_words(
    texts: list[str], question: str, stored: bool, duplicates_first: bool
) -> None:
    # Whether or not the near-duplicates sorted the pool's words before (the echo reuses that order).
    hashes = [word_hashes(t) if words_module.hashed_by_database(t) else None for t in texts] if stored else None
    pool_words = PoolWords(texts, question, hashes=hashes)
    if duplicates_first and len(texts) >= 2:
        pool_words.nearest_duplicates(list(range(len(texts))))
    asked = _content(question)
    expected = [len(_content(text) & asked) / len(asked) if asked else 0.0 for text in texts]
    assert pool_words.echo().tolist() == expected
