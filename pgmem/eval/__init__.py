"""The evaluation harness: dataset adapters that turn public QA data into spans and questions."""

from __future__ import annotations

from pgmem.eval.datasets import (
    DATASETS,
    EvalCorpus,
    EvalQuestion,
    load_dataset,
    load_hotpotqa,
    load_jsonl,
    load_locomo,
    load_multihop,
)

__all__ = [
    "DATASETS",
    "EvalCorpus",
    "EvalQuestion",
    "load_dataset",
    "load_hotpotqa",
    "load_jsonl",
    "load_locomo",
    "load_multihop",
]
