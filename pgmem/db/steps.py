"""One implementation, two drivers: operations written as generators of I/O steps.

An operation that needs several statements with logic between them (ingest: look up the
stored spans, enrich and embed, find link partners, write in one transaction) is written
once as a generator. It yields a step — run a statement, copy rows, open or close a
transaction, run CPU-bound work — and receives the step's result; it never touches a
connection. :func:`drive` runs the steps on a ``psycopg.Connection``,
:func:`drive_async` on a ``psycopg.AsyncConnection`` (CPU work in a worker thread).
This is how psycopg itself shares its protocol code between its sync and async
connections. A driver error is thrown back into the generator at the step that failed,
so the generator's ``database_errors`` blocks translate it as in straight-line code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Iterable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from pgmem.db.queries import Statement, query, run, run_async
from pgmem.db.vectors import vector_binary_dumper

T = TypeVar("T")


@dataclass(frozen=True)
class Fetch:
    """Run a statement; the step's result is its rows, by name."""

    statement: Statement


@dataclass(frozen=True)
class Execute:
    """Run a statement that returns no rows."""

    statement: Statement


@dataclass(frozen=True)
class Script:
    """Run SQL the operation composed with :mod:`psycopg.sql`, without parameters: DDL
    over names the catalogue gave (an index to drop, its definition to build again)."""

    sql: sql.SQL | sql.Composed


@dataclass(frozen=True)
class Copy:
    """``COPY ... FROM STDIN`` with the named statement, writing ``rows``.

    ``types`` are the columns' types (names or oids) for a binary COPY (``FORMAT
    BINARY``), where each value is dumped by its column's type; ``vector_oid`` is the
    database's pgvector ``vector`` type, whose columns take numpy vectors in binary form.
    """

    name: str
    rows: Iterable[tuple[Any, ...]]
    types: tuple[str | int, ...] = ()
    vector_oid: int | None = None


_Cursor = TypeVar("_Cursor", psycopg.Cursor[Any], psycopg.AsyncCursor[Any])


def _copy_cursor(cursor: _Cursor, step: Copy) -> _Cursor:
    """``cursor`` ready for ``step``'s rows: the vector dumper registered on it alone (the
    caller's connection keeps its adapters)."""
    if step.vector_oid is not None:
        cursor.adapters.register_dumper(None, vector_binary_dumper(step.vector_oid))
    return cursor


@dataclass(frozen=True)
class Begin:
    """Open a transaction block (a savepoint inside the caller's transaction)."""


@dataclass(frozen=True)
class Commit:
    """Close the innermost block opened by :class:`Begin` (commit or release the savepoint)."""


@dataclass(frozen=True)
class Compute:
    """CPU-bound work: ``function(*arguments)``; the async driver runs it in a thread."""

    function: Callable[..., Any]
    arguments: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Call:
    """Work outside the connection that the operation's owner supplies (a chat model
    call, a nested pgmem operation): handed to the driver's ``handle``, which the
    async driver awaits."""

    request: Any


Step = Fetch | Execute | Script | Copy | Begin | Commit | Compute | Call
Steps = Generator[Step, Any, T]


def _no_handler(request: Any) -> Any:
    raise TypeError(f"this driver has no handler for the call {request!r}")


def _perform(
    conn: psycopg.Connection[Any],
    step: Step,
    blocks: list[AbstractContextManager[Any]],
    handle: Callable[[Any], Any],
) -> Any:
    if isinstance(step, Fetch):
        return run(conn, step.statement.name, step.statement.params or None).fetchall()
    if isinstance(step, Execute):
        # No parameters: the simple protocol, which allows several statements in one.
        conn.execute(query(step.statement.name), step.statement.params or None)
        return None
    if isinstance(step, Script):
        conn.execute(step.sql)
        return None
    if isinstance(step, Copy):
        with _copy_cursor(conn.cursor(), step).copy(query(step.name)) as copy:
            if step.types:
                copy.set_types(list(step.types))
            for row in step.rows:
                copy.write_row(row)
        return None
    if isinstance(step, Begin):
        block = conn.transaction()
        block.__enter__()
        blocks.append(block)
        return None
    if isinstance(step, Commit):
        blocks.pop().__exit__(None, None, None)
        return None
    if isinstance(step, Call):
        return handle(step.request)
    return step.function(*step.arguments)


def drive(conn: psycopg.Connection[Any], steps: Steps[T], handle: Callable[[Any], Any] = _no_handler) -> T:
    """Run ``steps`` on a sync connection and return the generator's result.

    ``handle`` answers the :class:`Call` steps (their ``request``).
    """
    blocks: list[AbstractContextManager[Any]] = []
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(result) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except BaseException as exc:
            # The operation failed: roll back what it opened, innermost first.
            while blocks:
                blocks.pop().__exit__(type(exc), exc, exc.__traceback__)
            raise
        result, error = None, None
        try:
            result = _perform(conn, step, blocks, handle)
        except BaseException as exc:  # cancellation too: the generator's blocks must unwind
            error = exc


async def _no_async_handler(request: Any) -> Any:
    raise TypeError(f"this driver has no handler for the call {request!r}")


async def _perform_async(
    conn: psycopg.AsyncConnection[Any],
    step: Step,
    blocks: list[AbstractAsyncContextManager[Any]],
    handle: Callable[[Any], Awaitable[Any]],
) -> Any:
    if isinstance(step, Fetch):
        cursor = await run_async(conn, step.statement.name, step.statement.params or None)
        return await cursor.fetchall()
    if isinstance(step, Execute):
        await conn.execute(query(step.statement.name), step.statement.params or None)
        return None
    if isinstance(step, Script):
        await conn.execute(step.sql)
        return None
    if isinstance(step, Copy):
        async with _copy_cursor(conn.cursor(), step).copy(query(step.name)) as copy:
            if step.types:
                copy.set_types(list(step.types))
            for row in step.rows:
                await copy.write_row(row)
        return None
    if isinstance(step, Begin):
        block = conn.transaction()
        await block.__aenter__()
        blocks.append(block)
        return None
    if isinstance(step, Commit):
        await blocks.pop().__aexit__(None, None, None)
        return None
    if isinstance(step, Call):
        return await handle(step.request)
    return await asyncio.to_thread(step.function, *step.arguments)


async def drive_async(
    conn: psycopg.AsyncConnection[Any],
    steps: Steps[T],
    handle: Callable[[Any], Awaitable[Any]] = _no_async_handler,
) -> T:
    """Run ``steps`` on an async connection and return the generator's result.

    ``handle`` answers the :class:`Call` steps (their ``request``), awaited.
    """
    blocks: list[AbstractAsyncContextManager[Any]] = []
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(result) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except BaseException as exc:
            while blocks:
                await blocks.pop().__aexit__(type(exc), exc, exc.__traceback__)
            raise
        result, error = None, None
        try:
            result = await _perform_async(conn, step, blocks, handle)
        except BaseException as exc:  # cancellation too: the generator's blocks must unwind
            error = exc
