"""Re-fusing a stored stage-one pool: other dense / lexical mixes without another query.

Stage one returns, for every candidate, the parts of its base score (DESIGN §3.1)::

    base = dense_weight * cosine + lexical_weight * bm25 / max bm25  (the relevance)
           + facet boost + link_weight * (best relevance among its linked notes in the pool)

and its pool is the union of the dense top-``k_dense``, the lexical top-``k_lex`` and the
neighbours of the best of both, whatever the weights. So any other fusion of the two
scores can be evaluated from the pool alone: :func:`components` reads the parts back
(recovering, for each linked candidate, which pool candidate its link boost came from),
:func:`relevance` fuses dense and lexical scores under a named method, :func:`base_scores`
adds the facet and link boosts back (the link boost from the partner's *new* relevance)
and :func:`rescored` gives the pool with those base scores and its aggregates recomputed,
ready for :func:`pgmem.retrieval.pipeline.finish_pack`. ``tools/sweep_fusion.py`` measures
fusions this way (docs/results.md); none of them is on the read path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from pgmem.errors import ConfigurationError
from pgmem.params import StageOneParams
from pgmem.retrieval.pool import Pool
from pgmem.validate import between

_Array = npt.NDArray[np.float64]

Method = Literal["linear", "zscore", "minmax", "rank"]
METHODS: tuple[str, ...] = get_args(Method)

#: A link boost and link_weight * (a partner's relevance) match when they differ by less
#: than this (both come from the same double-precision expression in stage one).
LINK_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Components:
    """The parts of every candidate's base score, in pool order.

    ``partner[i]`` is the index of the pool candidate whose relevance gave candidate
    ``i`` its link boost, -1 when it has none (or when no candidate matches, which
    :attr:`unmatched` counts: its stored link boost is then kept as it is).
    """

    dense: _Array
    lexical: _Array
    facet: _Array
    link: _Array
    partner: npt.NDArray[np.int64]
    unmatched: int


def components(pool: Pool, stage_one: StageOneParams) -> Components:
    """The base-score parts of ``pool``'s candidates, read with the weights that made it."""
    candidates = pool.candidates
    dense = np.array([c.dense_score for c in candidates], dtype=np.float64)
    lexical = np.array([c.lexical_score for c in candidates], dtype=np.float64)
    facet = np.array([c.facet_boost for c in candidates], dtype=np.float64)
    link = np.array([c.link_boost for c in candidates], dtype=np.float64)
    old = stage_one.link_weight * (stage_one.dense_weight * dense + stage_one.lexical_weight * lexical)
    documents = np.array([c.document_id for c in candidates], dtype=object)
    partner = np.full(len(candidates), -1, dtype=np.int64)
    unmatched = 0
    for i in np.flatnonzero(link > 0):
        error = np.abs(old - link[i])
        error[(documents != documents[i]) | (np.arange(len(candidates)) == i)] = np.inf
        best = int(np.argmin(error))
        if error[best] <= LINK_TOLERANCE * max(1.0, abs(link[i])):
            partner[i] = best
        else:
            unmatched += 1
    return Components(dense, lexical, facet, link, partner, unmatched)


def _zscore(values: _Array) -> _Array:
    spread = float(values.std())
    return (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)


def _minmax(values: _Array) -> _Array:
    span = float(values.max() - values.min())
    return (values - values.min()) / span if span > 0 else np.zeros_like(values)


def _rank(values: _Array) -> _Array:
    """1 for the best, falling linearly to 0 for the worst (ties: pool order)."""
    ranks = np.empty(len(values))
    ranks[np.argsort(-values, kind="stable")] = np.arange(len(values))
    return 1.0 - ranks / max(len(values) - 1, 1)


