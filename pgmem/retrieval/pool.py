"""The stage-one pool as the pure read path sees it: candidates plus aggregates.

In production the aggregates come from the window functions of
``pgmem.stage_one_v1`` (one SQL statement); :meth:`Pool.from_candidates` computes the
same numbers with numpy, for tests, golden files and the evaluation harness.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pgmem.retrieval.words import PoolWords
from pgmem.types import Candidate, FamilyAggregate


@dataclass(frozen=True)
class Pool:
    """A bounded candidate pool C with N, mean, population variance and entropy of b.

    ``feedback_helpful`` and ``feedback_unhelpful`` are the namespace's summed feedback
    weights (every family's, not only the pool's): the base rate the beta mode measures
    each family against.
    """

    candidates: tuple[Candidate, ...]
    size: int
    mean: float
    variance: float
    entropy: float
    families: tuple[FamilyAggregate, ...]
    feedback_helpful: float = 0.0
    feedback_unhelpful: float = 0.0
    #: The question the pool was searched for (the family alarm measures echo against it).
    query: str = ""
    #: Notes in the namespace (0 = unknown) and seconds since it was created (None = unknown).
    namespace_notes: int = 0
    namespace_age_seconds: float | None = None

    @cached_property
    def words(self) -> PoolWords:
        """The candidates' words (stored hashes, else tokenised), read once and shared by the alarm and the packer."""
        texts = [candidate.text for candidate in self.candidates]
        return PoolWords(texts, self.query, [candidate.word_hashes for candidate in self.candidates])

    @classmethod
    def from_candidates(
        cls,
        candidates: Iterable[Candidate],
        feedback: Mapping[str, tuple[float, float]] | None = None,
        *,
        query: str = "",
        namespace_counts: Mapping[str, int] | None = None,
        namespace_age_seconds: float | None = None,
        bound: Collection[str] = (),
    ) -> Pool:
        """Build a pool and compute its aggregates exactly as DESIGN §3.1 defines them.

        ``feedback`` maps a family to its summed (helpful, unhelpful) feedback weights;
        the namespace totals are their sums (families outside the pool included).
        ``query`` is the question; ``namespace_counts`` maps every family of the
        namespace to its note count (the namespace's size is their sum);
        ``namespace_age_seconds`` is how long ago the namespace was created (each
        candidate's ``age_seconds`` says when it was written) and ``bound`` names the
        families bound to writer roles.
        """
        rows = tuple(candidates)
        feedback = feedback or {}
        helpful_total = float(sum(h for h, _ in feedback.values()))
        unhelpful_total = float(sum(u for _, u in feedback.values()))
        counts = namespace_counts or {}
        namespace_notes = int(sum(counts.values()))
        if not rows:
            return cls(
                rows,
                0,
                0.0,
                0.0,
                0.0,
                (),
                feedback_helpful=helpful_total,
                feedback_unhelpful=unhelpful_total,
                query=query,
                namespace_notes=namespace_notes,
                namespace_age_seconds=namespace_age_seconds,
            )
        scores = np.array([c.base_score for c in rows], dtype=np.float64)
        size = len(rows)
        by_family: dict[str, list[Candidate]] = {}
        for candidate in rows:
            by_family.setdefault(candidate.family, []).append(candidate)
        families = tuple(
            FamilyAggregate(
                family=name,
                count=len(members),
                score_sum=float(np.sum([m.base_score for m in members])),
                mean_confidence=float(np.mean([m.confidence for m in members])),
                feedback_helpful=float(feedback.get(name, (0.0, 0.0))[0]),
                feedback_unhelpful=float(feedback.get(name, (0.0, 0.0))[1]),
                namespace_count=int(counts.get(name, 0)),
                bound=name in bound,
            )
            for name, members in sorted(by_family.items())
        )
        shares = np.array([f.count / size for f in families])
        entropy = float(-np.sum(shares * np.log(shares)))
        return cls(
            candidates=rows,
            size=size,
            mean=float(scores.mean()),
            variance=float(scores.var()),
            entropy=max(entropy, 0.0),
            families=families,
            feedback_helpful=helpful_total,
            feedback_unhelpful=unhelpful_total,
            query=query,
            namespace_notes=namespace_notes,
            namespace_age_seconds=namespace_age_seconds,
        )
