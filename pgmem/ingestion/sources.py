"""Spans from files and in-memory sources: documents, conversations, span records.

* Plain text and Markdown are cut by :mod:`pgmem.ingestion.split` into paragraph or
  sentence spans; Markdown headings become the spans' context.
* Conversations (JSON Lines turns, or LoCoMo-shaped JSON) give one span per turn,
  with byte offsets into the session transcript (see :func:`conversation_transcript`).
* JSON Lines span records are read as :class:`pgmem.Span` fields.

Every span's ``start``/``end`` are exact UTF-8 byte offsets into its document. See
docs/sources.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgmem.errors import ConfigurationError, InputError
from pgmem.ingestion.spans import MAX_ID_CHARS
from pgmem.ingestion.split import SplitConfig, split_document, split_passage
from pgmem.types import Span

__all__ = [
    "FAMILY_BY",
    "SplitConfig",
    "conversation_transcript",
    "spans_from_conversation",
    "spans_from_document",
    "spans_from_jsonl",
    "spans_from_path",
    "spans_from_text",
]

#: What a conversation turn's family can be: its session, or its speaker.
FAMILY_BY = ("session", "speaker")

_DEFAULT_SPLIT = SplitConfig()
_MARKDOWN_SUFFIXES = (".md", ".markdown")


# -- documents --------------------------------------------------------------------------


def spans_from_text(
    text: str,
    *,
    document_id: str,
    family: str,
    markdown: bool = False,
    split: SplitConfig = _DEFAULT_SPLIT,
) -> list[Span]:
    """Spans of an in-memory text or Markdown document.

    Parameters
    ----------
    text : str
        The document. Offsets refer to ``text.encode("utf-8")``.
    document_id, family : str
        Set on every span.
    markdown : bool
        Read headings (as context), fenced code blocks and lists as Markdown.
    split : SplitConfig
        Unit (paragraph or sentence) and sizes.

    Returns
    -------
    list of Span
        In document order; ``context`` is the heading trail for Markdown, else None.
    """
    return _document_spans(text, document_id=document_id, family=family, markdown=markdown, split=split)


def spans_from_document(path: Path, *, family: str | None = None, split: SplitConfig = _DEFAULT_SPLIT) -> list[Span]:
    """Spans of a UTF-8 text or Markdown file (Markdown if it ends in .md or .markdown).

    ``document_id`` is the file name and ``family`` defaults to its stem.
    """
    text = _read_text(path)
    return _document_spans(
        text,
        document_id=path.name,
        family=family or path.stem,
        markdown=path.suffix.lower() in _MARKDOWN_SUFFIXES,
        split=split,
        where=str(path),
    )


def _document_spans(
    text: str, *, document_id: str, family: str, markdown: bool, split: SplitConfig, where: str | None = None
) -> list[Span]:
    where = where or document_id
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{where}: not valid Unicode text ({exc.reason} at character {exc.start})") from None
    nul = text.find("\x00")
    if nul >= 0:
        raise InputError(f"{where}:{text.count(chr(10), 0, nul) + 1}: contains a NUL character; spans cannot hold one")
    return [
        Span(document_id=document_id, text=p.text, start=p.start, end=p.end, family=family, context=p.context)
        for p in split_document(text, split, markdown=markdown)
    ]


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


# -- span records -----------------------------------------------------------------------


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
            # ValueError covers bad JSON and integers of over 4,300 digits.
            except (ValueError, TypeError, RecursionError) as exc:
                raise InputError(f"{path}:{number}: not a span record ({exc})") from None
    return spans


# Whether a .jsonl file holds span records: its first object has start or end.
def _holds_span_records(path: Path) -> bool:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):
                    return True  # let the span reader report the line
                return not isinstance(record, dict) or "start" in record or "end" in record
    return True


# -- conversations ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Turn:
    speaker: str
    text: str
    time: datetime | None
    turn_id: str | None

    @property
    def line(self) -> str:
        # The transcript line, speaker label included: who said it is part of the
        # evidence (and, embedded with the text, worth ~20 points of dense recall on LoCoMo).
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class _Session:
    document_id: str
    name: str | None
    turns: tuple[_Turn, ...]

    @property
    def transcript(self) -> str:
        return "\n".join(turn.line for turn in self.turns)


def spans_from_conversation(
    data: object,
    *,
    family_by: str = "session",
    document_prefix: str | None = None,
    split: SplitConfig = _DEFAULT_SPLIT,
) -> list[Span]:
    """One span per dialogue turn, with offsets into its session transcript.

    Parameters
    ----------
    data : dict or list
        A LoCoMo-shaped sample (``{"conversation": {"session_1": [...],
        "session_1_date_time": ...}, "sample_id": ...}``), a list of them, or a list of
        turns ``{"speaker", "text", "time" or "timestamp", "session", "id"}`` (the
        objects of a JSON Lines file).
    family_by : {"session", "speaker"}
        What a span's family is.
    document_prefix : str, optional
        The conversation id when the data has none (``sample_id``); the file name when
        called from :func:`spans_from_path`. Default ``"conversation"``.
    split : SplitConfig
        Only ``max_bytes`` and ``target_bytes`` matter: a turn longer than ``max_bytes``
        is cut like an over-long paragraph, every piece keeping the turn's id.

    Returns
    -------
    list of Span
        ``document_id`` is ``"<conversation id>/<session>"``; ``start``/``end`` are byte
        offsets into that session's transcript (:func:`conversation_transcript`);
        ``source_ts`` is the turn's time, else its session's (naive times are UTC);
        ``external_id`` is the turn id; ``metadata`` holds ``speaker`` and ``session``.
    """
    _check_family_by(family_by)
    return _conversation_spans(_sessions(data, document_prefix, None), family_by, split)


def conversation_transcript(data: object, document_id: str, *, document_prefix: str | None = None) -> str:
    """The session transcript that the spans of ``document_id`` point into.

    It is the session's turns as ``"Speaker: text"`` lines (the text exactly as given),
    joined by ``"\\n"`` in order; a span is one whole line (or a piece of an over-long
    one), and its text is ``transcript.encode("utf-8")[span.start:span.end].decode("utf-8")``.
    ``data`` and ``document_prefix`` are as for :func:`spans_from_conversation`.
    """
    sessions = _sessions(data, document_prefix, None)
    for session in sessions:
        if session.document_id == document_id:
            return session.transcript
    known = ", ".join(repr(s.document_id) for s in sessions[:5]) + (", ..." if len(sessions) > 5 else "")
    raise InputError(f"no session with document_id {document_id!r} in this conversation (it has {known or 'none'})")


def _check_family_by(family_by: str) -> None:
    if family_by not in FAMILY_BY:
        raise ConfigurationError(f"family_by must be one of {', '.join(map(repr, FAMILY_BY))}, got {family_by!r}")


def _conversation_spans(sessions: list[_Session], family_by: str, split: SplitConfig) -> list[Span]:
    spans: list[Span] = []
    for session in sessions:
        family = session.name or session.document_id
        offset = 0
        for turn in session.turns:
            metadata = {"speaker": turn.speaker} | ({"session": session.name} if session.name else {})
            line = turn.line
            for piece in split_passage(line, split) if turn.text.strip() else []:
                spans.append(
                    Span(
                        document_id=session.document_id,
                        text=piece.text,
                        start=offset + piece.start,
                        end=offset + piece.end,
                        family=turn.speaker if family_by == "speaker" else family,
                        source_ts=turn.time,
                        external_id=turn.turn_id,
                        metadata=metadata,
                    )
                )
            offset += len(line.encode("utf-8")) + 1
    return spans


_SESSION_KEY = re.compile(r"session_(\d+)")


# Normalise any supported conversation shape into sessions, checking every field.
def _sessions(data: object, document_prefix: str | None, source: str | None) -> list[_Session]:
    prefix = document_prefix or "conversation"
    label = f"{source}: " if source else ""
    sessions: list[_Session]
    if isinstance(data, Mapping) and (
        "conversation" in data or any(isinstance(k, str) and _SESSION_KEY.fullmatch(k) for k in data)
    ):
        sessions = _locomo_sessions(data, prefix, label)
    elif isinstance(data, list) and data and all(isinstance(d, Mapping) and "conversation" in d for d in data):
        sessions = []
        for index, sample in enumerate(data, start=1):
            fallback = prefix if len(data) == 1 else f"{prefix}#{index}"
            sessions.extend(_locomo_sessions(sample, fallback, label))
    elif isinstance(data, list):
        sessions = _flat_sessions([(f"{label}turn {i}", turn) for i, turn in enumerate(data, start=1)], prefix)
    else:
        raise InputError(
            f"{label}a conversation must be a LoCoMo object ({{'conversation': {{'session_1': [...]}}}}),"
            f" a list of them, or a list of turns; got {type(data).__name__}"
        )
    seen: set[str] = set()
    for session in sessions:
        if session.document_id in seen:
            raise InputError(f"{label}two sessions have the document_id {session.document_id!r}; give each an id")
        seen.add(session.document_id)
    return sessions


def _locomo_sessions(sample: Mapping[str, Any], fallback_id: str, label: str) -> list[_Session]:
    conversation = sample.get("conversation", sample)
    if not isinstance(conversation, Mapping):
        raise InputError(f"{label}'conversation' must be an object, got {type(conversation).__name__}")
    conversation_id = _optional_id(sample.get("sample_id"), f"{label}sample_id") or fallback_id
    numbered = sorted(
        (int(m.group(1)), key) for key in conversation if isinstance(key, str) and (m := _SESSION_KEY.fullmatch(key))
    )
    sessions: list[_Session] = []
    for _, key in numbered:
        where = f"{label}{conversation_id} {key}"
        turns = conversation[key]
        if not isinstance(turns, list):
            raise InputError(f"{where}: must be a list of turns, got {type(turns).__name__}")
        when = conversation.get(f"{key}_date_time")
        session_time = None if when is None else _session_time(when, f"{where}_date_time")
        parsed = tuple(_turn(turn, f"{where} turn {index}", session_time) for index, turn in enumerate(turns, start=1))
        sessions.append(_Session(f"{conversation_id}/{key}", key, parsed))
    return sessions


def _flat_sessions(records: list[tuple[str, object]], prefix: str) -> list[_Session]:
    grouped: dict[str | None, list[_Turn]] = {}
    for where, record in records:
        if not isinstance(record, Mapping):
            raise InputError(f"{where}: a turn must be a JSON object, got {type(record).__name__}")
        session = _optional_id(record.get("session"), f"{where}: session")
        grouped.setdefault(session, []).append(_turn(record, where, None))
    return [_Session(f"{prefix}/{name}" if name else prefix, name, tuple(turns)) for name, turns in grouped.items()]


def _turn(record: object, where: str, session_time: datetime | None) -> _Turn:
    if not isinstance(record, Mapping):
        raise InputError(f"{where}: a turn must be a JSON object, got {type(record).__name__}")
    speaker = record.get("speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        raise InputError(f"{where}: speaker must be a non-empty string, got {speaker!r}")
    _check_label(speaker, f"{where}: speaker")
    text = record.get("text")
    if not isinstance(text, str):
        raise InputError(f"{where}: text must be a string, got {type(text).__name__}")
    _check_clean(text, f"{where}: text")
    turn_id = _optional_id(record.get("id", record.get("dia_id")), f"{where}: id")
    raw_time = record.get("time", record.get("timestamp"))
    time = session_time if raw_time is None else _iso_time(raw_time, f"{where}: time")
    return _Turn(speaker.strip(), text, time, turn_id)


def _optional_id(value: object, describe: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise InputError(f"{describe} must be a non-empty string or a whole number, got {value!r}")
    return _check_label(str(value).strip(), describe)


# An id, session or speaker: short, NUL-free, valid Unicode (it becomes a span field).
def _check_label(value: str, describe: str) -> str:
    if len(value) > MAX_ID_CHARS:
        raise InputError(f"{describe} must be at most {MAX_ID_CHARS} characters, got {len(value)}")
    return _check_clean(value, describe)


def _check_clean(value: str, describe: str) -> str:
    """``value`` if it has no NUL and encodes as UTF-8, else InputError naming it."""
    if "\x00" in value:
        raise InputError(f"{describe} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{describe} is not valid Unicode ({exc.reason})") from None
    return value


def _iso_time(value: object, describe: str) -> datetime:
    if not isinstance(value, str):
        raise InputError(f"{describe} must be ISO 8601 text, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InputError(
            f"{describe} must be an ISO 8601 timestamp (e.g. 2023-05-08T13:56:00Z), got {value!r}"
        ) from None
    # A time without an offset is read as UTC (documented in docs/sources.md).
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


_LOCOMO_TIME = re.compile(r"(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})", re.IGNORECASE)
_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}


# A LoCoMo session date ("1:56 pm on 8 May, 2023", read as UTC) or ISO 8601 text.
def _session_time(value: object, describe: str) -> datetime:
    if isinstance(value, str) and (found := _LOCOMO_TIME.fullmatch(value.strip())):
        hour, minute, half, day, month, year = found.groups()
        if month.lower() in _MONTHS and 1 <= int(hour) <= 12:
            try:
                return datetime(
                    int(year),
                    _MONTHS[month.lower()],
                    int(day),
                    int(hour) % 12 + (12 if half.lower() == "p" else 0),
                    int(minute),
                    tzinfo=UTC,
                )
            except ValueError:
                pass
        raise InputError(f"{describe} is not a valid date, got {value!r}")
    try:
        return _iso_time(value, describe)
    except InputError:
        raise InputError(f"{describe} must be like '1:56 pm on 8 May, 2023' or ISO 8601, got {value!r}") from None


def _read_json(path: Path) -> Any:
    return _loads(_read_text(path), path)


def _read_turn_lines(path: Path) -> list[tuple[str, object]]:
    records: list[tuple[str, object]] = []
    for number, line in enumerate(_read_text(path).split("\n"), start=1):
        if line.strip():
            records.append((f"{path}:{number}", _loads(line, path, number)))
    return records


def _loads(text: str, path: Path, line: int | None = None) -> Any:
    """The JSON value of ``text`` (the file ``path``, or its line ``line``), else InputError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{line or exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise InputError(f"{path}:{line or 1}: JSON nested too deeply to read") from None
    except ValueError as exc:  # an integer of over 4,300 digits
        raise InputError(f"{path}:{line or 1}: not usable JSON ({exc})") from None


# -- dispatch ---------------------------------------------------------------------------


def spans_from_path(
    path: Path,
    *,
    family: str | None = None,
    split: SplitConfig = _DEFAULT_SPLIT,
    family_by: str = "session",
) -> list[Span]:
    """Spans of a file, read by its suffix.

    Parameters
    ----------
    path : Path
        ``.jsonl``: span records if the first object has ``start`` or ``end``, else
        conversation turns (one per line); ``.json``: a conversation (LoCoMo shape or a
        list of turns); ``.md``/``.markdown``: Markdown; anything else: plain text.
    family : str, optional
        Family of every span. Default: the file stem for documents, the session or
        speaker (``family_by``) for conversations. Span records keep their own.
    split : SplitConfig
        How documents (and over-long turns) are cut.
    family_by : {"session", "speaker"}
        Family of conversation turns when ``family`` is not given.

    Returns
    -------
    list of Span
        Conversation spans use the file name as conversation id when the data has none.
    """
    _check_family_by(family_by)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl" and _holds_span_records(path):
        return spans_from_jsonl(path)
    if suffix not in (".jsonl", ".json"):
        return spans_from_document(path, family=family, split=split)
    if suffix == ".jsonl":
        sessions = _flat_sessions(_read_turn_lines(path), path.name)
    else:
        sessions = _sessions(_read_json(path), path.name, str(path))
    spans = _conversation_spans(sessions, family_by, split)
    return spans if family is None else [replace(span, family=family) for span in spans]
