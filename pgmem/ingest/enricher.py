"""The enricher: deterministic facets of a note, computed once at write time.

:class:`RuleEnricher` is the first, rule-based implementation: regular expressions
and small word lists, no model and no network. Everything the write path needs from
an enricher goes through the :class:`Enricher` protocol, so a richer one (spaCy,
GLiNER, a date parser) can replace it without touching the writer.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pgmem.errors import ConfigurationError
from pgmem.params import ROLES
from pgmem.validate import at_least, between, whole


@dataclass(frozen=True)
class EntityTag:
    text: str
    confidence: float


@dataclass(frozen=True)
class TimeTag:
    """A normalised time expression: the half-open interval [start, end)."""

    text: str
    start: datetime
    end: datetime
    granularity: str
    confidence: float


@dataclass(frozen=True)
class Enrichment:
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

    Attributes
    ----------
    keyword_budget : int
        Keywords kept per note (default 8).
    source_prior : float
        Prior confidence of any source (default 0.5).
    prior_weight, quality_weight, extraction_weight : float
        Write-time confidence = weighted mean of the source prior, the span quality
        (length: very short spans carry little) and the mean extraction confidence
        (defaults 0.5, 0.3, 0.2; they must sum to a positive number).
    """

    keyword_budget: int = 8
    source_prior: float = 0.5
    prior_weight: float = 0.5
    quality_weight: float = 0.3
    extraction_weight: float = 0.2

    def __post_init__(self) -> None:
        whole("keyword_budget", self.keyword_budget, 0, 64)
        between("source_prior", self.source_prior, 0.0, 1.0)
        for name in ("prior_weight", "quality_weight", "extraction_weight"):
            at_least(name, getattr(self, name), 0.0)
        weights = (self.prior_weight, self.quality_weight, self.extraction_weight)
        if sum(weights) <= 0:
            raise ConfigurationError(
                f"prior_weight, quality_weight and extraction_weight must be >= 0 with a positive sum, got {weights}"
            )


STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also yes oh ok okay yeah hey hi hello really so well like
    just got get going gonna thanks thank one would could much many
    """.split()  # noqa: SIM905 - a word list reads best as text
)

# Capitalised only because they open a sentence: never the first word of a name.
_LEADING_NOISE = STOPWORDS | frozenset(
    """yesterday today tomorrow tonight monday tuesday wednesday thursday friday saturday
    sunday last next this after before when while then however meanwhile""".split()  # noqa: SIM905
)

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"

_HANDLE_PATTERNS = (
    re.compile(r"https?://[^\s<>\"')\]]+[^\s<>\"')\].,;:!?]"),
    re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"),
    re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,7}\b"),
    re.compile(r"\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bv\d+(?:\.\d+)?\b"),
    re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|trillion|bn|[mkb])\b)?", re.I),
    re.compile(
        r"\b\d[\d,]*(?:\.\d+)?\s?(?:%|percent\b|kg\b|km\b|cm\b|mm\b|mg\b|ml\b|gb\b|mb\b|tb\b"
        r"|kb\b|ms\b|mph\b|usd\b|eur\b|gbp\b|miles\b|hours\b|minutes\b|years\b|days\b)",
        re.I,
    ),
    re.compile(r"#[A-Za-z_]\w+"),
    re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"),
)
_QUOTED = re.compile(r"[\"“]([^\"”\n]{2,80})[\"”]")
_ENTITY = re.compile(r"\b[A-Z][\w'’&.-]*(?:\s+(?:(?:of|the|de|la|van|von|and|for)\s+)?[A-Z][\w'’&.-]*)*")
_ACRONYM = re.compile(r"\b[A-Z]{2,6}s?\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)\W*$")
_WORD = re.compile(r"\w+", re.UNICODE)

_ISO_DATE = re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b")
_DAY_MONTH_YEAR = re.compile(r"\b(?P<day>\d{1,2})(?:st|nd|rd|th)?\s+" + _MONTH + r",?\s+(?P<year>\d{4})\b", re.I)
_MONTH_DAY_YEAR = re.compile(r"\b" + _MONTH + r"\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<year>\d{4})\b", re.I)
_MONTH_YEAR = re.compile(r"\b" + _MONTH + r"\s+(?P<year>\d{4})\b", re.I)
_YEAR = re.compile(r"\b(?P<year>(?:19|20)\d{2})\b")
_RELATIVE = re.compile(
    r"\b(?P<expr>yesterday|today|tonight|tomorrow|(?:last|next|this)\s+(?:week|month|year))\b",
    re.I,
)

_ROLE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("summary", re.compile(r"^\s*(?:in summary|to summari[sz]e|overall|in short|tl;dr)\b", re.I)),
    (
        "procedure",
        re.compile(
            r"^\s*(?:step\s+\d+|\d+[.)]\s|first,|then,|to\s+\w+.*,\s*(?:run|use|click|open|set))",
            re.I,
        ),
    ),
    (
        "definition",
        re.compile(r"^\s*[\w\s'’-]{1,60}?\b(?:is defined as|refers to|stands for|means|is an?|are)\b", re.I),
    ),
    (
        "claim",
        re.compile(
            r"\b(?:i think|i believe|in my opinion|i feel|should|must|arguably|probably|clearly)\b",
            re.I,
        ),
    ),
)


def _interval(year: int, month: int | None = None, day: int | None = None) -> tuple[datetime, datetime, str]:
    if month is None:
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), "year"
    if day is None:
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
        return start, end, "month"
    start = datetime(year, month, day, tzinfo=UTC)
    return start, start + timedelta(days=1), "day"


def _month(value: str) -> int | None:
    return _MONTHS.get(value.lower().rstrip("."))


def extract_time_tags(text: str, anchor: datetime | None) -> tuple[TimeTag, ...]:
    """Absolute dates, months and years, and relative words resolved against ``anchor``."""
    tags: list[TimeTag] = []
    taken: list[tuple[int, int]] = []

    def add(match: re.Match[str], year: int, month: int | None, day: int | None, confidence: float) -> None:
        if any(s < match.end() and match.start() < e for s, e in taken):
            return  # a more specific expression already covers this text
        try:
            start, end, granularity = _interval(year, month, day)
        except ValueError:
            return  # 31 February and the like: not a date
        taken.append((match.start(), match.end()))
        tags.append(TimeTag(match.group(0), start, end, granularity, confidence))

    for match in _ISO_DATE.finditer(text):
        add(match, int(match["year"]), int(match["month"]), int(match["day"]), 0.95)
    for pattern in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR):
        for match in pattern.finditer(text):
            add(match, int(match["year"]), _month(match["month"]), int(match["day"]), 0.9)
    for match in _MONTH_YEAR.finditer(text):
        add(match, int(match["year"]), _month(match["month"]), None, 0.85)
    for match in _YEAR.finditer(text):
        add(match, int(match["year"]), None, None, 0.6)
    if anchor is not None:
        day = anchor.astimezone(UTC)
        for match in _RELATIVE.finditer(text):
            expr = " ".join(match["expr"].lower().split())
            if expr in ("yesterday", "today", "tonight", "tomorrow"):
                shift = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}[expr]
                target = day + timedelta(days=shift)
                add(match, target.year, target.month, target.day, 0.7)
                continue
            direction, unit = expr.split()
            step = {"last": -1, "this": 0, "next": 1}[direction]
            if unit == "year":
                add(match, day.year + step, None, None, 0.7)
            elif unit == "month":
                index = day.year * 12 + day.month - 1 + step
                add(match, index // 12, index % 12 + 1, None, 0.7)
            else:
                monday = datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(days=day.weekday())
                start = monday + timedelta(weeks=step)
                if not any(s < match.end() and match.start() < e for s, e in taken):
                    taken.append((match.start(), match.end()))
                    tags.append(TimeTag(match.group(0), start, start + timedelta(weeks=1), "week", 0.6))
    return tuple(sorted(tags, key=lambda t: (t.start, t.end, t.text)))


def extract_handles(text: str) -> tuple[str, ...]:
    """Exact strings worth matching verbatim: URLs, e-mails, ids, versions, amounts, ..."""
    found: dict[str, None] = {}
    for pattern in _HANDLE_PATTERNS:
        for match in pattern.finditer(text):
            found.setdefault(match.group(0).strip(), None)
    for match in _QUOTED.finditer(text):
        found.setdefault(match.group(1).strip(), None)
    return tuple(found)


def extract_entities(text: str) -> tuple[EntityTag, ...]:
    """Capitalised names and acronyms, each with a confidence from how it was found."""
    scores: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for match in _ENTITY.finditer(text):
        name = match.group(0).rstrip(".'’-&")
        words = name.split()
        at_start = bool(_SENTENCE_START.search(text[: match.start()]))
        if at_start and len(words) > 1 and words[0].lower() in _LEADING_NOISE:
            words = words[1:]
            name = " ".join(words)
            at_start = False
        if len(words) == 1 and (name.lower() in STOPWORDS or len(name) < 2):
            continue
        if len(words) > 1:
            confidence = 0.8
        elif at_start:
            confidence = 0.35
        else:
            confidence = 0.6
        counts[name] += 1
        scores[name] = max(scores.get(name, 0.0), confidence)
    for match in _ACRONYM.finditer(text):
        name = match.group(0)
        if name.rstrip("s").lower() in STOPWORDS or name == "I":
            continue
        counts[name] += 1
        scores[name] = max(scores.get(name, 0.0), 0.7)
    return tuple(
        EntityTag(name, round(min(1.0, score + 0.1 * (counts[name] - 1)), 4)) for name, score in sorted(scores.items())
    )


def extract_keywords(text: str, budget: int) -> tuple[str, ...]:
    """Up to ``budget`` content words, favouring names and numbers, then frequency."""
    weights: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, match in enumerate(_WORD.finditer(text)):
        word = match.group(0)
        key = word.lower()
        if key in STOPWORDS or (len(key) < 3 and not key.isdigit()):
            continue
        bonus = 2.0 if (word[0].isupper() or word.isdigit()) else 1.0
        weights[key] = weights.get(key, 0.0) + bonus
        first.setdefault(key, index)
    ranked = sorted(weights, key=lambda k: (-weights[k], first[k]))
    return tuple(ranked[:budget])


def classify_role(text: str, metadata: Mapping[str, Any], has_time: bool) -> str:
    """The first matching rule's role; dialogue for conversation turns; else fact/other."""
    if metadata.get("speaker"):
        return "dialogue"
    for role, pattern in _ROLE_RULES:
        if pattern.search(text):
            return role
    if has_time and re.search(r"\b\w+ed\b", text):
        return "event"
    if re.search(r"\d|\b[A-Z][a-z]+\b", text[1:]):
        return "fact"
    return "other"


