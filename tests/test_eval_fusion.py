"""Re-fusing a stored pool (pgmem.eval.fusion): the parts read back, other mixes re-scored."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from pgmem.embeddings import HashingEmbedder
from pgmem.errors import ConfigurationError
from pgmem.eval.datasets import load_jsonl
from pgmem.eval.fusion import base_scores, components, pool_signals, relevance, rescored
from pgmem.eval.runner import answerable_pools
from pgmem.params import CalibrationParams, PackParams, StageOneParams
from pgmem.retrieval.calibrate import calibrate
from pgmem.retrieval.packer import rank_and_pack
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate

DEFAULT = StageOneParams()

# (note, document, span start, family, cosine, normalised BM25, facet boost)
ROWS = [
    ("a", "d1", 0, "f1", 0.80, 0.10, 0.00),
    ("b", "d1", 10, "f1", 0.30, 1.00, 0.05),
    ("c", "d1", 20, "f2", 0.20, 0.00, 0.00),
    ("d", "d2", 0, "f2", 0.60, 0.50, 0.02),
    ("e", "d2", 10, "f3", 0.10, 0.90, 0.00),
    ("f", "d3", 0, "f3", 0.50, 0.00, 0.00),
]
# Links within a document, both ways, as stage one follows them: previous / next span.
LINKS = {"a": ["b"], "b": ["a", "c"], "c": ["b"], "d": ["e"], "e": ["d"], "f": []}


def stage_one_pool(params: StageOneParams = DEFAULT) -> Pool:
    """The pool stage one would return for ROWS under ``params`` (its base-score formula)."""
    relevance_of = {note: params.dense_weight * d + params.lexical_weight * lex for note, _, _, _, d, lex, _ in ROWS}
    candidates = []
    for note, document, start, family, dense, lexical, facet in ROWS:
        link = params.link_weight * max((relevance_of[p] for p in LINKS[note]), default=0.0)
        candidates.append(
            Candidate(
                note_id=note,
                external_id=note,
                document_id=document,
                span_start=start,
                span_end=start + 5,
                text=f"note {note} text",
                context="",
                family=family,
                role="fact",
                confidence=0.5,
                source_ts=None,
                dense_score=dense,
                lexical_score=lexical,
                facet_boost=facet,
                link_boost=link,
                base_score=relevance_of[note] + facet + link,
            )
        )
    return Pool.from_candidates(candidates, query="which note")


def test_the_default_mix_reproduces_the_stored_base_scores():
    pool = stage_one_pool()
    parts = components(pool, DEFAULT)
    assert parts.unmatched == 0
    # a's link boost came from b, b's from a (a: 0.59 > c: 0.14), d's from e, e's from d.
    names = [c.note_id for c in pool.candidates]
    assert {names[i]: names[p] for i, p in enumerate(parts.partner) if p >= 0} == {
        "a": "b",
        "b": "a",
        "c": "b",
        "d": "e",
        "e": "d",
    }
    again = base_scores(parts, relevance(parts, DEFAULT.lexical_weight), DEFAULT.link_weight)
    np.testing.assert_allclose(again, [c.base_score for c in pool.candidates], rtol=0, atol=1e-12)


def test_another_mix_is_what_stage_one_would_score_with_those_weights():
    lexical_heavy = StageOneParams(dense_weight=0.2, lexical_weight=0.8, link_weight=0.1)
    parts = components(stage_one_pool(), DEFAULT)
    fused = base_scores(parts, relevance(parts, 0.8), 0.1)
    # Same partners here (each linked candidate's best partner keeps its lead), so the
    # re-scored pool is exactly the one stage one returns under the other weights.
    expected = [c.base_score for c in stage_one_pool(lexical_heavy).candidates]
    np.testing.assert_allclose(fused, expected, rtol=0, atol=1e-12)


def test_link_weight_zero_leaves_relevance_and_facets():
    parts = components(stage_one_pool(), DEFAULT)
    fused = relevance(parts, 0.3)
    np.testing.assert_allclose(base_scores(parts, fused, 0.0), fused + parts.facet)


def test_an_unexplained_link_boost_is_kept_and_counted():
    pool = stage_one_pool()
    odd = tuple(
        c if c.note_id != "f" else Candidate(**{**vars(c), "link_boost": 0.123, "base_score": c.base_score + 0.123})
        for c in pool.candidates
    )
    parts = components(Pool.from_candidates(odd), DEFAULT)
    assert parts.unmatched == 1
    index = [c.note_id for c in odd].index("f")
    assert parts.partner[index] == -1
    assert base_scores(parts, relevance(parts, 0.9), 0.3)[index] == pytest.approx(0.9 * 0.0 + 0.1 * 0.5 + 0.123)


def test_rescored_pool_aggregates_are_stage_ones():
    pool = stage_one_pool()
    parts = components(pool, DEFAULT)
    base = base_scores(parts, relevance(parts, 0.6, "zscore"), 0.2)
    fresh = rescored(pool, base)
    reference = Pool.from_candidates(fresh.candidates, query=pool.query)
    assert fresh.mean == pytest.approx(reference.mean)
    assert fresh.variance == pytest.approx(reference.variance)
    assert [(f.family, f.count) for f in fresh.families] == [(f.family, f.count) for f in reference.families]
    for mine, theirs in zip(fresh.families, reference.families, strict=True):
        assert mine.score_sum == pytest.approx(theirs.score_sum)
    assert fresh.query == pool.query and fresh.entropy == pool.entropy
    # and it packs: the relevance-only pack of the re-scored pool follows the new scores
    packed = rank_and_pack(fresh, calibrate(fresh, CalibrationParams(), "relevance"), PackParams(budget=2)).items
    best_two = sorted(fresh.candidates, key=lambda c: -c.base_score)[:2]
    assert [item.note_id for item in packed] == [c.note_id for c in best_two]


@pytest.mark.parametrize("method", ["zscore", "minmax", "rank"])
def test_normalised_fusions_keep_the_default_relevance_scale(method):
    parts = components(stage_one_pool(), DEFAULT)
    reference = relevance(parts, DEFAULT.lexical_weight)
    fused = relevance(parts, 0.5, method)
    assert fused.mean() == pytest.approx(reference.mean())
    assert fused.std() == pytest.approx(reference.std())


def test_the_extreme_shares_are_the_single_retrievers_orders():
    parts = components(stage_one_pool(), DEFAULT)
    for method in ("linear", "zscore", "minmax", "rank"):
        assert np.argmax(relevance(parts, 0.0, method)) == np.argmax(parts.dense)
        assert np.argmax(relevance(parts, 1.0, method)) == np.argmax(parts.lexical)
    # rank: a note without any query term gets no lexical rank credit
    only_lexical = relevance(parts, 1.0, "rank")
    no_terms = parts.lexical == 0
    assert np.all(only_lexical[no_terms] == only_lexical.min())


def test_bad_arguments_name_the_parameter():
    parts = components(stage_one_pool(), DEFAULT)
    with pytest.raises(ConfigurationError, match="lexical_share"):
        relevance(parts, 1.5)
    with pytest.raises(ConfigurationError, match="method"):
        relevance(parts, 0.5, "softmax")
    with pytest.raises(ConfigurationError, match="link_weight"):
        base_scores(parts, relevance(parts, 0.3), -0.1)
    with pytest.raises(ConfigurationError, match="base"):
        rescored(stage_one_pool(), np.array([1.0, math.nan, 0, 0, 0, 0]))


def test_pool_signals():
    parts = components(stage_one_pool(), DEFAULT)
    signals = pool_signals(parts)
    assert signals["lexical_matched"] == pytest.approx(4 / 6)
    assert signals["lexical_2nd"] == pytest.approx(0.9)
    assert signals["dense_top"] == pytest.approx(0.8)
    assert signals["dense_gap"] == pytest.approx(0.8 - 0.1)  # fewer than 10: the worst
    # dense top 5: a d f b c; lexical top 5: b e d a c (c before f at 0: pool order)
    assert signals["overlap_5"] == pytest.approx(4 / 5)
    assert -1 <= signals["correlation"] <= 1
    assert pool_signals(components(Pool.from_candidates(stage_one_pool().candidates[:1]), DEFAULT)) == {}


def test_a_real_stage_one_pool_is_read_back_exactly(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, tmp_path: Path
) -> None:
    """On pools from the stage-one statement itself (links, facets, a whole document's
    neighbours), the default mix re-scored from the parts is the stored base score."""
    notes = [
        ("Ada Lovelace founded Acme Corp in Paris.", "wire", "a"),
        ("Acme Corp makes analytical engines in Paris.", "wire", "a"),
        ("Its engines were sold to the Paris observatory.", "wire", "a"),
        ("Cheese and wine pair well.", "blog", "b"),
        ("The river Seine flows through Paris.", "atlas", "c"),
        ("Paris has many bridges over the Seine.", "atlas", "c"),
    ]
    lines, offsets = [], {"a": 0, "b": 0, "c": 0}
    for i, (text, family, document) in enumerate(notes):
        start = offsets[document]
        offsets[document] = start + len(text) + 1  # spans of one document, in order
        record = {"id": f"n{i}", "text": text, "family": family, "document_id": document}
        lines.append(json.dumps({"type": "note", **record, "start": start, "end": start + len(text)}))
    lines.append(json.dumps({"type": "question", "id": "q1", "question": "Who founded Acme Corp?", "gold": ["n0"]}))
    lines.append(json.dumps({"type": "question", "id": "q2", "question": "What flows through Paris?", "gold": ["n4"]}))
    lines.append(json.dumps({"type": "question", "id": "q3", "question": "What is unknown?", "gold": []}))
    path = tmp_path / "linked.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    questions, requests, pools = answerable_pools(conn, load_jsonl(path), hashing)
    assert [q.id for q in questions] == ["q1", "q2"]  # no gold: not answerable
    assert [r.namespace for r in requests] == ["eval-default"] * 2
    linked = 0
    for pool in pools:
        assert pool.size == 6
        parts = components(pool, DEFAULT)
        assert parts.unmatched == 0
        linked += int((parts.partner >= 0).sum())
        again = base_scores(parts, relevance(parts, DEFAULT.lexical_weight), DEFAULT.link_weight)
        np.testing.assert_allclose(again, [c.base_score for c in pool.candidates], rtol=0, atol=1e-9)
        fresh = rescored(pool, again)
        assert fresh.mean == pytest.approx(pool.mean) and fresh.variance == pytest.approx(pool.variance)
        assert [f.score_sum for f in fresh.families] == pytest.approx([f.score_sum for f in pool.families])
    assert linked > 0  # the documents' neighbours gave link boosts to read back
