"""Spans from files: JSON Lines span records, or plain text / Markdown documents.

Text and Markdown are split into paragraph spans (blank-line separated) with exact
UTF-8 byte offsets; a Markdown heading becomes the context of the paragraphs under
it. The enricher issue deepens this splitter (sentences, target lengths).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pgmem.errors import InputError
from pgmem.ingest.spans import MAX_SPAN_BYTES
from pgmem.types import Span

_PARAGRAPH = re.compile(rb"(?:[^\n]|\n(?![ \t]*\n))+")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def spans_from_jsonl(path: Path) -> list[Span]:
    """One span per line: a JSON object with :class:`pgmem.Span`'s field names."""
    spans: list[Span] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise TypeError("a line must hold a JSON object")
                spans.append(Span(**record))
            except (json.JSONDecodeError, TypeError) as exc:
                raise InputError(f"{path}:{number}: not a span record ({exc})") from None
    return spans


def spans_from_document(path: Path, *, family: str | None = None) -> list[Span]:
    """Paragraph spans of a text or Markdown file; family defaults to the file name."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    markdown = path.suffix.lower() in (".md", ".markdown")
    heading: list[str] = []
    spans: list[Span] = []
    for match in _PARAGRAPH.finditer(data):
        raw = match.group(0).decode("utf-8")
        # Trim with str's notion of white space, then count the trimmed bytes, so the
        # offsets stay exact for any Unicode.
        body = raw.strip()
        if not body:
            continue
        start = match.start() + len(raw[: len(raw) - len(raw.lstrip())].encode("utf-8"))
        end = start + len(body.encode("utf-8"))
        text = body
        if markdown:
            found = _HEADING.match(text)
            if found and "\n" not in text:
                level = len(found.group(1))
                heading = [*heading[: level - 1], found.group(2)]
                continue
        if end - start > MAX_SPAN_BYTES:
            raise InputError(f"{path}: paragraph at bytes {start}-{end} is over {MAX_SPAN_BYTES} bytes; split it")
        spans.append(
            Span(
                document_id=path.name,
                text=text,
                start=start,
                end=end,
                family=family or path.stem,
                context=" › ".join(heading) if heading else None,
            )
        )
    return spans


def spans_from_path(path: Path, *, family: str | None = None) -> list[Span]:
    """Spans from a .jsonl file, or from a text / Markdown document."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix.lower() == ".jsonl":
        return spans_from_jsonl(path)
    return spans_from_document(path, family=family)
