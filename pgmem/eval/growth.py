"""Recall and latency as the store grows: the questions' corpus padded with distractors.

Each namespace of an :class:`~pgmem.eval.datasets.EvalCorpus` is padded, in place, to
``factor ×`` its size (×1, ×10, ×100 by default) with distractor notes, and every system
of :mod:`pgmem.eval.runner` is evaluated at each size. Notes are immutable and
append-only, so the ×10 store is the ×1 store plus distractors and the ×100 store is the
×10 store plus more: one store grows, as a real memory does.

Distractors (:func:`distractor_spans`) are real text: whole spans of the corpus's other
namespaces first (another conversation's turns, another question's paragraphs), then,
when those run out, recombinations of those spans' texts (the first half of one span's
words and the second half of another's, as ``benchmarks/bench_lexical.py`` does) —
not of the padded namespace's own texts, whose halves would be near-duplicates of its
gold notes, unless the corpus has no other namespace (MultiHop-RAG). Their
families and timestamps are drawn from the padded namespace's own spans, weighted by how
many spans each family has, so padding changes the store's size but not its family
structure. A distractor is its own one-span document, marked ``{"distractor": true}`` in
its metadata, with an ``external_id`` that no gold id can equal.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import psycopg

from pgmem.api import ingest
from pgmem.embeddings import Embedder
from pgmem.errors import ConfigurationError, InputError
from pgmem.eval.datasets import EvalCorpus
from pgmem.eval.metrics import QuestionResult, summarise
from pgmem.eval.runner import SYSTEMS, RunConfig, evaluate, evaluation_steps
from pgmem.ingestion.spans import MAX_SPAN_BYTES
from pgmem.types import Span, jsonable
from pgmem.validate import check_namespace

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

__all__ = [
    "DEFAULT_FACTORS",
    "GrowthProgress",
    "distractor_spans",
    "growth_command",
    "render_growth_markdown",
    "run_growth",
    "write_growth",
]

DEFAULT_FACTORS = (1, 10, 100)
#: Spans per ingest() call while padding (one transaction each; the progress step).
INGEST_CHUNK = 1_000
#: Recombinations in a row that may come out as duplicates before the corpus is judged
#: too small to give more distinct distractors.
MAX_DUPLICATE_DRAWS = 10_000
#: Document and external ids of distractors start with this (or with more dashes in
#: front of it, when the corpus itself has ids that start so).
DISTRACTOR_TAG = "distractor"
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


# -- distractors ------------------------------------------------------------------------


def _free_tag(*corpora: EvalCorpus) -> str:
    """A tag that starts no document id, external id or gold id of the corpora."""
    taken = [
        value
        for corpus in corpora
        for spans in corpus.spans.values()
        for span in spans
        for value in (span.document_id, span.external_id or "")
    ]
    taken += [gold for corpus in corpora for question in corpus.questions for gold in question.gold]
    tag = DISTRACTOR_TAG
    while any(value.startswith(tag) for value in taken):
        tag = "-" + tag
    return tag


def _recombined(texts: Sequence[str], seen: set[str], rng: random.Random) -> Iterator[str]:
    """New texts: the first half of one text's words, the second half of another's."""
    words = [text.split() for text in texts]
    already = len(seen)
    failures = 0
    while True:
        first, second = rng.choice(words), rng.choice(words)
        text = " ".join(first[: max(1, len(first) // 2)] + second[len(second) // 2 :])
        if text in seen or len(text.encode("utf-8")) > MAX_SPAN_BYTES:
            failures += 1
            if failures > MAX_DUPLICATE_DRAWS:
                raise InputError(
                    f"count: {len(texts)} span texts recombine into no more than {len(seen) - already}"
                    " distinct recombined distractors; ask for fewer (a smaller growth factor)"
                )
            continue
        failures = 0
        seen.add(text)
        yield text


def _distractor_stream(corpus: EvalCorpus, namespace: str, seed: int, source: EvalCorpus) -> Iterator[Span]:
    own = corpus.spans[namespace]
    rng = random.Random(f"pgmem-growth:{seed}:{namespace}")
    family_counts: dict[str, int] = {}
    for span in own:
        family_counts[span.family] = family_counts.get(span.family, 0) + 1
    families = list(family_counts)
    weights = [family_counts[family] for family in families]
    timestamps = [span.source_ts for span in own]
    tag = _free_tag(corpus, source)
    others = [span for name in sorted(source.spans) if name != namespace for span in source.spans[name]]
    # Recombined from other namespaces' texts: halves of the namespace's own texts
    # would be near-duplicates of its gold notes (on one LoCoMo conversation at ×100,
    # hashing embedder, they halve recall), an attack rather than a bigger store. A
    # corpus of one namespace has nothing else to recombine.
    texts = [span.text for span in others] or [span.text for span in own]
    real_texts = {span.text for spans in (*source.spans.values(), own) for span in spans}
    rng.shuffle(others)

    def real() -> Iterator[tuple[str, Span | None]]:
        for span in others:
            yield span.text, span

    def recombined() -> Iterator[tuple[str, Span | None]]:
        for text in _recombined(texts, set(real_texts), rng):
            yield text, None

    number = 0
    for sources in (real(), recombined()):
        for text, origin in sources:
            # Drawn per distractor in a fixed order: the sequence does not depend on how
            # many are asked for, so a larger count extends a smaller one.
            family = rng.choices(families, weights)[0]
            source_ts = rng.choice(timestamps)
            metadata = {**(origin.metadata or {}), "distractor": True} if origin else {"distractor": True}
            yield Span(
                document_id=f"{tag}/{number}",
                text=text,
                start=0,
                end=len(text.encode("utf-8")),
                family=family,
                source_ts=source_ts,
                external_id=f"{tag}-{number}",
                role=origin.role if origin else None,
                confidence=origin.confidence if origin else None,
                context=origin.context if origin else None,
                metadata=metadata,
            )
            number += 1


def distractor_spans(
    corpus: EvalCorpus,
    namespace: str,
    count: int,
    seed: int = 0,
    *,
    source: EvalCorpus | None = None,
) -> list[Span]:
    """Distractor notes for one namespace of a corpus.

    Parameters
    ----------
    corpus : EvalCorpus
        The corpus whose namespace is padded; its gold ids are never reused.
    namespace : str
        A namespace of ``corpus`` (a key of ``corpus.spans``).
    count : int
        How many distractors (>= 0).
    seed : int
        Seed of every draw; the same arguments give the same spans, and a larger
        ``count`` extends the list a smaller one gives.
    source : EvalCorpus, optional
        Where distractor texts come from (default ``corpus``): pass the whole dataset
        when ``corpus`` is a part of it, so the other parts' real spans are used.

    Returns
    -------
    list of Span
        First the real spans of the source's other namespaces, shuffled, texts
        unchanged (role, confidence and context kept); then recombinations of those
        spans' texts (first half of one's words, second half of another's), distinct
        from every real text and from each other. Only when the source has no other
        namespace are the namespace's own texts recombined: then distractors hold
        halves of gold notes, a harder test than a larger store. Each is its own one-span
        document ``distractor/<n>`` (start 0, end its UTF-8 length) with external id
        ``distractor-<n>`` (more dashes in front when the corpus has ids starting
        ``distractor``), a family drawn from the namespace's own families weighted by
        their span counts, a ``source_ts`` drawn from the namespace's own spans, and
        ``"distractor": true`` in its metadata.

    Raises
    ------
    ConfigurationError
        ``namespace`` is not one of the corpus's, or ``count`` is negative.
    InputError
        The source's texts cannot give ``count`` distinct distractors.
    """
    if namespace not in corpus.spans or not corpus.spans[namespace]:
        raise ConfigurationError(
            f"namespace must be one of the corpus's namespaces with spans ({', '.join(sorted(corpus.spans))}),"
            f" got {namespace!r}"
        )
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ConfigurationError(f"count must be a whole number >= 0, got {count!r}")
    spans: list[Span] = []
    if count == 0:
        return spans
    for span in _distractor_stream(corpus, namespace, seed, source or corpus):
        spans.append(span)
        if len(spans) == count:
            break
    return spans


# -- the growth run ---------------------------------------------------------------------


def _check_factors(factors: Sequence[int]) -> list[int]:
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
    ordered = _check_factors(factors)
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


# -- output -----------------------------------------------------------------------------


def _number(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.{digits}f}"


def render_growth_markdown(growth: Mapping[str, Any]) -> str:
    """The growth run as a Markdown page.

    Parameters
    ----------
    growth : mapping
        What :func:`run_growth` returns, optionally with ``scale`` (the JSON of
        ``benchmarks/bench_scale.py``) added.

    Returns
    -------
    str
        Tables of evidence recall per system and of stage-one latency per store size.
    """
    corpus = growth["corpus"]
    steps = growth["factors"]
    systems = list(growth["systems"])
    lines = [
        f"# Growth: {corpus['name']}",
        "",
        f"{corpus['questions']} questions against {corpus['spans']} notes in {corpus['namespaces']} namespace(s),"
        f" padded in place with distractors from {growth['source']['name']} (seed {growth['seed']});"
        f" embedder {growth['embedder']}, budget {growth['budget']}. Metrics leave adversarial questions out.",
    ]
    if growth.get("recombined_own_texts"):
        lines += [
            "",
            "Padded with recombinations of their own texts (no other namespace to draw from), so distractors"
            f" hold halves of gold notes: {', '.join(growth['recombined_own_texts'])}.",
        ]
    for metric, title in (
        ("recall", "Evidence recall"),
        ("full_support", "Full support"),
        ("answer_containment", "Answer containment"),
    ):
        lines += [
            "",
            f"## {title} (%) by store size",
            "",
            "| factor | notes | " + " | ".join(systems) + " |",
            "|---:|---:|" + "---:|" * len(systems),
        ]
        for step in steps:
            cells = [_number(step["systems"][system][metric]) for system in systems]
            lines.append(f"| ×{step['factor']} | {step['notes']:,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Stage one",
        "",
        "| factor | notes | distractors (recombined) | ingest s | evaluate s | p50 ms | p95 ms | mean ms"
        " | median pool | degraded % |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step in steps:
        latency = step["stage_one_ms"]
        lines.append(
            f"| ×{step['factor']} | {step['notes']:,} |"
            f" {step['distractors']:,} ({step['recombined_distractors']:,}) | {_number(step['ingest_seconds'])} |"
            f" {_number(step['evaluate_seconds'])} | {_number(latency['p50'])} | {_number(latency['p95'])} |"
            f" {_number(latency['mean'])} | {_number(step['pool_size_median'], 0)} |"
            f" {_number(None if step['degraded_rate'] is None else 100 * step['degraded_rate'])} |"
        )
    scale = growth.get("scale")
    if scale:
        lines += [
            "",
            f"## Synthetic scale points (benchmarks/bench_scale.py; {scale.get('machine', 'machine not recorded')})",
            "",
            "Recombined real sentences in one namespace, hashing embedder at 384 dimensions: latency only.",
            "",
            "| notes | p50 ms | p95 ms | mean ms |",
            "|---:|---:|---:|---:|",
        ]
        for point in scale["points"]:
            latency = point["stage_one_ms"]
            lines.append(
                f"| {point['notes']:,} | {_number(latency['p50'])} | {_number(latency['p95'])} |"
                f" {_number(latency['mean'])} |"
            )
    lines.append("")
    return "\n".join(lines)


def write_growth(growth: Mapping[str, Any], folder: Path) -> tuple[Path, Path, Path]:
    """Write ``growth.md``, ``growth.json`` and ``growth.png`` into ``folder``.

    Parameters
    ----------
    growth : mapping
        What :func:`run_growth` returns, optionally with ``scale`` added (overlaid on
        the latency panel of the plot).
    folder : Path
        Created when missing.

    Returns
    -------
    tuple of Path
        The Markdown, JSON and PNG paths.
    """
    from pgmem.eval.plots import plot_growth

    folder.mkdir(parents=True, exist_ok=True)
    markdown, data, image = folder / "growth.md", folder / "growth.json", folder / "growth.png"
    markdown.write_text(render_growth_markdown(growth), encoding="utf-8")
    data.write_text(json.dumps(jsonable(growth), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    plot_growth(growth, image, scale=growth.get("scale"))
    return markdown, data, image


# -- the command ------------------------------------------------------------------------


class _Bars:
    """:class:`GrowthProgress` on a rich progress display: one bar per step and phase."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._ingest: Any = None
        self._questions: Any = None

    def step(self, factor: int, spans: int, questions: int) -> None:
        self._ingest = self._progress.add_task(f"×{factor}: ingesting", total=spans)
        self._questions = self._progress.add_task(f"×{factor}: questions", total=questions)

    def ingested(self, spans: int) -> None:
        self._progress.advance(self._ingest, spans)

    def answered(self, questions: int) -> None:
        self._progress.advance(self._questions, questions)


