"""Checks shared by every entry point, one place for each rule.

Parameter objects raise :class:`ConfigurationError` naming the parameter and the
allowed range; caller data (questions, hints, span fields, metadata, timestamps)
raises :class:`InputError` naming the field. The ``*_problem`` functions return the
rule a value breaks (or None) so that callers can prefix it with where the value was.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
from collections.abc import Mapping
from datetime import datetime, timedelta

from pgmem.errors import ConfigurationError, InputError

#: What a namespace may be (the same rule as the CHECK constraint in sql/schema.sql).
NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")

#: Largest value of a PostgreSQL ``integer``: the default ceiling of every whole-number
#: parameter, so none can overflow a column, a function argument or a JSON log.
INT4_MAX = 2**31 - 1

#: The range of PostgreSQL ``real`` (note confidence): its input refuses larger
#: magnitudes and nonzero ones that round to zero (below half the smallest subnormal,
#: 1.4e-45); these round bounds sit just inside both.
REAL_SMALLEST = 1e-45
REAL_LARGEST = 3.4e38

#: Largest UTC offset PostgreSQL accepts in ``timestamptz`` input (it refuses +16:00).
MAX_UTC_OFFSET = timedelta(hours=15, minutes=59, seconds=59)

#: Longest timeout any pgmem call accepts, in seconds (a day): past it a timeout protects
#: nothing, and ``threading.Timer`` and socket timeouts overflow near 2**33 seconds.
MAX_TIMEOUT_SECONDS = 86_400.0

#: Deepest nesting of span metadata: far below Python's recursion limit (1000) and
#: PostgreSQL's jsonb nesting limit (about 6,000 on this server's stack), and deeper
#: than any real metadata.
MAX_METADATA_DEPTH = 32
#: Largest span metadata, in characters of its JSON text: metadata annotates a note of
#: at most 16 KiB; it is not a second document.
MAX_METADATA_CHARS = 65_536


def finite(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number, got {describe_value(value)}")
    # float() of a huge int overflows: it is as unusable as an infinite value.
    if (isinstance(value, int) and abs(value) > 2**1023) or not math.isfinite(value):
        raise ConfigurationError(f"{name} must be finite, got {describe_value(value)}")


def at_least(name: str, value: float, low: float, *, strict: bool = False) -> None:
    finite(name, value)
    if value < low or (strict and value == low):
        rule = ">" if strict else ">="
        raise ConfigurationError(f"{name} must be {rule} {low}, got {describe_value(value)}")


def between(name: str, value: float, low: float, high: float) -> None:
    finite(name, value)
    if not low <= value <= high:
        raise ConfigurationError(f"{name} must be in [{low}, {high}], got {describe_value(value)}")


def whole(name: str, value: int, low: int, high: int | None = None) -> None:
    """Check a whole number in [low, high]; without ``high``, at most :data:`INT4_MAX`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be a whole number, got {describe_value(value)}")
    if high is not None and not low <= value <= high:
        raise ConfigurationError(f"{name} must be in [{low}, {high}], got {describe_value(value)}")
    if value < low:
        raise ConfigurationError(f"{name} must be >= {low}, got {describe_value(value)}")
    if value > INT4_MAX:
        raise ConfigurationError(f"{name} must be at most {INT4_MAX} (PostgreSQL integer), got {describe_value(value)}")


def timeout_seconds(name: str, value: float) -> float:
    """Return a timeout in (0, :data:`MAX_TIMEOUT_SECONDS`] as a float, else ConfigurationError."""
    at_least(name, value, 0.0, strict=True)
    between(name, value, 0.0, MAX_TIMEOUT_SECONDS)
    return float(value)


def real_problem(value: float) -> str | None:
    """The rule a finite number breaks for a PostgreSQL ``real``, or None."""
    if value != 0 and not REAL_SMALLEST <= abs(value) <= REAL_LARGEST:
        return f"needs 0 or a magnitude in [{REAL_SMALLEST:g}, {REAL_LARGEST:g}] (PostgreSQL real)"
    return None


#: What a note confidence may be: it is stored as a ``real`` in [0, 1].
CONFIDENCE_RULE = f"must be a number in [0, 1], 0 or at least {REAL_SMALLEST:g} (PostgreSQL real)"


