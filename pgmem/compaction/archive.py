"""Dropped messages become notes; archived notes come back by id or by query.

A trajectory's archive is ONE document (:func:`archive_document`) whose spans are the
messages compactions dropped, in trajectory order: a message's pieces keep their byte
offsets within the message, and each message starts one byte after the end of the last
one archived before it (the document's largest ``span_end``, read in the archive's own
transaction under a per-trajectory advisory lock, so offsets are unique and increasing
across generations). Stage one then treats archived turns as it treats a document's
spans: the previous and next message come along with a hit, and ingest links neighbours.

Every archive is one transaction (a savepoint inside the caller's). Each note carries
its message's digest (``metadata.digest``); a message whose digest the trajectory's
document already holds is not written again, so archiving it a second time, after a
crash or because a later generation dropped it too, is a no-op.

The archive is written as a generator of I/O steps (:mod:`pgmem.db.steps`), so the
sync and the async compactor share it.
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

from pgmem.db.errors import database_errors
from pgmem.db.queries import Statement
from pgmem.db.steps import Begin, Commit, Fetch, Steps, drive
from pgmem.embeddings import Embedder
from pgmem.errors import InputError
from pgmem.ingestion.writer import IngestResult
from pgmem.ingestion.writer import write as write_spans
from pgmem.types import Span

#: Longest note cut from one message, in UTF-8 bytes (long tool observations are split).
MAX_NOTE_BYTES = 2_000
#: Bytes between the end of one archived message and the start of the next.
MESSAGE_GAP = 1
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


def archive_document(trajectory_id: str) -> str:
    """The document id of a trajectory's archive: one document, its messages as spans."""
    return f"{trajectory_id}:archive"


