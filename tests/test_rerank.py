"""A caller-supplied re-ranker of pgmem's top candidates (pgmem.pack(..., reranker=...)).

Plumbing with deterministic toy re-rankers (one that reverses pgmem's order), the rules a
re-ranker must not get around (the quarantine of an alarmed family), validation, errors
that leave nothing half-done, and the same through the sync and the async API.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from finish_golden import FINISH_DIR, pool_from_record
from helpers import make_spans
from psycopg.rows import dict_row

import pgmem
import pgmem.aio
from pgmem.embeddings import HashingEmbedder
from pgmem.params import CalibrationParams, PackParams
from pgmem.retrieval.pipeline import finish_pack, prepare_pack
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.rerank import note_text
from pgmem.types import Candidate

QUESTION = "Which harbour did the ferry leave from?"
WORDS = ("harbour", "ferry", "pier", "quay", "storm", "council", "museum", "guitar", "lake", "studio", "budget")


class Reverse:
    """Scores the i-th text i: the last of pgmem's order comes first."""

    name = "reverse"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((question, list(texts)))
        return [float(i) for i in range(len(texts))]


def _pool(rows: int = 12) -> Pool:
    candidates = [
        Candidate(
            note_id=f"00000000-0000-4000-8000-{i:012d}",
            external_id=f"n{i}",
            document_id=f"doc-{i}",
            span_start=0,
            span_end=10,
            text=f"note {i} about the {WORDS[i % len(WORDS)]} number {i * 7}",
            context=f"session {i % 3}" if i % 2 else "",
            family=f"family-{i % 4}",
            role="fact",
            confidence=0.6,
            source_ts=None,
            dense_score=0.9 - 0.05 * i,
            lexical_score=0.5,
            facet_boost=0.0,
            link_boost=0.0,
            base_score=0.9 - 0.05 * i,
        )
        for i in range(rows)
    ]
    return Pool.from_candidates(candidates, query=QUESTION)


def _finish(pool: Pool, reranker: Any = None, mode: str = "calibrated", **packing: Any) -> pgmem.Pack:
    request = prepare_pack(
        QUESTION, embedder=HashingEmbedder(), mode=mode, packing=PackParams(**packing), reranker=reranker
    )
    return finish_pack(request, pool)


def test_a_reversing_reranker_of_the_whole_pool_reverses_the_pack_and_keeps_pgmems_scores() -> None:
    pool = _pool(12)
    default = _finish(pool, budget=12)
    reverse = Reverse()
    reranked = _finish(pool, reverse, budget=12, rerank_top=12, rerank_weight=1.0)
    order = [item.note_id for item in default.items]
    assert len(order) == 12
    assert [item.note_id for item in reranked.items] == order[::-1]
    # Only the pick order changed: every note reports pgmem's own scores.
    scores = {item.note_id: (item.final_score, item.regularizer, item.normalized_score) for item in default.items}
    assert {item.note_id: (item.final_score, item.regularizer, item.normalized_score) for item in reranked.items} == (
        scores
    )
    # The re-ranker read the question and each candidate's context and text, in pgmem's order.
    by_id = {c.note_id: c for c in pool.candidates}
    assert reverse.calls == [(QUESTION, [note_text(by_id[note]) for note in order])]
    assert any("\n" in text for text in reverse.calls[0][1])
    rerank = reranked.diagnostics.rerank
    assert rerank is not None and rerank.reranker == "reverse" and (rerank.top, rerank.weight) == (12, 1.0)
    assert [n.note_id for n in rerank.notes] == order
    assert [(n.pgmem_rank, n.rank, n.score) for n in rerank.notes] == [(i + 1, 12 - i, float(i)) for i in range(12)]
    assert set(rerank.moved) == set(order)  # an even count: every place changes
    assert reranked.diagnostics.parameters["rerank"] == {"reranker": "reverse", "top": 12, "weight": 1.0}
    assert "rerank" in reranked.diagnostics.timings_ms
    assert reranked.to_dict()["diagnostics"]["rerank"]["notes"][0]["rank"] == 12


def test_in_the_decayed_order_the_picks_follow_the_rerankers_scores_too() -> None:
    """order="decayed" picks by the re-ranked scores less the decay (none here: decay 0)."""
    pool = _pool(12)
    settings = {"budget": 12, "order": "decayed", "overlap_decay": 0.0}
    default = [item.note_id for item in _finish(pool, **settings).items]
    reranked = _finish(pool, Reverse(), rerank_top=12, rerank_weight=1.0, **settings)
    assert [item.note_id for item in reranked.items] == default[::-1]
    # the decayed scores reported are pgmem's own (final less the decay, here 0)
    assert all(item.decayed_score == item.final_score for item in reranked.items)


def test_only_the_top_n_are_scored_and_reordered() -> None:
    pool = _pool(12)
    default = [item.note_id for item in _finish(pool, budget=8).items]
    reverse = Reverse()
    reranked = [item.note_id for item in _finish(pool, reverse, budget=8, rerank_top=4, rerank_weight=1.0).items]
    assert len(reverse.calls[0][1]) == 4
    assert reranked == default[:4][::-1] + default[4:8]


