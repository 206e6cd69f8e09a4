"""Validation of caller spans and their deterministic note ids."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgmem.errors import InputError
from pgmem.params import ROLES
from pgmem.types import Span
from pgmem.validate import (
    CONFIDENCE_RULE,
    INT4_MAX,
    describe_value,
    invalid_confidence,
    metadata_problem,
    parse_timestamp,
    text_problem,
)

#: Largest span text accepted, in UTF-8 bytes. Notes are atomic: a longer text is a
#: document to split, not a note (and would be truncated by any embedder).
MAX_SPAN_BYTES = 16_384
MAX_ID_CHARS = 512
MAX_CONTEXT_CHARS = 1_024

# Fixed namespace for uuid5 note ids; changing it would change every note id.
_NOTE_ID_NAMESPACE = uuid.UUID("6f1c1a52-3c2e-5d0a-9a55-70676d656d31")


@dataclass(frozen=True)
class ValidSpan:
    """A span that passed validation, with its note id and parsed timestamp."""

    index: int
    note_id: str
    span: Span
    source_ts: datetime | None
    metadata: Mapping[str, Any]


def note_id(namespace: str, document_id: str, start: int, end: int, text: str) -> str:
    """The deterministic note id of a span: re-ingesting the same span is a no-op."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    key = json.dumps([namespace, document_id, start, end, digest], separators=(",", ":"))
    return str(uuid.uuid5(_NOTE_ID_NAMESPACE, key))


def _fail(index: int, span: object, field: str, rule: str) -> InputError:
    ident = getattr(span, "external_id", None) or getattr(span, "document_id", None)
    where = f"span {index}" + (f" ({ident!r})" if isinstance(ident, str) else "")
    return InputError(f"{where}: {field} {rule}".replace(":  ", ": "))


def _check_text_field(index: int, span: object, field: str, value: object, *, optional: bool, limit: int) -> None:
    problem = text_problem(value, max_chars=limit, optional=optional)
    if problem:
        raise _fail(index, span, field, problem)


def validate_span(index: int, span: object, namespace: str) -> ValidSpan:
    """Check every field of one span; raise InputError naming the span, field and rule."""
    if not isinstance(span, Span):
        raise _fail(index, span, "span", f"must be a pgmem.Span, got {type(span).__name__}")
    _check_text_field(index, span, "document_id", span.document_id, optional=False, limit=MAX_ID_CHARS)
    _check_text_field(index, span, "family", span.family, optional=False, limit=MAX_ID_CHARS)
    _check_text_field(index, span, "external_id", span.external_id, optional=True, limit=MAX_ID_CHARS)
    _check_text_field(index, span, "context", span.context, optional=True, limit=MAX_CONTEXT_CHARS)
    _check_text_field(index, span, "text", span.text, optional=False, limit=MAX_SPAN_BYTES)
    size = len(span.text.encode("utf-8"))
    if size > MAX_SPAN_BYTES:
        raise _fail(index, span, "text", f"must be at most {MAX_SPAN_BYTES} UTF-8 bytes, got {size}")
    for name in ("start", "end"):
        value = getattr(span, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(index, span, name, f"must be a whole number, got {describe_value(value)}")
        if value < 0:
            raise _fail(index, span, name, f"must be >= 0, got {describe_value(value)}")
        if value > INT4_MAX:
            rule = f"must be at most {INT4_MAX} (PostgreSQL integer), got {describe_value(value)}"
            raise _fail(index, span, name, rule)
    if span.end <= span.start:
        raise _fail(index, span, "end", f"must be greater than start ({span.start}), got {span.end}")
    if span.end - span.start != size:
        raise _fail(
            index,
            span,
            "start/end",
            f"must cover exactly the text's {size} UTF-8 bytes, got end - start = {span.end - span.start}",
        )
    if span.role is not None and span.role not in ROLES:
        raise _fail(index, span, "role", f"must be one of {', '.join(ROLES)}, got {describe_value(span.role)}")
    if span.confidence is not None:
        c = span.confidence
        if invalid_confidence(c):
            raise _fail(index, span, "confidence", f"{CONFIDENCE_RULE}, got {describe_value(c)}")
    source_ts = None
    if span.source_ts is not None:
        try:
            source_ts = parse_timestamp(span.source_ts, "source_ts")
        except InputError as exc:
            raise _fail(index, span, "", str(exc)) from None
    metadata: Mapping[str, Any] = span.metadata or {}
    if not isinstance(metadata, Mapping):
        raise _fail(index, span, "metadata", f"must be a mapping, got {type(metadata).__name__}")
    problem = metadata_problem(metadata)
    if problem:
        raise _fail(index, span, "", problem)
    return ValidSpan(
        index=index,
        note_id=note_id(namespace, span.document_id, span.start, span.end, span.text),
        span=span,
        source_ts=source_ts,
        metadata=dict(metadata),
    )