def message_digest(message: Message) -> str:
    """A digest of the whole message (key order ignored): what makes re-archiving a no-op."""
    canonical = json.dumps(message, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


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
    """Where one dropped message went: the trajectory's document, its digest, the note ids of its pieces."""

    position: int
    document_id: str
    digest: str
    note_ids: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class _Entry:
    position: int
    message: Message
    text: str
    digest: str


def _entries(messages: Sequence[tuple[int, Message]]) -> list[_Entry]:
    """The messages that carry text, each once (by digest), in the given order."""
    entries: list[_Entry] = []
    seen: set[str] = set()
    for position, message in messages:
        text = render_message(message)
        digest = message_digest(message)
        if text.strip() and digest not in seen:
            seen.add(digest)
            entries.append(_Entry(position, message, text, digest))
    return entries


def message_spans(
    entry: _Entry,
    offset: int,
    *,
    document_id: str,
    trajectory_id: str,
    generation: int,
    round_number: int,
    names: Mapping[str, str],
) -> list[Span]:
    """The spans of one message, its first byte at ``offset`` of the trajectory's document."""
    message = entry.message
    ranges = _pieces(entry.text)
    data = entry.text.encode("utf-8")
    family = message_family(message, names)
    role = str(message.get("role", "unknown"))
    extra: dict[str, Any] = {}
    if message.get("tool_calls"):
        extra["tool_calls"] = message["tool_calls"]
    if message.get("tool_call_id"):
        extra["tool_call_id"] = message["tool_call_id"]
    return [
        Span(
            document_id=document_id,
            text=data[start:end].decode("utf-8"),
            start=offset + start,
            end=offset + end,
            family=family,
            external_id=message.get("name") if isinstance(message.get("name"), str) else None,
            context=f"{role} {family}, round {round_number}",
            role="dialogue",
            metadata={
                "kind": "archived_message",
                "trajectory": trajectory_id,
                "generation": generation,
                "round": round_number,
                "position": entry.position,
                "digest": entry.digest,
                "message_role": role,
                "part": part,
                "parts": len(ranges),
                **(extra if part == 0 else {}),
            },
        )
        for part, (start, end) in enumerate(ranges)
    ]


def archived_lookup(namespace: str, trajectory_id: str, digests: Sequence[str]) -> Statement:
    """The archive's end and the notes already archived for ``digests`` (one statement)."""
    return Statement(
        "archive",
        "archived_messages",
        {"namespace": namespace, "document_id": archive_document(trajectory_id), "digests": list(digests)},
    )


def _archived(rows: Sequence[Mapping[str, Any]]) -> tuple[int | None, dict[str, list[str]]]:
    """(end of the archive or None when it is empty, digest -> note ids in document order)."""
    stored: dict[str, list[str]] = {}
    end: int | None = None
    for row in rows:
        end = row["archive_end"]
        if row["note_id"] is not None:
            stored.setdefault(str(row["digest"]), []).append(str(row["note_id"]))
    return end, stored


def archive_steps(
    messages: Sequence[tuple[int, Message]],
    *,
    namespace: str,
    embedder: Embedder,
    trajectory_id: str,
    generation: int,
    round_number: int,
    all_messages: Sequence[Message],
) -> Steps[tuple[list[ArchivedMessage], IngestResult]]:
    """Write the messages (position, message) as notes in one transaction; re-archiving is a no-op.

    A message archived before (an earlier compaction, a retry after a crash) keeps the
    notes it has: its metadata says when it was first dropped.
    """
    entries = _entries(messages)
    if not entries:
        return [], IngestResult((), 0, 0)
    document_id = archive_document(trajectory_id)
    lookup = archived_lookup(namespace, trajectory_id, [e.digest for e in entries])
    with database_errors("archive"):
        # A read first: on a non-autocommit connection it opens the caller's transaction,
        # so the block below is a savepoint in it and the commit stays the caller's.
        _, stored = _archived((yield Fetch(lookup)))
    if all(e.digest in stored for e in entries):
        return _result(entries, document_id, stored, IngestResult((), 0, 0))
    with database_errors("archive"):
        yield Begin()
        # One archiver per trajectory at a time: the next offset is read under the lock
        # (held to the end of the transaction: the caller's, on a non-autocommit connection).
        yield Fetch(Statement("archive", "lock_archive", {"namespace": namespace, "document_id": document_id}))
        end, stored = _archived((yield Fetch(lookup)))
    names = tool_names(all_messages)
    offset = 0 if end is None else end + MESSAGE_GAP
    spans: list[Span] = []
    fresh: dict[str, int] = {}
    for entry in entries:
        if entry.digest in stored:
            continue
        laid = message_spans(
            entry,
            offset,
            document_id=document_id,
            trajectory_id=trajectory_id,
            generation=generation,
            round_number=round_number,
            names=names,
        )
        fresh[entry.digest] = len(spans)
        spans.extend(laid)
        offset = laid[-1].end + MESSAGE_GAP
    written = yield from write_spans(spans, namespace=namespace, embedder=embedder)
    yield Commit()
    for entry in entries:
        if entry.digest in fresh:
            first = fresh[entry.digest]
            stored[entry.digest] = list(written.note_ids[first : first + len(_pieces(entry.text))])
    return _result(entries, document_id, stored, written)


def _result(
    entries: Sequence[_Entry], document_id: str, stored: Mapping[str, list[str]], written: IngestResult
) -> tuple[list[ArchivedMessage], IngestResult]:
    archived = [ArchivedMessage(e.position, document_id, e.digest, tuple(stored[e.digest]), e.text) for e in entries]
    all_ids = tuple(note_id for entry in archived for note_id in entry.note_ids)
    return archived, IngestResult(all_ids, written.inserted, len(all_ids) - written.inserted)


def archive_messages(
    conn: psycopg.Connection[Any],
    messages: Sequence[tuple[int, Message]],
    *,
    namespace: str,
    embedder: Embedder,
    trajectory_id: str,
    generation: int,
    round_number: int,
    all_messages: Sequence[Message],
) -> tuple[list[ArchivedMessage], IngestResult]:
    """:func:`archive_steps` on a sync connection."""
    return drive(
        conn,
        archive_steps(
            messages,
            namespace=namespace,
            embedder=embedder,
            trajectory_id=trajectory_id,
            generation=generation,
            round_number=round_number,
            all_messages=all_messages,
        ),
    )


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


def fetch_notes_steps(namespace: str, identifiers: Sequence[str]) -> Steps[list[RecalledNote]]:
    """The notes of ``namespace`` named by full ids or ref prefixes, in document order."""
    if not identifiers:
        return []
    bounds = [id_bounds(i) for i in identifiers]
    arguments = {"namespace": namespace, "lows": [b[0] for b in bounds], "highs": [b[1] for b in bounds]}
    with database_errors("recall"):
        rows = yield Fetch(Statement("recall", "recall_notes", arguments))
    return [RecalledNote(str(r["note_id"]), r["text"], r["family"], r["context"], r["metadata"] or {}) for r in rows]


def fetch_notes(conn: psycopg.Connection[Any], namespace: str, identifiers: Sequence[str]) -> list[RecalledNote]:
    """:func:`fetch_notes_steps` on a sync connection."""
    return drive(conn, fetch_notes_steps(namespace, identifiers))
