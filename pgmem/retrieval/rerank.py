"""A caller-supplied re-ranker over pgmem's best candidates (issue 14).

No cross-encoder ships with pgmem (none ships inside a package on the index; see
docs/results.md), but one that reads question and note together can gain a lot: a
perfect re-ranking of pgmem's top 16 would lift LoCoMo recall at budget 8 from 70.9 to
78.3. So a caller with a model of their own passes it to :func:`pgmem.pack` as
``reranker=``: any object with a ``score(question, texts)`` method (the
:class:`Reranker` protocol). The finish then

1. ranks the pool as usual (final score = normalised base score + family regulariser,
   ties by note id) and takes the first ``PackParams.rerank_top`` candidates;
2. asks the re-ranker for one score per candidate (its context and text);
3. sorts those candidates by ``(1 - w) * z(final) + w * z(rerank)`` (both standardised
   over them, ``w = PackParams.rerank_weight``; ties keep pgmem's order) and gives them
   pgmem's top final scores in that order, so the packer picks them in the mixed order
   and everything after them as before.

Only the pick order changes: the reported scores stay pgmem's, and quotas, the family
cap, the quarantine of an alarmed family and the overlap rules are applied to every pick
as without a re-ranker (a re-ranker cannot un-quarantine a family). The scores and the
moves are reported in :attr:`pgmem.Diagnostics.rerank`. A re-ranker that raises, returns
the wrong number of scores or a non-finite one makes the pack fail with
:class:`pgmem.RerankError` before anything is packed or logged. Pure Python and numpy
around the caller's call: no I/O of its own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pgmem.errors import ConfigurationError, RerankError
from pgmem.params import PackParams
from pgmem.types import Candidate, Reranked, Reranking
from pgmem.validate import describe_value

_Array = npt.NDArray[np.float64]


class Reranker(Protocol):
    """What pgmem needs from a re-ranker (a cross-encoder, an LLM judge, ...).

    ``score(question, texts)`` returns one finite number per text, higher meaning more
    relevant to ``question``; only their order and spread among the texts of one call
    matter (they are standardised). Each text is a note's context (its title, session
    or speaker, when it has one) and its text, on two lines. An optional ``name``
    attribute names the re-ranker in the diagnostics, the logged parameters and error
    messages (else its class name). pgmem calls ``score`` once per pack, from a worker
    thread under :mod:`pgmem.aio`.
    """

    def score(self, question: str, texts: Sequence[str]) -> Sequence[float]: ...


def reranker_name(reranker: Any) -> str:
    """The name a re-ranker is reported under: its ``name`` attribute, else its class name."""
    name = getattr(reranker, "name", None)
    return name if isinstance(name, str) and name else type(reranker).__qualname__


def check_reranker(reranker: Any) -> Reranker | None:
    """``reranker`` if it has a callable ``score`` (or is None), else ConfigurationError."""
    if reranker is None or callable(getattr(reranker, "score", None)):
        return reranker  # type: ignore[no-any-return]
    raise ConfigurationError(
        "reranker must have a score(question, texts) method returning one float per text, "
        f"got {describe_value(reranker)}"
    )


def note_text(candidate: Candidate) -> str:
    """What the re-ranker reads of a candidate: its context and its text, on two lines."""
    return f"{candidate.context}\n{candidate.text}" if candidate.context else candidate.text


def _standardised(values: _Array) -> _Array:
    spread = float(values.std())
    if not spread > 1e-12:
        return np.zeros_like(values)
    standardised: _Array = (values - values.mean()) / spread
    return standardised


class TopReranking:
    """The packer's re-ordering hook for one pack: re-ranks the first ``rerank_top``
    candidates of pgmem's order with ``reranker`` and keeps what it did in ``outcome``."""

    def __init__(self, reranker: Reranker, question: str, params: PackParams) -> None:
        self.reranker = reranker
        self.question = question
        self.top = params.rerank_top
        self.weight = params.rerank_weight
        self.name = reranker_name(reranker)
        self.outcome: Reranking | None = None
        #: Milliseconds the re-ranker's call took (the pack's ``rerank`` timing).
        self.elapsed_ms = 0.0

    def scores(self, texts: list[str]) -> _Array:
        """The re-ranker's scores of ``texts``, checked (RerankError naming it otherwise)."""
        started = time.perf_counter()
        try:
            returned = self.reranker.score(self.question, texts)
        except Exception as exc:
            raise RerankError(f"reranker {self.name!r} failed: {type(exc).__name__}: {exc}") from exc
        self.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
        try:
            scores = np.asarray(returned, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise RerankError(
                f"reranker {self.name!r} must return one number per text, got {describe_value(returned)}"
            ) from exc
        if scores.shape != (len(texts),):
            raise RerankError(
                f"reranker {self.name!r} returned {scores.size} score(s) in shape {scores.shape} for {len(texts)} texts"
            )
        if not np.all(np.isfinite(scores)):
            bad = int(np.flatnonzero(~np.isfinite(scores))[0])
            raise RerankError(
                f"reranker {self.name!r} returned a non-finite score {float(scores[bad])!r} for text {bad}"
            )
        return scores

    def __call__(self, candidates: Sequence[Candidate], final: _Array, order: list[int]) -> tuple[list[int], _Array]:
        """The pick order and pick scores after re-ranking ``order``'s first candidates.

        ``final`` holds every candidate's final score and ``order`` is pgmem's scan order
        (final descending, ties by note id); the re-ranked candidates take the final
        scores of the first ``top`` places in their mixed order.
        """
        top = order[: self.top]
        scores = self.scores([note_text(candidates[index]) for index in top])
        mixed = (1.0 - self.weight) * _standardised(final[top]) + self.weight * _standardised(scores)
        # Rounded so that equal mixes tie exactly whatever the arithmetic; ties keep pgmem's order.
        mixed = np.round(mixed, 12)
        places = sorted(range(len(top)), key=lambda k: (-mixed[k], k))
        picked = final.copy()
        slots = final[top]  # non-increasing: pgmem's order
        for slot, k in enumerate(places):
            picked[top[k]] = slots[slot]
        rank = {k: slot + 1 for slot, k in enumerate(places)}
        self.outcome = Reranking(
            reranker=self.name,
            top=self.top,
            weight=self.weight,
            notes=tuple(
                Reranked(note_id=candidates[index].note_id, score=float(scores[k]), pgmem_rank=k + 1, rank=rank[k])
                for k, index in enumerate(top)
            ),
        )
        return [top[k] for k in places] + order[len(top) :], picked
