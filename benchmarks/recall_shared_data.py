"""Evidence recall@8 on the shared LoCoMo dev and MultiHop-RAG data (a benchmark, not a test).

A quick check against ../shared/BASELINES.md, same embedder (the bundled int8 MiniLM):
every question with gold evidence is packed in `relevance` and `calibrated` mode
(budget 8, DESIGN defaults, no family cap) and the mean share of its gold evidence ids
in the pack is printed. The full evaluation harness (`pgmem eval`) supersedes it.

    .venv/bin/python benchmarks/recall_shared_data.py [--data ../shared/data] [--only locomo]

LoCoMo: a note is one turn written "Speaker: text", family = session, time = session
date, one namespace per conversation, categories 1-4. MultiHop-RAG: the shipped demo
corpus (each gold fact a note, family = publisher).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pgmem
from pgmem.demo import NAMESPACE, load_corpus
from pgmem.embeddings import get_embedder

Question = tuple[str, str, list[str], str]  # namespace, question, gold external ids, category


def locomo(conn: object, path: Path, model: pgmem.Embedder) -> list[Question]:
    questions: list[Question] = []
    for conversation in json.loads(path.read_text(encoding="utf-8")):
        namespace = conversation["sample_id"]
        turns = conversation["conversation"]
        spans = []
        session = 1
        while f"session_{session}" in turns:
            when = datetime.strptime(turns[f"session_{session}_date_time"], "%I:%M %p on %d %B, %Y")
            position = 0
            for turn in turns[f"session_{session}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                size = len(text.encode("utf-8"))
                spans.append(
                    pgmem.Span(
                        document_id=f"session_{session}",
                        text=text,
                        start=position,
                        end=position + size,
                        family=f"session_{session}",
                        source_ts=when.replace(tzinfo=UTC),
                        external_id=turn["dia_id"],
                        metadata={"speaker": turn["speaker"]},
                    )
                )
                position += size + 1
            session += 1
        pgmem.ingest(conn, spans, namespace=namespace, embedder=model)  # type: ignore[arg-type]
        for qa in conversation["qa"]:
            if qa.get("category") != 5 and qa.get("evidence"):
                questions.append(
                    (namespace, qa["question"], [e.strip() for e in qa["evidence"]], f"category {qa['category']}")
                )
    return questions


def multihop(conn: object, model: pgmem.Embedder) -> list[Question]:
    spans, questions = load_corpus()
    pgmem.ingest(conn, spans, namespace=NAMESPACE, embedder=model)  # type: ignore[arg-type]
    return [(NAMESPACE, q.question, list(q.evidence), q.type) for q in questions if q.evidence]


def recall(
    conn: object,
    questions: list[Question],
    model: pgmem.Embedder,
    mode: str,
    stage_one: pgmem.StageOneParams,
    derive_hints: bool,
) -> dict[str, float]:
    """Mean recall@8 overall ("all") and per question category."""
    scores: dict[str, list[float]] = {}
    for namespace, question, gold, category in questions:
        pack = pgmem.pack(
            conn,  # type: ignore[arg-type]
            question,
            namespace=namespace,
            mode=mode,
            embedder=model,
            stage_one=stage_one,
            derive_hints=derive_hints,
        )
        packed = {item.external_id for item in pack.items}
        score = sum(1 for g in gold if g in packed) / len(gold)
        scores.setdefault("all", []).append(score)
        scores.setdefault(category, []).append(score)
    return {name: 100 * statistics.fmean(values) for name, values in sorted(scores.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--only", choices=("locomo", "multihop"))
    parser.add_argument("--dsn")
    parser.add_argument("--by-category", action="store_true", help="also print recall per question category")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="JSON",
        help='StageOneParams overrides and derive_hints, e.g. \'{"link_weight": 0, "derive_hints": false}\';'
        " repeat to compare settings",
    )
    args = parser.parse_args()
    if args.dsn is None and "PGMEM_HOME" not in os.environ:
        os.environ["PGMEM_HOME"] = tempfile.mkdtemp(prefix="pgmem-recall-")
    settings = [json.loads(text) for text in args.setting] or [{}]
    model = get_embedder("minilm")
    with pgmem.connect(args.dsn, migrate=True) as conn:
        sets = {
            "LoCoMo dev (categories 1-4)": lambda: locomo(conn, args.data / "locomo" / "locomo_dev5.json", model),
            "MultiHop-RAG sample": lambda: multihop(conn, model),
        }
        for name, load in sets.items():
            if args.only and not name.lower().startswith(args.only[:5]):
                continue
            questions = load()
            for overrides in settings:
                started = time.perf_counter()
                params = dict(overrides)
                derive_hints = bool(params.pop("derive_hints", True))
                stage_one = pgmem.StageOneParams.from_dict(params)
                figures = {
                    mode: recall(conn, questions, model, mode, stage_one, derive_hints)
                    for mode in ("relevance", "calibrated")
                }
                print(
                    f"{name} {json.dumps(overrides)}: {len(questions)} questions, recall@8 relevance"
                    f" {figures['relevance']['all']:.1f}, calibrated {figures['calibrated']['all']:.1f}"
                    f" ({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
                if args.by_category:
                    for category in figures["relevance"]:
                        if category != "all":
                            print(
                                f"    {category:<20} relevance {figures['relevance'][category]:5.1f}"
                                f"   calibrated {figures['calibrated'][category]:5.1f}"
                            )


if __name__ == "__main__":
    main()
