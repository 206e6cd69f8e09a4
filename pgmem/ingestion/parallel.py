"""Enrichment in worker processes, for a bulk load's write phase (``enrich_workers``).

A bulk load's client work is mostly the enricher's (pure Python: one core, whatever the
machine has), while the database waits for the rows. :class:`EnrichPool` shares each
part of the load between the calling process and ``workers`` processes of its own, slice
by slice. The facets are the enricher's own, in order, whichever process computed them.

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
#: Spans per slice a worker (or this process) enriches at a time.
SLICE_SPANS = 128

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
        """The facets of ``inputs``, in order. The spans go out in slices of
        :data:`SLICE_SPANS`; the workers take them from the front while this process takes
        the ones no worker has started yet from the back (a slice is cancelled before it is
        enriched here), so the processes share the work however fast each one is."""
        slices = [inputs[start : start + SLICE_SPANS] for start in range(0, len(inputs), SLICE_SPANS)]
        futures: list[Future[list[Enrichment]]] = [self._executor.submit(_enrich, part) for part in slices]
        done: dict[int, list[Enrichment]] = {}
        try:
            for index in reversed(range(len(slices))):
                if not futures[index].cancel():
                    break  # a worker has it, and every slice before it
                done[index] = [self.enricher.enrich(span) for span in slices[index]]
            return [facet for index, future in enumerate(futures) for facet in done.get(index) or future.result()]
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def close(self) -> None:
        """Stop the workers (pending slices are cancelled)."""
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> EnrichPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
