"""Sweep the packer's settings on the shared data: one stage-one pool per question, many packs.

    .venv/bin/python tools/sweep_packing.py locomo multihop hotpotqa --data-dir ../shared/data \
        [--home DIR | --dsn DSN] [--embedder minilm] [--out sweep.json]

For every answerable question, stage one runs once (the statement ``pgmem.pack`` runs,
hints derived from the question, DESIGN defaults); the pool is then calibrated and
packed under every combination of the packer's settings — ``order`` (``final``: the
seed's scan; ``decayed``: each pick maximises the decayed score), ``overlap_decay``,
``family_cap`` — in the ``calibrated`` and ``relevance`` modes, at budget 8. The
evidence recall of each setting (overall and per category) is printed as Markdown and
written as JSON, with the roles found in each corpus (role quotas can only matter where
there is more than one). The corpora are ingested idempotently under the ``eval-``
prefix, so a store built by ``pgmem eval`` is reused.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from pgmem.db.connection import connect
from pgmem.embeddings import get_embedder
from pgmem.eval.datasets import load_dataset
from pgmem.eval.metrics import QuestionResult, summarise
from pgmem.eval.runner import RunConfig, answerable_pools
from pgmem.params import PackParams
from pgmem.retrieval.pipeline import finish_pack

ORDERS = ("final", "decayed")
DECAYS = (0.0, 0.25, 0.5, 1.0, 2.0)
FAMILY_CAPS = (None, 2, 3, 4)
MODES = ("calibrated", "relevance")


def sweep(conn: Any, name: str, data_dir: Path, embedder: Any) -> dict[str, Any]:
    corpus = load_dataset(name, data_dir)
    config = RunConfig()
    # The same pieces pgmem.pack and the eval runner compose: one pool per question, then
    # every setting finishes its own pack from that pool.
    questions, requests, pools = answerable_pools(conn, corpus, embedder, config)
    namespaces = [config.namespace_prefix + namespace for namespace in corpus.spans]
    roles = dict(
        conn.execute(
            "SELECT role, count(*) FROM pgmem.notes WHERE namespace = ANY(%s) GROUP BY role ORDER BY 2 DESC",
            [namespaces],
        ).fetchall()
    )
    rows = []
    for mode, order, decay, cap in itertools.product(MODES, ORDERS, DECAYS, FAMILY_CAPS):
        params = PackParams(order=order, overlap_decay=decay, family_cap=cap)
        results = []
        for question, request, pool in zip(questions, requests, pools, strict=True):
            items = finish_pack(dataclasses.replace(request, mode=mode, packing=params), pool).items
            results.append(
                QuestionResult(
                    question_id=question.id,
                    category=question.category,
                    gold=question.gold,
                    packed=tuple(item.external_id or item.note_id for item in items),
                    packed_texts=tuple(item.text for item in items),
                    answers=question.answers,
                )
            )
        summary = summarise(results)
        rows.append(
            {
                "mode": mode,
                "order": order,
                "overlap_decay": decay,
                "family_cap": cap,
                "recall": summary.recall,
                "by_category": {c: s.recall for c, s in summary.by_category.items()},
            }
        )
    return {"dataset": name, "questions": len(questions), "roles": roles, "rows": rows}


def render(result: dict[str, Any]) -> str:
    categories = sorted({c for row in result["rows"] for c in row["by_category"]})
    lines = [
        f"## {result['dataset']} ({result['questions']} questions; roles given in the data: {result['roles']})",
        "",
        "| mode | order | decay | family cap | recall | " + " | ".join(categories) + " |",
        "|---|---|---|---|---|" + "---|" * len(categories),
    ]
    for row in result["rows"]:
        cells = [f"{row['by_category'][c]:.1f}" for c in categories]
        lines.append(
            f"| {row['mode']} | {row['order']} | {row['overlap_decay']} | {row['family_cap'] or 'none'} |"
            f" {row['recall']:.1f} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--dsn")
    parser.add_argument("--home")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--out", default="sweep.json")
    args = parser.parse_args(argv)
    embedder = get_embedder(args.embedder)
    results = []
    with connect(args.dsn, home=args.home, migrate=True) as conn:
        for name in args.datasets:
            result = sweep(conn, name, Path(args.data_dir), embedder)
            results.append(result)
            print(render(result), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