@pytest.mark.parametrize(("weight", "reversed_"), [(0.0, False), (0.25, False), (0.5, False), (0.75, True)])
def test_the_weight_mixes_pgmems_order_with_the_rerankers(weight: float, reversed_: bool) -> None:
    """In the relevance mode pgmem's scores fall evenly and the re-ranker's rise evenly:
    standardised, they cancel at weight 0.5 (a tie everywhere keeps pgmem's order); above
    it the re-ranker's order wins."""
    pool = _pool(12)
    default = [item.note_id for item in _finish(pool, mode="relevance", budget=12).items]
    mixed = _finish(pool, Reverse(), mode="relevance", budget=12, rerank_top=12, rerank_weight=weight)
    assert [item.note_id for item in mixed.items] == (default[::-1] if reversed_ else default)
    assert mixed.diagnostics.rerank is not None
    assert len(mixed.diagnostics.rerank.moved) == (12 if reversed_ else 0)


def test_without_a_reranker_the_pack_and_its_record_are_unchanged() -> None:
    pool = _pool(12)
    default = _finish(pool)
    other = _finish(pool, rerank_top=3, rerank_weight=0.9)
    assert [i.note_id for i in other.items] == [i.note_id for i in default.items]
    document = default.to_dict()
    assert "rerank" not in document["diagnostics"]
    assert "rerank" not in default.diagnostics.parameters
    assert not {"rerank_top", "rerank_weight"} & set(default.diagnostics.parameters["packing"])
    assert "rerank" not in default.diagnostics.timings_ms
    other_document = other.to_dict()
    del document["diagnostics"]["timings_ms"], other_document["diagnostics"]["timings_ms"]
    assert other_document == document


def _alarmed_record() -> dict[str, Any]:
    record: dict[str, Any] = json.loads((FINISH_DIR / "01_128_sessions_calibrated.json").read_text(encoding="utf-8"))
    return record


def test_a_reranker_never_unquarantines_an_alarmed_family() -> None:
    record = _alarmed_record()
    pool = pool_from_record(record)
    calibration = CalibrationParams(**record["calibration"])
    packing = record["packing"]
    request = prepare_pack(record["query"], embedder=HashingEmbedder(), mode=record["mode"], calibration=calibration)
    default = finish_pack(dataclasses.replace(request, packing=PackParams(**packing)), pool)
    quarantined = set(default.diagnostics.quarantined)
    assert len(quarantined) == 1, "the recorded pool alarms on its attacker family"

    class FavourQuarantined:
        name = "favour-quarantined"

        def score(self, question: str, texts: Sequence[str]) -> list[float]:
            flagged = {note_text(c) for c in pool.candidates if c.family in quarantined}
            return [10.0 if text in flagged else 0.0 for text in texts]

    favoured = finish_pack(
        dataclasses.replace(
            request,
            packing=PackParams(**packing, rerank_top=len(pool.candidates), rerank_weight=1.0),
            reranker=FavourQuarantined(),
        ),
        pool,
    )
    rerank = favoured.diagnostics.rerank
    assert rerank is not None and rerank.moved
    # The re-ranker put the quarantined families' notes first ...
    first = {rerank.notes[i].note_id for i in range(len(rerank.notes)) if rerank.notes[i].score == 10.0}
    family_of = {c.note_id: c.family for c in pool.candidates}
    assert first and {family_of[n] for n in first} <= quarantined
    # ... and still at most quarantine_cap of each is packed, the rest refused for quarantine.
    packed = Counter(item.family for item in favoured.items)
    assert all(packed[family] <= calibration.quarantine_cap for family in quarantined)
    assert len(favoured.items) == len(default.items)
    # (each was scanned, being first, and refused: for its quarantine, or an overlap before it)
    refused = {r.note_id: r.reason for r in favoured.diagnostics.rejections}
    assert first - {item.note_id for item in favoured.items} <= set(refused)
    assert Counter(refused[n] for n in first if n in refused)["quarantine"] >= 1
    assert len(first) > len(quarantined) * calibration.quarantine_cap


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("rerank_top", 0),
        ("rerank_top", 1001),
        ("rerank_top", 2.5),
        ("rerank_weight", -0.1),
        ("rerank_weight", 1.5),
        ("rerank_weight", math.nan),
    ],
)
def test_bad_rerank_parameters_name_the_parameter(field: str, value: Any) -> None:
    with pytest.raises(pgmem.ConfigurationError, match=field):
        PackParams(**{field: value})


@pytest.mark.parametrize("reranker", [object(), "cross-encoder", lambda q, t: [1.0]])
def test_a_reranker_without_a_score_method_is_refused(reranker: Any) -> None:
    with pytest.raises(pgmem.ConfigurationError, match="reranker must have a score"):
        prepare_pack(QUESTION, embedder=HashingEmbedder(), reranker=reranker)


class Broken:
    name = "broken-model"

    def __init__(self, returns: Any = None, raises: Exception | None = None) -> None:
        self.returns, self.raises = returns, raises

    def score(self, question: str, texts: Sequence[str]) -> Any:
        if self.raises is not None:
            raise self.raises
        return self.returns(texts)


