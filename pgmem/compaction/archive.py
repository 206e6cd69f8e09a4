"""Dropped messages become notes; archived notes come back by id or by query.

Every message a compaction drops (assistant turns, tool calls, tool observations) is
written as notes of the namespace in one :func:`pgmem.ingest` call (one transaction, or
a savepoint inside the caller's). A message's document id is derived from the
trajectory and the message's own content, so archiving it again, after a crash or
because a later generation dropped it too, writes nothing new.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgmem.api import ingest
from pgmem.db.errors import database_errors
from pgmem.db.queries import query, run
from pgmem.embeddings import Embedder
from pgmem.errors import InputError
from pgmem.ingestion.writer import IngestResult
from pgmem.types import Span

#: Longest note cut from one message, in UTF-8 bytes (long tool observations are split).
MAX_NOTE_BYTES = 2_000
SUMMARY_FAMILY = "compaction-summary"

Message = Mapping[str, Any]
_BREAK = re.compile(r"\n\s*\n|(?<=[.!?])\s+|\n|\s+")


def message_family(message: Message, tool_names: Mapping[str, str]) -> str:
    """Provenance of a message: the source URL or tool it came from, else its speaker."""
    for key in ("source_url", "url", "source"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:512]
    role = str(message.get("role", "unknown"))
    if role == "tool":
        name = message.get("name") or tool_names.get(str(message.get("tool_call_id", "")))
        return str(name) if name else "tool"
    calls = message.get("tool_calls") or []
    if role == "assistant" and calls:
        function = calls[0].get("function", {}) if isinstance(calls[0], Mapping) else {}
        return str(function.get("name") or "tool")
    name = message.get("name")
    return str(name) if isinstance(name, str) and name.strip() else role


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """Tool call id -> tool name, from the assistant messages' tool calls."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, Mapping) and call.get("id"):
                names[str(call["id"])] = str(call.get("function", {}).get("name", "tool"))
    return names


def render_message(message: Message) -> str:
    """The text of a message as archived: its content, then its tool calls."""
    content = message.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, Sequence):
        parts = [
            str(p.get("text", "")) if isinstance(p, Mapping) and p.get("type") == "text" else json.dumps(p)
            for p in content
        ]
    else:
        parts = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        parts.append(f"call {function.get('name', '?')}({function.get('arguments', '')})")
    return "\n".join(p for p in parts if p.strip())


def message_key(trajectory_id: str, message: Message) -> str:
    """Document id of a message: the trajectory and a digest of the whole message."""
    canonical = json.dumps(message, sort_keys=True, default=str, ensure_ascii=False)
    return f"{trajectory_id}:m:{hashlib.sha256(canonical.encode()).hexdigest()[:24]}"


def _pieces(text: str) -> list[tuple[int, int]]:
    """Byte ranges of ``text`` of at most MAX_NOTE_BYTES, cut at breaks, trimmed."""
    data = text.encode("utf-8")
    if len(data) <= MAX_NOTE_BYTES:
        return [(0, len(data))]
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < len(data):
        end = min(start + MAX_NOTE_BYTES, len(data))
        if end < len(data):
            # Cut at the last break inside the window (else a character boundary).
            window = data[start:end].decode("utf-8", errors="ignore")
            cut = None
            for match in _BREAK.finditer(window):
                if match.start() > len(window) // 3:
                    cut = match.start()
            window = window[:cut] if cut else window
            end = start + len(window.encode("utf-8"))
        piece = data[start:end].decode("utf-8")
        lead = len(piece) - len(piece.lstrip())
        trail = len(piece) - len(piece.rstrip())
        s = start + len(piece[:lead].encode("utf-8"))
        e = end - len(piece[len(piece) - trail :].encode("utf-8")) if trail else end
        if e > s:
            ranges.append((s, e))
        start = end
    return ranges


@dataclass(frozen=True)
class ArchivedMessage:
    """Where one dropped message went: its document and the note ids of its pieces."""

    position: int
    document_id: str
    note_ids: tuple[str, ...]
    text: str


def message_spans(
    messages: Sequence[tuple[int, Message]],
    *,
    trajectory_id: str,
    generation: int,
    round_number: int,
    all_messages: Sequence[Message],
) -> tuple[list[Span], list[tuple[int, str, str, int]]]:
    """The spans of the messages (position, message) and (position, document, text, pieces) each."""
    names = tool_names(all_messages)
    spans: list[Span] = []
    layout: list[tuple[int, str, str, int]] = []
    seen: set[str] = set()
    for position, message in messages:
        text = render_message(message)
        document_id = message_key(trajectory_id, message)
        if not text.strip() or document_id in seen:
            continue
        seen.add(document_id)
        ranges = _pieces(text)
        data = text.encode("utf-8")
        family = message_family(message, names)
        role = str(message.get("role", "unknown"))
        extra: dict[str, Any] = {}
        if message.get("tool_calls"):
            extra["tool_calls"] = message["tool_calls"]
        if message.get("tool_call_id"):
            extra["tool_call_id"] = message["tool_call_id"]
        for part, (start, end) in enumerate(ranges):
            spans.append(
                Span(
                    document_id=document_id,
                    text=data[start:end].decode("utf-8"),
                    start=start,
                    end=end,
                    family=family,
                    external_id=message.get("name") if isinstance(message.get("name"), str) else None,
                    context=f"{role} {family}, round {round_number}",
                    role="dialogue",
                    metadata={
                        "kind": "archived_message",
                        "trajectory": trajectory_id,
                        "generation": generation,
                        "round": round_number,
                        "position": position,
                        "message_role": role,
                        "part": part,
                        "parts": len(ranges),
                        **(extra if part == 0 else {}),
                    },
                )
            )
        layout.append((position, document_id, text, len(ranges)))
    return spans, layout


