"""Schema management: apply sql/schema.sql to a fresh database, else replay alembic.

A fresh database gets the current schema in one step and is stamped at the head
revision; an existing one is upgraded through the frozen migrations in
``sql/migrations/``. ``tests/test_migrations.py`` proves both roads end in the same
schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from pgmem.db.errors import database_errors
from pgmem.db.resources import alembic_dir, sql_dir
from pgmem.errors import SchemaError

# pg_advisory_xact_lock key: one migrator at a time per database.
_MIGRATION_LOCK = 0x70676D656D  # "pgmem"


def _alembic_config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(alembic_dir()))
    return config


def head_revision() -> str:
    """The newest revision of the migration chain."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if head is None:
        raise SchemaError("the alembic migration chain is empty")
    return str(head)


def current_revision(conn: psycopg.Connection[Any]) -> str | None:
    """The revision the database is at, or None if pgmem was never installed there."""
    with database_errors("read schema version"):
        row = conn.execute("SELECT to_regclass('pgmem.alembic_version') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return None
        version = conn.execute("SELECT version_num FROM pgmem.alembic_version").fetchone()
    return str(version[0]) if version else None


def run_sql_file(name: str) -> None:
    """Execute ``sql/migrations/NAME`` inside the running alembic migration."""
    from alembic import op

    script = (sql_dir() / "migrations" / name).read_text(encoding="utf-8")
    # Straight to the driver: no SQLAlchemy bind-parameter parsing of the SQL text.
    driver = op.get_bind().connection.driver_connection
    if driver is None:
        raise SchemaError("alembic gave the migration no open database connection")
    driver.execute(script)


@contextmanager
def _unwrap_sqlalchemy(wrapper: type[Exception]) -> Iterator[None]:
    # SQLAlchemy wraps driver errors raised while it connects; hand the psycopg error
    # itself to database_errors so it becomes the usual pgmem error.
    try:
        yield
    except wrapper as exc:
        original = getattr(exc, "orig", None)
        if isinstance(original, psycopg.Error):
            raise original from exc
        raise


def _stamped_revision(raw: psycopg.Connection[Any]) -> str | None:
    row = raw.execute("SELECT version_num FROM pgmem.alembic_version").fetchone()
    return str(row[0]) if row else None


def _open_migration_engine(conn: psycopg.Connection[Any] | str) -> Any:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    if isinstance(conn, str):
        conninfo = conn
    else:
        # info.dsn leaves the password out; put it back for our own connection.
        password = conn.info.password
        conninfo = make_conninfo(conn.info.dsn, password=password) if password else conn.info.dsn

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(conninfo)

    return create_engine("postgresql+psycopg://", creator=connect, poolclass=NullPool)


def migrate(conn: psycopg.Connection[Any] | str) -> str:
    """Create or upgrade the pgmem schema; idempotent. Returns the revision now in place.

    Parameters
    ----------
    conn : psycopg.Connection or str
        A connection (its connection parameters are reused) or a DSN. Migrations run
        on a separate connection of their own and commit; the caller's connection and
        its transaction are left untouched.
    """
    from sqlalchemy.exc import DBAPIError

    from alembic import command

    config = _alembic_config()
    head = head_revision()
    engine = _open_migration_engine(conn)
    try:
        with database_errors("migrate"), _unwrap_sqlalchemy(DBAPIError), engine.begin() as sa_conn:
            raw = sa_conn.connection.driver_connection
            raw.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            version = raw.execute(
                "SELECT to_regclass('pgmem.alembic_version') IS NOT NULL, to_regclass('pgmem.notes') IS NOT NULL"
            ).fetchone()
            has_version, has_notes = (bool(version[0]), bool(version[1])) if version else (False, False)
            config.attributes["connection"] = sa_conn
            if not has_version and has_notes:
                raise SchemaError(
                    "schema pgmem exists but carries no migration record (pgmem.alembic_version);"
                    " it was not created by pgmem.migrate and cannot be upgraded safely"
                )
            if not has_version:
                raw.execute((sql_dir() / "schema.sql").read_text(encoding="utf-8"))
                command.stamp(config, head)
            elif _stamped_revision(raw) != head:
                command.upgrade(config, "head")
    finally:
        engine.dispose()
    return head
