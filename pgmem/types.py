"""Result and input types of the public API (plain frozen dataclasses, no I/O)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, TypeVar

_Frozen = TypeVar("_Frozen")


@dataclass(frozen=True)
class Span:
    """One span of a source document, the unit pgmem turns into an immutable note.

    Parameters
    ----------
    document_id : str
        The caller's id of the source document.
    text : str
        The exact span text: the document's UTF-8 bytes ``[start:end]``.
    start, end : int
        Byte offsets of the span in the source document (``0 <= start < end``,
        ``end - start`` equal to the UTF-8 length of ``text``).
    family : str
        Provenance family: the publisher, session, tool or author the span came from.
    source_ts : datetime or str, optional
        When the source said it (timezone-aware, or ISO 8601 text).
    external_id : str, optional
        The caller's own id for the span (e.g. a dialogue turn id); returned on packed items.
    role : str, optional
        One of :data:`pgmem.ROLES`; derived by the enricher when omitted.
    confidence : float, optional
        Write-time confidence in [0, 1]; derived by the enricher when omitted.
    context : str, optional
        A short phrase situating the span (title, section, speaker); derived when omitted.
    metadata : mapping, optional
        Free JSON-serialisable metadata stored with the note.
    """

    document_id: str
    text: str
    start: int
    end: int
    family: str
    source_ts: datetime | str | None = None
    external_id: str | None = None
    role: str | None = None
    confidence: float | None = None
    context: str | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Citation:
    """Where a note's text comes from: a document and a byte range in it."""

    document_id: str
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.document_id}[{self.start}:{self.end}]"


@dataclass(frozen=True)
class Candidate:
    """One row of the stage-one pool, as returned by ``pgmem.stage_one_v1``."""

    note_id: str
    external_id: str | None
    document_id: str
    span_start: int
    span_end: int
    text: str
    context: str
    family: str
    role: str
    confidence: float
    source_ts: datetime | None
    dense_score: float
    lexical_score: float
    facet_boost: float
    link_boost: float
    base_score: float
    entity_boost: float = 0.0
    time_boost: float = 0.0
    keyword_boost: float = 0.0
    handle_boost: float = 0.0
    #: Seconds since the note was written (``pgmem.notes.created_at``, which writers
    #: cannot set; None = unknown): the family alarm's burst gate reads it.
    age_seconds: float | None = None
    #: The note's distinct words as 64-bit hashes (``pgmem.word_hashes_v1``), or None for a
    #: note stored without them: the family alarm and the packer tokenise its text instead.
    word_hashes: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def citation(self) -> Citation:
        return Citation(self.document_id, self.span_start, self.span_end)

    @property
    def boosts(self) -> dict[str, float]:
        """What each bounded boost added to the base score (facets and link)."""
        return {
            "entity": self.entity_boost,
            "time": self.time_boost,
            "keyword": self.keyword_boost,
            "handle": self.handle_boost,
            "link": self.link_boost,
        }


@dataclass(frozen=True)
class FamilyAggregate:
    """Per-family pool aggregates: m_f (count), R_f (sum of b), p_f (mean confidence),
    and the family's summed feedback weights (helpful, unhelpful) for the beta mode."""

    family: str
    count: int
    score_sum: float
    mean_confidence: float
    feedback_helpful: float = 0.0
    feedback_unhelpful: float = 0.0
    #: The family's notes in the whole namespace (pgmem.family_stats; 0 = unknown).
    namespace_count: int = 0
    #: Seconds since the family's first note in the namespace (None = unknown).
    age_seconds: float | None = None
    #: Whether the family is bound to writer roles (pgmem.family_writers): only they write it.
    bound: bool = False


@dataclass(frozen=True)
class FamilyCalibration:
    """Everything DESIGN §3.2 computes for one family, kept for the diagnostics."""

    family: str
    count: int
    score_sum: float
    mean_confidence: float
    expected_sum: float
    expected_variance: float
    z: float
    shrunk_z: float
    corroboration: float
    reliability: float
    uncertainty: float
    regularizer: float
    variance_floor_dominated: bool
    #: Summed weight of the feedback on this family's notes (pgmem.feedback).
    feedback_helpful: float = 0.0
    feedback_unhelpful: float = 0.0
    #: Posterior mean of the family's Beta reliability, and its distance from the
    #: namespace's base rate in posterior standard deviations (the beta mode's signal).
    feedback_reliability: float = 0.0
    feedback_z: float = 0.0
    #: The family alarm (pgmem.retrieval.alarm): its inputs, each in [0, 1] ...
    namespace_count: int = 0
    pool_share: float = 0.0
    namespace_share: float = 0.0
    newness: float = 0.0
    duplicate_density: float = 0.0
    question_echo: float = 0.0
    #: How nearly the family's most question-like note restates the question
    #: (``echo ** 4 * precision``); it alone can alarm (one note is enough).
    question_restatement: float = 0.0
    #: ... its bounded score, the threshold it was compared with (None: alarm off),
    #: whether it fired, and whether the family was quarantined for it (regulariser
    #: negative, at most ``quarantine_cap`` notes packed; every mode but ``relevance``).
    alarm_score: float = 0.0
    alarm_threshold: float | None = None
    alarmed: bool = False
    quarantined: bool = False
    #: How alike the family's notes are to each other across documents (the alarm's
    #: collusion input, in [0, 1]), and whether it reached the threshold in a late burst:
    #: a colluding family gets at most ``collusion_cap`` notes and never refills a pack.
    collusion: float = 0.0
    colluding: bool = False
    #: The burst gate on collusion: of the family's colluding pool notes (near-copies of a
    #: same-family note in another document) the ``ALARM_GROUP`` written closest together
    #: (preferring groups written ``burst_window`` or more after the namespace was
    #: created), how many seconds their write times span and how long after the
    #: namespace's creation the first of them was written (None: fewer colluding notes,
    #: or write times unknown). For a family not ``bound`` to writer roles, collusion in a
    #: late burst (span <= burst_window <= lateness) makes it ``colluding``; outside one,
    #: collusion still counts in the alarm score and its near-copies are held.
    burst_span: float | None = None
    burst_lateness: float | None = None
    bound: bool = False
    #: A newcomer (``CalibrationParams.newcomer_share``): unbound, first written after the
    #: namespace's first load and recently, with far fewer notes than the pool's
    #: established families. Not an alarm: its notes past the pool's best
    #: ``newcomer_quota`` newcomer notes are held (packed after every other candidate).
    newcomer: bool = False


