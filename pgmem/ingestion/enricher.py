"""The enricher: deterministic facets of a note, computed once at write time.

:class:`RuleEnricher` needs no model and no network: entity tags
(:mod:`pgmem.ingestion.entities`, pluggable), time tags (:mod:`pgmem.ingestion.times`),
keywords (:mod:`pgmem.ingestion.keywords`), micro-handles (:mod:`pgmem.ingestion.handles`)
and the role (:mod:`pgmem.ingestion.roles`), plus a context descriptor and a write-time
confidence. Everything the write path needs from an enricher goes through the
:class:`Enricher` protocol, so another one can replace it without touching the writer.
See docs/enrichment.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from pgmem.errors import ConfigurationError
from pgmem.ingestion.entities import (
    STOPWORDS,
    EntityExtractor,
    EntityTag,
    RuleEntityExtractor,
    SpacyEntityExtractor,
    extract_entities,
)
from pgmem.ingestion.handles import extract_handles
from pgmem.ingestion.hints import QueryHints, derive_query_hints
from pgmem.ingestion.keywords import extract_keywords
from pgmem.ingestion.roles import classify_role
from pgmem.ingestion.times import TimeTag, extract_time_tags
from pgmem.validate import at_least, between, whole

__all__ = [
    "STOPWORDS",
    "Enricher",
    "EnricherConfig",
    "Enrichment",
    "EntityExtractor",
    "EntityTag",
    "QueryHints",
    "RuleEnricher",
    "RuleEntityExtractor",
    "SpacyEntityExtractor",
    "SpanInput",
    "TimeTag",
    "classify_role",
    "context_descriptor",
    "derive_query_hints",
    "extract_entities",
    "extract_handles",
    "extract_keywords",
    "extract_time_tags",
]

#: Longest context descriptor the enricher writes (the writer accepts up to 1,024).
MAX_DESCRIPTOR_CHARS = 200
_PART_CHARS = 80
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WORD = re.compile(r"\w+")
# ASCII's non-letters, deleted from an ASCII text to count its letters (str.isalpha).
_ASCII_NON_LETTERS = bytes(code for code in range(128) if not chr(code).isalpha())


def _letters(text: str) -> int:
    """How many characters of ``text`` are letters (``str.isalpha``)."""
    if text.isascii():
        return len(text.encode("ascii").translate(None, _ASCII_NON_LETTERS))
    return sum(map(str.isalpha, text))


@dataclass(frozen=True)
class Enrichment:
    """The write-time facets of one note (see the table in DESIGN.md §2)."""

    role: str
    context: str
    confidence: float
    entities: tuple[EntityTag, ...]
    time_tags: tuple[TimeTag, ...]
    keywords: tuple[str, ...]
    handles: tuple[str, ...]


@dataclass(frozen=True)
class SpanInput:
    """What an enricher sees of a span (already validated)."""

    text: str
    family: str
    source_ts: datetime | None
    role: str | None
    confidence: float | None
    context: str | None
    metadata: Mapping[str, Any]


class Enricher(Protocol):
    """Turns a validated span into its write-time facets."""

    def enrich(self, span: SpanInput) -> Enrichment: ...


@dataclass(frozen=True)
class EnricherConfig:
    """Settings of :class:`RuleEnricher`.

    The write-time confidence of a note that was not given one is the weighted mean

    ``(prior_weight * prior + quality_weight * quality + extraction_weight * extraction)
    / (prior_weight + quality_weight + extraction_weight)``

    where *prior* is ``family_priors[family]`` or else ``source_prior``; *quality* is
    ``min(1, words / quality_words)``, halved when fewer than 40 % of the non-space
    characters are letters (markup, tables, dumps) and scaled by 0.8 for a question;
    *extraction* is the mean confidence of the note's entity and time tags. A note
    with no tag has no extraction term: its weight leaves the denominator too, so an
    absence of names does not read as evidence against the note.

    Attributes
    ----------
    keyword_budget : int
        Keywords kept per note (default 8, 0..64).
    source_prior : float
        Prior confidence of a source whose family has no entry in ``family_priors``
        (default 0.5, in [0, 1]).
    family_priors : mapping of str to float
        Prior confidence per provenance family, each in [0, 1] (default empty).
    prior_weight, quality_weight, extraction_weight : float
        Weights of the three terms (defaults 0.5, 0.3, 0.2; each >= 0, positive sum).
    quality_words : int
        Words at which a span counts as full length (default 12, >= 1).
    min_entity_confidence : float
        Entity tags below this confidence are not written (default 0.0: keep all).
    """

    keyword_budget: int = 8
    source_prior: float = 0.5
    family_priors: Mapping[str, float] = field(default_factory=dict, hash=False)
    prior_weight: float = 0.5
    quality_weight: float = 0.3
    extraction_weight: float = 0.2
    quality_words: int = 12
    min_entity_confidence: float = 0.0

    def __post_init__(self) -> None:
        whole("keyword_budget", self.keyword_budget, 0, 64)
        between("source_prior", self.source_prior, 0.0, 1.0)
        if not isinstance(self.family_priors, Mapping):
            raise ConfigurationError(f"family_priors must be a mapping, got {type(self.family_priors).__name__}")
        for family, prior in self.family_priors.items():
            if not isinstance(family, str):
                raise ConfigurationError(f"family_priors keys must be family ids (strings), got {family!r}")
            between(f"family_priors[{family!r}]", prior, 0.0, 1.0)
        # Freeze a copy so a caller mutating its dict cannot change the enricher.
        object.__setattr__(self, "family_priors", dict(sorted(self.family_priors.items())))
        for name in ("prior_weight", "quality_weight", "extraction_weight"):
            at_least(name, getattr(self, name), 0.0)
        weights = (self.prior_weight, self.quality_weight, self.extraction_weight)
        if sum(weights) <= 0:
            raise ConfigurationError(
                f"prior_weight, quality_weight and extraction_weight must be >= 0 with a positive sum, got {weights}"
            )
        whole("quality_words", self.quality_words, 1)
        between("min_entity_confidence", self.min_entity_confidence, 0.0, 1.0)


def _day(ts: datetime) -> str:
    return f"{ts.day} {_MONTH_NAMES[ts.month - 1]} {ts.year}"


def _part(value: Any) -> str:
    """One metadata value as a short, single-line, NUL-free phrase."""
    if value is None or isinstance(value, bool | Mapping | list | tuple):
        return ""
    text = " ".join(str(value).replace("\x00", " ").split())
    return text if len(text) <= _PART_CHARS else text[: _PART_CHARS - 1].rstrip() + "…"


def context_descriptor(metadata: Mapping[str, Any], source_ts: datetime | None) -> str:
    """A short phrase situating a note.

    Parameters
    ----------
    metadata : mapping
        The span's metadata: ``speaker`` and ``session`` for a conversation turn,
        ``title`` and ``section`` for a document.
    source_ts : datetime, optional
        When the source said it.

    Returns
    -------
    str
        ``"Caroline · session 3 · 8 May 2023"`` for a turn, ``"Doc title › Section"``
        for a document, the date alone when that is all there is, else ``""``.
    """
    speaker = _part(metadata.get("speaker"))
    if speaker:
        parts = [speaker]
        session = _part(metadata.get("session"))
        if session:
            parts.append(session if session.lower().startswith("session") else f"session {session}")
        if source_ts is not None:
            parts.append(_day(source_ts))
        return " · ".join(parts)[:MAX_DESCRIPTOR_CHARS]
    located = [p for p in (_part(metadata.get("title")), _part(metadata.get("section"))) if p]
    if located:
        return " › ".join(located)[:MAX_DESCRIPTOR_CHARS]
    return _day(source_ts) if source_ts is not None else ""


class RuleEnricher:
    """Deterministic, training-free enrichment: no model, no network.

    Parameters
    ----------
    config : EnricherConfig, optional
        Keyword budget and confidence weights (defaults documented there).
    entity_extractor : EntityExtractor, optional
        Replaces the rule-based entity extractor, e.g.
        ``SpacyEntityExtractor(spacy.load("en_core_web_sm"))``. Use the same one for
        :func:`derive_query_hints` so questions and notes are tagged alike.
    """

    def __init__(
        self, config: EnricherConfig | None = None, *, entity_extractor: EntityExtractor | None = None
    ) -> None:
        if config is not None and not isinstance(config, EnricherConfig):
            raise ConfigurationError(f"config must be an EnricherConfig, got {type(config).__name__}")
        if entity_extractor is not None and not callable(getattr(entity_extractor, "extract", None)):
            raise ConfigurationError("entity_extractor must have an extract(text) method")
        self.config = config or EnricherConfig()
        self.entity_extractor: EntityExtractor = entity_extractor or RuleEntityExtractor()

    def enrich(self, span: SpanInput) -> Enrichment:
        """The facets of one span: caller-given role, context and confidence win."""
        config = self.config
        entities = tuple(
            e for e in self.entity_extractor.extract(span.text) if e.confidence >= config.min_entity_confidence
        )
        time_tags = extract_time_tags(span.text, span.source_ts)
        role = span.role or classify_role(span.text, span.metadata, bool(time_tags))
        return Enrichment(
            role=role,
            context=span.context if span.context is not None else context_descriptor(span.metadata, span.source_ts),
            confidence=span.confidence if span.confidence is not None else self.confidence(span, entities, time_tags),
            entities=entities,
            time_tags=time_tags,
            keywords=extract_keywords(span.text, config.keyword_budget),
            handles=extract_handles(span.text),
        )

    def confidence(self, span: SpanInput, entities: tuple[EntityTag, ...], time_tags: tuple[TimeTag, ...]) -> float:
        """Write-time confidence from the source prior, span quality and extraction
        confidences, weighted as :class:`EnricherConfig` documents."""
        config = self.config
        prior = config.family_priors.get(span.family, config.source_prior)
        text = span.text
        words = len(_WORD.findall(text))
        quality = min(1.0, words / config.quality_words)
        visible = len("".join(text.split()))  # characters that are not whitespace (str.isspace)
        if visible and _letters(text) < 0.4 * visible:
            quality *= 0.5
        if text.rstrip().endswith("?"):
            quality *= 0.8
        extracted = [e.confidence for e in entities] + [t.confidence for t in time_tags]
        total = config.prior_weight * prior + config.quality_weight * quality
        weight = config.prior_weight + config.quality_weight
        if extracted:
            total += config.extraction_weight * sum(extracted) / len(extracted)
            weight += config.extraction_weight
        value = total / weight if weight > 0 else prior
        return round(min(1.0, max(0.0, value)), 4)