def relevance(parts: Components, lexical_share: float, method: Method | str = "linear") -> _Array:
    """Dense and lexical scores fused, ``lexical_share`` of the weight on the lexical side.

    ``linear`` is stage one's own mix (cosine and max-normalised BM25 as they are);
    ``zscore`` standardises both over the pool, ``minmax`` stretches both to [0, 1],
    ``rank`` uses linear rank scores (lexical 0 for notes without a query term). The
    three normalised methods are mapped back onto the mean and spread of stage one's
    default relevance, so the facet and link boosts keep their weight against it.
    """
    between("lexical_share", lexical_share, 0.0, 1.0)
    if method not in METHODS:
        raise ConfigurationError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    dense, lexical = parts.dense, parts.lexical
    if method == "linear" or len(dense) == 0:
        return (1.0 - lexical_share) * dense + lexical_share * lexical
    if method == "zscore":
        fused = (1.0 - lexical_share) * _zscore(dense) + lexical_share * _zscore(lexical)
    elif method == "minmax":
        fused = (1.0 - lexical_share) * _minmax(dense) + lexical_share * _minmax(lexical)
    else:
        fused = (1.0 - lexical_share) * _rank(dense) + lexical_share * _rank(lexical) * (lexical > 0)
    default = StageOneParams()
    reference = default.dense_weight * dense + default.lexical_weight * lexical
    return _zscore(fused) * float(reference.std()) + float(reference.mean())


def base_scores(parts: Components, fused: _Array, link_weight: float) -> _Array:
    """``fused`` plus the facet boosts and ``link_weight`` times each partner's fused relevance."""
    between("link_weight", link_weight, 0.0, 1.0)
    linked = parts.partner >= 0
    link = np.where(linked, link_weight * fused[np.maximum(parts.partner, 0)], parts.link)
    return np.asarray(fused + parts.facet + link, dtype=np.float64)


def rescored(pool: Pool, base: _Array) -> Pool:
    """``pool`` with these base scores (same order) and its score aggregates recomputed.

    Mean, population variance and each family's score sum follow the new scores, as
    stage one's window functions would compute them; everything else (feedback totals,
    namespace counts, the question) is kept.
    """
    if len(base) != pool.size or not np.all(np.isfinite(base)):
        raise ConfigurationError(f"base must hold {pool.size} finite scores, got {len(base)}")
    candidates = tuple(dataclasses.replace(c, base_score=float(s)) for c, s in zip(pool.candidates, base, strict=True))
    if not candidates:
        return pool
    sums: dict[str, float] = {}
    for candidate in candidates:
        sums[candidate.family] = sums.get(candidate.family, 0.0) + candidate.base_score
    families = tuple(dataclasses.replace(f, score_sum=sums[f.family]) for f in pool.families)
    return dataclasses.replace(
        pool, candidates=candidates, mean=float(base.mean()), variance=float(base.var()), families=families
    )


def _top(values: _Array, k: int) -> set[int]:
    return {int(i) for i in np.argsort(-values, kind="stable")[:k]}


def pool_signals(parts: Components) -> Mapping[str, float]:
    """Per-query signals a fusion could read from the pool (no other query needed).

    ``lexical_matched``: share of candidates with any query term; ``lexical_2nd`` /
    ``lexical_10th``: the 2nd / 10th best normalised BM25 (the best is 1); ``lexical_std``;
    ``dense_top``: best cosine; ``dense_gap``: best minus 10th best cosine;
    ``dense_z``: best cosine in pool standard deviations; ``overlap_5`` / ``overlap_10``:
    shared share of the dense and lexical top 5 / 10; ``correlation``: Pearson
    correlation of the two scores over the pool.
    """
    dense, lexical = parts.dense, parts.lexical
    n = len(dense)
    if n < 2:
        return {}
    d, lex = np.sort(dense)[::-1], np.sort(lexical)[::-1]
    tenth = min(9, n - 1)
    both_vary = dense.std() > 0 and lexical.std() > 0
    return {
        "lexical_matched": float((lexical > 0).mean()),
        "lexical_2nd": float(lex[1]),
        "lexical_10th": float(lex[tenth]),
        "lexical_std": float(lexical.std()),
        "dense_top": float(d[0]),
        "dense_gap": float(d[0] - d[tenth]),
        "dense_z": float((d[0] - dense.mean()) / dense.std()) if dense.std() > 0 else 0.0,
        "overlap_5": len(_top(dense, 5) & _top(lexical, 5)) / 5,
        "overlap_10": len(_top(dense, 10) & _top(lexical, 10)) / 10,
        "correlation": float(np.corrcoef(dense, lexical)[0, 1]) if both_vary else 0.0,
    }
