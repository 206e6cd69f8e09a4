"""Build pgmem/data/multihop_rag_demo.json from the MultiHop-RAG sample in ../shared/data.

The sample has no article bodies, only the quoted gold facts, so each distinct fact is
its own document (a span covering it whole) with its article's publisher, title, URL,
author and date. Facts of one article are not adjacent text in the source, so they are
not given local links. Run from the repository root:

    python tools/build_demo_data.py [../shared/data/multihop_rag_sample]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SOURCE = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/multihop_rag_sample")
TARGET = Path("pgmem/data/multihop_rag_demo.json")


def main() -> None:
    queries = json.loads((SOURCE / "queries.json").read_text(encoding="utf-8"))["queries"]
    truth = json.loads((SOURCE / "ground_truth.json").read_text(encoding="utf-8"))
    facts: dict[tuple[str, str], dict[str, str]] = {}
    for query in queries:
        for evidence in truth[query["id"]]["evidence_list"]:
            key = (evidence["url"], evidence["fact"])
            if key not in facts:
                facts[key] = {"id": f"F{len(facts) + 1:03d}", "text": evidence["fact"]} | {
                    field: evidence[field] for field in ("source", "title", "url", "author", "category", "published_at")
                }
    questions = [
        {
            "id": query["id"],
            "question": query["question"],
            "type": query["question_type"],
            "answer": truth[query["id"]]["answer"],
            "evidence": sorted({facts[(e["url"], e["fact"])]["id"] for e in truth[query["id"]]["evidence_list"]}),
        }
        for query in queries
    ]
    document = {
        "dataset": "MultiHop-RAG (Tang & Yang, COLM 2024), 500-question sample",
        "licence": "ODC-BY 1.0; see ATTRIBUTION.md",
        "facts": list(facts.values()),
        "questions": questions,
    }
    TARGET.write_text(json.dumps(document, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{TARGET}: {len(facts)} facts, {len(questions)} questions")


if __name__ == "__main__":
    main()
