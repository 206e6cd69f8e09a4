"""The repr of 660 packs of the pgmem on PYTHONPATH, to compare two trees byte for byte.

The ``bench_finish.py`` LoCoMo pools (40 of 128 rows, 10 of 20, 5 of 3), every other pool
with the word hashes stage one returns and the others tokenised, a quarter of them with
each turn its own document and write times in bursts (so collusion and the burst gate
read something), packed in every mode, both pack orders, with and without a token
budget, family cap, coverage and collusion, at alarm thresholds 0.4, 0.05 and off; the
word memo emptied every third pool. Timings are dropped; everything else of each
``Pack`` is written, one repr per line::

    PYTHONPATH=/path/to/before python benchmarks/finish_reprs.py before.txt
    PYTHONPATH=/path/to/after  python benchmarks/finish_reprs.py after.txt
    cmp before.txt after.txt
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from bench_finish import LOCOMO, locomo_pools, with_stored_hashes

from pgmem.embeddings import HashingEmbedder
from pgmem.params import CalibrationParams, PackParams
from pgmem.retrieval import words
from pgmem.retrieval.pipeline import finish_pack, prepare_pack


def per_turn(pool: Any, seed: int) -> Any:
    """``pool`` with each turn its own document and write times in bursts, some families bound."""
    candidates = tuple(
        dataclasses.replace(
            candidate,
            document_id=candidate.external_id or candidate.note_id,
            age_seconds=float(((i * 7919 + seed) % 97) * (30 if i % 2 else 5000)),
        )
        for i, candidate in enumerate(pool.candidates)
    )
    families = tuple(
        dataclasses.replace(family, age_seconds=float(50_000 + 1000 * j), bound=j % 7 == 3)
        for j, family in enumerate(pool.families)
    )
    return dataclasses.replace(
        pool,
        candidates=candidates,
        families=families,
        namespace_age_seconds=200_000.0,
        namespace_notes=pool.namespace_notes or 600,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    args = parser.parse_args()
    plain = locomo_pools(LOCOMO, 128, 40) + locomo_pools(LOCOMO, 20, 10) + locomo_pools(LOCOMO, 3, 5)
    hashed = with_stored_hashes(plain)
    pools = []
    for k, (without, with_hashes) in enumerate(zip(plain, hashed, strict=True)):
        pool = with_hashes if k % 2 == 0 else without
        pools.append(per_turn(pool, k) if k % 4 in (1, 2) else pool)
    embedder = HashingEmbedder()
    configurations = [
        (mode, order, token_budget, threshold)
        for mode in ("calibrated", "relevance", "raw_bonus", "beta")
        for order in ("final", "decayed")
        for token_budget in (None, 60)
        for threshold in (0.4, 0.05, None)
    ]
    reprs = []
    for k, pool in enumerate(pools):
        if k % 3 == 0:
            words._WORD_HASHES.clear()
        for j, (mode, order, token_budget, threshold) in enumerate(configurations):
            if (k + j) % 4:
                continue
            request = prepare_pack(
                pool.query,
                mode=mode,
                embedder=embedder,
                packing=PackParams(
                    order=order,
                    token_budget=token_budget,
                    family_cap=3 if j % 3 == 0 else None,
                    coverage=0.5 if j % 5 == 0 else 0.0,
                ),
                calibration=CalibrationParams(alarm_threshold=threshold, collusion_cap=None if j % 7 == 0 else 0),
            )
            evidence = finish_pack(request, dataclasses.replace(pool))
            diagnostics = dataclasses.replace(evidence.diagnostics, timings_ms={})
            reprs.append(repr(dataclasses.replace(evidence, diagnostics=diagnostics)))
    text = "\n".join(reprs)
    args.output.write_text(text, encoding="utf-8")
    print(len(reprs), "packs, sha256", hashlib.sha256(text.encode()).hexdigest())


if __name__ == "__main__":
    main()
