"""``pgmem eval-growth``: arguments in, a growth run with progress bars, files out."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmem.errors import ConfigurationError, InputError
from pgmem.eval.growth.render import render_growth_markdown, write_growth
from pgmem.eval.growth.run import check_factors, run_growth
from pgmem.eval.runner import SYSTEMS, RunConfig

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


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
    factors = check_factors(args.factors)
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