BROKEN = {
    "raises": (Broken(raises=RuntimeError("CUDA out of memory")), "failed: RuntimeError: CUDA out of memory"),
    "too few": (Broken(lambda texts: [1.0] * (len(texts) - 1)), "returned 3 score"),
    "too many": (Broken(lambda texts: [1.0] * (len(texts) + 1)), "returned 5 score"),
    "nested": (Broken(lambda texts: [[1.0]] * len(texts)), "shape"),
    "nan": (Broken(lambda texts: [1.0, math.nan, 0.0, 0.0]), "non-finite score nan for text 1"),
    "inf": (Broken(lambda texts: [math.inf, 0.0, 0.0, 0.0]), "non-finite"),
    "not numbers": (Broken(lambda texts: ["high"] * len(texts)), "must return one number per text"),
    "none": (Broken(lambda texts: None), "shape"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_failing_reranker_raises_a_rerank_error_naming_it(case: str) -> None:
    reranker, message = BROKEN[case]
    with pytest.raises(pgmem.RerankError, match="broken-model") as raised:
        _finish(_pool(12), reranker, rerank_top=4)
    assert message in str(raised.value)
    assert isinstance(raised.value, pgmem.PgmemError)


TEXTS = [f"The {word} report number {i} was filed by the {WORDS[(i + 3) % len(WORDS)]} team." for i, word in
         enumerate(WORDS)]  # fmt: skip


def test_sync_pack_with_a_reranker_logs_its_parameters(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.ingest(conn, make_spans(TEXTS), embedder=hashing)
    default = pgmem.pack(conn, "harbour report", embedder=hashing, budget=6)
    packing = PackParams(budget=6, rerank_top=6, rerank_weight=1.0)
    evidence = pgmem.pack(conn, "harbour report", embedder=hashing, packing=packing, reranker=Reverse(), log=True)
    assert [i.note_id for i in evidence.items] == [i.note_id for i in default.items][::-1]
    with conn.cursor(row_factory=dict_row) as cursor:
        row = cursor.execute(
            "SELECT parameters -> 'rerank' AS rerank, parameters -> 'packing' AS packing FROM pgmem.pack_explain_v1"
            " WHERE pack_id = %s LIMIT 1",
            (evidence.pack_id,),
        ).fetchone()
    assert row is not None and row["rerank"] == {"reranker": "reverse", "top": 6, "weight": 1.0}
    assert "rerank_top" not in row["packing"]


def test_a_failing_reranker_logs_nothing(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.ingest(conn, make_spans(TEXTS), embedder=hashing)
    with pytest.raises(pgmem.RerankError, match="broken-model"):
        pgmem.pack(conn, "harbour report", embedder=hashing, reranker=Broken(raises=ValueError("bad")), log=True)
    assert conn.execute("SELECT count(*) FROM pgmem.pack_log").fetchone() == (0,)


class OffTheLoop(Reverse):
    """Records whether it was called with an event loop running in its thread."""

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.on_loop = False
        else:
            self.on_loop = True
        return super().score(question, texts)


def test_async_pack_runs_the_reranker_off_the_event_loop(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn, autocommit=True) as plain:
        pgmem.ingest(plain, make_spans(TEXTS), embedder=hashing)
        packing = PackParams(budget=6, rerank_top=6, rerank_weight=1.0)
        expected = pgmem.pack(plain, "harbour report", embedder=hashing, packing=packing, reranker=Reverse())
    reranker = OffTheLoop()

    async def main() -> pgmem.Pack:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            return await pgmem.aio.pack(aconn, "harbour report", embedder=hashing, packing=packing, reranker=reranker)

    got = asyncio.run(main())
    assert reranker.on_loop is False
    assert [i.note_id for i in got.items] == [i.note_id for i in expected.items]
    assert got.diagnostics.rerank == expected.diagnostics.rerank

    async def failing() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            await pgmem.aio.pack(aconn, "harbour report", embedder=hashing, reranker=Broken(raises=KeyError("x")))

    with pytest.raises(pgmem.RerankError, match="broken-model"):
        asyncio.run(failing())


def test_the_recorded_finish_pools_pack_alike_with_a_neutral_reranker() -> None:
    """A re-ranker scoring every note alike leaves every recorded pack's order as it was."""

    class Flat:
        def score(self, question: str, texts: Sequence[str]) -> list[float]:
            return [0.5] * len(texts)

    for path in sorted(Path(FINISH_DIR).glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        request = prepare_pack(
            record["query"],
            embedder=HashingEmbedder(),
            mode=record["mode"],
            calibration=CalibrationParams(**record["calibration"]),
            packing=PackParams(**record["packing"], rerank_top=64, rerank_weight=1.0),
        )
        pool = pool_from_record(record)
        plain = finish_pack(request, pool)
        flat = finish_pack(dataclasses.replace(request, reranker=Flat()), pool)
        assert [i.note_id for i in flat.items] == [i.note_id for i in plain.items], path.name
        assert flat.diagnostics.rejections == plain.diagnostics.rejections, path.name
