"""Summarise several `pgmem eval` reports (report.json) into Markdown tables.

    python tools/summarise_eval.py eval-out/*/report.json

One row per report: dataset, condition, recall of each system, calibrated − relevance
with its interval, and, under attack, each system's poisoned share and clean recall.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SYSTEMS = ("calibrated", "relevance", "raw_bonus", "dense", "lexical", "rrf")


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _condition(report: dict[str, Any]) -> str:
    cap = report["config"]["packing"].get("family_cap")
    return report.get("condition", "clean") + (f", family cap {cap}" if cap else "")


def main(paths: list[str]) -> None:
    reports = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    reports.sort(key=lambda r: (r["corpus"]["name"], _condition(r)))
    print("| data | condition | " + " | ".join(SYSTEMS) + " | calibrated − relevance |")
    print("|---|---|" + "---|" * len(SYSTEMS) + "---|")
    for r in reports:
        recall = [_cell(r["systems"].get(s, {}).get("recall")) for s in SYSTEMS]
        diff = next((d for d in r["differences"] if d["metric"] == "calibrated − relevance: recall"), None)
        shown = f"{diff['mean']:+.2f} [{diff['low']:+.2f}, {diff['high']:+.2f}]" if diff else "—"
        print(f"| {r['corpus']['name']} | {_condition(r)} | " + " | ".join(recall) + f" | {shown} |")
    attacked = [r for r in reports if r.get("attack")]
    if attacked:
        print()
        print("| data | condition | system | packs with poison | poisoned share | clean recall (attacked) |")
        print("|---|---|---|---|---|---|")
        for r in attacked:
            for system, a in r["attack"]["systems"].items():
                print(
                    f"| {r['corpus']['name']} | {_condition(r)} | {system} |"
                    f" {_cell(100 * a['attack_inclusion_rate'])} | {_cell(100 * a['poisoned_share'])} |"
                    f" {_cell(100 * a['clean_recall_under_attack'])} |"
                )


if __name__ == "__main__":
    main(sys.argv[1:])
