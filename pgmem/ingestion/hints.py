"""Query hints: the read side of the write-path extractors.

A question goes through the same entity, time, keyword and handle extractors as a
note, so what a question names matches what the notes were tagged with.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pgmem.errors import InputError
from pgmem.ingestion.entities import EntityExtractor, extract_entities
from pgmem.ingestion.handles import extract_handles
from pgmem.ingestion.keywords import extract_keywords
from pgmem.ingestion.times import extract_time_tags
from pgmem.validate import between, whole

#: Entity tags below this confidence are not hints (a question's first word is weak).
MIN_HINT_ENTITY_CONFIDENCE = 0.5

_QUESTION_WORDS = frozenset(
    """what when where who whom whose which why how did does do is are was were can could would
    should will shall has have had may might must name list describe explain tell give""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class QueryHints:
    """Hints derived from a question, ready for :func:`pgmem.pack`.

    Attributes
    ----------
    entities : tuple of str
        Entities named with confidence >= 0.5, question words excluded.
    time_from, time_to : datetime or None
        The hull [time_from, time_to) of every resolvable time expression, or None.
    keywords : tuple of str
        Lower-cased question-oriented keywords.
    handles : tuple of str
        Exact strings (ids, versions, URLs, quoted titles, ...).
    """

    entities: tuple[str, ...] = ()
    time_from: datetime | None = None
    time_to: datetime | None = None
    keywords: tuple[str, ...] = ()
    handles: tuple[str, ...] = ()


def derive_query_hints(
    question: str,
    now: datetime | None = None,
    *,
    entity_extractor: EntityExtractor | None = None,
    keyword_budget: int = 8,
    min_entity_confidence: float = MIN_HINT_ENTITY_CONFIDENCE,
) -> QueryHints:
    """Entities, a time range, keywords and handles named in ``question``.

    Parameters
    ----------
    question : str
        The question, e.g. ``"What did Caroline do in May 2023?"``.
    now : datetime, optional
        Anchor for relative expressions ("last week"); without it they are dropped.
        A naive datetime is taken as UTC.
    entity_extractor : EntityExtractor, optional
        The extractor the notes were enriched with (default: the rule extractor).
    keyword_budget : int
        Keywords kept at most (default 8).
    min_entity_confidence : float
        Entities below this confidence are left out (default 0.5).

    Returns
    -------
    QueryHints
        ``entities=("Caroline",)``, ``time_from=2023-05-01``, ``time_to=2023-06-01``
        and ``keywords=("caroline",)`` for the example above.

    Raises
    ------
    InputError
        If ``question`` is not a string.
    ConfigurationError
        If ``keyword_budget`` or ``min_entity_confidence`` is out of range.
    """
    if not isinstance(question, str):
        raise InputError(f"question must be a string, got {type(question).__name__}")
    whole("keyword_budget", keyword_budget, 0, 64)
    between("min_entity_confidence", min_entity_confidence, 0.0, 1.0)
    tags = entity_extractor.extract(question) if entity_extractor is not None else extract_entities(question)
    entities: dict[str, str] = {}
    for tag in tags:
        folded = tag.text.casefold()
        if tag.confidence >= min_entity_confidence and folded not in _QUESTION_WORDS:
            entities.setdefault(folded, tag.text)
    times = extract_time_tags(question, now)
    return QueryHints(
        entities=tuple(entities.values()),
        time_from=min((t.start for t in times), default=None),
        time_to=max((t.end for t in times), default=None),
        keywords=extract_keywords(question, keyword_budget),
        handles=extract_handles(question),
    )
