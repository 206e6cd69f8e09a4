"""Throughput of the write-path enricher on LoCoMo conversation turns.

Every turn becomes a ``SpanInput`` (text = the turn, metadata = speaker and session,
source_ts = the session's date), and ``RuleEnricher.enrich`` runs over all of them in
one thread. Embedding is not included. The resolution caches of the time extractor
are cleared before every pass, so each pass is what a fresh process ingesting the
corpus would see.

    .venv/bin/python benchmarks/bench_enrich.py [--data PATH] [--passes N]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from pgmem.ingestion import times
from pgmem.ingestion.enricher import RuleEnricher, SpanInput

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()

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
