"""Spans cut from documents keep exact UTF-8 byte offsets."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pgmem
from pgmem.ingest.sources import spans_from_document, spans_from_path


def test_markdown_paragraphs_with_heading_context(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("# Guide\n\nFirst para\nstill first.\n\n## Step\n\nSecond — with ünïcode 🎉.\n", encoding="utf-8")
    spans = spans_from_path(path)
    data = path.read_bytes()
    assert [s.text for s in spans] == ["First para\nstill first.", "Second — with ünïcode 🎉."]
    assert [s.context for s in spans] == ["Guide", "Guide › Step"]
    for span in spans:
        assert data[span.start : span.end].decode("utf-8") == span.text
        assert span.family == "guide" and span.document_id == "guide.md"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1),
        max_size=6,
    )
)
def test_offsets_are_exact_for_any_text(tmp_path_factory: pytest.TempPathFactory, paragraphs: list[str]) -> None:
    path = tmp_path_factory.mktemp("docs") / "doc.txt"
    path.write_bytes("\n\n".join(paragraphs).encode("utf-8"))
    data = path.read_bytes()
    for span in spans_from_document(path):
        assert data[span.start : span.end].decode("utf-8") == span.text
        assert span.text.strip() == span.text


def test_bad_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text('{"document_id": "d", "text": "x", "start": 0, "end": 1, "family": "f"}\n[1, 2]\n')
    with pytest.raises(pgmem.InputError, match=r"spans.jsonl:2: not a span record"):
        spans_from_path(path)
