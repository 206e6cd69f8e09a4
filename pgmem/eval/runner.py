"""Run every system on one shared stage-one pool per question.

For each question stage one runs once (the statement ``pgmem.pack`` runs); the pgmem
modes then calibrate and pack that same pool, and the plain retrieval baselines rank
it: dense-only (cosine), lexical-only (BM25) and reciprocal-rank fusion of the two —
each pool holds the exact dense top-``k_dense`` and lexical top-``k_lex``, so these are
the baselines' true top-``budget`` at the same budget, on the same store and embedder.

The ``beta`` mode learns each family's reliability from :func:`pgmem.feedback` on a
training split, and is cross-fitted so that every question is still evaluated and none
is evaluated on feedback from itself: the questions are split into ``feedback_folds``
folds by a hash of their ids; for each fold the namespaces' feedback is reset, the other
folds' questions are packed in the beta mode one after another with feedback after each
(the packed gold notes helpful, the others not: online, as a deployment would learn),
and then the fold's own questions are evaluated by every system. Systems other than
``beta`` do not read feedback, so their packs do not depend on the folds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from pgmem.api import feedback, ingest, reset_feedback
from pgmem.embeddings import Embedder, embed_unique
from pgmem.errors import ConfigurationError
from pgmem.eval.datasets import EvalCorpus, EvalQuestion
from pgmem.eval.metrics import QuestionResult
from pgmem.eval.stress import attack_targets
from pgmem.params import CalibrationParams, PackParams, StageOneParams, check_mode
from pgmem.retrieval.pipeline import PackRequest, fetch_pool, finish_pack, prepare_pack
from pgmem.retrieval.pool import Pool
from pgmem.types import Candidate
from pgmem.validate import between, check_namespace, whole

PGMEM_MODES = ("calibrated", "relevance", "raw_bonus", "beta")
BASELINES = ("dense", "lexical", "rrf")
#: The calibrated mode with one ingredient of the regulariser switched off (DESIGN §3.2):
#: not run by default; name them in ``systems`` to see where a gain comes from.
ABLATIONS: dict[str, dict[str, Any]] = {
    "calibrated-no-shrinkage": {"shrinkage": 0.0},
    "calibrated-no-uncertainty": {"use_uncertainty": False},
    "calibrated-no-prior": {"alpha_prior": 0.0},
}
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
    #: Cross-fitting folds of the beta mode's training split (>= 2).
    feedback_folds: int = 2
    #: Seed of the fold assignment.
    seed: int = 0
    #: Share of the beta mode's training judgements flipped at random (noisy feedback).
    feedback_noise: float = 0.0
    #: The attacker judges its own packed notes helpful (adversarial feedback).
    adversarial_feedback: bool = False

    def __post_init__(self) -> None:
        whole("feedback_folds", self.feedback_folds, 2, 20)
        between("feedback_noise", self.feedback_noise, 0.0, 1.0)

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
class FeedbackStats:
    """What the beta mode learned from: training packs and judgements over all folds."""

    folds: int
    training_packs: int
    helpful: int
    unhelpful: int


@dataclass(frozen=True)
class RunResult:
    results: dict[str, list[QuestionResult]]
    diagnostics: list[PoolDiagnostics]
    ingest_seconds: float
    feedback: FeedbackStats | None = None


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


def answerable_pools(
    conn: psycopg.Connection[Any], corpus: EvalCorpus, embedder: Embedder, config: RunConfig | None = None
) -> tuple[list[EvalQuestion], list[PackRequest], list[Pool]]:
    """Ingest ``corpus`` (idempotent) and fetch one stage-one pool per answerable question.

    The questions with gold evidence (adversarial ones left out), their pack requests
    (as :func:`pgmem.pack` prepares them, hints derived, with the question's vector)
    and their pools: what the sweeps under ``tools/`` finish many packs from.
    """
    config = config or RunConfig()
    ingest_corpus(conn, corpus, embedder, config)
    questions = [q for q in corpus.questions if not q.adversarial and q.gold]
    vectors = embed_unique(embedder, [q.question for q in questions])
    requests = [
        dataclasses.replace(
            prepare_pack(q.question, namespace=config.namespace_prefix + q.namespace, embedder=embedder),
            query_vector=vector,
        )
        for q, vector in zip(questions, vectors, strict=True)
    ]
    return questions, requests, [fetch_pool(conn, request) for request in requests]


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
    raise ConfigurationError(f"system {system!r} is not a baseline; baselines are {', '.join(BASELINES)}")


def _result(
    question: EvalQuestion, packed: Sequence[Any], latency: dict[str, float], gold_documents: tuple[str, ...] = ()
) -> QuestionResult:
    return QuestionResult(
        question_id=question.id,
        category=question.category,
        gold=question.gold,
        packed=tuple(item.external_id or item.note_id for item in packed),
        packed_texts=tuple(item.text for item in packed),
        answers=question.answers,
        latency_ms=latency,
        gold_documents=gold_documents,
        packed_documents=tuple(item.document_id for item in packed),
    )


def gold_documents(corpus: EvalCorpus) -> dict[str, tuple[str, ...]]:
    """Question id → the distinct documents (sessions, articles) of its gold evidence."""
    documents = {
        (namespace, span.external_id): span.document_id for namespace, spans in corpus.spans.items() for span in spans
    }
    return {
        q.id: tuple(dict.fromkeys(documents[q.namespace, g] for g in q.gold if (q.namespace, g) in documents))
        for q in corpus.questions
    }


def fold_of(question_id: str, folds: int, seed: int = 0) -> int:
    """The cross-fitting fold of a question: a stable hash of its id and the seed."""
    digest = hashlib.sha256(f"{seed}:{question_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % folds


def evaluation_steps(corpus: EvalCorpus, systems: Sequence[str], config: RunConfig | None = None) -> int:
    """How many progress steps :func:`evaluate` reports: one per evaluated question,
    plus one per training pack of the beta mode (questions with gold evidence, once per
    fold they train)."""
    config = config or RunConfig()
    steps = len(corpus.questions)
    if "beta" in systems:
        steps += (config.feedback_folds - 1) * sum(1 for q in corpus.questions if q.gold)
    return steps


class _Session:
    """One evaluation's connection, embedder, configuration and question vectors."""

    def __init__(
        self, conn: psycopg.Connection[Any], corpus: EvalCorpus, embedder: Embedder, config: RunConfig
    ) -> None:
        self.conn = conn
        self.embedder = embedder
        self.config = config
        self.packing = config.pack_params()
        vectors = embed_unique(embedder, [q.question for q in corpus.questions])
        self.vectors = {q.id: vector for q, vector in zip(corpus.questions, vectors, strict=True)}
        self.gold_documents = gold_documents(corpus)
        self.poisoned = {note for notes in attack_targets(corpus).values() for note in notes}

    def namespace(self, question: EvalQuestion) -> str:
        return self.config.namespace_prefix + question.namespace

    def request(self, question: EvalQuestion) -> PackRequest:
        """The pack request of ``question`` (as pgmem.pack prepares it), with its vector."""
        request = prepare_pack(
            question.question,
            namespace=self.namespace(question),
            derive_hints=self.config.derive_hints,
            stage_one=self.config.stage_one,
            calibration=self.config.calibration,
            packing=self.packing,
            embedder=self.embedder,
        )
        return dataclasses.replace(request, query_vector=self.vectors[question.id])

    def train(self, question: EvalQuestion) -> tuple[int, int]:
        """Pack ``question`` in the beta mode and give feedback on the pack; returns
        the (helpful, unhelpful) judgements given."""
        request = dataclasses.replace(self.request(question), mode="beta")
        items = finish_pack(request, fetch_pool(self.conn, request)).items
        gold = set(question.gold)
        judged = {item.note_id: (item.external_id or item.note_id) in gold for item in items}
        if self.config.feedback_noise > 0:
            rng = random.Random(f"{self.config.seed}:{question.id}")
            judged = {note: label != (rng.random() < self.config.feedback_noise) for note, label in judged.items()}
        if self.config.adversarial_feedback:
            for item in items:
                if (item.external_id or item.note_id) in self.poisoned:
                    judged[item.note_id] = True
        helpful = [note for note, label in judged.items() if label]
        unhelpful = [note for note, label in judged.items() if not label]
        if items:
            feedback(self.conn, namespace=self.namespace(question), helpful=helpful, unhelpful=unhelpful)
        return len(helpful), len(unhelpful)

    def run(
        self, question: EvalQuestion, systems: Sequence[str], diagnostics: list[PoolDiagnostics]
    ) -> dict[str, QuestionResult]:
        """Every system on ``question``'s one stage-one pool."""
        started = time.perf_counter()
        request = self.request(question)
        pool = fetch_pool(self.conn, request)
        stage_one_ms = (time.perf_counter() - started) * 1000
        results: dict[str, QuestionResult] = {}
        for system in systems:
            tick = time.perf_counter()
            if system in PGMEM_MODES:
                evidence = finish_pack(dataclasses.replace(request, mode=check_mode(system)), pool)
                packed: Sequence[Any] = evidence.items
                if system == "calibrated":
                    explained = evidence.diagnostics
                    diagnostics.append(
                        PoolDiagnostics(
                            question_id=question.id,
                            degraded_reasons=explained.degraded_reasons,
                            entropy=pool.entropy,
                            pool_size=pool.size,
                            floor_dominated_families=sum(f.variance_floor_dominated for f in explained.families),
                            families=len(explained.families),
                        )
                    )
            elif system in ABLATIONS:
                calibration = dataclasses.replace(request.calibration, **ABLATIONS[system])
                ablated = dataclasses.replace(request, mode="calibrated", calibration=calibration)
                packed = finish_pack(ablated, pool).items
            else:
                packed = baseline_pack(pool, system, self.packing.budget)
            latency = {"stage_one": stage_one_ms, "rank": (time.perf_counter() - tick) * 1000}
            results[system] = _result(question, packed, latency, self.gold_documents[question.id])
        return results


def evaluate(
    conn: psycopg.Connection[Any],
    corpus: EvalCorpus,
    embedder: Embedder,
    config: RunConfig | None = None,
    *,
    systems: Sequence[str] = SYSTEMS,
    progress: Callable[[int], None] | None = None,
    ingested: bool = False,
) -> RunResult:
    """Ingest ``corpus`` (idempotent) and run ``systems`` on every question.

    Returns per-system question results (for :mod:`pgmem.eval.metrics`), in the
    corpus's question order, and the calibrated mode's pool diagnostics. Adversarial
    questions (LoCoMo category 5) are run too; their results carry the category so
    reports can show them apart. With the ``beta`` mode, the evaluation namespaces'
    feedback is reset and relearned per fold (see the module docstring); ``progress``
    then also counts the training packs (:func:`evaluation_steps`). With ``ingested``
    the corpus is taken to be in its namespaces already (written by an earlier run with
    the same ``namespace_prefix``) and is not ingested again.

    The beta mode's training judgements are the packed gold notes helpful and the rest
    not (an upper bound: perfect feedback); ``config.feedback_noise`` flips a random
    share of them, and ``config.adversarial_feedback`` has the attacker judge its own
    packed (poisoned) notes helpful.
    """
    config = config or RunConfig()
    unknown = sorted(set(systems) - set(SYSTEMS) - set(ABLATIONS))
    if unknown:
        raise ConfigurationError(f"systems has unknown {unknown}; choose from {', '.join(SYSTEMS)}")
    ingest_seconds = 0.0 if ingested else ingest_corpus(conn, corpus, embedder, config)
    session = _Session(conn, corpus, embedder, config)
    by_question: dict[str, dict[str, QuestionResult]] = {}
    diagnostics: list[PoolDiagnostics] = []
    stats = None

    def evaluate_all(questions: Iterable[EvalQuestion]) -> None:
        for question in questions:
            by_question[question.id] = session.run(question, systems, diagnostics)
            if progress is not None:
                progress(1)

    if "beta" not in systems:
        evaluate_all(corpus.questions)
    else:
        folds = config.feedback_folds
        fold = {q.id: fold_of(q.id, folds, config.seed) for q in corpus.questions}
        namespaces = sorted({session.namespace(q) for q in corpus.questions})
        packs = helpful = unhelpful = 0
        for k in range(folds):
            for namespace in namespaces:
                reset_feedback(conn, namespace=namespace)
            for question in corpus.questions:
                if fold[question.id] != k and question.gold:
                    good, bad = session.train(question)
                    packs, helpful, unhelpful = packs + 1, helpful + good, unhelpful + bad
                    if progress is not None:
                        progress(1)
            evaluate_all(q for q in corpus.questions if fold[q.id] == k)
        stats = FeedbackStats(folds=folds, training_packs=packs, helpful=helpful, unhelpful=unhelpful)
    results = {system: [by_question[q.id][system] for q in corpus.questions] for system in systems}
    order = {q.id: i for i, q in enumerate(corpus.questions)}
    diagnostics.sort(key=lambda d: order[d.question_id])
    return RunResult(results=results, diagnostics=diagnostics, ingest_seconds=ingest_seconds, feedback=stats)
