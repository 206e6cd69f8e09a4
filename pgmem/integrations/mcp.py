"""The ``pgmem mcp`` server: pgmem as Model Context Protocol tools.

Needs the ``mcp`` extra (``pip install 'pgmem[mcp]'``, the official MCP Python SDK).
Five tools: ``remember`` (write text as notes), ``pack`` (cited evidence for a
question), ``recall`` (a note by id), ``feedback`` (which notes helped) and ``forget``
(erase notes; only when the server's database role may).

The namespace and the database role are the server's: they come from its connection
(``--dsn``, ``--namespace``), never from the model, and no tool takes a namespace. Every
input is checked by pgmem's own validation; a :class:`pgmem.PgmemError` reaches the
model as a tool error carrying its message. See docs/integrations/mcp.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Annotated, Any

import psycopg
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from pgmem.api import feedback, forget, ingest, pack
from pgmem.db.errors import database_errors
from pgmem.db.queries import run
from pgmem.embeddings import Embedder
from pgmem.errors import DatabaseError, InputError, PgmemError
from pgmem.ingestion.sources import spans_from_text
from pgmem.integrations._common import content_id, read_notes
from pgmem.validate import check_namespace, check_text, describe_value

__all__ = ["MAX_PACK_BUDGET", "MAX_REMEMBER_CHARS", "Memory", "build_server", "serve"]

#: Longest text one ``remember`` call writes, in characters (a few pages: the model
#: remembers what it learnt, it does not upload documents; ``pgmem ingest`` does that).
MAX_REMEMBER_CHARS = 65_536
#: Longest ``source`` or ``family`` label (the source becomes part of a document id).
MAX_LABEL_CHARS = 256
#: Most notes one ``pack`` call returns: enough evidence for any answer, and a bound on
#: what one call puts into the model's context.
MAX_PACK_BUDGET = 50
#: Most note ids one ``feedback`` or ``forget`` call names.
MAX_NOTE_IDS = 256

TRANSPORTS = ("stdio", "http")

INSTRUCTIONS = (
    "pgmem is long-term memory. Call `pack` with a question to get a small set of cited notes"
    " (cite them as [citation]); `remember` to store what you learnt, with the family it came"
    " from (user, a tool, a document's publisher) and its source; `recall` to reread one note;"
    " `feedback` to say which packed notes helped. The memory (namespace) is fixed by the server."
)


class Memory:
    """The server's side of every tool: one database session, one namespace.

    The connection is opened by ``open_connection`` (bound to the namespace by the
    server's configuration), used by one tool call at a time and reopened if it broke.
    Each method validates its inputs with pgmem's checks and raises
    :class:`pgmem.PgmemError` subclasses; it returns JSON-ready dicts.
    """

    def __init__(
        self,
        open_connection: Callable[[], psycopg.Connection[Any]],
        *,
        namespace: str,
        embedder: Embedder | str | None = None,
        log_packs: bool = False,
    ) -> None:
        self.namespace = check_namespace(namespace)
        self._open = open_connection
        self._embedder = embedder
        self._log_packs = log_packs
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The session, for one call at a time (tool calls run in worker threads)."""
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                if self._conn is not None:
                    self._conn.close()
                self._conn = self._open()
            yield self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def role(self) -> dict[str, Any]:
        """The database role the server acts as, and whether it may erase notes."""
        with self.connection() as conn, database_errors("read the server's role"):
            row = run(conn, "session_role").fetchone()
        if row is None:
            raise DatabaseError("the database did not say which role this server acts as")
        return {"role": row["role"], "may_forget": bool(row["may_forget"])}

    def remember(self, text: str, family: str, source: str, source_ts: str | None = None) -> dict[str, Any]:
        check_text("text", text, max_chars=MAX_REMEMBER_CHARS)
        check_text("family", family, max_chars=MAX_LABEL_CHARS)
        check_text("source", source, max_chars=MAX_LABEL_CHARS)
        # The same text from the same source is the same document: remembering it again is a no-op.
        spans = spans_from_text(text, document_id=content_id(text, source.strip()), family=family.strip())
        spans = [replace(span, source_ts=source_ts, metadata={"source": source}) for span in spans]
        with self.connection() as conn:
            result = ingest(conn, spans, namespace=self.namespace, embedder=self._embedder)
        return {
            "note_ids": list(result.note_ids),
            "citations": [f"{span.document_id}[{span.start}:{span.end}]" for span in spans],
            "new_notes": result.inserted,
            "already_known": result.skipped,
        }

    def pack(self, question: str, budget: int = 8, token_budget: int | None = None) -> dict[str, Any]:
        if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_PACK_BUDGET:
            raise InputError(f"budget must be a whole number in [1, {MAX_PACK_BUDGET}], got {describe_value(budget)}")
        with self.connection() as conn:
            evidence = pack(
                conn,
                question,
                namespace=self.namespace,
                budget=budget,
                token_budget=token_budget,
                embedder=self._embedder,
                log=self._log_packs,
            )
        d = evidence.diagnostics
        return {
            "question": evidence.query,
            "notes": [
                {
                    "rank": item.rank,
                    "citation": str(item.citation),
                    "note_id": item.note_id,
                    "text": item.text,
                    "context": item.context,
                    "family": item.family,
                    "role": item.role,
                    "source_ts": item.source_ts.isoformat() if item.source_ts else None,
                    "score": round(item.final_score, 4),
                }
                for item in evidence.items
            ],
            "pack_id": evidence.pack_id,
            "degraded": d.degraded,
            "degraded_reasons": list(d.degraded_reasons),
            "pool_size": d.pool_size,
        }

    def recall(self, note_id: str) -> dict[str, Any]:
        with self.connection() as conn:
            notes = read_notes(conn, namespace=self.namespace, note_ids=[note_id], limit=1)
        if not notes:
            raise InputError(f"no note {note_id} in this memory")
        return notes[0].to_dict()

    def feedback(
        self, helpful: list[str] | None = None, unhelpful: list[str] | None = None, pack_id: str | None = None
    ) -> dict[str, Any]:
        for name, ids in (("helpful", helpful), ("unhelpful", unhelpful)):
            if ids is not None and len(ids) > MAX_NOTE_IDS:
                raise InputError(f"{name} must name at most {MAX_NOTE_IDS} notes, got {len(ids)}")
        with self.connection() as conn:
            result = feedback(conn, namespace=self.namespace, helpful=helpful, unhelpful=unhelpful, pack_id=pack_id)
        return {
            "recorded": result.recorded,
            "families": {family: {"helpful": h, "unhelpful": u} for family, (h, u) in result.families.items()},
        }

    def forget(
        self,
        reason: str,
        note_ids: list[str] | None = None,
        document_id: str | None = None,
        family: str | None = None,
    ) -> dict[str, Any]:
        if note_ids is not None and len(note_ids) > MAX_NOTE_IDS:
            raise InputError(f"note_ids must name at most {MAX_NOTE_IDS} notes, got {len(note_ids)}")
        role = self.role()
        if not role["may_forget"]:
            raise InputError(
                f"forget is for admins: this server acts as database role {role['role']!r}, which may not erase"
                " notes (it needs pgmem_admin); nothing was erased"
            )
        with self.connection() as conn:
            result = forget(
                conn, namespace=self.namespace, reason=reason, note_ids=note_ids, document_id=document_id, family=family
            )
        return {"notes_removed": result.notes_removed, "audit_id": result.audit_id}


@contextmanager
def _tool_errors() -> Iterator[None]:
    """pgmem's errors reach the model as tool errors carrying their message (the SDK
    prefixes it with ``Error executing tool <name>:``)."""
    try:
        yield
    except PgmemError as exc:
        raise ToolError(str(exc)) from exc


_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_ERASE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

NoteId = Annotated[str, Field(description="A note id, as returned by pack or remember.")]


def build_server(memory: Memory) -> MCPServer:
    """An MCP server whose five tools act on ``memory`` (its namespace and role)."""
    from pgmem import __version__

    # WARNING: the SDK configures logging (to stderr), and INFO would log every request there.
    server: MCPServer = MCPServer("pgmem", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    @server.tool(annotations=_WRITE)
    def remember(
        text: Annotated[str, Field(description=f"What to remember (at most {MAX_REMEMBER_CHARS} characters).")],
        family: Annotated[
            str, Field(description="Who or what it came from: the user, a tool, a publisher, a session.")
        ],
        source: Annotated[str, Field(description="Where it came from: a URL, file, conversation or tool call id.")],
        source_ts: Annotated[
            str | None, Field(description="When the source said it, ISO 8601 with a UTC offset.")
        ] = None,
    ) -> dict[str, Any]:
        """Store text in long-term memory as immutable, cited notes (one per paragraph)."""
        with _tool_errors():
            return memory.remember(text, family, source, source_ts)

    @server.tool(name="pack", annotations=_READ_ONLY)
    def pack_tool(
        question: Annotated[str, Field(description="The question the evidence is for.")],
        budget: Annotated[int, Field(description=f"Most notes to return (1 to {MAX_PACK_BUDGET}).")] = 8,
        token_budget: Annotated[int | None, Field(description="Most tokens of note text in all.")] = None,
    ) -> dict[str, Any]:
        """Find the few notes that best answer a question, each with its citation, family and score."""
        with _tool_errors():
            return memory.pack(question, budget, token_budget)

    @server.tool(annotations=_READ_ONLY)
    def recall(note_id: NoteId) -> dict[str, Any]:
        """Reread one note by its id: its full text, citation, family, role, time and metadata."""
        with _tool_errors():
            return memory.recall(note_id)

    @server.tool(name="feedback", annotations=_WRITE)
    def feedback_tool(
        helpful: Annotated[list[NoteId] | None, Field(description="Ids of packed notes that helped.")] = None,
        unhelpful: Annotated[list[NoteId] | None, Field(description="Ids of packed notes that did not.")] = None,
        pack_id: Annotated[str | None, Field(description="The pack_id the notes came in, if any.")] = None,
    ) -> dict[str, Any]:
        """Say which packed notes helped answer and which did not; later packs learn from it."""
        with _tool_errors():
            return memory.feedback(helpful, unhelpful, pack_id)

    @server.tool(name="forget", annotations=_ERASE)
    def forget_tool(
        reason: Annotated[str, Field(description="Why the notes must go (kept in the audit log).")],
        note_ids: Annotated[list[NoteId] | None, Field(description="Erase these notes.")] = None,
        document_id: Annotated[str | None, Field(description="Or erase every note of this document.")] = None,
        family: Annotated[str | None, Field(description="Or erase every note of this family.")] = None,
    ) -> dict[str, Any]:
        """Erase notes for good (admin servers only): exactly one of note_ids, document_id or family."""
        with _tool_errors():
            return memory.forget(reason, note_ids, document_id, family)

    return server


def serve(
    memory: Memory,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
) -> None:
    """Serve ``memory`` over stdio, or streamable HTTP at ``http://host:port/path``, until stopped.

    The connection is opened (and checked) before serving, and closed afterwards.
    """
    if transport not in TRANSPORTS:
        raise InputError(f"transport must be one of {', '.join(TRANSPORTS)}, got {describe_value(transport)}")
    memory.role()  # a wrong DSN or namespace fails here, not at the model's first call
    server = build_server(memory)
    try:
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=port, streamable_http_path=path)
    finally:
        memory.close()
