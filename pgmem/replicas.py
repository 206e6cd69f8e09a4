"""Read replicas: packs on hot standbys, writes on the primary (docs/replicas.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import make_conninfo

from pgmem import api
from pgmem.db.connection import connect
from pgmem.db.errors import database_errors
from pgmem.errors import ConfigurationError, DatabaseError, PgmemError
from pgmem.types import Pack
from pgmem.validate import check_namespace, timeout_seconds

Result = TypeVar("Result")

#: Where a pack goes when no standby can serve it.
Fallback = Literal["primary", "error"]
#: Longest pause between two looks at a standby's replay position, in seconds.
MAX_POLL_SECONDS = 0.05


class ReplicaSet:
    """A primary and its hot standbys: packs go to a standby, everything else to the primary.

    Connections are opened on first use with :func:`pgmem.connect` (autocommit, no
    migration: migrate the primary once; standbys replay the schema) and kept open.

    * :meth:`pack` runs on the first standby that is up and, with ``read_your_writes``,
      has replayed every write made through this set; a standby that is down, restarted
      or lagging past ``replay_timeout`` is skipped (and reconnected on the next pack),
      and when none can serve, the pack runs on the primary (``fallback="primary"``,
      the default) or raises :class:`pgmem.DatabaseError` (``fallback="error"``).
      A logged pack (``log=True``) writes ``pgmem.pack_log``, so it runs on the primary.
    * :meth:`ingest`, :meth:`supersede`, :meth:`feedback` and :meth:`forget` run on the
      primary and remember its WAL position afterwards; :attr:`primary` is the primary's
      connection for anything else (call :meth:`mark_written` after writing through it
      if the next packs must see that write).

    Parameters
    ----------
    primary : str
        DSN of the primary.
    standbys : sequence of str
        DSNs of hot standbys, in order of preference.
    namespace : str, optional
        Bind every connection to this namespace (as ``pgmem.connect(namespace=...)``).
    read_your_writes : bool
        Packs wait until a standby has replayed the last write made through this set
        (default True); with False a pack may miss writes of the last moments.
    replay_timeout : float
        Seconds a pack waits for a standby to catch up before trying the next (default 2).
    fallback : {"primary", "error"}
        What a pack does when no standby can serve it (default ``"primary"``).
    connect_timeout : int
        Seconds to wait when (re)connecting to a server (default 3; libpq's minimum is 2);
        replaces a ``connect_timeout`` given in the DSNs.
    """

    def __init__(
        self,
        primary: str,
        standbys: Sequence[str],
        *,
        namespace: str | None = None,
        read_your_writes: bool = True,
        replay_timeout: float = 2.0,
        fallback: Fallback = "primary",
        connect_timeout: int = 3,
    ) -> None:
        if isinstance(standbys, str) or not all(isinstance(dsn, str) for dsn in standbys):
            raise ConfigurationError("standbys must be a list of DSN strings")
        if not isinstance(primary, str):
            raise ConfigurationError(f"primary must be a DSN string, got {type(primary).__name__}")
        if fallback not in ("primary", "error"):
            raise ConfigurationError(f"fallback must be 'primary' or 'error', got {fallback!r}")
        if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int) or connect_timeout < 2:
            raise ConfigurationError(f"connect_timeout must be an integer >= 2 (seconds), got {connect_timeout!r}")
        if namespace is not None:
            check_namespace(namespace)
        self.replay_timeout = timeout_seconds("replay_timeout", replay_timeout)
        self.read_your_writes = bool(read_your_writes)
        self.fallback: Fallback = fallback
        self._namespace = namespace
        try:
            self._dsns = [make_conninfo(dsn, connect_timeout=connect_timeout) for dsn in (primary, *standbys)]
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"primary and standbys must be libpq DSNs: {exc}") from exc
        self._connections: list[psycopg.Connection[Any] | None] = [None] * len(self._dsns)
        self._written_lsn: str | None = None
        #: Which server served the last pack: ``"primary"`` or ``"standby <index>"``.
        self.last_route: str | None = None
        #: Why standbys were skipped by the last pack (empty when the first one served it).
        self.skipped: list[str] = []

    # Connections ---------------------------------------------------------------

    def _connection(self, index: int) -> psycopg.Connection[Any]:
        conn = self._connections[index]
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            conn.close()
            self._connections[index] = None
        conn = connect(self._dsns[index], namespace=self._namespace, migrate=False)
        if index > 0:
            try:
                with database_errors("connect to standby"):
                    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                if row is None or not row[0]:
                    raise DatabaseError(f"standby {index - 1} is not a hot standby (pg_is_in_recovery() is false)")
            except BaseException:
                conn.close()
                raise
        self._connections[index] = conn
        return conn

    @property
    def primary(self) -> psycopg.Connection[Any]:
        """The primary's connection (autocommit), opened on first use."""
        return self._connection(0)

    def close(self) -> None:
        """Close every connection the set opened."""
        for index, conn in enumerate(self._connections):
            if conn is not None:
                conn.close()
                self._connections[index] = None

    def __enter__(self) -> ReplicaSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Writes --------------------------------------------------------------------

    def mark_written(self) -> str:
        """Remember the primary's current WAL position: later packs wait until a standby replays it."""
        with database_errors("read the primary's WAL position"):
            row = self.primary.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        if row is None:
            raise DatabaseError("read the primary's WAL position: no row returned")
        self._written_lsn = str(row[0])
        return self._written_lsn

    def _write(self, operation: Callable[..., Result], *args: Any, **kwargs: Any) -> Result:
        result = operation(self.primary, *args, **kwargs)
        self.mark_written()
        return result

    def ingest(self, *args: Any, **kwargs: Any) -> Any:
        """:func:`pgmem.ingest` on the primary (same arguments after the connection)."""
        return self._write(api.ingest, *args, **kwargs)

    def supersede(self, *args: Any, **kwargs: Any) -> Any:
        """:func:`pgmem.supersede` on the primary."""
        return self._write(api.supersede, *args, **kwargs)

    def feedback(self, *args: Any, **kwargs: Any) -> Any:
        """:func:`pgmem.feedback` on the primary."""
        return self._write(api.feedback, *args, **kwargs)

    def forget(self, *args: Any, **kwargs: Any) -> Any:
        """:func:`pgmem.forget` on the primary."""
        return self._write(api.forget, *args, **kwargs)

    # Reads ---------------------------------------------------------------------

    def _caught_up(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the standby has replayed the last write, waiting up to replay_timeout."""
        if not self.read_your_writes or self._written_lsn is None:
            return True
        deadline = time.monotonic() + self.replay_timeout
        pause = 0.002
        while True:
            with database_errors("read the standby's replay position"):
                row = conn.execute(
                    "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)", (self._written_lsn,)
                ).fetchone()
            if row is not None and row[0]:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, MAX_POLL_SECONDS)

    def pack(self, question: str, **kwargs: Any) -> Pack:
        """:func:`pgmem.pack` on a standby (same arguments after the connection).

        Routing is described on the class; :attr:`last_route` says which server answered
        and :attr:`skipped` why standbys before it were passed over.
        """
        self.skipped = []
        if kwargs.get("log"):
            self.last_route = "primary"
            return api.pack(self.primary, question, **kwargs)
        for index in range(1, len(self._dsns)):
            evidence = self._pack_on_standby(index, question, kwargs)
            if evidence is not None:
                self.last_route = f"standby {index - 1}"
                return evidence
        if self.fallback == "error" or len(self._dsns) == 1:
            reasons = "; ".join(self.skipped) or "no standbys were given"
            raise DatabaseError(f"pack: no standby could serve it ({reasons})")
        self.last_route = "primary"
        return api.pack(self.primary, question, **kwargs)

    def _pack_on_standby(self, index: int, question: str, kwargs: dict[str, Any]) -> Pack | None:
        """The pack from standby ``index``, or None (and why, in :attr:`skipped`) if it cannot serve."""
        name = f"standby {index - 1}"
        # A connection opened by an earlier pack may have died with a restart of its
        # server: one fresh connection is tried before moving on.
        reused = self._connections[index] is not None
        while True:
            try:
                conn = self._connection(index)
            except PgmemError as exc:
                # Down, refusing connections, or no standby at all (promoted).
                self.skipped.append(f"{name}: {exc}")
                return None
            try:
                if not self._caught_up(conn):
                    self.skipped.append(f"{name}: has not replayed {self._written_lsn} after {self.replay_timeout:g} s")
                    return None
                return api.pack(conn, question, **kwargs)
            except PgmemError as exc:
                if not self._server_failed(index, exc):
                    raise
                if reused:
                    reused = False
                    continue
                self.skipped.append(f"{name}: {exc}")
                return None

    def _server_failed(self, index: int, exc: PgmemError) -> bool:
        """Whether ``exc`` says the server (not the request) failed; closes its connection if so.

        A lost connection, a server shutting down and a query cancelled by a recovery
        conflict are worth another server; bad input, a missing schema, a wrong
        embedding model or the caller's own ``timeout`` are not.
        """
        cause = exc.__cause__
        conn = self._connections[index]
        broken = conn is None or conn.closed or conn.broken
        conflict = isinstance(cause, pg_errors.SerializationFailure | pg_errors.AdminShutdown)
        lost = isinstance(cause, psycopg.OperationalError) and not isinstance(cause, pg_errors.QueryCanceled)
        if not (broken or conflict or lost):
            return False
        if conn is not None:
            conn.close()
            self._connections[index] = None
        return True
