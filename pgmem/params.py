"""Typed, validated parameter objects for the read path (DESIGN §3.5).

Every parameter has a documented default and is checked when the object is built:
a bad value raises :class:`pgmem.ConfigurationError` naming the parameter and the
allowed range. Every pack records the parameters it used in its diagnostics
(:meth:`as_dict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from pgmem.errors import ConfigurationError
from pgmem.validate import at_least, between, describe_value, finite, whole

Mode = Literal["calibrated", "relevance", "raw_bonus", "beta"]
MODES: tuple[str, ...] = get_args(Mode)

PackOrder = Literal["decayed", "final"]
PACK_ORDERS: tuple[str, ...] = get_args(PackOrder)

ROLES: tuple[str, ...] = (
    "fact",
    "event",
    "definition",
    "procedure",
    "claim",
    "dialogue",
    "summary",
    "other",
)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
#: Values that are never mappings (checked first: isinstance against an ABC is slow).
_SCALARS: frozenset[type] = frozenset({int, float, str, bool, type(None)})


def _field_names(kind: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(kind))
    return names


class _Params:
    """Shared helpers: ``as_dict`` for diagnostics and ``replace`` with validation."""

    def as_dict(self) -> dict[str, Any]:
        # What dataclasses.asdict gives for these flat dataclasses (mappings copied, the
        # rest immutable scalars), without its deep recursion: every pack's diagnostics
        # call this three times.
        values = {name: getattr(self, name) for name in _field_names(type(self))}
        return {
            name: value if type(value) in _SCALARS or not isinstance(value, Mapping) else dict(value)
            for name, value in values.items()
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Any:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigurationError(
                f"{cls.__name__} has no parameter {describe_value(unknown[0])}; known: {', '.join(sorted(known))}"
            )
        return cls(**values)


@dataclass(frozen=True)
class StageOneParams(_Params):
    """Candidate search and base score (DESIGN §3.1).

    Attributes
    ----------
    k_dense : int
        Candidates taken from the HNSW cosine search (default 50, 1..1000).
    k_lex : int
        Candidates taken from the BM25 lexical search (default 50, 0..1000; 0 turns it off).
    ef_search : int
        HNSW search breadth for a graph of up to ``ef_search_notes`` notes; raised to
        ``k_dense`` when smaller (default 100, 1..1000).
    ef_search_notes : int or None
        Above this many notes in the model's HNSW graph (every namespace of the model
        shares it) the breadth grows in proportion to the graph's size:
        ``ceil(ef_search * notes / ef_search_notes)``, at most 1000 (pgvector's limit),
        never below ``ef_search`` (default 200,000, >= 1; None: ``ef_search`` at every
        size). HNSW's recall at a fixed breadth falls as the graph grows; at ef_search
        100 the dense top 50 held 0.95 of the exact top 50 at 200k MiniLM vectors, the
        size that chose the default (docs/performance.md, "The ANN stage at a million
        notes"). Namespaces ranked exactly (below ``pgmem.exact_dense_notes``) are not
        affected.
    lex_max_terms : int
        At most this many query terms screen lexical candidates, the rarest first
        (default 8). All query terms still contribute to every candidate's BM25 score.
    lex_max_postings : int
        Screening stops adding terms once their summed document frequency would pass
        this many notes (default 5000), so lexical search cost stays bounded as the
        store grows; the rarest term is always used.
    bm25_k1, bm25_b : float
        BM25 term-frequency saturation and length normalisation (defaults 1.2, 0.75;
        0..100 and 0..1: past a few units k1 no longer saturates anything).
    dense_weight, lexical_weight : float
        Base score = dense_weight * cosine + lexical_weight * BM25 / max BM25 in the pool
        (defaults 0.7, 0.3; each 0..1000, far past where the bounded boosts stop
        mattering, and below where the database's arithmetic would overflow).
    entity_boost, time_boost, keyword_boost, handle_boost : float
        Maximum additive boost for matching entity hints (scaled by tag confidence),
        time hints, keyword hints and exact micro-handles (defaults 0.05 each, 0..1).
    link_weight : float
        Fraction of the best relevance among a candidate's linked notes in the pool
        that is added to its score as the link boost (default 0.3, 0..1).
    neighbour_seeds : int
        The best this-many dense and lexical candidates pull their neighbours into the
        pool: the previous and next span of their document and the notes they link to
        (default 10; 0 turns it off; 0..100).
    family_candidates : int or None
        At most this many notes of one provenance family ahead of other families' notes
        in the dense top ``k_dense`` and, separately, in the lexical top ``k_lex``
        (default 12, 1..1000; None: no cap). Notes past the cap are demoted, not
        dropped: a family alone in its namespace loses nothing. While other families'
        notes may lie deeper, a search goes 2, 4, then 8 times as deep, so a family that
        writes many notes near every question cannot fill every pool (issue 13: with
        the family quarantined, nothing else would be left to pack). Chosen on
        MultiHop-RAG's poisoned namespaces (any cap from 8 to 20 undid the crowding
        there, and cost its clean questions nothing), LoCoMo as transfer: see
        docs/security.md ("Pool crowding").
    """

    k_dense: int = 50
    k_lex: int = 50
    ef_search: int = 100
    ef_search_notes: int | None = 200_000
    lex_max_terms: int = 8
    lex_max_postings: int = 5000
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    dense_weight: float = 0.7
    lexical_weight: float = 0.3
    entity_boost: float = 0.05
    time_boost: float = 0.05
    keyword_boost: float = 0.05
    handle_boost: float = 0.05
    link_weight: float = 0.3
    neighbour_seeds: int = 10
    family_candidates: int | None = 12

    def __post_init__(self) -> None:
        whole("k_dense", self.k_dense, 1, 1000)
        whole("k_lex", self.k_lex, 0, 1000)
        whole("ef_search", self.ef_search, 1, 1000)
        if self.ef_search_notes is not None:
            whole("ef_search_notes", self.ef_search_notes, 1)
        whole("lex_max_terms", self.lex_max_terms, 1, 64)
        whole("lex_max_postings", self.lex_max_postings, 1)
        whole("neighbour_seeds", self.neighbour_seeds, 0, 100)
        if self.family_candidates is not None:
            whole("family_candidates", self.family_candidates, 1, 1000)
        between("bm25_k1", self.bm25_k1, 0.0, 100.0)
        between("bm25_b", self.bm25_b, 0.0, 1.0)
        between("dense_weight", self.dense_weight, 0.0, 1000.0)
        between("lexical_weight", self.lexical_weight, 0.0, 1000.0)
        if self.dense_weight + self.lexical_weight == 0:
            raise ConfigurationError("dense_weight + lexical_weight must be > 0, got 0: no relevance signal left")
        for name in ("entity_boost", "time_boost", "keyword_boost", "handle_boost", "link_weight"):
            between(name, getattr(self, name), 0.0, 1.0)


@dataclass(frozen=True)
class CalibrationParams(_Params):
    """Family calibration and its degraded-mode switch (DESIGN §3.2-3.3).

    Attributes
    ----------
    n_min : int
        Pools with fewer candidates are degraded: no family regulariser (default 8).
    var_min : float
        Pools whose base-score variance is below this are degraded (default 1e-4).
    h_min : float
        Pools whose family-label entropy (nats) is below this are degraded (default 0.3).
    var_floor : float
        Added to every family's expected variance so tiny families cannot produce huge
        z-scores (default 1e-3).
    eps : float
        Numerical floor inside square roots and divisions (default 1e-9).
    shrinkage : float
        ``lambda``: family-size shrinkage, z' = z * m / (m + lambda) (default 2).
    tau : float
        tanh temperature (default 2, > 0).
    alpha_prior : float
        Weight of the write-time confidence prior p_f in the reliability r_f (default 0.3).
    gamma : float
        Maximum size of the family regulariser, in pool standard deviations (default 0.5).
    feedback_prior : float
        ``kappa``, beta mode only: strength (in pseudo-judgements) of the prior that
        centres every family's Beta reliability on the namespace's helpful rate, so a
        family without feedback gets no nudge and a few judgements move it little
        (default 2, > 0).
    alarm_threshold : float or None
        A family whose alarm score (:mod:`pgmem.retrieval.alarm`, in [0, 1]) reaches
        this is alarmed and, in every mode but ``relevance``, quarantined; a note whose
        own restatement of the question reaches it is held back (packed last) instead,
        its family untouched (default 0.4, in (0, 1]; ``None`` switches the alarm off).
        Chosen on HotpotQA, see docs/security.md.
    quarantine_cap : int
        At most this many notes of a quarantined family are packed (default 1, >= 0).
    collusion_cap : int or None
        A family whose collusion (several of its notes near-copies of each other across
        documents) reaches ``alarm_threshold`` *in a late burst* (below) is quarantined:
        at most this many of its notes are packed and none of them refills a pack that
        ends short (default 0, >= 0; 0 measured best against poisoning). Outside a burst
        its near-copies are held one by one (packed after every other candidate) and it
        is never rewarded. ``None`` switches the collusion alarm off (collusion is still
        measured and reported).
    burst_window : float
        Seconds; a family's colluding notes written as a late burst — ``ALARM_GROUP`` of
        them within ``burst_window`` of each other, the first at least ``burst_window``
        after the namespace was created (default one hour, > 0) — quarantine the family;
        otherwise only the near-copies themselves are held. A genuine templated writer
        (release notes, status lines) writes over time or with the namespace's first
        load; an attacker writing its variants at once into an established namespace is a
        burst, a patient one is not (its near-copies are held). Families bound to writer roles
        (``pgmem.bind_family``) are exempt: nobody else can write them. See
        docs/security.md.
    quarantine_penalty : float
        A quarantined family's regulariser is ``-quarantine_penalty * alarm_score``, in
        pool standard deviations (default 3, >= 0), whatever the mode's own regulariser.
    recency_window : float
        Seconds over which a family stops counting as new for the alarm (default 7 days).
    newcomer_share : float or None
        The newcomer hold, against spread attacks (one note per new family). A *newcomer*
        is a family not bound to writer roles whose first note was written
        ``burst_window`` or more after the namespace was created and less than
        ``recency_window`` ago, holding at most ``max(1, floor(newcomer_share * m))``
        notes in the namespace, ``m`` being the median namespace size of the pool's
        established families (the others: founded with the namespace, or older than the
        window). Provenance families are sources; a source that just appeared with a
        note or two has no track record, and an attacker can mint as many as it likes.
        Across all newcomer families of a pool the best ``newcomer_quota`` notes (by base
        score) stay in the running; the others are held (packed after every other
        candidate, as a restating note is), in every mode but ``relevance`` (default
        0.25, in (0, 1]; ``None`` switches the hold off). Chosen on the ``late-families``
        stores (legitimate new families) and the paired spread attack, docs/security.md.
    newcomer_quota : int
        How many notes of newcomer families together stay in the running (default 1,
        >= 0).
    use_uncertainty : bool
        Discount the regulariser by ``(1 - u_f)`` (default True). False sets ``u_f = 0``:
        with ``shrinkage=0`` and ``alpha_prior=0`` it is one of the ablations of
        ``pgmem eval --systems calibrated-no-uncertainty`` (docs/evaluation.md).
    """

    n_min: int = 8
    var_min: float = 1e-4
    h_min: float = 0.3
    var_floor: float = 1e-3
    eps: float = 1e-9
    shrinkage: float = 2.0
    tau: float = 2.0
    alpha_prior: float = 0.3
    gamma: float = 0.5
    feedback_prior: float = 2.0
    alarm_threshold: float | None = 0.4
    quarantine_cap: int = 1
    collusion_cap: int | None = 0
    burst_window: float = 3_600.0
    quarantine_penalty: float = 3.0
    recency_window: float = 7 * 86_400.0
    newcomer_share: float | None = 0.25
    newcomer_quota: int = 1
    use_uncertainty: bool = True

    def __post_init__(self) -> None:
        whole("n_min", self.n_min, 1)
        at_least("var_min", self.var_min, 0.0)
        at_least("h_min", self.h_min, 0.0)
        at_least("var_floor", self.var_floor, 0.0)
        at_least("eps", self.eps, 0.0, strict=True)
        at_least("shrinkage", self.shrinkage, 0.0)
        at_least("tau", self.tau, 0.0, strict=True)
        between("alpha_prior", self.alpha_prior, 0.0, 1.0)
        at_least("gamma", self.gamma, 0.0)
        at_least("feedback_prior", self.feedback_prior, 0.0, strict=True)
        if self.alarm_threshold is not None:
            between("alarm_threshold", self.alarm_threshold, 0.0, 1.0)
            at_least("alarm_threshold", self.alarm_threshold, 0.0, strict=True)
        whole("quarantine_cap", self.quarantine_cap, 0)
        if self.collusion_cap is not None:
            whole("collusion_cap", self.collusion_cap, 0)
        at_least("burst_window", self.burst_window, 0.0, strict=True)
        at_least("quarantine_penalty", self.quarantine_penalty, 0.0)
        at_least("recency_window", self.recency_window, 0.0, strict=True)
        if self.newcomer_share is not None:
            between("newcomer_share", self.newcomer_share, 0.0, 1.0)
            at_least("newcomer_share", self.newcomer_share, 0.0, strict=True)
        whole("newcomer_quota", self.newcomer_quota, 0)
        if not isinstance(self.use_uncertainty, bool):
            raise ConfigurationError(
                f"use_uncertainty must be True or False, got {describe_value(self.use_uncertainty)}"
            )


#: How many entities a pack's hints name for ``PackParams.multi_entity_coverage`` to apply.
MULTI_ENTITY = 2


@dataclass(frozen=True)
class PackParams(_Params):
    """The greedy, deterministic packer (DESIGN §3.3).

    Attributes
    ----------
    budget : int
        Maximum number of notes in the pack (default 8, 1..1000).
    token_budget : int or None
        Optional maximum of summed note tokens (approximate count, see
        :func:`pgmem.retrieval.packer.count_tokens`); ``None`` means no token limit.
    role_quotas : mapping of role to int
        Per-role maxima; roles not named are unlimited (default none).
    family_cap : int or None
        Maximum notes from one provenance family; ``None`` means no cap (default).
    overlap_decay : float
        Score subtracted per unit of overlap with an already selected note (default 0.5).
    overlap_hard_threshold : float
        A candidate overlapping a selected note by more than this is rejected (default 0.9).
    minimum_effective_score : float or None
        A candidate whose decayed score is below this is rejected; ``None`` (default)
        disables the rule, so tiny pools are never emptied by a normalised-score cut.
    order : {"decayed", "final"}
        ``"decayed"``: each next pick is the remaining candidate with the best decayed
        score given what is already packed (an MMR-like greedy, so a near-repeat of a
        packed note waits behind a fresh one); ``"final"``: the seed's single scan by the
        undecayed final score, the decay only feeding ``minimum_effective_score``.
    coverage : float
        Weight (in pool standard deviations) of question coverage in each next pick: the
        pick maximises its score plus ``coverage`` times the idf-weighted share of the
        question's content words it holds that no packed note holds yet, so a pack
        covers a question's several entities and aspects (default 0: off, the pick is
        by ``order`` alone; 0..10).
    multi_entity_coverage : float
        The coverage weight of a pack whose hints (the question's and the caller's)
        name :data:`MULTI_ENTITY` entities or more, when larger than ``coverage``
        (default 2, 0..10; 0 switches it off): a question about two people, two sources
        or two works gets a note on each. Measured on the three shared datasets
        (docs/results.md): MultiHop-RAG +0.5 and HotpotQA +0.6 points of recall, LoCoMo
        unchanged in every category; coverage on every pack gains more on HotpotQA and
        costs LoCoMo's multi-hop questions. It costs the finish about 0.4 ms on such packs.
    rerank_top : int
        How many of pgmem's best candidates (by final score) a caller-supplied re-ranker
        (``pgmem.pack(..., reranker=...)``) scores and re-orders (default 16, 1..1000;
        read only when a re-ranker is given): a cross-encoder's cost grows with it, and
        a perfect re-ranker of the top 8 gains almost nothing while one of the top 16
        gains 7–11 points of recall at budget 8 (32: 13–20; docs/results.md).
    rerank_weight : float
        The re-ranker's share of the order of those candidates: they are sorted by
        ``(1 - w) * z(final) + w * z(rerank)``, both standardised over the re-ranked
        candidates, and take the top ``rerank_top`` final scores in that order (default
        0.25, 0..1; 0 keeps pgmem's order, 1 is the re-ranker's alone): a perfect
        re-ranker keeps 75–93 % of its gain at 0.25, a weak one (nanoranker) costs
        nothing measurable there and up to 5 points at 0.5 (docs/results.md). Only the
        order changes: quotas, caps, the quarantine and the overlap rules still apply.
    """

    budget: int = 8
    token_budget: int | None = None
    role_quotas: Mapping[str, int] = field(default_factory=dict)
    family_cap: int | None = None
    overlap_decay: float = 0.5
    overlap_hard_threshold: float = 0.9
    minimum_effective_score: float | None = None
    order: PackOrder = "final"
    coverage: float = 0.0
    multi_entity_coverage: float = 2.0
    rerank_top: int = 16
    rerank_weight: float = 0.25

    def __post_init__(self) -> None:
        whole("budget", self.budget, 1, 1000)
        between("coverage", self.coverage, 0.0, 10.0)
        between("multi_entity_coverage", self.multi_entity_coverage, 0.0, 10.0)
        whole("rerank_top", self.rerank_top, 1, 1000)
        between("rerank_weight", self.rerank_weight, 0.0, 1.0)
        if self.order not in PACK_ORDERS:
            raise ConfigurationError(f"order must be one of {', '.join(PACK_ORDERS)}, got {describe_value(self.order)}")
        if self.token_budget is not None:
            whole("token_budget", self.token_budget, 1)
        if not isinstance(self.role_quotas, Mapping):
            raise ConfigurationError(
                f"role_quotas must be a mapping of role to count, got {type(self.role_quotas).__name__}"
            )
        for role, quota in self.role_quotas.items():
            if role not in ROLES:
                raise ConfigurationError(
                    f"role_quotas has unknown role {describe_value(role)}; roles are {', '.join(ROLES)}"
                )
            whole(f"role_quotas[{describe_value(role)}]", quota, 0)
        # Freeze the mapping so a caller mutating its dict cannot change a logged pack.
        object.__setattr__(self, "role_quotas", dict(sorted(self.role_quotas.items())))
        if self.family_cap is not None:
            whole("family_cap", self.family_cap, 1)
        at_least("overlap_decay", self.overlap_decay, 0.0)
        between("overlap_hard_threshold", self.overlap_hard_threshold, 0.0, 1.0)
        if self.minimum_effective_score is not None:
            finite("minimum_effective_score", self.minimum_effective_score)


def check_mode(mode: str) -> Mode:
    """Return ``mode`` if it is a known ablation mode, else raise ConfigurationError."""
    if mode not in MODES:
        raise ConfigurationError(f"mode must be one of {', '.join(MODES)}, got {describe_value(mode)}")
    return mode  # type: ignore[return-value]
