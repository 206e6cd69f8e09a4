"""What pack(..., log=True) costs over pack() (a benchmark, not a test).

Ingests the shipped demo corpus (438 facts) into the embedded server (or --dsn), then
asks each question twice in a row, once without and once with ``log=True``
(alternating which goes first), and prints the median and p95 of both and of the
paired difference. With log=True the pack is written by one more statement
(pgmem.log_pack_v2: the pack, its families, items and rejections), so the difference
is one round trip plus the insert and, in autocommit, its commit.

    .venv/bin/python benchmarks/bench_pack_log.py [--calls 100] [--dsn DSN] [--embedder hashing]
        [--synchronous-commit off]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

import pgmem
from pgmem.demo import NAMESPACE, load_corpus
from pgmem.embeddings import get_embedder


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--dsn")
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument(
        "--synchronous-commit",
        choices=("on", "off"),
        default="on",
        help="the session's synchronous_commit (off: a commit does not wait for its WAL flush)",
    )
    args = parser.parse_args()
    if args.dsn is None and "PGMEM_HOME" not in os.environ:
        os.environ["PGMEM_HOME"] = tempfile.mkdtemp(prefix="pgmem-bench-")

    model = get_embedder(args.embedder)
    spans, questions = load_corpus()
    timings: dict[bool, list[float]] = {False: [], True: []}
    with pgmem.connect(args.dsn, migrate=True) as conn:
        pgmem.ingest(conn, spans, namespace=NAMESPACE, embedder=model)
        conn.execute("SELECT set_config('synchronous_commit', %s, false)", (args.synchronous_commit,))
        asked = [q.question for q in questions][: args.calls]
        pgmem.pack(conn, asked[0], namespace=NAMESPACE, embedder=model, log=True)  # warm caches
        for i, question in enumerate(asked):
            for log in (False, True) if i % 2 == 0 else (True, False):
                tick = time.perf_counter()
                pgmem.pack(conn, question, namespace=NAMESPACE, embedder=model, log=log)
                timings[log].append((time.perf_counter() - tick) * 1000)
    differences = [logged - plain for plain, logged in zip(timings[False], timings[True], strict=True)]
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}; {model.name}, autocommit connection,"
        f" synchronous_commit {args.synchronous_commit}, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"pack() over {len(asked)} distinct questions, each with and without log=True:")
    for label, values in (("log=False", timings[False]), ("log=True", timings[True]), ("difference", differences)):
        print(f"  {label:<11} median {statistics.median(values):6.2f} ms   p95 {percentile(values, 0.95):6.2f} ms")


if __name__ == "__main__":
    main()
