"""Named SQL statements from ``sql/queries.sql``, loaded once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row

from pgmem.db.errors import database_errors
from pgmem.db.resources import sql_dir
from pgmem.errors import SchemaError

Rows = list[dict[str, Any]]

_NAME = re.compile(r"^-- name: (?P<name>\w+) --$", re.MULTILINE)


@cache
def _all() -> dict[str, str]:
    text = (sql_dir() / "queries.sql").read_text(encoding="utf-8")
    parts = _NAME.split(text)
    # split() yields [preamble, name1, body1, name2, body2, ...]
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(name: str) -> str:
    """The SQL text of the statement called ``name`` in queries.sql.

    The text is pgmem's own packaged SQL, never user input; values always travel as
    bind parameters.
    """
    try:
        return _all()[name]
    except KeyError:
        raise SchemaError(f"no SQL statement named {name!r} in queries.sql") from None


def run(
    conn: psycopg.Connection[Any],
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    prepare: bool | None = None,
    binary: bool | None = None,
) -> psycopg.Cursor[dict[str, Any]]:
    """Execute the named statement on a cursor of pgmem's own; rows come back by name.

    The caller's connection may have any row factory (tuples, dicts, classes): pgmem
    never reads rows through it, so what it reads does not depend on how the
    connection was opened. ``binary`` asks for the rows in binary format (the same
    values, without formatting and parsing every float as text).
    """
    cursor = conn.cursor(row_factory=dict_row)
    return cursor.execute(query(name), params, prepare=prepare, binary=binary)


async def run_async(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    prepare: bool | None = None,
    binary: bool | None = None,
) -> psycopg.AsyncCursor[dict[str, Any]]:
    """:func:`run` on an async connection (a dict_row cursor of pgmem's own)."""
    cursor = conn.cursor(row_factory=dict_row)
    return await cursor.execute(query(name), params, prepare=prepare, binary=binary)


def run_tuples(
    conn: psycopg.Connection[Any],
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    prepare: bool | None = None,
    binary: bool | None = None,
) -> psycopg.Cursor[tuple[Any, ...]]:
    """:func:`run` with rows as tuples, read by the names of the cursor's ``description``
    (:func:`column_names`), never by a fixed position: for stage one's ~45 columns of ~128
    rows, where building each row's dict (``dict_row``) cost as much as reading it."""
    cursor = conn.cursor(row_factory=tuple_row)
    return cursor.execute(query(name), params, prepare=prepare, binary=binary)


async def run_tuples_async(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    prepare: bool | None = None,
    binary: bool | None = None,
) -> psycopg.AsyncCursor[tuple[Any, ...]]:
    """:func:`run_tuples` on an async connection."""
    cursor = conn.cursor(row_factory=tuple_row)
    return await cursor.execute(query(name), params, prepare=prepare, binary=binary)


def column_names(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> list[str]:
    """The names of the columns the cursor's statement returned, in row order."""
    if cursor.description is None:
        raise SchemaError("the statement returned no columns")
    return [column.name for column in cursor.description]


@dataclass(frozen=True)
class Statement:
    """One named statement of ``queries.sql`` with its bind parameters, ready to run.

    ``action`` names the operation in error messages ("forget", "feedback", ...).
    """

    action: str
    name: str
    params: Mapping[str, Any]


def fetch(conn: psycopg.Connection[Any], statement: Statement) -> Rows:
    """Run ``statement`` and return its rows by name; driver errors become pgmem errors."""
    with database_errors(statement.action):
        return run(conn, statement.name, statement.params).fetchall()


async def fetch_async(conn: psycopg.AsyncConnection[Any], statement: Statement) -> Rows:
    """:func:`fetch` on an async connection."""
    with database_errors(statement.action):
        cursor = await run_async(conn, statement.name, statement.params)
        return await cursor.fetchall()