@dataclass(frozen=True)
class PackItem:
    """One packed note with its scores and grounding."""

    rank: int
    note_id: str
    external_id: str | None
    document_id: str
    family: str
    role: str
    confidence: float
    text: str
    context: str
    source_ts: datetime | None
    citation: Citation
    base_score: float
    normalized_score: float
    regularizer: float
    final_score: float
    decayed_score: float
    max_overlap: float
    dense_score: float
    lexical_score: float
    facet_boost: float
    link_boost: float
    boosts: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Rejection:
    """A candidate the packer scanned and refused, with the rule that refused it.

    ``reason`` is one of ``overlap``, ``below_minimum``, ``role_quota``,
    ``family_cap``, ``quarantine`` (its family was quarantined by the family alarm) or
    ``token_budget``; ``overlaps_note_id`` names the selected note
    it overlapped most, when any.
    """

    note_id: str
    family: str
    role: str
    reason: str
    final_score: float
    decayed_score: float
    max_overlap: float
    overlaps_note_id: str | None
    #: The candidate's stage-one score and its family's regulariser (the packer scored
    #: it final = pool-normalised base score + regulariser); filled in by the pack
    #: pipeline, None on a Rejection built without its pool and calibration.
    base_score: float | None = None
    regularizer: float | None = None


@dataclass(frozen=True)
class Reranked:
    """One of the candidates a caller-supplied re-ranker scored.

    ``pgmem_rank`` is its 1-based place in pgmem's order (final score, ties by note id),
    ``rank`` its place after the mix with the re-ranker's ``score``; the packer picks in
    that order, so a note with ``rank != pgmem_rank`` was moved by the re-ranker.
    """

    note_id: str
    score: float
    pgmem_rank: int
    rank: int


@dataclass(frozen=True)
class Reranking:
    """What a caller-supplied re-ranker did to a pack: which re-ranker, with which
    ``top`` and ``weight`` (:class:`pgmem.PackParams` ``rerank_top``, ``rerank_weight``),
    and every candidate it scored, in pgmem's order."""

    reranker: str
    top: int
    weight: float
    notes: tuple[Reranked, ...]

    @property
    def moved(self) -> tuple[str, ...]:
        """The note ids whose place the re-ranker changed, in pgmem's order."""
        return tuple(note.note_id for note in self.notes if note.rank != note.pgmem_rank)


@dataclass(frozen=True)
class Diagnostics:
    """Why a pack looks the way it does (DESIGN §3.4)."""

    mode: str
    degraded: bool
    degraded_reasons: tuple[str, ...]
    pool_size: int
    pool_mean: float
    pool_variance: float
    entropy: float
    families: tuple[FamilyCalibration, ...]
    rejections: tuple[Rejection, ...]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    hints: Mapping[str, Any] = field(default_factory=dict)
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    namespace: str = ""
    embedding_model: str = ""
    #: What a caller-supplied re-ranker did; None when none ran (none given, or an empty
    #: pool), and then :meth:`Pack.to_dict` leaves the key out, so such packs read as before.
    rerank: Reranking | None = None

    def family(self, name: str) -> FamilyCalibration:
        """The calibration record of family ``name`` (KeyError if it is not in the pool)."""
        for record in self.families:
            if record.family == name:
                return record
        raise KeyError(name)

    @property
    def quarantined(self) -> tuple[str, ...]:
        """The families quarantined by the family alarm, sorted (see FamilyCalibration)."""
        return tuple(record.family for record in self.families if record.quarantined)


@dataclass(frozen=True)
class Pack:
    """An evidence pack: the selected notes in order, and the diagnostics behind them."""

    query: str
    items: tuple[PackItem, ...]
    diagnostics: Diagnostics
    pack_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO 8601, non-finite floats as null)."""
        document: dict[str, Any] = jsonable(asdict(self))
        if document["diagnostics"]["rerank"] is None:
            del document["diagnostics"]["rerank"]
        return document

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)


def jsonable(value: Any) -> Any:
    """``value`` with datetimes as ISO 8601 text and non-finite floats as None (JSON-ready)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def frozen_from_fields(kind: type[_Frozen], values: dict[str, Any]) -> _Frozen:
    """``kind(**values)`` for a frozen dataclass of this module, ``values`` naming every field.

    The frozen ``__init__`` sets each field through ``object.__setattr__`` (27 calls for a
    :class:`FamilyCalibration`); filling the new instance's ``__dict__`` at once gives the
    same object (no type here has a ``__post_init__``), at a third of the cost, for the
    records the read path builds on every pack. Nothing is checked: the caller names
    every field, as ``tests/test_finish_golden.py`` verifies for each type built this way.
    ``values`` itself becomes ``vars(instance)``: pass a dict built for this record.
    """
    instance = object.__new__(kind)
    # Set as the __dict__, not copied into it: ~10 % of a 22-field Candidate's construction.
    object.__setattr__(instance, "__dict__", values)
    return instance