def invalid_confidence(value: object) -> bool:
    """Whether ``value`` breaks :data:`CONFIDENCE_RULE` (NaN and huge integers included)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        return True
    return real_problem(value) is not None


def check_namespace(namespace: object) -> str:
    """Return ``namespace`` if valid, else raise InputError saying the rule."""
    if not isinstance(namespace, str) or not NAMESPACE_PATTERN.match(namespace):
        raise InputError(
            f"namespace must be 1-128 characters of letters, digits and _.:@/- starting with a"
            f" letter or digit, got {describe_value(namespace)}"
        )
    return namespace


def text_problem(value: object, *, max_chars: int, optional: bool = False) -> str | None:
    """The rule a text value breaks, or None.

    Text must be a ``str`` of at most ``max_chars`` characters, without NUL (PostgreSQL
    text cannot hold it) and encodable as UTF-8 (no lone surrogates); unless
    ``optional``, it must not be empty or whitespace only (None is then also allowed).
    """
    if value is None and optional:
        return None
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not optional and not value.strip():
        return "must not be empty or whitespace only"
    if len(value) > max_chars:
        return f"must be at most {max_chars} characters, got {len(value)}"
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid Unicode text ({exc.reason}, at position {exc.start})"
    return None


def check_text(name: str, value: object, *, max_chars: int, optional: bool = False) -> str:
    """Return ``value`` if it passes :func:`text_problem`, else raise InputError naming ``name``."""
    problem = text_problem(value, max_chars=max_chars, optional=optional)
    if problem:
        raise InputError(f"{name} {problem}")
    return value  # type: ignore[return-value]


def timestamp_problem(value: datetime) -> str | None:
    """The rule a datetime breaks for ``timestamptz``, or None.

    Its offset must be whole seconds within PostgreSQL's ±15:59:59, and the instant
    must lie in years 1-9999 in UTC, which PostgreSQL stores and psycopg can read back.
    """
    offset = value.utcoffset()
    if offset is None:
        return "must be timezone-aware (e.g. 2023-05-08T13:56:00+00:00)"
    if abs(offset) > MAX_UTC_OFFSET or offset.microseconds:
        return "must have a UTC offset of whole seconds within ±15:59:59"
    try:
        value.replace(tzinfo=None) - offset
    except OverflowError:
        return "must lie between 0001-01-01 and 9999-12-31 in UTC"
    return None


def parse_timestamp(value: datetime | str, describe: str) -> datetime:
    """A timezone-aware datetime from a datetime or ISO 8601 text, else InputError."""
    if isinstance(value, str):
        problem = text_problem(value, max_chars=64)
        if problem:
            raise InputError(f"{describe} {problem}")
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"{describe} must be an ISO 8601 timestamp, got {describe_value(value)}") from None
    if not isinstance(value, datetime):
        raise InputError(f"{describe} must be a datetime or ISO 8601 text, got {type(value).__name__}")
    problem = timestamp_problem(value)
    if problem:
        raise InputError(f"{describe} {problem}, got {value.isoformat()}")
    return value


def metadata_problem(metadata: Mapping[str, object]) -> str | None:
    """The rule span metadata breaks, naming the path of the bad value, or None.

    Metadata must be JSON that PostgreSQL ``jsonb`` stores: nested at most
    :data:`MAX_METADATA_DEPTH` levels, at most :data:`MAX_METADATA_CHARS` characters
    as JSON, no NUL (jsonb refuses ``\\u0000``) and no lone surrogates in keys or
    strings, finite numbers only.
    """
    budget = [MAX_METADATA_CHARS]
    problem = _json_problem(metadata, "metadata", 1, budget)
    if problem:
        return problem
    try:
        size = len(json.dumps(metadata, allow_nan=False))
    except (TypeError, ValueError) as exc:
        return f"metadata must be JSON-serialisable ({exc})"
    if size > MAX_METADATA_CHARS:
        return f"metadata must be at most {MAX_METADATA_CHARS} characters as JSON, got {size}"
    return None


def _json_problem(value: object, path: str, depth: int, budget: list[int]) -> str | None:
    # A cheap size estimate stops the walk of a huge value early; json.dumps measures
    # the exact size once the nesting is known to be safe.
    budget[0] -= 1 + (len(value) if isinstance(value, str) else 0)
    if budget[0] < 0:
        return f"metadata must be at most {MAX_METADATA_CHARS} characters as JSON (too large at {path})"
    if isinstance(value, str):
        problem = text_problem(value, max_chars=MAX_METADATA_CHARS, optional=True)
        return f"{path} {problem}" if problem else None
    if isinstance(value, Mapping | list | tuple) and depth > MAX_METADATA_DEPTH:
        return f"metadata must nest at most {MAX_METADATA_DEPTH} levels deep, got deeper at {path[:200]}"
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                problem = text_problem(key, max_chars=MAX_METADATA_CHARS, optional=True)
                if problem:
                    return f"{path[:200]} has a key that {problem}"
            problem = _json_problem(item, f"{path}[{describe_value(key, 40)}]", depth + 1, budget)
            if problem:
                return problem
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = _json_problem(item, f"{path}[{index}]", depth + 1, budget)
            if problem:
                return problem
    return None


def describe_value(value: object, limit: int = 80) -> str:
    """A short ``repr`` of a caller's value for a message, whatever the value is.

    Nesting, long strings and long containers are elided, so neither a huge nor a deeply
    nested value can make the message itself fail.
    """
    text = _BRIEF.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _BriefRepr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        # repr() of an int over 4,300 digits raises ValueError.
        if x.bit_length() > 200:
            return f"an integer of about {int(x.bit_length() * math.log10(2)) + 1} digits"
        return repr(x)


_BRIEF = _BriefRepr()
_BRIEF.maxlevel = 3
_BRIEF.maxstring = 60
_BRIEF.maxother = 60
