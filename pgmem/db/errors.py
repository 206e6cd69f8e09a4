"""The one boundary where driver errors become pgmem errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from pgmem.errors import (
    ConfigurationError,
    DatabaseError,
    EmbeddingMismatchError,
    FamilyRightsError,
    InputError,
    PgmemError,
    SchemaError,
)

#: SQLSTATEs raised by pgmem's own SQL (sql/schema.sql).
NOTE_IMMUTABLE = "PM001"
EMBEDDING_MISMATCH = "PM002"
UNKNOWN_NOTE = "PM003"
MODEL_NOT_REGISTERED = "PM004"
SUPERSEDE_UNREPLACED = "PM005"
FAMILY_NOT_WRITABLE = "PM006"
#: The row-level security policy that keeps unbound writers from superseding a bound
#: family's notes (migration 0009); PostgreSQL names it in its 42501 message.
SUPERSEDE_FAMILY_POLICY = "supersede_family_right"

#: Constraints of pgmem's tables that a caller's data (or raw SQL) can violate, and
#: the rule each one states.
CONSTRAINT_RULES = {
    "notes_span": (
        "one note per document span: another note already holds this span of the document"
        " (re-ingest never replaces a note; pgmem.supersede does, audited)"
    ),
    "notes_pkey": "a note with this note id already exists in the namespace",
    "notes_span_length": "a note's span_end - span_start must equal the UTF-8 byte length of its text",
    "notes_namespace_model": "a note's model_id must be the embedding model its namespace is bound to",
}


@contextmanager
def deadline(conn: psycopg.Connection[Any], seconds: float | None, action: str) -> Iterator[None]:
    """Cancel the statement running inside the block after ``seconds``.

    A client-side timer sends PostgreSQL a cancel request, so no extra statement (and
    no round trip) is spent on a per-call ``statement_timeout``; the cancelled
    statement raises :class:`DatabaseError` saying the timeout was exceeded.
    """
    if seconds is None:
        yield
        return
    fired = threading.Event()

    def cancel() -> None:
        fired.set()
        conn.cancel_safe(timeout=5.0)

    timer = threading.Timer(seconds, cancel)
    timer.daemon = True
    timer.start()
    try:
        yield
    except pg_errors.QueryCanceled as exc:
        if fired.is_set():
            raise DatabaseError(f"{action}: exceeded its timeout of {seconds:g} s and was cancelled") from exc
        raise
    finally:
        timer.cancel()
        timer.join()


@asynccontextmanager
async def deadline_async(conn: psycopg.AsyncConnection[Any], seconds: float | None, action: str) -> AsyncIterator[None]:
    """:func:`deadline` on an async connection: a timer of the event loop sends the cancel
    request, and the cancelled statement raises the same :class:`DatabaseError`."""
    if seconds is None:
        yield
        return
    fired = asyncio.Event()
    cancels: list[asyncio.Task[None]] = []

    def cancel() -> None:
        fired.set()
        cancels.append(asyncio.ensure_future(conn.cancel_safe(timeout=5.0)))

    timer = asyncio.get_running_loop().call_later(seconds, cancel)
    try:
        yield
    except pg_errors.QueryCanceled as exc:
        if fired.is_set():
            raise DatabaseError(f"{action}: exceeded its timeout of {seconds:g} s and was cancelled") from exc
        raise
    finally:
        timer.cancel()
        for task in cancels:
            await task


@contextmanager
def database_errors(action: str) -> Iterator[None]:
    """Translate psycopg errors raised inside the block into pgmem errors.

    ``action`` says what was being done ("ingest", "pack", ...) so the message can
    name it; the driver error stays attached as ``__cause__``.
    """
    try:
        yield
    except PgmemError:
        raise
    except psycopg.Error as exc:
        raise translate(exc, action) from exc


def translate(exc: psycopg.Error, action: str) -> PgmemError:
    """The pgmem error for a driver error raised during ``action``."""
    message = (exc.diag.message_primary or str(exc)).strip()
    state = exc.sqlstate
    if state == EMBEDDING_MISMATCH:
        return EmbeddingMismatchError(f"{action}: {message}")
    if state == MODEL_NOT_REGISTERED:
        hint = (exc.diag.message_hint or "").strip()
        return ConfigurationError(f"{action}: {message}" + (f". {hint}" if hint else ""))
    if state == FAMILY_NOT_WRITABLE:
        hint = (exc.diag.message_hint or "").strip()
        return FamilyRightsError(f"{action}: {message}" + (f". {hint}" if hint else ""))
    if state in (NOTE_IMMUTABLE, UNKNOWN_NOTE, SUPERSEDE_UNREPLACED, "22023"):
        return InputError(f"{action}: {message}")
    if isinstance(exc, pg_errors.InsufficientPrivilege) and f'"{SUPERSEDE_FAMILY_POLICY}"' in message:
        return FamilyRightsError(
            f"{action}: the note to replace belongs to a family bound to other writer roles"
            " (pgmem.bind_family): only its bound writers and admins may supersede it"
        )
    rule = CONSTRAINT_RULES.get(exc.diag.constraint_name or "")
    if rule is not None and isinstance(exc, pg_errors.IntegrityError):
        # Only a unique key's detail is quoted: it names the span, not the row's content.
        # (PostgreSQL leaves it out for roles under row-level security.)
        detail = exc.diag.message_detail if isinstance(exc, pg_errors.UniqueViolation) else None
        return InputError(f"{action}: {rule}" + (f" ({detail.rstrip('.')})" if detail else ""))
    missing = (
        pg_errors.UndefinedTable,
        pg_errors.UndefinedFunction,
        pg_errors.UndefinedObject,
        pg_errors.InvalidSchemaName,
    )
    if isinstance(exc, missing):
        return SchemaError(
            f"{action}: the pgmem schema is missing or outdated ({message}); run pgmem.migrate(conn) or `pgmem migrate`"
        )
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        # A hot standby (or a READ ONLY transaction): say where the write must go.
        return DatabaseError(
            f"{action}: this connection is read-only ({message}); {action} writes, so it needs the primary"
            " (pgmem.ReplicaSet sends writes and logged packs there)"
        )
    if isinstance(exc, pg_errors.QueryCanceled):
        return DatabaseError(f"{action}: cancelled by the server ({message})")
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseError(f"{action}: the database is unreachable or failed ({message})")
    return DatabaseError(f"{action}: PostgreSQL refused it ({state or 'no SQLSTATE'}: {message})")
