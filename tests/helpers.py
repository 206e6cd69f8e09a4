"""Small builders shared by the tests."""

from __future__ import annotations

from typing import Any

import pgmem


def make_spans(texts: list[str], *, document_id: str = "doc", family: str = "f", **fields: Any) -> list[pgmem.Span]:
    """Spans laid end to end in one document (offsets exact, one byte between them)."""
    spans = []
    position = 0
    for text in texts:
        size = len(text.encode("utf-8"))
        spans.append(
            pgmem.Span(
                document_id=document_id,
                text=text,
                start=position,
                end=position + size,
                family=family,
                **fields,
            )
        )
        position += size + 1
    return spans