class RuleEnricher:
    """Deterministic, training-free enrichment with regular expressions and word lists."""

    def __init__(self, config: EnricherConfig | None = None) -> None:
        self.config = config or EnricherConfig()

    def enrich(self, span: SpanInput) -> Enrichment:
        entities = extract_entities(span.text)
        time_tags = extract_time_tags(span.text, span.source_ts)
        role = span.role or classify_role(span.text, span.metadata, bool(time_tags))
        if role not in ROLES:
            raise ConfigurationError(f"enricher produced unknown role {role!r}")
        return Enrichment(
            role=role,
            context=span.context if span.context is not None else self._context(span),
            confidence=span.confidence if span.confidence is not None else self._confidence(span, entities, time_tags),
            entities=entities,
            time_tags=time_tags,
            keywords=extract_keywords(span.text, self.config.keyword_budget),
            handles=extract_handles(span.text),
        )

    def _context(self, span: SpanInput) -> str:
        parts = [str(span.metadata[key]).strip() for key in ("speaker", "title", "section") if span.metadata.get(key)]
        if span.source_ts is not None:
            ts = span.source_ts.astimezone(UTC)
            parts.append(f"{ts.day} {ts:%B %Y}")
        return " · ".join(parts)

    def _confidence(self, span: SpanInput, entities: tuple[EntityTag, ...], time_tags: tuple[TimeTag, ...]) -> float:
        c = self.config
        words = len(_WORD.findall(span.text))
        quality = min(1.0, words / 12)
        extracted = [e.confidence for e in entities] + [t.confidence for t in time_tags]
        extraction = sum(extracted) / len(extracted) if extracted else c.source_prior
        total = c.prior_weight + c.quality_weight + c.extraction_weight
        value = (
            c.prior_weight * c.source_prior + c.quality_weight * quality + c.extraction_weight * extraction
        ) / total
        return round(min(1.0, max(0.0, value)), 4)
