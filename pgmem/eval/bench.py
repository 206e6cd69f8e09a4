"""``pgmem bench``: pack latency per stage, ingest speed, index sizes and memory as one
namespace grows (a benchmark, not a test).

The store is built from real text: sentences of the shared data (LoCoMo turns, HotpotQA
sentences, MultiHop-RAG facts) recombined into new ones — the first half of one
sentence's words, the second half of another's — so the vocabulary and its skew are
real (:func:`recombined`). It grows, in place, to each requested size through
:func:`pgmem.ingest`; notes are deterministic, so a second run on the same server
reuses what the namespace already holds. At each size every question (LoCoMo questions,
categories 1–4) is packed with :func:`pgmem.pack` in two passes; the second, warm pass
gives the figures: p50 / p95 / p99 of the whole call and of each stage the pack's
diagnostics time (embedding the question, stage one, calibrate and pack).

With the hashing embedder (the default here) the vectors carry no meaning: latency only.

``--peers`` runs the side-by-side comparison of :mod:`pgmem.eval.peers` instead (LangChain
and LlamaIndex ``PGVectorStore`` on the same server, vectors and questions; MiniLM by
default, since recall is reported too).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from pgmem.api import ingest, pack
from pgmem.db.connection import connect, conninfo_of
from pgmem.embeddings import Embedder, get_embedder
from pgmem.errors import ConfigurationError
from pgmem.types import Span
from pgmem.validate import check_namespace

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["bench_command", "percentiles", "real_sentences", "recombined", "run_bench"]

#: The stages a pack's diagnostics time, and the whole call.
STAGES = ("embed", "stage_one", "calibrate_and_pack", "pack")
FAMILIES = 50
TABLE_SIZE = "table pgmem.notes (heap + TOAST)"
HNSW_SIZE = "hnsw index of the namespace's model"


def real_sentences(data: Path) -> tuple[list[str], list[str]]:
    """Sentences of the shared data and the LoCoMo questions (categories 1-4)."""
    sentences: list[str] = []
    questions: list[str] = []
    try:
        locomo = json.loads((data / "locomo" / "locomo_dev5.json").read_text(encoding="utf-8"))
        hotpot = json.loads(
            (data / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json").read_text(encoding="utf-8")
        )
        truth = json.loads((data / "multihop_rag_sample" / "ground_truth.json").read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"--data-dir: cannot read the shared data under {data}: {exc}") from None
    for conversation in locomo:
        turns = conversation["conversation"]
        session = 1
        while f"session_{session}" in turns:
            sentences += [turn["text"] for turn in turns[f"session_{session}"]]
            session += 1
        questions += [qa["question"] for qa in conversation["qa"] if qa.get("category") != 5]
    for item in hotpot:
        for _title, paragraph in item["context"]:
            sentences += [s.strip() for s in paragraph if s.strip()]
    sentences += sorted({e["fact"] for v in truth.values() for e in v["evidence_list"]})
    return sentences, questions


def recombined(sentences: Sequence[str], count: int, seed: int = 7) -> list[str]:
    """``count`` new sentences: the first half of one sentence's words, the second half of another's."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        a, b = rng.choice(sentences).split(), rng.choice(sentences).split()
        out.append(" ".join(a[: max(1, len(a) // 2)] + b[len(b) // 2 :]))
    return out


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99 (linear interpolation) and the mean, rounded to µs."""
    array = np.asarray(values, dtype=np.float64)
    return {
        "p50": round(float(np.percentile(array, 50)), 3),
        "p95": round(float(np.percentile(array, 95)), 3),
        "p99": round(float(np.percentile(array, 99)), 3),
        "mean": round(float(array.mean()), 3),
    }


def _spans(texts: Sequence[str], first: int) -> list[Span]:
    return [
        Span(document_id=f"bench-{i}", text=text, start=0, end=len(text.encode("utf-8")), family=f"f{i % FAMILIES}")
        for i, text in enumerate(texts, start=first)
    ]


def _stored(conn: psycopg.Connection[Any], namespace: str) -> int:
    row = conn.execute("SELECT count(*) FROM pgmem.notes WHERE namespace = %s", (namespace,)).fetchone()
    return int(row[0]) if row else 0


def _one(conn: psycopg.Connection[Any], query: str, params: Sequence[Any] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def _sizes(conn: psycopg.Connection[Any], namespace: str) -> dict[str, int]:
    """Bytes of the notes table (with TOAST) and of each of its indexes; the model's HNSW index by name."""
    model_id = _one(conn, "SELECT model_id FROM pgmem.namespaces WHERE namespace = %s", (namespace,))
    rows = conn.execute(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = 'pgmem.notes'::regclass ORDER BY c.relname"
    ).fetchall()
    sizes = {f"index {name}": int(size) for name, size in rows}
    sizes[TABLE_SIZE] = int(_one(conn, "SELECT pg_table_size('pgmem.notes')"))
    sizes[HNSW_SIZE] = sizes.get(f"index notes_embedding_hnsw_m{model_id}", 0)
    return sizes


def _memory(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Client peak RSS, the server's shared_buffers, and the server backend's RSS when local."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    memory: dict[str, Any] = {
        "client_peak_rss_mb": round(peak / (1024 * 1024 if platform.system() == "Darwin" else 1024), 1),
        "shared_buffers": _one(conn, "SHOW shared_buffers"),
    }
    memory["server_backend_rss_mb"] = None  # a server over TCP may be another machine: not measured
    if conn.info.host.startswith("/"):  # a Unix socket: the backend is a process of this machine
        import psutil  # type: ignore[import-untyped]  # the embedded server's dependency

        backend = psutil.Process(int(_one(conn, "SELECT pg_backend_pid()")))
        memory["server_backend_rss_mb"] = round(backend.memory_info().rss / 2**20, 1)
    return memory


def _reindex_seconds(conn: psycopg.Connection[Any], namespace: str) -> dict[str, float]:
    """Seconds to rebuild the model's HNSW index and the lexical GIN index from scratch."""
    model_id = _one(conn, "SELECT model_id FROM pgmem.namespaces WHERE namespace = %s", (namespace,))
    timings = {}
    for index in (f"notes_embedding_hnsw_m{model_id}", "notes_lexemes_gin"):
        started = time.perf_counter()
        conn.execute(f"REINDEX INDEX pgmem.{index}")  # names built from an integer and a constant
        timings[index] = round(time.perf_counter() - started, 2)
    return timings


def _time_questions(
    conn: psycopg.Connection[Any], namespace: str, questions: Sequence[str], embedder: Embedder
) -> dict[str, dict[str, float]]:
    """Every question packed twice (budget 8, calibrated); the warm pass's percentiles per stage."""
    for question in questions:  # first pass: caches and plans
        pack(conn, question, namespace=namespace, budget=8, embedder=embedder)
    samples: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for question in questions:
        started = time.perf_counter()
        result = pack(conn, question, namespace=namespace, budget=8, embedder=embedder)
        samples["pack"].append((time.perf_counter() - started) * 1000)
        for stage in STAGES[:-1]:
            samples[stage].append(float(result.diagnostics.timings_ms[stage]))
    return {stage: percentiles(values) for stage, values in samples.items()}


def run_bench(
    conn: psycopg.Connection[Any],
    sizes: Sequence[int],
    questions: Sequence[str],
    sentences: Sequence[str],
    embedder: Embedder,
    *,
    namespace: str = "bench",
    batch: int = 5000,
    writers: int = 1,
    reindex: bool = False,
    report: Callable[[dict[str, Any]], None] = lambda point: None,
) -> list[dict[str, Any]]:
    """Grow ``namespace`` to each of ``sizes`` notes and measure there; one dict per size.

    ``writers`` > 1 ingests that many batches at once, each writer on its own connection to
    ``conn``'s server (a thread each; batch i goes to writer i mod ``writers``), as concurrent
    writers of one namespace do: notes of batches written at once do not link to each other.
    """
    check_namespace(namespace)
    if not sizes or min(sizes) < 1 or list(sizes) != sorted(set(sizes)):
        raise ConfigurationError(f"--notes must be increasing positive note counts, got {list(sizes)}")
    if batch < 1:
        raise ConfigurationError(f"--batch must be >= 1, got {batch}")
    if writers < 1:
        raise ConfigurationError(f"--writers must be >= 1, got {writers}")
    if len(questions) < 1:
        raise ConfigurationError("no questions to time")
    texts = recombined(sentences, max(sizes))
    points = []
    for size in sizes:
        done = _stored(conn, namespace)
        if done > size:  # notes are never removed: the namespace is past this size already
            continue
        started = time.perf_counter()
        batches = [_spans(texts[first : min(first + batch, size)], first) for first in range(done, size, batch)]
        _write(conn, batches, namespace, embedder, writers)
        seconds = time.perf_counter() - started
        added = max(size - done, 0)
        if conn.autocommit:  # VACUUM cannot run inside a transaction block
            conn.execute("VACUUM ANALYZE pgmem.notes")
        point: dict[str, Any] = {
            "notes": _stored(conn, namespace),
            "ingested": added,
            "ingest_seconds": round(seconds, 1),
            "ingest_notes_per_second": round(added / seconds, 1) if added and seconds > 0 else None,
            "ingest_writers": writers,
            "questions": len(questions),
            "latency_ms": _time_questions(conn, namespace, questions, embedder),
            "bytes": _sizes(conn, namespace),
            "memory": _memory(conn),
        }
        if reindex:
            point["reindex_seconds"] = _reindex_seconds(conn, namespace)
        points.append(point)
        report(point)
    return points


def _write(
    conn: psycopg.Connection[Any], batches: Sequence[list[Span]], namespace: str, embedder: Embedder, writers: int
) -> None:
    """``pgmem.ingest`` each batch: one after another on ``conn``, or by ``writers`` connections at once."""
    if writers == 1 or len(batches) < 2:
        for spans in batches:
            ingest(conn, spans, namespace=namespace, embedder=embedder)
        return
    with writer_connections(conn, writers) as connections:
        write_at_once(connections, batches, namespace, embedder)


@contextmanager
def writer_connections(conn: psycopg.Connection[Any], writers: int) -> Iterator[list[psycopg.Connection[Any]]]:
    """``conn`` and ``writers - 1`` more connections to its server, database and role (closed after)."""
    connections = [conn]
    try:
        for _ in range(writers - 1):
            connections.append(connect(conninfo_of(conn), migrate=False))
        yield connections
    finally:
        for extra in connections[1:]:
            extra.close()


def write_at_once(
    connections: Sequence[psycopg.Connection[Any]], batches: Sequence[list[Span]], namespace: str, embedder: Embedder
) -> int:
    """``pgmem.ingest`` the batches, batch i by connection i mod len(connections), each
    connection in its own thread; the notes inserted. A writer's error is raised after
    every writer has stopped."""
    count = len(connections)

    def write(index: int) -> int:
        return sum(
            ingest(connections[index], spans, namespace=namespace, embedder=embedder).inserted
            for spans in batches[index::count]
        )

    with ThreadPoolExecutor(max_workers=count) as pool:
        return sum(pool.map(write, range(count)))


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _machine(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_average": load_average(),
        "postgresql": _one(conn, "SHOW server_version"),
        "pgvector": _one(conn, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
    }


def _print_point(console: Console, point: dict[str, Any]) -> None:
    latency = point["latency_ms"]
    console.print(
        f"[bold]{point['notes']:,} notes[/bold]: ingest {point['ingested']:,} notes in {point['ingest_seconds']} s"
        f" ({point['ingest_notes_per_second']} notes/s, {point['ingest_writers']} writer(s));"
        f" {point['questions']} questions, warm pass (ms):"
    )
    for stage in STAGES:
        values = latency[stage]
        console.print(f"  {stage:<20} p50 {values['p50']:8.2f}   p95 {values['p95']:8.2f}   p99 {values['p99']:8.2f}")
    sizes = point["bytes"]
    hnsw, table = sizes[HNSW_SIZE], sizes[TABLE_SIZE]
    console.print(f"  hnsw index {hnsw / 2**20:.1f} MB, table {table / 2**20:.1f} MB; memory {point['memory']}")
    if "reindex_seconds" in point:
        console.print(f"  index rebuild (s): {point['reindex_seconds']}")


def latency_plot(width: float, height: float, panels: int = 1) -> tuple[Any, Any]:
    """A figure and its axes (one per panel, side by side) for plots against store size (the 'eval' extra)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ConfigurationError("--plot needs the 'eval' extra: pip install 'pgmem[eval]'") from exc
    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots(1, panels, squeeze=False)[0]


def format_size_axis(axis: Any, *, ylabel: str, title: str, legend_size: float = 10) -> None:
    """Log-scale store size, values from zero, grid, legend and title."""
    axis.set_xscale("log")
    axis.set_xlabel("notes in the namespace (log scale)")
    axis.set_ylabel(ylabel)
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=legend_size)
    axis.set_title(title)


def plot_bench(points: Sequence[dict[str, Any]], path: Path) -> Path:
    """Stage-one and whole-pack latency (p50, p95) against store size, as a PNG."""
    figure, (axis,) = latency_plot(6.4, 4.0)
    notes = [point["notes"] for point in points]
    for stage, colour in (("stage_one", "tab:blue"), ("pack", "tab:orange")):
        for quantile, style in (("p50", "-o"), ("p95", "--o")):
            values = [point["latency_ms"][stage][quantile] for point in points]
            axis.plot(notes, values, style, color=colour, label=f"{stage} {quantile}")
    format_size_axis(axis, ylabel="ms (warm pass)", title="pgmem pack latency against store size")
    figure.savefig(path, dpi=120)
    return path


def bench_command(args: argparse.Namespace, console: Console, *, connect: Callable[[argparse.Namespace], Any]) -> int:
    """The ``pgmem bench`` subcommand."""
    try:
        sizes = [int(part) for part in str(args.notes).split(",") if part.strip()]
    except ValueError:
        raise ConfigurationError(f"--notes must be comma-separated integers, got {args.notes!r}") from None
    if args.questions < 200:
        console.print(f"[yellow]note: {args.questions} questions (the figures in docs/ use at least 200)[/yellow]")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if getattr(args, "peers", False):
        return _peers(args, console, sizes, out, connect)
    sentences, all_questions = real_sentences(Path(args.data_dir))
    questions = all_questions[: args.questions]
    embedder = get_embedder(args.embedder or "hashing:384")
    with connect(args) as conn:
        machine = _machine(conn)
        points = run_bench(
            conn,
            sizes,
            questions,
            sentences,
            embedder,
            namespace=args.namespace,
            batch=args.batch,
            writers=args.writers,
            reindex=args.reindex,
            report=lambda point: _print_point(console, point),
        )
        machine["load_average_after"] = load_average()
    result = {"benchmark": "pgmem bench", "embedder": embedder.name, "machine": machine, "points": points}
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    written = [out / "bench.json"]
    if args.plot:
        written.append(plot_bench(points, out / "bench.png"))
    console.print(f"written: {', '.join(map(str, written))}")
    return 0


def _peers(
    args: argparse.Namespace,
    console: Console,
    sizes: Sequence[int],
    out: Path,
    connect: Callable[[argparse.Namespace], Any],
) -> int:
    """``pgmem bench --peers`` (pgmem.eval.peers); MiniLM unless --embedder says otherwise."""
    from pgmem.eval.peers import peers_command, plot_peers, require_peers

    require_peers()  # before starting a server
    embedder = get_embedder(args.embedder or "minilm")
    with connect(args) as conn:
        machine = _machine(conn)

        def save(result: dict[str, Any]) -> None:
            machine["load_average_after"] = load_average()
            report = {"benchmark": "pgmem bench --peers", "embedder": embedder.name, "machine": machine, **result}
            (out / "peers.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

        result = peers_command(args, console, conn, sizes, embedder, save)
    written = [out / "peers.json"]
    if args.plot:
        written.append(plot_peers(result["points"], out / "peers.png"))
    console.print(f"written: {', '.join(map(str, written))}")
    return 0
