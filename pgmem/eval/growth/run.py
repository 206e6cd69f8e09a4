"""The growth run: pad each namespace in place factor by factor, evaluate at every size.

Notes are immutable and append-only, so the ×10 store is the ×1 store plus
distractors and the ×100 store is the ×10 store plus more: one store grows, as a real
memory does.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import psycopg

from pgmem.api import ingest
from pgmem.embeddings import Embedder
from pgmem.errors import ConfigurationError
from pgmem.eval.datasets import EvalCorpus
from pgmem.eval.growth.distractors import distractor_spans
from pgmem.eval.metrics import QuestionResult, summarise
from pgmem.eval.runner import SYSTEMS, RunConfig, evaluate, evaluation_steps
from pgmem.types import Span
from pgmem.validate import check_namespace

DEFAULT_FACTORS = (1, 10, 100)
#: Spans per ingest() call while padding (one transaction each; the progress step).
INGEST_CHUNK = 1_000
#: The metrics every factor reports per system (percentages).
METRICS = ("recall", "precision", "full_support", "answer_containment")


class GrowthProgress(Protocol):
    """What :func:`run_growth` reports while it runs (a progress bar, a log)."""

    def step(self, factor: int, spans: int, questions: int) -> None:
        """A factor starts: ``spans`` to ingest, then ``questions`` evaluation steps
        (:func:`pgmem.eval.runner.evaluation_steps`: the questions, plus the beta mode's
        training packs)."""

    def ingested(self, spans: int) -> None:
        """``spans`` more spans were ingested (new or already stored)."""

    def answered(self, questions: int) -> None:
        """``questions`` more evaluation steps were done."""


def check_factors(factors: Sequence[int]) -> list[int]:
    if not factors or any(isinstance(f, bool) or not isinstance(f, int) or f < 1 for f in factors):
        raise ConfigurationError(f"factors must be a non-empty list of whole numbers >= 1, got {list(factors)!r}")
    return sorted(set(factors))


def _note_counts(conn: psycopg.Connection[Any], namespaces: Sequence[str]) -> dict[str, int]:
    rows = conn.execute(
        "SELECT namespace, count(*) FROM pgmem.notes WHERE namespace = ANY (%(namespaces)s) GROUP BY namespace",
        {"namespaces": list(namespaces)},
    ).fetchall()
    counts = {str(name): int(count) for name, count in rows}
    return {name: counts.get(name, 0) for name in namespaces}


def _ingest_chunks(
    conn: psycopg.Connection[Any],
    spans: Sequence[Span],
    namespace: str,
    embedder: Embedder,
    progress: GrowthProgress | None,
) -> None:
    for start in range(0, len(spans), INGEST_CHUNK):
        chunk = spans[start : start + INGEST_CHUNK]
        ingest(conn, chunk, namespace=namespace, embedder=embedder)
        if progress is not None:
            progress.ingested(len(chunk))


def _latency(results: Sequence[QuestionResult]) -> dict[str, float]:
    values = np.asarray([r.latency_ms["stage_one"] for r in results if "stage_one" in r.latency_ms], dtype=np.float64)
    if values.size == 0:
        return {"p50": math.nan, "p95": math.nan, "mean": math.nan}
    return {
        "p50": float(np.percentile(values, 50)),
        "p95": float(np.percentile(values, 95)),
        "mean": float(values.mean()),
    }


def run_growth(
    conn: psycopg.Connection[Any],
    corpus: EvalCorpus,
    embedder: Embedder,
    config: RunConfig,
    *,
    factors: Sequence[int] = DEFAULT_FACTORS,
    systems: Sequence[str] = SYSTEMS,
    seed: int = 0,
    source: EvalCorpus | None = None,
    progress: GrowthProgress | None = None,
) -> dict[str, Any]:
    """Evaluate every system as the corpus's store grows by ``factors``.

    For each factor in increasing order, every namespace of ``corpus`` is padded in
    place (in the database namespace ``config.namespace_prefix + namespace``) to
    ``factor ×`` its original span count with :func:`distractor_spans` — the originals
    are written first, then the distractors the previous factor did not write — and
    :func:`pgmem.eval.runner.evaluate` runs every question.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection to a migrated database; written to only in the prefixed namespaces.
    corpus : EvalCorpus
        The questions and the spans they are asked against.
    embedder : Embedder
        Embeds originals, distractors and questions.
    config : RunConfig
        Budget, parameters and ``namespace_prefix`` (use one that the plain evaluation
        does not use: padding is permanent).
    factors : sequence of int
        Store sizes as multiples of the corpus (>= 1; run in increasing order).
    systems : sequence of str
        As :func:`pgmem.eval.runner.evaluate`.
    seed : int
        Seed of the distractors.
    source : EvalCorpus, optional
        Where distractor texts come from (default ``corpus``), see :func:`distractor_spans`.
    progress : GrowthProgress, optional
        Told when a factor starts, and of every ingested chunk and answered question.

    Returns
    -------
    dict
        Plain JSON-able data: ``corpus`` (name and counts), ``source``, ``embedder``,
        ``budget``, ``seed``, ``namespace_prefix``, ``systems``,
        ``recombined_own_texts`` (namespaces with no other namespace to draw
        distractors from, padded with halves of their own notes), and ``factors``: per
        factor ``factor``, ``notes`` (counted in ``pgmem.notes``), ``notes_by_namespace``,
        ``distractors``, ``recombined_distractors`` (the others are real spans of other
        namespaces), ``ingest_seconds`` (this step's writes), ``evaluate_seconds``,
        ``questions`` (answerable ones, over which metrics are averaged),
        ``stage_one_ms`` (``p50``, ``p95``, ``mean`` over every question run, adversarial
        included: stage one runs once per question for all systems),
        ``pool_size_median``, ``degraded_rate``, and ``systems``: per system ``n``,
        ``recall``, ``precision``, ``full_support`` and ``answer_containment`` (percent,
        adversarial questions left out as in the report).

    Raises
    ------
    ConfigurationError
        Bad ``factors``, or a namespace that already holds more notes than a factor
        asks for (padded earlier to a larger factor: use a fresh database or prefix).
    """
    ordered = check_factors(factors)
    unknown = sorted(set(systems) - set(SYSTEMS))
    if not systems or unknown:
        raise ConfigurationError(f"systems must be a non-empty list of {', '.join(SYSTEMS)}, got {list(systems)!r}")
    source = source or corpus
    originals = {name: len(spans) for name, spans in corpus.spans.items()}
    # Real spans available to each namespace before recombinations start.
    real = {name: sum(len(spans) for other, spans in source.spans.items() if other != name) for name in corpus.spans}
    database = {name: check_namespace(config.namespace_prefix + name) for name in corpus.spans}
    padding = {
        name: distractor_spans(corpus, name, (ordered[-1] - 1) * originals[name], seed, source=source)
        for name in corpus.spans
    }
    adversarial = {q.id for q in corpus.questions if q.adversarial}
    steps: list[dict[str, Any]] = []
    written = dict.fromkeys(corpus.spans, 0)
    for index, factor in enumerate(ordered):
        wanted = {name: (factor - 1) * originals[name] for name in corpus.spans}
        new_spans = sum(wanted[name] - written[name] for name in corpus.spans)
        if index == 0:
            new_spans += sum(originals.values())
        if progress is not None:
            progress.step(factor, new_spans, evaluation_steps(corpus, systems, config))
        started = time.perf_counter()
        for name in corpus.spans:
            if index == 0:
                # The originals first: the ×1 store is the plain evaluation's store, and
                # the originals' write-time links never point at a distractor.
                _ingest_chunks(conn, corpus.spans[name], database[name], embedder, progress)
            _ingest_chunks(conn, padding[name][written[name] : wanted[name]], database[name], embedder, progress)
            written[name] = wanted[name]
        ingest_seconds = time.perf_counter() - started
        counts = _note_counts(conn, list(database.values()))
        for name, namespace in database.items():
            if counts[namespace] > factor * originals[name]:
                raise ConfigurationError(
                    f"factors: namespace {namespace!r} already holds {counts[namespace]} notes, more than factor"
                    f" {factor} asks for ({factor * originals[name]}); it was padded by an earlier run to a larger"
                    " factor: use a fresh database or another namespace prefix"
                )
        started = time.perf_counter()
        run = evaluate(
            conn,
            corpus,
            embedder,
            config,
            systems=systems,
            progress=progress.answered if progress is not None else None,
        )
        evaluate_seconds = time.perf_counter() - started
        first = run.results[systems[0]]
        pools = [d.pool_size for d in run.diagnostics]
        summaries = {
            system: summarise([r for r in results if r.question_id not in adversarial])
            for system, results in run.results.items()
        }
        steps.append(
            {
                "factor": factor,
                "notes": sum(counts.values()),
                "notes_by_namespace": counts,
                "distractors": sum(wanted.values()),
                "recombined_distractors": sum(max(0, wanted[name] - real[name]) for name in corpus.spans),
                "ingest_seconds": ingest_seconds,
                "evaluate_seconds": evaluate_seconds,
                "questions": len(corpus.questions) - len(adversarial),
                "stage_one_ms": _latency(first),
                "pool_size_median": statistics.median(pools) if pools else math.nan,
                "degraded_rate": (sum(1 for d in run.diagnostics if d.degraded_reasons) / len(pools))
                if pools
                else math.nan,
                "systems": {
                    system: {"n": summary.n, **{metric: getattr(summary, metric) for metric in METRICS}}
                    for system, summary in summaries.items()
                },
            }
        )
    return {
        "corpus": {"name": corpus.name, **corpus.stats()},
        "source": {"name": source.name, **source.stats()},
        "embedder": embedder.name,
        "budget": config.budget,
        "seed": seed,
        "namespace_prefix": config.namespace_prefix,
        "systems": list(systems),
        # Namespaces padded with recombinations of their own texts (no other namespace
        # to draw from): their distractors hold halves of gold notes.
        "recombined_own_texts": sorted(name for name in corpus.spans if real[name] == 0),
        "factors": steps,
    }