def archive_messages(
    conn: psycopg.Connection[Any],
    messages: Sequence[tuple[int, Message]],
    *,
    namespace: str,
    embedder: Embedder | str | None,
    trajectory_id: str,
    generation: int,
    round_number: int,
    all_messages: Sequence[Message],
) -> tuple[list[ArchivedMessage], IngestResult]:
    """Write the messages as notes in one transaction; re-archiving is a no-op."""
    spans, layout = message_spans(
        messages,
        trajectory_id=trajectory_id,
        generation=generation,
        round_number=round_number,
        all_messages=all_messages,
    )
    # A message archived before (an earlier compaction, a retry after a crash) keeps
    # the notes it has: its metadata says when it was first dropped, and ingest would
    # rightly refuse the same span with another generation or round.
    stored: dict[str, list[str]] = {}
    if layout:
        rows = run(conn, "notes_of_documents", {"namespace": namespace, "document_ids": [entry[1] for entry in layout]})
        for row in rows:
            stored.setdefault(row["document_id"], []).append(str(row["note_id"]))
    fresh = [span for span in spans if span.document_id not in stored]
    result = ingest(conn, fresh, namespace=namespace, embedder=embedder) if fresh else IngestResult((), 0, 0)
    archived: list[ArchivedMessage] = []
    cursor = 0
    for position, document_id, text, pieces in layout:
        if document_id in stored:
            note_ids = tuple(stored[document_id])
        else:
            note_ids = result.note_ids[cursor : cursor + pieces]
            cursor += pieces
        archived.append(ArchivedMessage(position, document_id, note_ids, text))
    all_ids = tuple(note_id for entry in archived for note_id in entry.note_ids)
    return archived, IngestResult(all_ids, result.inserted, result.skipped + len(spans) - len(fresh))


def summary_span(
    summary: str, *, trajectory_id: str, generation: int, cites: Sequence[str], flagged: int, reason: str
) -> Span:
    """The summary of one compaction as a note, linked to the notes it cites (metadata)."""
    text = summary.encode("utf-8")[:16_000].decode("utf-8", errors="ignore").strip()
    return Span(
        document_id=f"{trajectory_id}:summary:{generation}:{hashlib.sha256(text.encode()).hexdigest()[:16]}",
        text=text,
        start=0,
        end=len(text.encode("utf-8")),
        family=SUMMARY_FAMILY,
        role="summary",
        context=f"summary of generation {generation}",
        metadata={
            "kind": "summary",
            "trajectory": trajectory_id,
            "generation": generation,
            "cites": list(cites),
            "uncited_claims": flagged,
            "reason": reason,
        },
    )


@dataclass(frozen=True)
class RecalledNote:
    """An archived note reopened by the ``recall`` tool."""

    note_id: str
    text: str
    family: str
    context: str
    metadata: Mapping[str, Any]


_HEX = re.compile(r"^[0-9a-f]{4,32}$")


def id_bounds(identifier: str) -> tuple[str, str]:
    """The note-id range a full id or a hex prefix (a citation ref) stands for."""
    hexid = identifier.strip().strip("[]#").replace("-", "").lower()
    if not _HEX.match(hexid):
        raise InputError(f"note_ids must be note ids or citation refs (4-32 hex digits), got {identifier!r}")
    low = hexid.ljust(32, "0")
    high = hexid.ljust(32, "f")
    return str(uuid.UUID(low)), str(uuid.UUID(high))


def fetch_notes(conn: psycopg.Connection[Any], namespace: str, identifiers: Sequence[str]) -> list[RecalledNote]:
    """The notes of ``namespace`` named by full ids or ref prefixes, in document order."""
    if not identifiers:
        return []
    bounds = [id_bounds(i) for i in identifiers]
    with database_errors("recall"), conn.cursor(row_factory=dict_row) as cursor:
        rows = cursor.execute(
            query("recall_notes"),
            {"namespace": namespace, "lows": [b[0] for b in bounds], "highs": [b[1] for b in bounds]},
        ).fetchall()
    return [RecalledNote(str(r["note_id"]), r["text"], r["family"], r["context"], r["metadata"] or {}) for r in rows]