def _load_scale(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"--scale-json {path}: cannot read ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--scale-json {path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    points = data.get("points") if isinstance(data, dict) else None
    if not isinstance(points, list) or not all(
        isinstance(p, dict) and isinstance(p.get("notes"), int) and isinstance(p.get("stage_one_ms"), dict)
        for p in points
    ):
        raise InputError(
            f"--scale-json {path}: must be benchmarks/bench_scale.py output"
            " ({'points': [{'notes': int, 'stage_one_ms': {'p50', 'p95'}}]})"
        )
    scale: dict[str, Any] = data
    return scale


def growth_command(
    args: argparse.Namespace,
    console: Console,
    *,
    connect: Callable[[argparse.Namespace], Any],
    progress: Progress,
) -> int:
    """``pgmem eval-growth``: load, pad, evaluate, write ``growth.md/json/png``, print.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line: ``dataset``, ``data_dir``, ``out``, ``factors``,
        ``limit``, ``namespaces``, ``budget``, ``systems``, ``seed``, ``scale_json``,
        ``embedder``.
    console : rich.console.Console
        Where the report and the written paths are printed.
    connect : callable
        Opens the database connection from ``args`` (``--dsn``, ``--home``); a context
        manager.
    progress : rich.progress.Progress
        The progress display (entered here).

    Returns
    -------
    int
        The exit status (0).
    """
    from pgmem.embeddings import resolve_embedder
    from pgmem.eval.datasets import load_dataset

    for name in ("limit", "namespaces"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigurationError(f"--{name} must be >= 1, got {value}")
    if args.budget < 1:
        raise ConfigurationError(f"--budget must be >= 1, got {args.budget}")
    factors = _check_factors(args.factors)
    scale = _load_scale(Path(args.scale_json)) if args.scale_json else None
    source = load_dataset(args.dataset, Path(args.data_dir))
    corpus = source
    if args.namespaces is not None:
        kept = list(source.spans)[: args.namespaces]
        corpus = dataclasses.replace(
            source,
            spans={name: source.spans[name] for name in kept},
            questions=tuple(q for q in source.questions if q.namespace in kept),
        )
    if args.limit is not None:
        corpus = dataclasses.replace(corpus, questions=corpus.questions[: args.limit])
    systems = args.systems or list(SYSTEMS)
    # Padding is permanent: namespaces of their own, apart from `pgmem eval`'s.
    config = RunConfig(budget=args.budget, namespace_prefix=f"growth-{source.name}-s{args.seed}-", seed=args.seed)
    embedder = resolve_embedder(args.embedder)
    started = time.perf_counter()
    with connect(args) as conn, progress:
        growth = run_growth(
            conn,
            corpus,
            embedder,
            config,
            factors=factors,
            systems=systems,
            seed=args.seed,
            source=source,
            progress=_Bars(progress),
        )
    growth["wall_seconds"] = time.perf_counter() - started
    if scale is not None:
        growth["scale"] = scale
    markdown, data, image = write_growth(growth, Path(args.out))
    console.print(render_growth_markdown(growth), markup=False, highlight=False)
    console.print(f"growth run: {growth['wall_seconds']:.0f} s; written: {markdown}, {data}, {image}")
    return 0
