"""Run every system on one shared stage-one pool per question.

For each question stage one runs once (the statement ``pgmem.pack`` runs); the pgmem
modes then calibrate and pack that same pool, and the plain retrieval baselines rank
it: dense-only (cosine), lexical-only (BM25) and reciprocal-rank fusion of the two —
each pool holds the exact dense top-``k_dense`` and lexical top-``k_lex``, so these are
the baselines' true top-``budget`` at the same budget, on the same store and embedder.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from pgmem.api import build_hints, ingest
from pgmem.embeddings import Embedder, embed_unique
from pgmem.eval.datasets import EvalCorpus, EvalQuestion
from pgmem.eval.metrics import QuestionResult
from pgmem.params import CalibrationParams, PackParams, StageOneParams
from pgmem.retrieval.calibrate import calibrate
from pgmem.retrieval.packer import rank_and_pack
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.stage_one import run_stage_one, stage_one_arguments
from pgmem.types import Candidate
from pgmem.validate import check_namespace

PGMEM_MODES = ("calibrated", "relevance", "raw_bonus")
BASELINES = ("dense", "lexical", "rrf")
SYSTEMS = PGMEM_MODES + BASELINES
#: Reciprocal-rank fusion constant (the usual 60).
RRF_K = 60


@dataclass(frozen=True)
class RunConfig:
    """What an evaluation run compares, at one budget."""

    budget: int = 8
    stage_one: StageOneParams = field(default_factory=StageOneParams)
    calibration: CalibrationParams = field(default_factory=CalibrationParams)
    packing: PackParams | None = None
    derive_hints: bool = True
    namespace_prefix: str = "eval-"

    def pack_params(self) -> PackParams:
        return PackParams(budget=self.budget) if self.packing is None else self.packing


@dataclass(frozen=True)
class PoolDiagnostics:
    """Per-question diagnostics of the calibrated mode, for the fallback statistics."""

    question_id: str
    degraded_reasons: tuple[str, ...]
    entropy: float
    pool_size: int
    floor_dominated_families: int
    families: int


@dataclass(frozen=True)
class RunResult:
    results: dict[str, list[QuestionResult]]
    diagnostics: list[PoolDiagnostics]
    ingest_seconds: float


def ingest_corpus(
    conn: psycopg.Connection[Any],
    corpus: EvalCorpus,
    embedder: Embedder,
    config: RunConfig,
    progress: Callable[[int], None] | None = None,
) -> float:
    """Write the corpus into its own namespaces (``prefix + namespace``); returns seconds."""
    started = time.perf_counter()
    for namespace, spans in corpus.spans.items():
        ingest(conn, spans, namespace=check_namespace(config.namespace_prefix + namespace), embedder=embedder)
        if progress is not None:
            progress(len(spans))
    return time.perf_counter() - started


def _top(candidates: Sequence[Candidate], key: Callable[[Candidate], float], budget: int) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (-key(c), c.note_id))[:budget]


def baseline_pack(pool: Pool, system: str, budget: int) -> list[Candidate]:
    """The plain retrieval baselines' top-``budget`` from the shared pool."""
    if system == "dense":
        return _top(pool.candidates, lambda c: c.dense_score, budget)
    if system == "lexical":
        return _top([c for c in pool.candidates if c.lexical_score > 0], lambda c: c.lexical_score, budget)
    if system == "rrf":
        dense_rank = {
            c.note_id: i for i, c in enumerate(_top(pool.candidates, lambda c: c.dense_score, len(pool.candidates)))
        }
        lexical = _top(
            [c for c in pool.candidates if c.lexical_score > 0], lambda c: c.lexical_score, len(pool.candidates)
        )
        lexical_rank = {c.note_id: i for i, c in enumerate(lexical)}

        def fused(c: Candidate) -> float:
            score = 1.0 / (RRF_K + 1 + dense_rank[c.note_id])
            if c.note_id in lexical_rank:
                score += 1.0 / (RRF_K + 1 + lexical_rank[c.note_id])
            return score

        return _top(pool.candidates, fused, budget)
    raise ValueError(f"unknown baseline {system!r}")


def _result(question: EvalQuestion, packed: Sequence[Any], latency: dict[str, float]) -> QuestionResult:
    return QuestionResult(
        question_id=question.id,
        category=question.category,
        gold=question.gold,
        packed=tuple(item.external_id or item.note_id for item in packed),
        packed_texts=tuple(item.text for item in packed),
        answers=question.answers,
        latency_ms=latency,
    )


def evaluate(
    conn: psycopg.Connection[Any],
    corpus: EvalCorpus,
    embedder: Embedder,
    config: RunConfig | None = None,
    *,
    systems: Sequence[str] = SYSTEMS,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Ingest ``corpus`` (idempotent) and run ``systems`` on every question.

    Returns per-system question results (for :mod:`pgmem.eval.metrics`) and the
    calibrated mode's pool diagnostics. Adversarial questions (LoCoMo category 5) are
    run too; their results carry the category so reports can show them apart.
    """
    config = config or RunConfig()
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        raise ValueError(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    ingest_seconds = ingest_corpus(conn, corpus, embedder, config)
    packing = config.pack_params()
    vectors = embed_unique(embedder, [q.question for q in corpus.questions])
    results: dict[str, list[QuestionResult]] = {system: [] for system in systems}
    diagnostics: list[PoolDiagnostics] = []
    for question, vector in zip(corpus.questions, vectors, strict=True):
        namespace = config.namespace_prefix + question.namespace
        started = time.perf_counter()
        hints = build_hints(question.question, derive=config.derive_hints)
        arguments = stage_one_arguments(namespace, embedder.name, vector, question.question, hints, config.stage_one)
        pool = run_stage_one(conn, arguments)
        stage_one_ms = (time.perf_counter() - started) * 1000
        for system in systems:
            tick = time.perf_counter()
            if system in PGMEM_MODES:
                calibration = calibrate(pool, config.calibration, system)  # type: ignore[arg-type]
                packed: Sequence[Any] = rank_and_pack(pool, calibration, packing).items
                if system == "calibrated":
                    diagnostics.append(
                        PoolDiagnostics(
                            question_id=question.id,
                            degraded_reasons=calibration.degraded_reasons,
                            entropy=pool.entropy,
                            pool_size=pool.size,
                            floor_dominated_families=sum(f.variance_floor_dominated for f in calibration.families),
                            families=len(calibration.families),
                        )
                    )
            else:
                packed = baseline_pack(pool, system, packing.budget)
            latency = {"stage_one": stage_one_ms, "rank": (time.perf_counter() - tick) * 1000}
            results[system].append(_result(question, packed, latency))
        if progress is not None:
            progress(1)
    return RunResult(results=results, diagnostics=diagnostics, ingest_seconds=ingest_seconds)
