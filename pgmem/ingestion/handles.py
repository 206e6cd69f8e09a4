"""Micro-handles: exact strings a question may quote verbatim.

URLs, e-mail addresses, ticket-style ids, UUIDs and commit hashes, versions, amounts
of money, numbers with units, quoted titles, code identifiers, hashtags and
@-mentions. They are matched verbatim at read time, so they are kept exactly as
written (no case folding) and in the order they first appear.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterator

# Units written after a number, with or without a space ("12 kg", "12kg") ...
_UNITS = (
    "%|percent|per cent|kg|kgs|mg|lbs?|pounds|oz|ounces|tons|tonnes|km|cm|mm|mi|miles|ft|feet|inches|yards"
    "|meters|metres|kilometers|kilometres|km/h|kph|mph|kmh|ml|litres|liters|gallons|kb|mb|gb|tb|kib|mib|gib|tib"
    "|kbps|mbps|gbps|hz|khz|mhz|ghz|kw|kwh|mw|mah|ms|secs?|seconds|mins?|minutes|hrs?|hours|days|weeks|months"
    "|years|°c|°f|calories|kcal|steps|pages|reps|laps|points|pts|stars|usd|eur|gbp|jpy|chf|cad|aud|dollars"
    "|euros|bucks|cents"
)
# ... and one-letter units only when attached ("5m", "3h", "10k", "2x"): "5 in the" is no length.
_ATTACHED_UNITS = "[kmgtshlwvxcf]|in"

_DIGIT = re.compile(r"\d")
_CURRENCY = re.compile(r"[$€£¥₹]")

# Each pattern comes with a cheap test on the raw text: most spans contain none of
# these characters, and skipping a regex pass is what keeps the write path fast.
# Every pattern runs in linear time. A run such as "a.a.a..." or "1,1,1,..." offers a
# match start at each of its pieces, and rescanning the run from each of them was
# quadratic (a crafted 16 KiB span took minutes). Possessive quantifiers (*+, ++) never
# give back what cannot lead to a match, and the fixed-width lookbehinds only start a
# match in the first 40-128 characters of such a run: longer than any number, e-mail
# local part (64 at most, RFC 5321) or run of dotted names seen in text.
_PATTERNS: tuple[tuple[Callable[[str], bool], re.Pattern[str]], ...] = (
    # URLs, with or without a scheme; trailing punctuation belongs to the sentence.
    (
        lambda t: "://" in t or "www." in t,
        re.compile(r"(?:\bhttps?://|\bwww\.)[^\s<>\"'`)\]}]*[^\s<>\"'`)\]}.,;:!?]"),
    ),
    (lambda t: "@" in t, re.compile(r"\b(?<![\w.+-]{64})[\w.+-]++@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")),
    # @mentions (after e-mails, which contain an @ too).
    (lambda t: "@" in t, re.compile(r"(?<![\w.@])@[A-Za-z_]\w{1,38}")),
    (
        lambda t: "-" in t,
        re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    ),
    # Ticket / record ids: ABC-1234, CVE-2024-3094, RFC-9110.
    (lambda t: "-" in t, re.compile(r"\b[A-Z][A-Z0-9]{1,9}(?:-\d{1,7})+\b")),
    # Versions: v2, v2.3, 2.3.1, 1.0.0-rc1 (two-part numbers without a "v" are decimals).
    (
        lambda t: "." in t or "v" in t,
        re.compile(r"\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]*\w)?\b|\bv\d+(?:\.\d+)?(?:[-+][\w.]*\w)?\b"),
    ),
    # Money: $4.5 million, €20, £3.99, ¥500.
    (
        lambda t: _CURRENCY.search(t) is not None,
        re.compile(
            r"[$€£¥₹]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|trillion|thousand|bn|mn|[mkb])\b)?",
            re.IGNORECASE,
        ),
    ),
    # Numbers with a unit (and amounts written with a currency word after them).
    (
        lambda t: _DIGIT.search(t) is not None,
        re.compile(
            r"(?<![\w.])(?<![\d,]{40})\d[\d,]*+(?:\.\d+)?(?:\s?(?:million|billion|thousand))?"
            r"(?:\s?(?:" + _UNITS + r")|(?:" + _ATTACHED_UNITS + r"))(?![\w/])",
            re.IGNORECASE,
        ),
    ),
    # Hex commit hashes: 7-40 hex characters with at least one digit and one letter.
    (
        lambda t: _DIGIT.search(t) is not None,
        re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
    ),
    (lambda t: "#" in t, re.compile(r"(?<![\w&#])#[A-Za-z_]\w+")),
    # Code identifiers: snake_case, camelCase, dotted.paths, and anything in backticks.
    (lambda t: "_" in t, re.compile(r"\b[A-Za-z]\w*_\w+\b")),
    (lambda t: True, re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b")),
    (lambda t: "." in t, re.compile(r"\b(?<![\w.]{128})[a-z_]\w*+(?:\.[a-z_]\w*+)++(?=\()")),
)
_BACKTICKED = re.compile(r"`([^`\n]{1,80})`")
_QUOTED = re.compile(r"\"([^\"\n]{2,80})\"|“([^”\n]{2,80})”|‘([^’\n]{2,80})’(?!\w)")
# Brand names written like camelCase are names, not code.
_BRANDS = re.compile(r"^[ie][A-Z]")


def extract_handles(text: str) -> tuple[str, ...]:
    """Exact strings worth matching verbatim, in order of first appearance.

    Parameters
    ----------
    text : str
        Any text; never raises.

    Returns
    -------
    tuple of str
        URLs, e-mails, @mentions, UUIDs, ids such as ``ABC-1234``, versions, amounts of
        money, numbers with units, commit hashes, hashtags, code identifiers, and the
        contents of quotes and backticks. A handle found inside a longer one (the
        ``2.3.1`` of ``v2.3.1``) is not repeated.
    """
    found: list[tuple[int, int, str]] = []
    for matches in _passes(text):
        # The matches of one pass never overlap, so a match is only ever inside one of
        # an earlier pass: look it up in those, sorted by start, in logarithmic time
        # (a scan of every earlier match was quadratic on texts with thousands).
        earlier = sorted((start, end) for start, end, _ in found)
        reach = list(itertools.accumulate((end for _, end in earlier), max))
        for start, end, value in matches:
            value = value.strip()
            if not value or "\x00" in value:
                continue
            before = bisect.bisect_right(earlier, start, key=lambda span: span[0])
            if before and reach[before - 1] >= end:
                continue
            found.append((start, end, value))
    unique: dict[str, None] = {}
    for _, _, value in sorted(found):
        unique.setdefault(value, None)
    return tuple(unique)


def _passes(text: str) -> Iterator[Iterator[tuple[int, int, str]]]:
    """The matches of each pattern, pass by pass in priority order, as (start, end, value)."""
    for quick_test, pattern in _PATTERNS:
        if quick_test(text):
            yield (
                (match.start(), match.end(), match.group(0))
                for match in pattern.finditer(text)
                if not _BRANDS.match(match.group(0))
            )
    if "`" in text:
        yield ((match.start(1), match.end(1), match.group(1)) for match in _BACKTICKED.finditer(text))
    if any(q in text for q in '"“‘'):
        yield (
            (match.start(group), match.end(group), match.group(group))
            for match in _QUOTED.finditer(text)
            for group in [match.lastindex or 1]
        )
