"""Pure parts of cited summaries and of the archive: refs, citation checks, flags, pieces."""

from __future__ import annotations

import itertools
import uuid

from hypothesis import given
from hypothesis import strategies as st

from pgmem.compaction.archive import (
    MAX_NOTE_BYTES,
    _pieces,
    archive_document,
    id_bounds,
    message_digest,
    message_family,
    render_message,
)
from pgmem.compaction.summary import (
    UNCITED,
    check_citations,
    flag_uncited,
    open_questions,
    short_refs,
    summary_prompt,
)

A = "0a1b2c3d-0000-4000-8000-000000000001"
B = "0a1b2c3d-0000-4000-8000-000000000002"
C = "ffee0011-2233-4455-6677-8899aabbccdd"


def test_refs_are_the_shortest_unique_prefixes() -> None:
    refs = short_refs([A, B, C])
    assert refs["ffee0011"] == C
    assert {len(r) for r in refs if refs[r] in (A, B)} == {32}
    assert set(refs.values()) == {A, B, C}


@given(st.lists(st.uuids(), max_size=30))
def test_refs_always_resolve_to_their_note(ids: list[uuid.UUID]) -> None:
    refs = short_refs([str(i) for i in ids])
    assert len(refs) == len(set(ids))
    for ref, full in refs.items():
        assert full.replace("-", "").startswith(ref) and len(ref) >= 8


def test_citation_check_accepts_refs_and_full_ids_and_rejects_others() -> None:
    refs = short_refs([C])
    check = check_citations(f"X [#ffee0011]. Y [#{C}]. Z [#deadbeef] [#deadbeef].", refs)
    assert check.cited == (C,) and check.invalid == ("deadbeef",) and not check.ok


def test_flagging_removes_bad_citations_and_marks_uncited_claims() -> None:
    refs = short_refs([C])
    text = "Canberra is the capital [#ffee0011]. Sydney is bigger [#deadbeef]. Ok.\nOpen questions:\nWho knows?"
    flagged, count = flag_uncited(text, refs)
    assert count == 1
    assert "Canberra is the capital [#ffee0011]." in flagged
    assert f"Sydney is bigger. {UNCITED}" in flagged
    assert flagged.count(UNCITED) == 1 and "Ok." in flagged and flagged.endswith("Who knows?")


def test_open_questions() -> None:
    assert open_questions("a.\nOpen questions:\n- What next?\n* Why?\nnone\n") == ["What next?", "Why?"]
    assert open_questions("no section") == []


def test_summary_prompt_cites_only_with_refs() -> None:
    cited = summary_prompt("task", [("ffee0011", "tool: x")], 100)
    assert "[#ffee0011] tool: x" in cited[1]["content"] and "[#ffee0011]" in cited[0]["content"]
    plain = summary_prompt("task", [(None, "tool: x")], 100, previous="old")
    assert "cit" not in plain[0]["content"] and "Earlier summary:\nold" in plain[1]["content"]


def test_long_messages_become_exact_pieces() -> None:
    text = ("Sentence number one is here. " * 200 + "\n\n" + "é" * 3000).strip()
    data = text.encode()
    ranges = _pieces(text)
    assert len(ranges) > 2
    for start, end in ranges:
        piece = data[start:end].decode()
        assert 0 < end - start <= MAX_NOTE_BYTES and piece == piece.strip()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))


def test_message_identity_family_and_rendering() -> None:
    call = {"id": "k", "function": {"name": "fetch", "arguments": "{}"}}
    assert message_family({"role": "tool", "tool_call_id": "k"}, {"k": "fetch"}) == "fetch"
    assert message_family({"role": "tool", "url": "https://x.org/a"}, {}) == "https://x.org/a"
    assert message_family({"role": "user", "name": "Ana"}, {}) == "Ana"
    assert message_family({"role": "assistant", "tool_calls": [call]}, {}) == "fetch"
    assert render_message({"role": "assistant", "content": "hi", "tool_calls": [call]}) == "hi\ncall fetch({})"
    assert message_digest({"role": "user", "content": "a"}) == message_digest({"content": "a", "role": "user"})
    assert message_digest({"role": "user", "content": "a"}) != message_digest({"role": "user", "content": "b"})
    assert message_digest({"role": "user", "content": "a"}) != message_digest({"role": "assistant", "content": "a"})
    assert archive_document("t") != archive_document("u")


def test_id_bounds() -> None:
    assert id_bounds(C) == (C, C)
    assert id_bounds("[#ffee0011]") == ("ffee0011-0000-0000-0000-000000000000", "ffee0011-ffff-ffff-ffff-ffffffffffff")
