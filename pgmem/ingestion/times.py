"""Time tags: absolute and relative time expressions as half-open intervals.

Candidates are found by one pass of a combined regular expression (fast, and the
alternation order makes the most specific form win where two overlap). Each
candidate is turned into a hashable key; the key is resolved, together with the
anchor's calendar day for relative forms, by a cached function: absolute dates are
read by :func:`dateutil.parser.parse`, calendar arithmetic (months, years, "last
Friday") is :class:`dateutil.relativedelta.relativedelta`. A conversation repeats
the same few expressions against the same session day, so almost every resolution is
a cache hit.

Every interval is a range of calendar days expressed at UTC midnight: "8 May 2023"
is [2023-05-08T00:00Z, 2023-05-09T00:00Z) whatever the anchor's time zone. Relative
expressions are resolved against the anchor's *local* calendar day (a session held at
23:30 in New York on 8 May is 8 May there). Relative expressions without an anchor
are dropped: there is nothing to resolve them against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache

from dateutil import parser as date_parser
from dateutil.relativedelta import FR, MO, SA, SU, TH, TU, WE, relativedelta, weekday


@dataclass(frozen=True)
class TimeTag:
    """A normalised time expression: the half-open interval [start, end).

    Attributes
    ----------
    text : str
        The expression as written.
    start, end : datetime
        Aware (UTC) bounds, ``start < end``.
    granularity : str
        ``day``, ``week``, ``month``, ``season``, ``year`` or ``decade``.
    confidence : float
        In [0, 1]: high for a full absolute date, lower for a resolved relative
        expression, lowest for a bare year or a vague count ("a few weeks ago").
    """

    text: str
    start: datetime
    end: datetime
    granularity: str
    confidence: float


#: Confidence of each kind of expression (see docs/enrichment.md for the rationale).
CONFIDENCE: dict[str, float] = {
    "iso_date": 0.95,
    "full_date": 0.9,
    "numeric_date_unambiguous": 0.85,
    "numeric_date_ambiguous": 0.6,
    "month_year": 0.85,
    "season_year": 0.75,
    "winter_year": 0.6,
    "decade": 0.55,
    "decade_two_digit": 0.45,
    "year_with_cue": 0.6,
    "year": 0.5,
    "relative_day": 0.8,
    "relative_night": 0.75,
    "count_ago": 0.75,
    "count_ahead": 0.55,
    "vague_count": 0.45,
    "past_span": 0.55,
    "shift_calendar": 0.7,
    "shift_partial": 0.6,
    "shift_weekend": 0.6,
    "shift_season": 0.6,
    "shift_month_name": 0.65,
    "shift_weekday": 0.65,
    "this_weekday": 0.6,
    "weekday": 0.45,
    "month_day": 0.6,
    "cue_month": 0.5,
}

_MONTH_NUMBERS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_WEEKDAYS: dict[str, weekday] = {
    "monday": MO,
    "tuesday": TU,
    "wednesday": WE,
    "thursday": TH,
    "friday": FR,
    "saturday": SA,
    "sunday": SU,
}
_SEASON_START_MONTH = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
# Vague counts become a range of counts; the interval covers all of them.
_VAGUE_COUNTS = {"couple": (2, 2), "few": (2, 4), "several": (3, 7)}
# A four-digit number after one of these is a year even outside 1900-2099.
_YEAR_CUES = frozenset(
    [
        "in",
        "since",
        "during",
        "by",
        "until",
        "till",
        "from",
        "of",
        "before",
        "after",
        "around",
        "circa",
        "year",
        "early",
        "late",
        "mid",
        "spring",
        "summer",
        "autumn",
        "fall",
        "winter",
    ]
)
# A four-digit number before one of these counts things, it is not a year.
_COUNTED = frozenset(
    [
        "people",
        "dollars",
        "euros",
        "pounds",
        "miles",
        "km",
        "kg",
        "calories",
        "steps",
        "words",
        "pages",
        "points",
        "members",
        "followers",
        "times",
        "feet",
        "meters",
        "metres",
        "students",
        "users",
        "items",
        "units",
        "rupees",
        "yen",
        "kids",
        "children",
        "votes",
        "copies",
        "views",
        "likes",
    ]
)

# Case-insensitive month names are only used next to digits ("may 8, 2023"); alone,
# "may" and "march" are verbs, so a bare month must be capitalised and spelled out.
_MONTH_ANY = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_MONTH_FULL = r"(?-i:January|February|March|April|May|June|July|August|September|October|November|December)"
_MONTH_CAPITALISED = (
    r"(?-i:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_WEEKDAY = r"(?-i:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_SEASON = r"(?:spring|summer|autumn|fall|winter)"
_ORDINAL_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR4 = r"(?:1\d|20|21)\d\d"
_COUNT = (
    r"\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
    r"|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several"
)
_UNIT = r"day|week|month|year|decade"
# "in May 2023", "last May 2023", "Monday, 8 May 2023": the date after the cue is the
# expression; the cue must not claim the month (or weekday) for itself.
_NO_DATE_AFTER = rf"(?!,?\s+(?:of\s+|the\s+)?(?:\d|{_MONTH_CAPITALISED}\s*\d))"

# Order matters: at one position the first alternative that matches wins, so the
# longer, more specific forms come before the shorter ones they contain.
_ALTERNATIVES = (
    ("iso", r"(?P<iso>\d{4}-\d{1,2}-\d{1,2}|\d{4}/\d{1,2}/\d{1,2})(?![\d/-])"),
    ("dmy", rf"(?:the\s+)?{_ORDINAL_DAY}(?:\s+of)?\s+{_MONTH_ANY},?\s+{_YEAR4}(?!\d)"),
    ("mdy", rf"{_MONTH_ANY}\s+(?:the\s+)?{_ORDINAL_DAY},?\s+{_YEAR4}(?!\d)"),
    ("numeric", r"\d{1,2}/\d{1,2}/\d{4}(?![\d/])"),
    ("my", rf"{_MONTH_ANY}\s+(?:of\s+)?{_YEAR4}(?!\d)"),
    ("sy", rf"(?:the\s+)?(?P<sy_season>{_SEASON})\s+(?:of\s+)?(?P<sy_year>{_YEAR4})(?!\d)"),
    (
        "decade",
        # Two-digit decades need "the" or an apostrophe: "in their 80s" is an age.
        r"the\s+(?:(?P<dec_mod2>early|mid|late)[\s-]+)?(?P<dec2>\d0)s"
        r"|(?:the\s+)?(?:(?P<dec_mod>early|mid|late)[\s-]+)?(?:(?P<dec4>\d{3}0)'?s|'(?P<dec2q>\d0)s)",
    ),
    (
        "relday",
        r"(?P<relday>(?:the\s+)?day\s+before\s+yesterday|(?:the\s+)?day\s+after\s+tomorrow|yesterday|today|tonight"
        r"|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening))",
    ),
    ("ago", rf"(?P<ago_n>{_COUNT})\s+(?P<ago_u>{_UNIT})s?\s+(?:ago|back)"),
    (
        "ahead",
        rf"(?:in\s+(?P<in_n>{_COUNT})\s+(?P<in_u>{_UNIT})s?|(?P<fn_n>{_COUNT})\s+(?P<fn_u>{_UNIT})s?\s+from\s+now)",
    ),
    ("span", rf"(?:the\s+)?(?:past|last)\s+(?P<span_n>{_COUNT})\s+(?P<span_u>{_UNIT})s"),
    (
        "shift",
        r"(?:the\s+)?(?:(?P<sh_part>earlier|later)\s+)?(?P<sh_dir>this\s+past|this\s+coming|last|this|next|past"
        rf"|coming)\s+(?P<sh_u>weekend|week|month|year|{_SEASON}|{_MONTH_FULL}|{_WEEKDAY}){_NO_DATE_AFTER}",
    ),
    (
        "md",
        rf"{_MONTH_CAPITALISED}\s+(?:the\s+)?{_ORDINAL_DAY}(?![\d:,.]\d)"
        rf"|(?:the\s+)?{_ORDINAL_DAY}\s+(?:of\s+)?{_MONTH_CAPITALISED}",
    ),
    ("cue_month", rf"(?:in|during|since|until|through|early|late|mid-?)\s+(?P<cm_month>{_MONTH_FULL}){_NO_DATE_AFTER}"),
    ("weekday", rf"(?P<weekday>{_WEEKDAY}){_NO_DATE_AFTER}"),
    ("year", rf"(?P<year>{_YEAR4})(?![\d'’]|s\b|[-/]\d)"),
)
_TIME = re.compile(
    r"(?<![\w$€£#])(?:" + "|".join(f"(?P<{kind}_>{pattern})" for kind, pattern in _ALTERNATIVES) + r")(?!\w)",
    re.IGNORECASE,
)
# A word every alternative of _TIME needs when it holds no digit (relday: day, night,
# tomorrow, morning, afternoon, evening; ago, ahead and span: their unit; shift: its unit,
# a season, a month or a weekday, which ends in "day"; weekday: "day"; cue_month: a
# month); the month names are matched case-sensitively there, so they are here. Every
# other alternative needs a digit. Without any of them an ASCII text holds no time
# expression, and the regular expression (the enricher's costliest step) is not run.
_TIME_WORDS = (
    "day", "night", "tomorrow", "morning", "afternoon", "evening", "week", "month", "year", "decade",
    "spring", "summer", "autumn", "fall", "winter",
)  # fmt: skip
_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December",
)  # fmt: skip
_ASCII_DIGIT = re.compile(r"[0-9]")


def _may_hold_time(text: str) -> bool:
    """False only when ``_TIME`` cannot match ``text``: ASCII without a digit or any of the
    words above (a text with other characters is always searched: Unicode digits and the
    letters case-insensitive matching equates with ASCII ones match too)."""
    if not text.isascii() or _ASCII_DIGIT.search(text) is not None:
        return True
    lowered = text.lower()
    return any(word in lowered for word in _TIME_WORDS) or any(month in text for month in _MONTH_NAMES)


# Case-insensitive matching equates four non-ASCII letters with ASCII ones (the long s
# with s, the dotless and the dotted capital i with i, the Kelvin sign with k): a matched
# word is folded to ASCII before it is looked up, so "laſt May" reads as "last May" instead
# of failing the lookup (every word the lookups hold is ASCII).
_ASCII_FOLD = str.maketrans({"\u017f": "s", "\u0131": "i", "\u0130": "i", "\u212a": "k"})
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[a-z]+")
_NEXT_WORD = re.compile(r"\s*([A-Za-z]+)")
_PREVIOUS_WORD = re.compile(r"([A-Za-z]+)[\s-]*$")

#: An interval of calendar days: (first day, first day after, granularity, confidence).
Resolved = tuple[date, date, str, float]
#: A normalised expression: a kind, then its parameters.
Key = tuple[str | int, ...]


def _lower(text: str) -> str:
    """``text`` lower-cased with the letters case-insensitive matching equates with ASCII ones folded to them."""
    return text.translate(_ASCII_FOLD).lower()


def _month_number(name: str) -> int:
    return _MONTH_NUMBERS[_lower(name)[:3]]


def _count(value: str) -> tuple[int, int, bool]:
    """(lowest, highest, vague) for a count such as "3", "two", "a few"."""
    words = _lower(value).split()
    if words[-1] == "of":
        words = words[:-1]
    if words[-1] in _VAGUE_COUNTS:
        low, high = _VAGUE_COUNTS[words[-1]]
        return low, high, words[-1] != "couple"
    if words[-1].isdigit():
        number = int(words[-1])
        return number, number, False
    number = _NUMBER_WORDS[words[-1]]
    return number, number, False


def _unit_interval(day: date, unit: str) -> tuple[date, date]:
    """The calendar unit (day, ISO week, month, year, decade) that contains ``day``."""
    if unit == "day":
        return day, day + timedelta(days=1)
    if unit == "week":
        monday = day - timedelta(days=day.weekday())
        return monday, monday + timedelta(weeks=1)
    if unit == "month":
        first = day.replace(day=1)
        return first, first + relativedelta(months=1)
    if unit == "year":
        return date(day.year, 1, 1), date(day.year + 1, 1, 1)
    first_year = day.year - day.year % 10
    return date(first_year, 1, 1), date(first_year + 10, 1, 1)


def _step(unit: str, count: int) -> relativedelta:
    if unit == "day":
        return relativedelta(days=count)
    if unit == "week":
        return relativedelta(weeks=count)
    if unit == "month":
        return relativedelta(months=count)
    return relativedelta(years=count * (10 if unit == "decade" else 1))


def _season(name: str, year: int) -> tuple[date, date]:
    """Meteorological seasons of the northern hemisphere; winter Y is Dec Y - Feb Y+1."""
    first = date(year, _SEASON_START_MONTH[name], 1)
    return first, first + relativedelta(months=3)


@lru_cache(maxsize=4096)
def _parse_absolute(expression: str) -> date:
    # Missing parts default to the first day of the first month; the regex that found
    # the candidate already decided its granularity.
    parsed = date_parser.parse(expression, default=datetime(2000, 1, 1))
    return parsed.date()


def _resolve_absolute(key: Key) -> Resolved | None:
    kind = key[0]
    if kind in ("iso", "dmy", "mdy", "numeric"):
        expression = str(key[1])
        if kind == "numeric":
            leading, following, _ = (int(part) for part in expression.split("/"))
            ambiguous = leading <= 12 and following <= 12 and leading != following
            confidence = CONFIDENCE["numeric_date_ambiguous" if ambiguous else "numeric_date_unambiguous"]
            # dateutil reads an ambiguous numeric date month first, as US usage does.
            day = _parse_absolute(expression)
        else:
            day = _parse_absolute(expression)
            confidence = CONFIDENCE["iso_date" if kind == "iso" else "full_date"]
        return day, day + timedelta(days=1), "day", confidence
    if kind == "my":
        first_day = _parse_absolute(str(key[1])).replace(day=1)
        return first_day, first_day + relativedelta(months=1), "month", CONFIDENCE["month_year"]
    if kind == "sy":
        name, year = str(key[1]), int(key[2])
        start, end = _season(name, year)
        return start, end, "season", CONFIDENCE["winter_year" if name == "winter" else "season_year"]
    if kind == "decade":
        first_year, modifier, two_digit = int(key[1]), str(key[2]), bool(key[3])
        offsets = {"": (0, 10), "early": (0, 4), "mid": (3, 7), "late": (6, 10)}[modifier]
        confidence = CONFIDENCE["decade_two_digit" if two_digit else "decade"]
        return date(first_year + offsets[0], 1, 1), date(first_year + offsets[1], 1, 1), "decade", confidence
    if kind == "year":
        year, cued = int(key[1]), bool(key[2])
        return date(year, 1, 1), date(year + 1, 1, 1), "year", CONFIDENCE["year_with_cue" if cued else "year"]
    return None


def _this_weekend(today: date) -> date:
    """Saturday of the ISO week of ``today``."""
    return today - timedelta(days=today.weekday()) + timedelta(days=5)


def _season_relative(name: str, direction: int, today: date) -> tuple[date, date]:
    if direction < 0:
        # The latest one that is over: in October, "last summer" is this year's.
        year = today.year
        while _season(name, year)[1] > today:
            year -= 1
    elif direction > 0:
        year = today.year
        while _season(name, year)[0] <= today:
            year += 1
    else:
        # This winter, in January, began in December of the year before.
        year = today.year - 1 if name == "winter" and today.month < 3 else today.year
    return _season(name, year)


def _resolve_shift(direction: int, unit: str, part: str, today: date) -> Resolved:
    if unit in ("week", "month", "year"):
        start, end = _unit_interval(today + _step(unit, direction), unit)
        if part:
            # "earlier this week" ends today; "later this month" starts today.
            start, end = (start, today + timedelta(days=1)) if part == "earlier" else (today, end)
            return start, end, unit, CONFIDENCE["shift_partial"]
        return start, end, unit, CONFIDENCE["shift_calendar"]
    if unit == "weekend":
        saturday = _this_weekend(today) + timedelta(weeks=direction)
        return saturday, saturday + timedelta(days=2), "week", CONFIDENCE["shift_weekend"]
    if unit in _SEASON_START_MONTH:
        start, end = _season_relative(unit, direction, today)
        return start, end, "season", CONFIDENCE["shift_season"]
    if unit in _WEEKDAYS:
        target = _WEEKDAYS[unit]
        if direction < 0:
            day = today + relativedelta(days=-1, weekday=target(-1))
        elif direction > 0:
            day = today + relativedelta(days=+1, weekday=target(+1))
        else:
            day = today - timedelta(days=today.weekday()) + timedelta(days=target.weekday)
            return day, day + timedelta(days=1), "day", CONFIDENCE["this_weekday"]
        return day, day + timedelta(days=1), "day", CONFIDENCE["shift_weekday"]
    month = _month_number(unit)
    year = today.year
    if direction < 0 and month >= today.month:
        year -= 1
    elif direction > 0 and month <= today.month:
        year += 1
    first = date(year, month, 1)
    return first, first + relativedelta(months=1), "month", CONFIDENCE["shift_month_name"]


def _resolve_relative(key: Key, today: date) -> Resolved | None:
    kind = key[0]
    if kind == "relday":
        offset, night = int(key[1]), bool(key[2])
        day = today + timedelta(days=offset)
        return day, day + timedelta(days=1), "day", CONFIDENCE["relative_night" if night else "relative_day"]
    if kind in ("ago", "ahead"):
        low, high, vague, unit = int(key[1]), int(key[2]), bool(key[3]), str(key[4])
        sign = -1 if kind == "ago" else 1
        near = _unit_interval(today + _step(unit, sign * low), unit)
        far = _unit_interval(today + _step(unit, sign * high), unit)
        start, end = min(near[0], far[0]), max(near[1], far[1])
        exact = CONFIDENCE["count_ago" if kind == "ago" else "count_ahead"]
        return start, end, unit, CONFIDENCE["vague_count"] if vague else exact
    if kind == "span":
        high, vague, unit = int(key[1]), bool(key[2]), str(key[3])
        start = today - _step(unit, high)
        return start, today + timedelta(days=1), unit, CONFIDENCE["vague_count" if vague else "past_span"]
    if kind == "shift":
        return _resolve_shift(int(key[1]), str(key[2]), str(key[3]), today)
    if kind == "weekday":
        # Said without "last" or "next", a weekday is most often one just past.
        day = today + relativedelta(weekday=_WEEKDAYS[str(key[1])](-1))
        return day, day + timedelta(days=1), "day", CONFIDENCE["weekday"]
    if kind == "md":
        day = date(today.year, int(key[1]), int(key[2]))
        return day, day + timedelta(days=1), "day", CONFIDENCE["month_day"]
    if kind == "cue_month":
        first = date(today.year, int(key[1]), 1)
        return first, first + relativedelta(months=1), "month", CONFIDENCE["cue_month"]
    return None


@lru_cache(maxsize=16384)
def _resolve(key: Key, today: date | None) -> Resolved | None:
    try:
        if today is None:
            return _resolve_absolute(key)
        return _resolve_relative(key, today)
    except (ValueError, OverflowError, date_parser.ParserError):
        # Not a representable calendar date (31 February, year 0, beyond year 9999):
        # the text is not a time expression, so it gets no tag.
        return None


def _key(kind: str, match: re.Match[str], text: str) -> tuple[Key, bool] | None:
    """The normalised key of a candidate, and whether it needs an anchor."""
    expression = " ".join(_lower(match.group(0)).split())
    if kind in ("iso", "dmy", "mdy", "numeric", "my"):
        # dateutil does not read "the 8th of May": drop the words it would trip on.
        cleaned = re.sub(r"\b(?:the|of)\b", " ", expression).replace(",", " ")
        return (kind, " ".join(cleaned.split())), False
    if kind == "sy":
        return ("sy", _lower(match["sy_season"]), int(match["sy_year"])), False
    if kind == "decade":
        modifier = _lower(match["dec_mod"] or match["dec_mod2"] or "")
        if match["dec4"]:
            return ("decade", int(match["dec4"]), modifier, 0), False
        # "the 90s" is the 1990s, "the 10s" the 2010s: the most recent such decade
        # before the 2030s, which is right for nearly every text written today.
        two = int(match["dec2"] or match["dec2q"])
        return ("decade", (1900 if two >= 30 else 2000) + two, modifier, 1), False
    if kind == "year":
        year = int(match["year"])
        previous = _PREVIOUS_WORD.search(text, max(0, match.start() - 12), match.start())
        cued = previous is not None and previous.group(1).lower() in _YEAR_CUES
        following = _NEXT_WORD.match(text, match.end())
        if following is not None and following.group(1).lower() in _COUNTED:
            return None
        if not cued and not 1900 <= year <= 2099:
            return None
        return ("year", year, int(cued)), False
    if kind == "relday":
        words = expression.split()
        offset = {"yesterday": -1, "tomorrow": 1}.get(words[-1], 0)
        if "before" in words:
            offset = -2
        elif "after" in words:
            offset = 2
        elif words[0] == "last":
            offset = -1
        return ("relday", offset, int(words[-1] == "night")), True
    if kind in ("ago", "ahead", "span"):
        prefix = {"ago": "ago", "span": "span"}.get(kind) or ("in" if match["in_n"] else "fn")
        low, high, vague = _count(match[f"{prefix}_n"])
        unit = _lower(match[f"{prefix}_u"])
        if kind == "span":
            return ("span", high, int(vague), unit), True
        return (kind, low, high, int(vague), unit), True
    if kind == "shift":
        direction_words = _lower(match["sh_dir"]).split()
        direction = {"last": -1, "past": -1, "this": 0, "next": 1, "coming": 1}[direction_words[-1]]
        unit = _lower(match["sh_u"])
        part = _lower(match["sh_part"] or "")
        if direction_words == ["past"] and unit in ("week", "month", "year"):
            # "the past month" is the last thirty-odd days, not the previous calendar month.
            return ("span", 1, 0, unit), True
        return ("shift", direction, unit, part), True
    if kind == "md":
        day = int(_DIGITS.findall(expression)[0])
        month = next(word for word in _WORD.findall(expression) if word[:3] in _MONTH_NUMBERS and word != "of")
        return ("md", _month_number(month), day), True
    if kind == "cue_month":
        return ("cue_month", _month_number(match["cm_month"])), True
    if kind == "weekday":
        return ("weekday", _lower(match["weekday"])), True
    return None


def _text_span(kind: str, match: re.Match[str]) -> tuple[int, int]:
    # The cue word ("in", "during") situates a bare month but is not part of it.
    if kind == "cue_month":
        return match.span("cm_month")
    return match.span()


def _as_datetime(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def extract_time_tags(text: str, anchor: datetime | None) -> tuple[TimeTag, ...]:
    """Time expressions in ``text`` as normalised intervals, in order of appearance.

    Parameters
    ----------
    text : str
        Any text; never raises.
    anchor : datetime, optional
        When the text was said or written (a span's ``source_ts``). Relative
        expressions ("yesterday", "last May", "two weeks ago") are resolved against
        its local calendar day, and dropped when it is ``None``. A naive anchor is
        taken as UTC.

    Returns
    -------
    tuple of TimeTag
        One tag per distinct expression and interval; ``start < end``, both aware.
    """
    today: date | None = None
    if anchor is not None:
        today = (anchor if anchor.tzinfo is not None else anchor.replace(tzinfo=UTC)).date()
    if not _may_hold_time(text):
        return ()
    tags: list[TimeTag] = []
    seen: set[tuple[str, date, date]] = set()
    for match in _TIME.finditer(text):
        kind = (match.lastgroup or "")[:-1]
        keyed = _key(kind, match, text)
        if keyed is None:
            continue
        key, relative = keyed
        if relative and today is None:
            continue
        resolved = _resolve(key, today if relative else None)
        if resolved is None:
            continue
        start, end, granularity, confidence = resolved
        low, high = _text_span(kind, match)
        written = text[low:high]
        identity = (written.lower(), start, end)
        if identity in seen:
            continue
        seen.add(identity)
        tags.append(TimeTag(written, _as_datetime(start), _as_datetime(end), granularity, confidence))
    return tuple(tags)
