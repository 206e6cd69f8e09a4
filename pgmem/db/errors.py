"""The one boundary where driver errors become pgmem errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg_errors

from pgmem.errors import (
    DatabaseError,
    EmbeddingMismatchError,
    InputError,
    PgmemError,
    SchemaError,
)

#: SQLSTATEs raised by pgmem's own SQL (sql/schema.sql).
NOTE_IMMUTABLE = "PM001"
EMBEDDING_MISMATCH = "PM002"


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
    if state == NOTE_IMMUTABLE:
        return InputError(f"{action}: {message}")
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
    if isinstance(exc, pg_errors.QueryCanceled):
        return DatabaseError(f"{action}: cancelled by the server ({message})")
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseError(f"{action}: the database is unreachable or failed ({message})")
    return DatabaseError(f"{action}: PostgreSQL refused it ({state or 'no SQLSTATE'}: {message})")
