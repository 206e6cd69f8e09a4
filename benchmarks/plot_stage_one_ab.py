"""Plot stage-one latency before and after a migration against namespace size.

Reads the JSON list that ``bench_stage_one_ab.py --json`` appends to and writes a PNG
(runs of ``--before 0008`` compare migration 0011 with 0008; older runs, without the
field, 0008 with 0001):

    .venv/bin/python benchmarks/plot_stage_one_ab.py ab.json docs/img/stage_one_ab.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from matplotlib.figure import Figure


def main() -> None:
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    runs = sorted(json.loads(source.read_text(encoding="utf-8")), key=lambda run: run["notes"])
    figure = Figure(figsize=(6.4, 4.0), layout="constrained")
    axis = figure.add_subplot()
    notes = [run["notes"] for run in runs]
    # The migration "after" introduced: the one following the "before" function's.
    change = {"0001": "0008", "0008": "0011"}.get(runs[0].get("before", "0001"), "the change")
    for label, colour in (("before", "tab:grey"), ("after", "tab:blue")):
        for quantile, style in (("p50", "-o"), ("p95", "--o")):
            axis.plot(
                notes,
                [run[quantile][label] for run in runs],
                style,
                color=colour,
                label=f"{label} {change}, {quantile}",
            )
    loads = ", ".join(f"{run['load_average']:.0f}" for run in runs)
    axis.set_xscale("log")
    axis.set_xlabel("notes in the namespace (log scale)")
    axis.set_ylabel("stage one, ms (round trip included)")
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend()
    axis.set_title(f"stage one before/after {change}, interleaved (load average {loads})", fontsize=10)
    figure.savefig(target, dpi=120)
    print(f"written: {target}")


if __name__ == "__main__":
    main()
