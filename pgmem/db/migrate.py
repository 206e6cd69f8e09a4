"""Schema management: apply sql/schema.sql to a fresh database, else replay alembic.

A fresh database gets the current schema in one step and is stamped at the head
revision; an existing one is upgraded through the frozen migrations in
``sql/migrations/``. ``tests/test_migrations.py`` proves both roads end in the same
schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import tuple_row

from pgmem.db.connection import conninfo_of
from pgmem.db.errors import database_errors
from pgmem.db.resources import alembic_dir, sql_dir
from pgmem.errors import SchemaError

# pg_advisory_xact_lock key: one migrator at a time per database.
_MIGRATION_LOCK = 0x70676D656D  # "pgmem"

#: The group roles are ``{prefix}_reader``, ``{prefix}_writer`` and ``{prefix}_admin``.
DEFAULT_ROLE_PREFIX = "pgmem"
ROLE_KINDS = ("reader", "writer", "admin")
_ROLE_PREFIX_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
# How the SQL files name the group roles; installed under another prefix, they are
# renamed in the text before it runs (identifiers only: no value is ever spliced in).
_ROLE_IN_SQL = re.compile(r"\bpgmem_(reader|writer|admin)\b")


def check_role_prefix(prefix: object) -> str:
    """Return ``prefix`` if it can prefix pgmem's group role names, else SchemaError."""
    if not isinstance(prefix, str) or not _ROLE_PREFIX_PATTERN.match(prefix):
        raise SchemaError(
            f"role_prefix must be 1-41 characters of lower-case letters, digits and _ starting with a letter,"
            f" got {prefix!r}"
        )
    return prefix


def with_role_prefix(script: str, prefix: str) -> str:
    """The SQL text ``script`` with pgmem's group roles named under ``prefix``."""
    if prefix == DEFAULT_ROLE_PREFIX:
        return script
    return _ROLE_IN_SQL.sub(lambda match: f"{prefix}_{match.group(1)}", script)


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
    with database_errors("read schema version"), conn.cursor(row_factory=tuple_row) as cursor:
        # A cursor of pgmem's own: the caller's row factory may not return tuples.
        row = cursor.execute("SELECT to_regclass('pgmem.alembic_version') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return None
        version = cursor.execute("SELECT version_num FROM pgmem.alembic_version").fetchone()
    return str(version[0]) if version else None


def run_sql_file(name: str) -> None:
    """Execute ``sql/migrations/NAME`` inside the running alembic migration."""
    from alembic import context, op

    prefix = context.config.attributes.get("role_prefix", DEFAULT_ROLE_PREFIX)
    script = with_role_prefix((sql_dir() / "migrations" / name).read_text(encoding="utf-8"), prefix)
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

    conninfo = conn if isinstance(conn, str) else conninfo_of(conn)

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(conninfo)

    return create_engine("postgresql+psycopg://", creator=connect, poolclass=NullPool)


def _installed_role_prefix(raw: psycopg.Connection[Any]) -> str:
    """The prefix this database's group roles were installed under (pgmem before 0004)."""
    # Two statements: a call of a function that does not exist fails at parse time.
    found = raw.execute("SELECT to_regprocedure('pgmem.group_role_v1(text)') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return DEFAULT_ROLE_PREFIX
    row = raw.execute("SELECT pgmem.group_role_v1('admin')").fetchone()
    admin = row[0] if row else None
    return str(admin).removesuffix("_admin") if admin else DEFAULT_ROLE_PREFIX


def _ensure_group_roles(raw: psycopg.Connection[Any], prefix: str) -> None:
    """Create the group roles that do not exist yet, safe against a concurrent migrator.

    Roles are cluster-wide and the migration lock is per database: two databases
    migrated at the same moment race on CREATE ROLE. The loser of the race finds the
    role there, which is all it wanted.
    """
    for kind in ROLE_KINDS:
        name = f"{prefix}_{kind}"
        if raw.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (name,)).fetchone():
            continue
        try:
            with raw.transaction():  # a savepoint: a lost race must not abort the migration
                raw.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))
        except (pg_errors.DuplicateObject, pg_errors.UniqueViolation):
            if not raw.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (name,)).fetchone():
                raise


def _databases_sharing_roles(raw: psycopg.Connection[Any], prefix: str) -> list[str]:
    """Other databases of the cluster where the group roles already hold privileges."""
    rows = raw.execute(
        "SELECT DISTINCT d.datname FROM pg_catalog.pg_shdepend AS s"
        " JOIN pg_catalog.pg_database AS d ON d.oid = s.dbid"
        " JOIN pg_catalog.pg_roles AS r ON r.oid = s.refobjid"
        " WHERE s.refclassid = 'pg_catalog.pg_authid'::regclass AND r.rolname = ANY (%s)"
        " AND d.datname <> current_database() ORDER BY 1",
        ([f"{prefix}_{kind}" for kind in ROLE_KINDS],),
    ).fetchall()
    return [str(row[0]) for row in rows]


def migrate(
    conn: psycopg.Connection[Any] | str,
    *,
    role_prefix: str | None = None,
    shared_roles: bool = False,
) -> str:
    """Create or upgrade the pgmem schema; idempotent. Returns the revision now in place.

    Parameters
    ----------
    conn : psycopg.Connection or str
        A connection (its connection parameters are reused) or a DSN. Migrations run
        on a separate connection of their own and commit; the caller's connection and
        its transaction are left untouched.
    role_prefix : str, optional
        Names the group roles ``{prefix}_reader``, ``{prefix}_writer`` and
        ``{prefix}_admin`` (default ``pgmem``; chosen at install, kept by upgrades).
        Roles are cluster-wide: every database installed under one prefix shares its
        readers, writers and admins, so give each application database of a cluster
        its own prefix.
    shared_roles : bool
        Install even though the roles already hold privileges in another database of
        the cluster (whose admins then administer this one too). Without it, such an
        install is refused with a :class:`SchemaError` naming those databases.
    """
    from sqlalchemy.exc import DBAPIError

    from alembic import command

    if role_prefix is not None:
        check_role_prefix(role_prefix)
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
            if has_version:
                prefix = _installed_role_prefix(raw)
                if role_prefix is not None and role_prefix != prefix:
                    raise SchemaError(
                        f"role_prefix {role_prefix!r} differs from the prefix {prefix!r} this database was"
                        " installed with; the group roles cannot be renamed by an upgrade"
                    )
            else:
                prefix = role_prefix or DEFAULT_ROLE_PREFIX
                sharing = _databases_sharing_roles(raw, prefix)
                if sharing and not shared_roles:
                    raise SchemaError(
                        f"the group roles {prefix}_reader/_writer/_admin already hold privileges in database(s)"
                        f" {', '.join(sharing)} of this cluster, whose admins would administer this database too;"
                        " install with another role_prefix (pgmem migrate --role-prefix NAME), or pass"
                        " shared_roles=True (--shared-roles) to share them knowingly"
                    )
            config.attributes["role_prefix"] = prefix
            _ensure_group_roles(raw, prefix)
            if not has_version:
                raw.execute(with_role_prefix((sql_dir() / "schema.sql").read_text(encoding="utf-8"), prefix))
                command.stamp(config, head)
            elif _stamped_revision(raw) != head:
                command.upgrade(config, "head")
    finally:
        engine.dispose()
    return head
