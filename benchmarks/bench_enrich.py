"""Throughput of the write-path enricher on LoCoMo conversation turns.

Every turn becomes a ``SpanInput`` (text = the turn, metadata = speaker and session,
source_ts = the session's date), and ``RuleEnricher.enrich`` runs over all of them in
one thread. Embedding is not included. The resolution caches of the time extractor
are cleared before every pass, so each pass is what a fresh process ingesting the
corpus would see.

    .venv/bin/python benchmarks/bench_enrich.py [--data PATH] [--passes N]

``--corpora DIR`` enriches instead every span of the shared corpora under DIR (LoCoMo,
MultiHop-RAG, HotpotQA, as their loaders give them) and ``--recombined`` sentences of the
bulk benchmarks' corpus, and prints the CPU per span (``time.process_time``, the median
pass: it holds on a loaded machine) per source and for all; ``--digest`` adds a digest of
every facet, to compare two trees' enrichers (the same digest, the same facets):

    PYTHONPATH=.:benchmarks python benchmarks/bench_enrich.py --corpora ../shared/data --digest
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pgmem
from pgmem.ingestion import times
from pgmem.ingestion.enricher import RuleEnricher, SpanInput
from pgmem.ingestion.spans import validate_span
from pgmem.ingestion.writer import span_input

DEFAULT_DATA = Path("/work/shared/data/locomo/locomo_dev5.json")
_SESSION = re.compile(r"^session_(\d+)$")


def session_time(value: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware UTC datetime."""
    return datetime.strptime(" ".join(value.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load_turns(path: Path) -> list[SpanInput]:
    spans: list[SpanInput] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        for key, turns in conversation.items():
            found = _SESSION.match(key)
            if found is None or not isinstance(turns, list):
                continue
            number = int(found.group(1))
            when = session_time(conversation[f"{key}_date_time"])
            for turn in turns:
                spans.append(
                    SpanInput(
                        text=turn["text"],
                        family=turn["speaker"],
                        source_ts=when,
                        role=None,
                        confidence=None,
                        context=None,
                        metadata={"speaker": turn["speaker"], "session": number},
                    )
                )
    return spans


def clear_caches() -> None:
    times._resolve.cache_clear()
    times._parse_absolute.cache_clear()


def span_inputs(spans: list[pgmem.Span], namespace: str) -> list[SpanInput]:
    """What the enricher sees of each span (validated as the write path validates it)."""
    return [span_input(validate_span(index, span, namespace)) for index, span in enumerate(spans)]


def corpora(data: Path, recombined: int, passes: int, digest: bool) -> None:
    """CPU per span over the shared corpora and recombined sentences (``--corpora``)."""
    from bench_lexical import synthetic
    from bench_scale import spans as bulk_spans

    from pgmem.eval.bench import real_sentences
    from pgmem.eval.datasets import load_dataset

    sources: dict[str, list[SpanInput]] = {}
    for name in ("locomo", "multihop", "hotpotqa"):
        corpus = load_dataset(name, data)
        sources[name] = [span for ns, spans in corpus.spans.items() for span in span_inputs(list(spans), ns)]
    if recombined:
        texts = synthetic(real_sentences(data)[0], recombined, seed=0)
        sources["recombined"] = span_inputs(bulk_spans(texts, 0), "recombined")
    enricher = RuleEnricher()
    report: dict[str, float | int | str] = {}
    facets_digest = hashlib.sha256()
    total_cpu, total_spans = 0.0, 0
    for name, inputs in sources.items():
        cpu = []
        for _ in range(passes):
            started = time.process_time()
            facets = [enricher.enrich(span) for span in inputs]
            cpu.append(time.process_time() - started)
        report[f"{name}_spans"] = len(inputs)
        report[f"{name}_ms_per_span"] = round(1000 * statistics.median(cpu) / len(inputs), 4)
        total_cpu += statistics.median(cpu)
        total_spans += len(inputs)
        facets_digest.update(repr(facets).encode())
    report["all_ms_per_span"] = round(1000 * total_cpu / total_spans, 4)
    if digest:
        report["digest"] = facets_digest.hexdigest()[:16]
    print(json.dumps(report, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--corpora", type=Path, help="the shared data folder: CPU per span over all its corpora")
    parser.add_argument("--recombined", type=int, default=20_000, help="with --corpora: recombined sentences too")
    parser.add_argument("--digest", action="store_true", help="with --corpora: a digest of every facet")
    args = parser.parse_args()
    if args.corpora is not None:
        corpora(args.corpora, args.recombined, args.passes, args.digest)
        return

    spans = load_turns(args.data)
    enricher = RuleEnricher()
    enricher.enrich(spans[0])  # import-time and first-call costs are not throughput
    rates = []
    for _ in range(args.passes):
        clear_caches()
        started = time.perf_counter()
        results = [enricher.enrich(span) for span in spans]
        rates.append(len(spans) / (time.perf_counter() - started))

    tagged = sum(1 for r in results if r.time_tags)
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"turns: {len(spans)} from {args.data.name}; passes: {args.passes} (caches cleared before each)")
    print(f"spans/s single-threaded: median {statistics.median(rates):,.0f}, min {min(rates):,.0f}")
    print(
        f"per turn: {sum(len(r.entities) for r in results) / len(spans):.2f} entities,"
        f" {sum(len(r.time_tags) for r in results) / len(spans):.2f} time tags ({tagged} turns with one),"
        f" {sum(len(r.keywords) for r in results) / len(spans):.2f} keywords,"
        f" {sum(len(r.handles) for r in results) / len(spans):.2f} handles"
    )
    print("roles:", dict(Counter(r.role for r in results).most_common()))


if __name__ == "__main__":
    main()
