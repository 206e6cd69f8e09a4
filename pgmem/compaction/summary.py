"""Cited summaries (pure): the summary prompt, citation checks and flags, open questions.

Archived notes are shown to the summariser as ``[#ref] text`` where ``ref`` is a short,
unique prefix of the note id; the summary cites them the same way. A citation naming a
ref outside the archived span is rejected; a sentence left without a valid citation is
flagged ``[uncited]`` in the kept summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Shortest note-id prefix used as a citation ref (32 bits: unique within any span).
REF_CHARS = 8
UNCITED = "[uncited]"
OPEN_QUESTIONS = "Open questions:"

_CITATION = re.compile(r"\[#([0-9a-fA-F-]{4,36})\]")
_SPACED_CITATION = re.compile(r"\s*\[#([0-9a-fA-F-]{4,36})\]")
# A sentence runs to its end punctuation and takes the citations that follow it.
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+(?:[ \t]*\[#[0-9a-fA-F-]{4,36}\])*|$)", re.MULTILINE)


def short_refs(note_ids: Iterable[str]) -> dict[str, str]:
    """Ref -> note id, each ref the shortest prefix (>= :data:`REF_CHARS` hex) unique here."""
    ids = sorted({n.replace("-", "").lower() for n in note_ids})
    refs: dict[str, str] = {}
    for i, hexid in enumerate(ids):
        length = REF_CHARS
        for other in (ids[i - 1] if i else "", ids[i + 1] if i + 1 < len(ids) else ""):
            while other and length < len(hexid) and hexid[:length] == other[:length]:
                length += 1
        refs[hexid[:length]] = _dashed(hexid)
    return refs


def _dashed(hexid: str) -> str:
    return f"{hexid[:8]}-{hexid[8:12]}-{hexid[12:16]}-{hexid[16:20]}-{hexid[20:]}"


def ref_of(note_id: str, refs: Mapping[str, str]) -> str:
    """The ref standing for ``note_id`` in ``refs`` (its first 8 hex characters if absent)."""
    for ref, full in refs.items():
        if full == note_id:
            return ref
    return note_id.replace("-", "")[:REF_CHARS]


SUMMARY_INSTRUCTIONS_CITED = (
    "Summarise the conversation excerpt below for your own later use: the facts, decisions and "
    "results needed to continue the task, in at most {max_tokens} tokens. End every sentence with "
    "the citations of the excerpt lines it relies on, written exactly as they appear, e.g. [#{example}]. "
    "Cite only refs shown below. Finish with a line '" + OPEN_QUESTIONS + "' followed by the open "
    "sub-questions, one per line."
)
SUMMARY_INSTRUCTIONS_PLAIN = (
    "Summarise the conversation excerpt below for your own later use: the facts, decisions and "
    "results needed to continue the task, in at most {max_tokens} tokens. Finish with a line '"
    + OPEN_QUESTIONS
    + "' followed by the open sub-questions, one per line."
)


def summary_prompt(
    task: str, excerpt: Sequence[tuple[str | None, str]], max_tokens: int, previous: str | None = None
) -> list[dict[str, Any]]:
    """Messages asking for a summary of ``excerpt`` ((ref or None, line) pairs).

    With refs the summary must cite them; without (the hard-reset rebuild) it is plain.
    """
    cited = any(ref for ref, _ in excerpt)
    example = next((ref for ref, _ in excerpt if ref), "0a1b2c3d")
    template = SUMMARY_INSTRUCTIONS_CITED if cited else SUMMARY_INSTRUCTIONS_PLAIN
    lines = [f"[#{ref}] {text}" if ref else text for ref, text in excerpt]
    body = f"Task: {task}\n\n"
    if previous:
        body += f"Earlier summary:\n{previous}\n\n"
    body += "Excerpt:\n" + "\n".join(lines)
    return [
        {"role": "system", "content": template.format(max_tokens=max_tokens, example=example)},
        {"role": "user", "content": body},
    ]


@dataclass(frozen=True)
class CitationCheck:
    """The citations of a summary: valid note ids in order, and refs outside the span."""

    cited: tuple[str, ...]
    invalid: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.invalid


def _resolve(ref: str, refs: Mapping[str, str]) -> str | None:
    key = ref.replace("-", "").lower()
    if key in refs:
        return refs[key]
    # A longer prefix (or the full id) of a known ref names the same note.
    matches = {full for short, full in refs.items() if key.startswith(short) and full.replace("-", "").startswith(key)}
    return matches.pop() if len(matches) == 1 else None


def check_citations(summary: str, refs: Mapping[str, str]) -> CitationCheck:
    """Which citations of ``summary`` name notes of the archived span (``refs``)."""
    cited: list[str] = []
    invalid: list[str] = []
    for match in _CITATION.finditer(summary):
        full = _resolve(match.group(1), refs)
        if full is None:
            if match.group(1) not in invalid:
                invalid.append(match.group(1))
        elif full not in cited:
            cited.append(full)
    return CitationCheck(tuple(cited), tuple(invalid))


def reask_message(check: CitationCheck) -> dict[str, Any]:
    """The one follow-up sent when a summary cites refs outside the archived span."""
    bad = ", ".join(f"[#{ref}]" for ref in check.invalid)
    return {
        "role": "user",
        "content": (
            f"These citations are not lines of the excerpt: {bad}. Rewrite the summary citing only the refs "
            "shown in the excerpt; drop a claim you cannot cite."
        ),
    }


def flag_uncited(summary: str, refs: Mapping[str, str]) -> tuple[str, int]:
    """``summary`` with invalid citations removed and every claim without a valid one flagged.

    Returns the text and the number of flagged sentences. The open-questions section is
    left as it is (questions cite nothing).
    """
    head, sep, tail = summary.partition(OPEN_QUESTIONS)
    flagged = 0

    def fix(match: re.Match[str]) -> str:
        nonlocal flagged
        sentence = match.group(0)
        kept = _SPACED_CITATION.sub(lambda c: c.group(0) if _resolve(c.group(1), refs) else "", sentence)
        words = re.sub(r"\[#[^\]]*\]", "", kept).split()
        if len(words) >= 3 and not _CITATION.search(kept):
            flagged += 1
            stripped = kept.rstrip()
            return f"{stripped} {UNCITED}" + kept[len(stripped) :]
        return kept

    return _SENTENCE.sub(fix, head) + sep + tail, flagged


def open_questions(summary: str, limit: int = 3) -> list[str]:
    """The sub-questions listed after the summary's ``Open questions:`` line."""
    _, sep, tail = summary.partition(OPEN_QUESTIONS)
    if not sep:
        return []
    questions = [line.strip(" -*•\t") for line in tail.splitlines()]
    return [q for q in questions if q and q.lower() not in {"none", "none."}][:limit]


def cite_sentences(text: str, ref: str) -> str:
    """``text`` with ``[#ref]`` after every sentence (how an extractive summary cites)."""
    return "".join(
        f"{m.group(0).rstrip()} [#{ref}]" + m.group(0)[len(m.group(0).rstrip()) :] if m.group(0).strip() else m.group(0)
        for m in _SENTENCE.finditer(text)
    ).strip()
