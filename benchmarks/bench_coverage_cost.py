"""CPU of calibrate + pack with and without multi-entity coverage, on stored pools (issue 14).

Reads the pools ``tools/sweep_quality.py collect`` stores (one per answerable question),
keeps those whose hints name two entities or more (the packs multi-entity coverage
applies to) and times ``calibrate`` + ``rank_and_pack`` with the coverage weight at 0 and
at its default, alternated in one process, ``--rounds`` rounds; prints each dataset's
median CPU per pack and the ratio::

    PYTHONPATH=. python tools/sweep_quality.py collect locomo multihop hotpotqa \\
        --data-dir ../shared/data --home /tmp/q/home --cache /tmp/q/cache
    PYTHONPATH=. python benchmarks/bench_coverage_cost.py --cache /tmp/q/cache
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from pathlib import Path

from pgmem.params import MULTI_ENTITY, PackParams
from pgmem.retrieval.calibrate import calibrate
from pgmem.retrieval.packer import rank_and_pack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, required=True, help="sweep_quality.py collect's --cache folder")
    parser.add_argument("--datasets", nargs="+", default=["multihop", "locomo", "hotpotqa"])
    parser.add_argument("--pools", type=int, default=200, help="at most this many pools per dataset (200)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    default = PackParams().multi_entity_coverage
    for name in args.datasets:
        data = pickle.loads((args.cache / f"{name}.pkl").read_bytes())
        pairs = [
            (request, pool)
            for request, pool in zip(data["requests"], data["pools"], strict=True)
            if len(request.hints.entities) >= MULTI_ENTITY
        ][: args.pools]
        times: dict[float, list[float]] = {0.0: [], default: []}
        for round_ in range(args.rounds):
            for weight in (0.0, default) if round_ % 2 == 0 else (default, 0.0):
                params = PackParams(multi_entity_coverage=weight)
                for request, pool in pairs:
                    started = time.process_time()
                    calibration = calibrate(pool, request.calibration, request.mode)
                    rank_and_pack(pool, calibration, params, entities=len(request.hints.entities))
                    times[weight].append(time.process_time() - started)
        off, on = (1e3 * statistics.median(times[w]) for w in (0.0, default))
        print(
            f"{name}: {len(pairs)} pools naming {MULTI_ENTITY}+ entities; calibrate + pack CPU median"
            f" {off:.2f} ms without, {on:.2f} ms with multi-entity coverage {default} ({on / off:.2f}x)"
        )


if __name__ == "__main__":
    main()
