"""``pgmem demo``: a real corpus, a few questions, calibration at work, one degraded pool.

The corpus is the MultiHop-RAG sample shipped as package data (ODC-BY 1.0, see
``pgmem/data/ATTRIBUTION.md``): 438 quoted news facts from 326 articles of 37
publishers; the family of a note is its publisher.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from rich.console import Console
from rich.progress import Progress

from pgmem.api import ingest, pack
from pgmem.embeddings import Embedder, resolve_embedder
from pgmem.render import print_pack
from pgmem.types import Pack, Span

NAMESPACE = "demo-multihop"
TINY_NAMESPACE = "demo-tiny"


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    type: str
    answer: str
    evidence: tuple[str, ...]


def load_corpus() -> tuple[list[Span], list[Question]]:
    """The demo spans (one per fact) and the questions with their gold fact ids."""
    raw = resources.files("pgmem.data").joinpath("multihop_rag_demo.json").read_text(encoding="utf-8")
    data = json.loads(raw)
    spans = [
        Span(
            document_id=fact["id"],
            text=fact["text"],
            start=0,
            end=len(fact["text"].encode("utf-8")),
            family=fact["source"],
            source_ts=fact["published_at"],
            external_id=fact["id"],
            context=f"{fact['source']} › {fact['title']}",
            metadata={"url": fact["url"], "title": fact["title"], "author": fact["author"]},
        )
        for fact in data["facts"]
    ]
    questions = [
        Question(q["id"], q["question"], q["type"], q["answer"], tuple(q["evidence"])) for q in data["questions"]
    ]
    return spans, questions


def _recall(evidence: Pack, gold: tuple[str, ...]) -> float:
    packed = {item.external_id for item in evidence.items}
    return sum(1 for g in gold if g in packed) / len(gold)


def run_demo(
    conn: psycopg.Connection[Any],
    console: Console | None = None,
    embedder: Embedder | str | None = None,
) -> dict[str, Any]:
    """Run the demo on ``conn`` and print it; returns the figures it printed."""
    console = console or Console()
    model = resolve_embedder(embedder)
    spans, questions = load_corpus()
    answerable = [q for q in questions if q.evidence]
    console.rule("[bold]pgmem demo[/bold]: MultiHop-RAG sample (ODC-BY 1.0), family = publisher")

    started = time.perf_counter()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("embedding and writing notes", total=len(spans))
        result = ingest(
            conn,
            spans,
            namespace=NAMESPACE,
            embedder=model,
            progress=lambda n: progress.advance(task, n),
        )
    articles = len({s.metadata["url"] for s in spans if s.metadata})
    families = len({s.family for s in spans})
    console.print(
        f"ingested {len(spans)} facts from {articles} articles of {families}"
        f" publishers into namespace [bold]{NAMESPACE}[/bold]: {result.inserted} new,"
        f" {result.skipped} already there ({time.perf_counter() - started:.1f} s, model {model.name})\n"
    )

    shown = []
    for kind in ("inference_query", "comparison_query", "temporal_query"):
        q = next(q for q in answerable if q.type == kind)
        shown.append(q)
        console.print(
            f"[bold]{kind}[/bold] {q.id}: {q.question}\n"
            f"[dim]gold facts: {', '.join(q.evidence)}; answer: {q.answer}[/dim]"
        )
        print_pack(
            console,
            pack(conn, q.question, namespace=NAMESPACE, embedder=model),
            gold=set(q.evidence),
        )

    console.rule("calibration at work: every answerable question, both modes, same pool")
    recalls: dict[str, list[float]] = {"calibrated": [], "relevance": []}
    latencies: list[float] = []
    changed: list[tuple[float, Question, Pack, Pack]] = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("packing", total=len(answerable))
        for q in answerable:
            tick = time.perf_counter()
            calibrated = pack(conn, q.question, namespace=NAMESPACE, embedder=model)
            latencies.append((time.perf_counter() - tick) * 1000)
            relevance = pack(conn, q.question, namespace=NAMESPACE, embedder=model, mode="relevance")
            recalls["calibrated"].append(_recall(calibrated, q.evidence))
            recalls["relevance"].append(_recall(relevance, q.evidence))
            if [i.note_id for i in calibrated.items] != [i.note_id for i in relevance.items]:
                gain = recalls["calibrated"][-1] - recalls["relevance"][-1]
                changed.append((gain, q, calibrated, relevance))
            progress.advance(task)
    mean = {mode: 100 * statistics.fmean(values) for mode, values in recalls.items()}
    better = sum(1 for gain, *_ in changed if gain > 0)
    worse = sum(1 for gain, *_ in changed if gain < 0)
    degraded = sum(1 for *_, c, _r in changed if c.diagnostics.degraded)
    console.print(
        f"{len(answerable)} questions with gold evidence, budget 8: evidence recall"
        f" calibrated [bold]{mean['calibrated']:.1f}[/bold] vs relevance-only [bold]{mean['relevance']:.1f}[/bold];"
        f" the family regulariser reordered {len(changed)} packs"
        f" ({better} gained recall, {worse} lost, {degraded} degraded);"
        f" pack latency median {statistics.median(latencies):.1f} ms, p95"
        f" {statistics.quantiles(latencies, n=20)[-1]:.1f} ms (embedding included)\n"
    )
    if changed:
        gain, q, calibrated, relevance = max(changed, key=lambda c: (abs(c[0]), c[1].id))
        console.print(
            f"the pack calibration changed most: {q.id}: {q.question}\n[dim]gold facts: {', '.join(q.evidence)}[/dim]"
        )
        entered = [i for i in calibrated.items if i.note_id not in {r.note_id for r in relevance.items}]
        left = [i for i in relevance.items if i.note_id not in {c.note_id for c in calibrated.items}]
        for item in entered:
            f = calibrated.diagnostics.family(item.family)
            console.print(
                f"  [green]+ {item.external_id}[/green] ({item.family}: m={f.count}, z={f.z:+.2f},"
                f" reg={f.regularizer:+.3f}) {item.text[:90]}"
            )
        for item in left:
            f = calibrated.diagnostics.family(item.family)
            console.print(
                f"  [red]- {item.external_id}[/red] ({item.family}: m={f.count}, z={f.z:+.2f},"
                f" reg={f.regularizer:+.3f}) {item.text[:90]}"
            )
        print_pack(console, calibrated, gold=set(q.evidence))

    console.rule("a degraded pool: a tiny namespace")
    tiny = [s for s in spans if s.family == "The Verge"][:3]
    ingest(conn, tiny, namespace=TINY_NAMESPACE, embedder=model)
    small = pack(conn, shown[0].question, namespace=TINY_NAMESPACE, embedder=model)
    print_pack(console, small)
    console.print(
        "With only "
        f"{small.diagnostics.pool_size} candidates the pool says nothing about families, so calibration"
        " switched itself off: the pack is exactly the relevance-only pack."
    )
    return {
        "recall": mean,
        "changed": len(changed),
        "median_pack_ms": statistics.median(latencies),
        "degraded_reasons": small.diagnostics.degraded_reasons,
    }
