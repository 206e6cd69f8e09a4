"""Where the SQL files and alembic scripts are, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def _locate(installed: str, checkout: str) -> Path:
    # A wheel carries them inside the package (pyproject force-include); an editable
    # install or a source checkout reads them from the repository root.
    inside = _PACKAGE / installed
    if inside.is_dir():
        return inside
    return _PACKAGE.parent / checkout


def sql_dir() -> Path:
    """The folder holding schema.sql, queries.sql and migrations/."""
    return _locate("_sql", "sql")


def alembic_dir() -> Path:
    """The alembic script folder (env.py and versions/)."""
    return _locate("_alembic", "alembic")
