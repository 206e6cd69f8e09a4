"""Splitting sources into spans: documents, conversations and span records.

Every span must select exactly its text from its document's UTF-8 bytes, whatever the
Unicode, the line endings or the split settings.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pgmem
from pgmem.ingestion.sources import (
    SplitConfig,
    conversation_transcript,
    spans_from_conversation,
    spans_from_document,
    spans_from_path,
    spans_from_text,
)
from pgmem.ingestion.spans import MAX_SPAN_BYTES, validate_span
from pgmem.ingestion.split import sentence_ranges

LOCOMO_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev5.json"


def assert_exact(document: bytes, spans: Sequence[pgmem.Span], max_bytes: int = MAX_SPAN_BYTES) -> None:
    """The properties every list of spans of one document has."""
    previous_end = 0
    for index, span in enumerate(spans):
        assert document[span.start : span.end].decode("utf-8") == span.text
        assert span.text and span.text.strip() == span.text
        assert len(span.text.encode("utf-8")) <= max_bytes
        assert span.start >= previous_end, "spans overlap or are out of order"
        previous_end = span.end
        validate_span(index, span, "test")


def texts(spans: Sequence[pgmem.Span]) -> list[str]:
    return [span.text for span in spans]


# -- Markdown and plain text -----------------------------------------------------------


def test_markdown_paragraphs_with_heading_context(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("# Guide\n\nFirst para\nstill first.\n\n## Step\n\nSecond — with ünïcode 🎉.\n", encoding="utf-8")
    spans = spans_from_path(path)
    assert texts(spans) == ["First para\nstill first.", "Second — with ünïcode 🎉."]
    assert [s.context for s in spans] == ["Guide", "Guide › Step"]
    assert {(s.family, s.document_id) for s in spans} == {("guide", "guide.md")}
    assert_exact(path.read_bytes(), spans)


def test_markdown_structure_setext_front_matter_fences_and_breaks() -> None:
    document = (
        "---\ntitle: Notes\ndate: 2023-05-08\n---\n"
        "Handbook\n========\n\nWelcome.\n\n"
        "Setup\n-----\n\nInstall it.\n"
        "### Shell ###\n"
        "```sh\n# not a heading\n\necho hi\n```\n\n"
        "* * *\n\n"
        "## Usage\n\nRun it.\n"
    )
    spans = spans_from_text(document, document_id="h.md", family="h", markdown=True)
    assert texts(spans) == ["Welcome.", "Install it.", "```sh\n# not a heading\n\necho hi\n```", "Run it."]
    assert [s.context for s in spans] == [
        "Handbook",
        "Handbook › Setup",
        "Handbook › Setup › Shell",
        "Handbook › Usage",
    ]
    assert_exact(document.encode(), spans)


def test_plain_text_has_no_markdown_reading() -> None:
    spans = spans_from_text("# Not a heading\n\nBody.\n", document_id="t.txt", family="t")
    assert texts(spans) == ["# Not a heading", "Body."]
    assert all(s.context is None for s in spans)


def test_an_over_long_code_block_is_cut_at_lines() -> None:
    code = "```\n" + "\n".join(f"line_{i} = {i}" for i in range(40)) + "\n```"
    spans = spans_from_text(
        code, document_id="c.md", family="c", markdown=True, split=SplitConfig(target_bytes=150, max_bytes=200)
    )
    assert len(spans) > 1
    assert spans[0].text.startswith("```\nline_0 = 0\n") and spans[-1].text.endswith("line_39 = 39\n```")
    assert_exact(code.encode(), spans, 200)


def test_lists_stay_whole_when_short_and_split_per_item_when_long() -> None:
    short = "Shopping:\n- eggs\n- milk\n"
    assert texts(spans_from_text(short, document_id="s", family="s", markdown=True)) == ["Shopping:\n- eggs\n- milk"]
    items = [f"{n}. Step {n} does a fairly long thing with the machine." for n in range(1, 5)]
    long = "Steps:\n" + "\n".join(items) + "\n   continued.\n"
    spans = spans_from_text(long, document_id="l", family="l", markdown=True, split=SplitConfig(target_bytes=100))
    assert texts(spans) == ["Steps:", *items[:-1], items[-1] + "\n   continued."]
    assert_exact(long.encode(), spans)


def test_crlf_line_endings() -> None:
    document = "# Title\r\n\r\nFirst line\r\nsecond line.\r\n\r\n\r\nNext — ok.\r\n"
    spans = spans_from_text(document, document_id="w.md", family="w", markdown=True)
    assert texts(spans) == ["First line\r\nsecond line.", "Next — ok."]
    assert [s.context for s in spans] == ["Title", "Title"]
    assert_exact(document.encode(), spans)


def test_sentences_do_not_split_on_abbreviations_decimals_or_ellipses() -> None:
    text = (
        "Dr. Smith moved to the U.S. in 2020. She paid $3.14, e.g. for tea... and left! "
        "Did she? “Yes,” said Mr. J. R. Tolkien. 次の文です。最後。"
    )
    assert [text[a:b] for a, b in sentence_ranges(text)] == [
        "Dr. Smith moved to the U.S. in 2020.",
        "She paid $3.14, e.g. for tea... and left!",
        "Did she?",
        "“Yes,” said Mr. J. R. Tolkien.",
        "次の文です。",
        "最後。",
    ]


def test_sentence_unit_merges_short_sentences_up_to_target() -> None:
    text = "One. Two. Three is longer than the rest.\n\nFour."
    one_each = spans_from_text(text, document_id="d", family="f", split=SplitConfig(unit="sentence", target_bytes=1))
    assert texts(one_each) == ["One.", "Two.", "Three is longer than the rest.", "Four."]
    merged = spans_from_text(text, document_id="d", family="f", split=SplitConfig(unit="sentence", target_bytes=12))
    # Merging stays inside a paragraph.
    assert texts(merged) == ["One. Two.", "Three is longer than the rest.", "Four."]
    assert_exact(text.encode(), merged)


def test_long_paragraph_is_cut_at_sentences_then_white_space_then_characters() -> None:
    sentences = [f"Sentence number {n} talks about something." for n in range(30)]
    paragraph = " ".join(sentences)
    config = SplitConfig(target_bytes=100, max_bytes=200)
    spans = spans_from_text(paragraph, document_id="p", family="p", split=config)
    assert all(s.text.endswith(".") for s in spans)  # cut at sentence ends only
    assert all(60 <= len(s.text.encode()) <= 100 for s in spans[:-1])
    assert_exact(paragraph.encode(), spans, 200)

    words = "word " * 100
    spans = spans_from_text(words, document_id="w", family="w", split=config)
    assert {len(s.text) for s in spans[:-1]} == {99}  # 20 words per piece
    assert_exact(words.encode(), spans, 200)

    family = "👩\u200d👩\u200d👧"  # 18 bytes, one grapheme
    blob = "e\u0301" * 50 + family * 5
    spans = spans_from_text(blob, document_id="b", family="b", split=SplitConfig(target_bytes=20, max_bytes=40))
    assert "".join(texts(spans)) == blob
    assert all(not s.text.startswith(("\u0301", "\u200d")) for s in spans)
    assert family in texts(spans)
    assert_exact(blob.encode(), spans, 40)


def test_split_config_is_validated() -> None:
    with pytest.raises(pgmem.ConfigurationError, match="unit must be one of 'sentence', 'paragraph', got 'word'"):
        SplitConfig(unit="word")
    with pytest.raises(pgmem.ConfigurationError, match=rf"max_bytes must be in \[4, {MAX_SPAN_BYTES}\]"):
        SplitConfig(max_bytes=MAX_SPAN_BYTES + 1)
    with pytest.raises(pgmem.ConfigurationError, match=r"target_bytes must be in \[1, 100\], got 200"):
        SplitConfig(target_bytes=200, max_bytes=100)
    with pytest.raises(pgmem.ConfigurationError, match="target_bytes must be a whole number"):
        SplitConfig(target_bytes=1.5)  # type: ignore[arg-type]


def test_bad_documents_name_the_file_and_rule(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(pgmem.InputError, match=r"bad.txt: not UTF-8 text"):
        spans_from_path(path)
    path.write_text("ok\n\nnul \x00 here\n", encoding="utf-8")
    with pytest.raises(pgmem.InputError, match=r"bad.txt:3: contains a NUL character"):
        spans_from_document(path)
    with pytest.raises(pgmem.InputError, match=r"missing.md: no such file"):
        spans_from_path(tmp_path / "missing.md")


# -- span records ------------------------------------------------------------------------


def test_jsonl_span_records_and_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    record = {"document_id": "d", "text": "x", "start": 0, "end": 1, "family": "f", "external_id": "D1:1"}
    path.write_text(json.dumps(record) + "\n\n", encoding="utf-8")
    assert spans_from_path(path, family="ignored") == [pgmem.Span(**record)]  # type: ignore[arg-type]
    path.write_text(json.dumps(record) + "\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(pgmem.InputError, match=r"spans.jsonl:2: not a span record"):
        spans_from_path(path)


# -- conversations -----------------------------------------------------------------------


def locomo_sample(sample_id: str | None = "conv-x") -> dict[str, Any]:
    sample: dict[str, Any] = {
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! Good to see you! "},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Hi — café ☕ time? 👍🏽"},
            ],
            "session_2_date_time": "12:09 am on 13 September, 2023",
            "session_2": [
                {"speaker": "Melanie", "dia_id": "D2:1", "text": "I ran a charity race.", "img_url": ["x"]},
                {"speaker": "Caroline", "dia_id": "D2:2", "text": "   "},
                {"speaker": "Caroline", "dia_id": "D2:3", "text": "Proud of you!"},
            ],
            "session_10_date_time": "9:55 am on 22 October, 2023",
            "session_10": [{"speaker": "Caroline", "dia_id": "D10:1", "text": "Ten."}],
        },
        "qa": [],
    }
    if sample_id is not None:
        sample["sample_id"] = sample_id
    return sample


def assert_conversation_exact(data: object, spans: Sequence[pgmem.Span], **kwargs: Any) -> None:
    for document_id in dict.fromkeys(s.document_id for s in spans):
        transcript = conversation_transcript(data, document_id, **kwargs).encode()
        assert_exact(transcript, [s for s in spans if s.document_id == document_id])


def test_locomo_sample_gives_one_span_per_turn(tmp_path: Path) -> None:
    sample = locomo_sample()
    spans = spans_from_conversation(sample)
    assert [s.external_id for s in spans] == ["D1:1", "D1:2", "D2:1", "D2:3", "D10:1"]  # D2:2 is blank
    # A span is a whole transcript line: the speaker label is part of the evidence.
    assert texts(spans)[:2] == ["Caroline: Hey Mel! Good to see you!", "Melanie: Hi — café ☕ time? 👍🏽"]
    assert [s.document_id for s in spans] == ["conv-x/session_1"] * 2 + ["conv-x/session_2"] * 2 + ["conv-x/session_10"]
    assert [s.family for s in spans] == ["session_1"] * 2 + ["session_2"] * 2 + ["session_10"]
    assert spans[0].source_ts == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert spans[2].source_ts == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)
    assert spans[1].metadata == {"speaker": "Melanie", "session": "session_1"}
    transcript = conversation_transcript(sample, "conv-x/session_2")
    assert transcript == "Melanie: I ran a charity race.\nCaroline:    \nCaroline: Proud of you!"
    assert (spans[3].start, spans[3].end) == (45, 68)
    assert_conversation_exact(sample, spans)

    by_speaker = spans_from_conversation([sample], family_by="speaker")
    assert [s.family for s in by_speaker] == ["Caroline", "Melanie", "Melanie", "Caroline", "Caroline"]

    path = tmp_path / "dialogues.json"
    path.write_text(json.dumps([locomo_sample(None), locomo_sample(None)]), encoding="utf-8")
    spans = spans_from_path(path, family="chat")
    assert (
        spans[0].document_id == "dialogues.json#1/session_1" and spans[-1].document_id == "dialogues.json#2/session_10"
    )
    assert {s.family for s in spans} == {"chat"}


def test_jsonl_turns(tmp_path: Path) -> None:
    turns = [
        {"speaker": "Ann", "text": "Hello there.", "time": "2024-01-02T10:00:00", "session": "s1", "id": "t1"},
        {"speaker": "Bob", "text": "Hi Ann 👋", "timestamp": "2024-01-02T10:01:00+02:00", "session": "s1", "id": 2},
        {"speaker": "Ann", "text": "Later.", "time": "2024-01-03T09:00:00Z", "session": "s2"},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(t, ensure_ascii=False) for t in turns) + "\n", encoding="utf-8")
    spans = spans_from_path(path)
    assert [(s.document_id, s.family, s.external_id) for s in spans] == [
        ("chat.jsonl/s1", "s1", "t1"),
        ("chat.jsonl/s1", "s1", "2"),
        ("chat.jsonl/s2", "s2", None),
    ]
    assert spans[0].source_ts == datetime(2024, 1, 2, 10, tzinfo=UTC)  # naive is UTC
    assert spans[1].source_ts == datetime(2024, 1, 2, 10, 1, tzinfo=timezone(timedelta(hours=2)))
    assert_conversation_exact(turns, spans, document_prefix="chat.jsonl")
    assert spans_from_conversation(turns, document_prefix="chat.jsonl") == spans
    assert [s.family for s in spans_from_path(path, family_by="speaker")] == ["Ann", "Bob", "Ann"]


def test_a_turn_over_max_bytes_is_cut_and_keeps_its_id() -> None:
    turns = [{"speaker": "Ann", "text": "First sentence here. Second sentence here. Third one.", "id": "t1"}]
    spans = spans_from_conversation(turns, split=SplitConfig(target_bytes=20, max_bytes=25))
    assert texts(spans) == ["Ann: First sentence here.", "Second sentence here.", "Third one."]
    assert {s.external_id for s in spans} == {"t1"} and {s.document_id for s in spans} == {"conversation"}
    assert_conversation_exact(turns, spans)


def test_bad_conversations_name_the_file_turn_and_rule(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"speaker": "Ann", "text": "ok"}\n\n{"text": "no speaker"}\n', encoding="utf-8")
    with pytest.raises(pgmem.InputError, match=r"chat.jsonl:3: speaker must be a non-empty string, got None"):
        spans_from_path(path)
    path.write_text('{"speaker": "Ann", "text": "ok", "time": "yesterday"}\n', encoding="utf-8")
    with pytest.raises(pgmem.InputError, match=r"chat.jsonl:1: time must be an ISO 8601 timestamp"):
        spans_from_path(path)
    sample = locomo_sample()
    sample["conversation"]["session_2"][1]["text"] = 7
    with pytest.raises(pgmem.InputError, match=r"conv-x session_2 turn 2: text must be a string, got int"):
        spans_from_conversation(sample)
    sample = locomo_sample()
    sample["conversation"]["session_1_date_time"] = "sometime"
    with pytest.raises(pgmem.InputError, match=r"session_1_date_time must be like '1:56 pm on 8 May, 2023'"):
        spans_from_conversation(sample)
    with pytest.raises(pgmem.InputError, match=r"turn 1: id must not contain NUL characters"):
        spans_from_conversation([{"speaker": "Ann", "text": "hi", "id": "a\x00"}])
    with pytest.raises(pgmem.InputError, match="two sessions have the document_id 'conv-x/session_1'"):
        spans_from_conversation([locomo_sample(), locomo_sample()])
    with pytest.raises(pgmem.InputError, match="a conversation must be a LoCoMo object"):
        spans_from_conversation("text")
    with pytest.raises(pgmem.InputError, match="no session with document_id 'conv-x/session_9'"):
        conversation_transcript(locomo_sample(), "conv-x/session_9")
    with pytest.raises(pgmem.ConfigurationError, match="family_by must be one of 'session', 'speaker'"):
        spans_from_conversation([], family_by="topic")
    json_path = tmp_path / "bad.json"
    json_path.write_text("{\n  oops\n}", encoding="utf-8")
    with pytest.raises(pgmem.InputError, match=r"bad.json:2: not valid JSON"):
        spans_from_path(json_path)


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="shared LoCoMo data not present")
def test_every_real_locomo_turn_round_trips() -> None:
    data = json.loads(LOCOMO_DEV.read_text(encoding="utf-8"))
    spans = spans_from_conversation(data)
    turns = [t for sample in data for k, v in sample["conversation"].items() if isinstance(v, list) for t in v]
    assert len(spans) == sum(1 for t in turns if t["text"].strip())
    assert {s.external_id for s in spans} == {t["dia_id"] for t in turns if t["text"].strip()}
    assert all(s.source_ts is not None for s in spans)
    assert_conversation_exact(data, spans)


# -- properties --------------------------------------------------------------------------

TRICKY = [
    "a",
    "Word",
    "Dr.",
    "U.S.",
    "e.g.",
    "3.14",
    "...",
    "…",
    ".",
    "!",
    "?",
    "。",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\r\n\r\n",
    "# ",
    "## ",
    "===",
    "---",
    "- ",
    "1. ",
    "```",
    "~~~",
    "e\u0301",
    "\u0301",
    "👩\u200d👩\u200d👧",
    "👍🏽",
    "🎉",
    "\u200d",
    "\ufe0f",
    "\x01",
    "\x1f",
    "\x7f",
    "\x85",
    "\u2028",
    "\u00a0",
    "日本語",
    "ü",
    '"',
    "“",
]
inline = st.lists(st.sampled_from([t for t in TRICKY if "\n" not in t]), max_size=10).map("".join)
markdown_lines = st.one_of(
    inline,
    st.builds(lambda level, title: "#" * level + " " + title, st.integers(1, 7), inline),
    st.builds(lambda marker, item: marker + item, st.sampled_from(["- ", "* ", "1. ", "  - ", "10) "]), inline),
    st.sampled_from(["", " ", "===", "---", "***", "```", "```py", "~~~~", "    code"]),
)
documents = st.one_of(
    st.builds(
        lambda lines, newline: newline.join(lines),
        st.lists(markdown_lines, max_size=25),
        st.sampled_from(["\n", "\r\n"]),
    ),
    st.lists(st.sampled_from(TRICKY), max_size=60).map("".join),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=200),
)
configs = st.builds(
    lambda unit, max_bytes, share: SplitConfig(unit, max(1, int(max_bytes * share)), max_bytes),
    st.sampled_from(["paragraph", "sentence"]),
    st.one_of(st.integers(4, 40), st.just(2000)),
    st.floats(0, 1),
)


@settings(max_examples=800, deadline=None)
@given(documents, configs, st.booleans())
def test_document_spans_are_exact(document: str, config: SplitConfig, markdown: bool) -> None:
    spans = spans_from_text(document, document_id="d", family="f", markdown=markdown, split=config)
    assert_exact(document.encode(), spans, config.max_bytes)


@settings(max_examples=40, deadline=None)
@given(documents, configs)
def test_document_files_are_exact(tmp_path_factory: pytest.TempPathFactory, document: str, config: SplitConfig) -> None:
    folder = tmp_path_factory.mktemp("docs")
    for name in ("doc.txt", "doc.md"):
        path = folder / name
        path.write_bytes(document.encode())
        assert_exact(path.read_bytes(), spans_from_path(path, split=config), config.max_bytes)


ids = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=5)
turn_lists = st.lists(
    st.fixed_dictionaries(
        {"speaker": st.sampled_from(["Ann", "Bob 🐍"]), "text": documents},
        optional={"session": st.sampled_from(["s1", "s2", 3]), "id": ids},
    ),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(turn_lists, configs)
def test_conversation_spans_are_exact(turns: list[dict[str, Any]], config: SplitConfig) -> None:
    turns = [t for t in turns if "id" not in t or t["id"].strip()]
    spans = spans_from_conversation(turns, split=config)
    assert len({s.external_id for s in spans if s.external_id}) <= len(turns)
    assert_conversation_exact(turns, spans)
    for span in spans:
        assert len(span.text.encode()) <= config.max_bytes
