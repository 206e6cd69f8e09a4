"""Why pgmem's rebuild trailed pack() alone at --ask end: the archive's document layout.

For each LoCoMo dev conversation the turns are ingested four ways and every answerable
question is packed from each (50 notes, a 4,000-token budget, the bundled MiniLM
embedder), printing evidence recall:

* ``message`` — as the compaction archive wrote them until it changed: one document per message,
  family ``user``, context ``user user, round N`` (no neighbours, no links);
* ``message-time`` — the same with the speaker, session and date as context and source time;
* ``session`` — one document per session, the turns as its spans in order (as ``pack``
  alone reads them), archive family and context;
* ``trajectory`` — one document for the whole trajectory, the turns as its spans in order
  (the layout ``pgmem.compaction.archive`` writes now).

Stage one brings the previous and next span of a document along and boosts linked
neighbours; with one document per message neither can happen.

    .venv/bin/python benchmarks/compaction_archive_layout.py [--conversations 2] [--home DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

import pgmem
from pgmem.embeddings import CachedEmbedder, resolve_embedder
from pgmem.eval.datasets import load_dataset
from pgmem.ingestion.enricher import context_descriptor

LAYOUTS = ("message", "message-time", "session", "trajectory")
#: Byte stride between sessions in the one-document trajectory layout (sessions are shorter).
SESSION_STRIDE = 1_000_000


def layout(name: str, index: int, span: pgmem.Span) -> pgmem.Span:
    fields = {"text": span.text, "family": "user", "role": "dialogue", "context": f"user user, round {index}"}
    if name == "message":
        return pgmem.Span(document_id=f"m{index}", start=0, end=len(span.text.encode()), **fields)
    if name == "message-time":
        fields["context"] = context_descriptor(span.metadata, span.source_ts)
        return pgmem.Span(
            document_id=f"m{index}", start=0, end=len(span.text.encode()), source_ts=span.source_ts, **fields
        )
    if name == "session":
        return pgmem.Span(document_id=span.document_id, start=span.start, end=span.end, **fields)
    shift = SESSION_STRIDE * int(span.document_id.rsplit("_", 1)[-1])
    return pgmem.Span(document_id="trajectory", start=span.start + shift, end=span.end + shift, **fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--home", help="embedded server folder (default: a fresh temporary one)")
    args = parser.parse_args()
    corpus = load_dataset("locomo", Path(args.data_dir))
    embedder = CachedEmbedder(resolve_embedder(None))
    home = args.home or tempfile.mkdtemp(prefix="pgmem-layout-")
    conn = pgmem.connect(None, home=home)
    recall: Counter[str] = Counter()
    asked = 0
    for namespace in list(corpus.spans)[: args.conversations]:
        spans = corpus.spans[namespace]
        for name in LAYOUTS:
            laid = [layout(name, i, s) for i, s in enumerate(spans)]
            pgmem.ingest(conn, laid, namespace=f"{namespace}.{name}", embedder=embedder)
        text = {str(s.external_id): s.text for s in spans}
        for q in corpus.questions:
            gold = [g for g in q.gold if g in text]
            if q.namespace != namespace or q.adversarial or not gold:
                continue
            asked += 1
            for name in LAYOUTS:
                items = pgmem.pack(
                    conn, q.question, namespace=f"{namespace}.{name}", budget=50, token_budget=4000, embedder=embedder
                ).items
                packed = {i.text for i in items}
                recall[name] += sum(1 for g in gold if text[g] in packed) / len(gold)
        print(namespace, {name: round(100 * recall[name] / asked, 1) for name in LAYOUTS}, flush=True)
    print(f"evidence recall (%) over {asked} questions:")
    for name in LAYOUTS:
        print(f"  {name:14s} {100 * recall[name] / asked:.1f}")


if __name__ == "__main__":
    main()
