"""Enrichment in worker processes, for a bulk load's write phase (``enrich_workers``).

A bulk load's client work is mostly the enricher's (pure Python: one core, whatever the
machine has), while the database waits for the rows. :class:`EnrichPool` splits each
part of the load between the calling process and ``workers`` processes of its own: the
caller's process enriches its share while the workers enrich theirs. The facets are the
enricher's own, in order, whichever process computed them.

The workers are started with ``spawn`` (a fresh interpreter: safe in a process with
threads, such as a web server's), receive the enricher once (it must pickle), and are
shut down when the load ends, fails or is interrupted. As for any use of
:mod:`multiprocessing`, a script that starts them must guard its entry point with
``if __name__ == "__main__":``.
"""

from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from types import TracebackType

from pgmem.errors import ConfigurationError
from pgmem.ingestion.enricher import Enricher, Enrichment, SpanInput
from pgmem.validate import whole

#: At most this many enrichment processes per load.
MAX_ENRICH_WORKERS = 64

_ENRICHER: Enricher | None = None


def _start(enricher: Enricher) -> None:
    """A worker's initialiser: the enricher it uses for every slice."""
    global _ENRICHER
    _ENRICHER = enricher


def _enrich(inputs: Sequence[SpanInput]) -> list[Enrichment]:
    """A worker's job: one slice of spans enriched."""
    if _ENRICHER is None:  # pragma: no cover - the initialiser always ran
        raise RuntimeError("enrichment worker started without an enricher")
    return [_ENRICHER.enrich(span) for span in inputs]


def check_enrich_workers(workers: int, enricher: Enricher) -> int:
    """``workers`` as given, else ConfigurationError naming ``enrich_workers``; from one
    worker on, ``enricher`` must pickle (it is sent to the worker processes)."""
    whole("enrich_workers", workers, 0, MAX_ENRICH_WORKERS)
    if workers:
        try:
            pickle.dumps(enricher)
        except Exception as exc:  # any pickling failure: a lambda, a lock, a model handle
            raise ConfigurationError(
                f"enrich_workers={workers} needs an enricher that pickles, to send it to the worker"
                f" processes; {type(enricher).__name__} does not ({type(exc).__name__}: {exc}). Use"
                " enrich_workers=0 to enrich in this process"
            ) from exc
    return workers


class EnrichPool:
    """``workers`` processes that enrich spans beside the calling process.

    Parameters
    ----------
    enricher : Enricher
        Sent to every worker once; it must pickle (a ConfigurationError says so).
    workers : int
        Processes besides the caller's (1 to :data:`MAX_ENRICH_WORKERS`).
    """

    def __init__(self, enricher: Enricher, workers: int) -> None:
        if check_enrich_workers(workers, enricher) < 1:
            raise ConfigurationError(f"enrich_workers must be >= 1 for a pool of workers, got {workers}")
        self.enricher = enricher
        self.workers = workers
        self._executor = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start, initargs=(enricher,)
        )

    def enrich(self, inputs: Sequence[SpanInput]) -> list[Enrichment]:
        """The facets of ``inputs``, in order: ``workers + 1`` contiguous slices, the
        first enriched here while the workers enrich the others."""
        share = -(-len(inputs) // (self.workers + 1))  # ceiling
        futures: list[Future[list[Enrichment]]] = [
            self._executor.submit(_enrich, inputs[start : start + share]) for start in range(share, len(inputs), share)
        ]
        try:
            facets = [self.enricher.enrich(span) for span in inputs[:share]]
            for future in futures:
                facets.extend(future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return facets

    def close(self) -> None:
        """Stop the workers (pending slices are cancelled)."""
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> EnrichPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
