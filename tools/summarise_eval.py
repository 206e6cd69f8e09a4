"""Summarise several `pgmem eval` reports (report.json) into Markdown tables.

    python tools/summarise_eval.py eval-out/*/report.json

One row per report: dataset, condition, recall of each system, calibrated − relevance
and beta − relevance with their intervals, and, under attack, each system's poisoned
share and clean recall (the same tables `pgmem eval` writes to summary.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pgmem.eval.report import render_summary


def main(paths: list[str]) -> None:
    reports = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    print(render_summary(reports), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
