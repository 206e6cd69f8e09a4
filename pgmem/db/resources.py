"""Where the SQL files and alembic scripts are, installed or in a source checkout."""

from __future__ import annotations

import re
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


def migration_function(migration: str, name: str) -> str:
    """The ``CREATE [OR REPLACE] FUNCTION name(...) ... $function$;`` statement of the frozen
    migration numbered ``migration`` (e.g. ``"0018"``): how that migration defined ``name``
    (schema-qualified, e.g. ``pgmem.stage_one_v1``). Tests and benchmarks run it beside the
    current definition to compare their rows."""
    (path,) = (sql_dir() / "migrations").glob(f"{migration}_*.sql")
    text = path.read_text(encoding="utf-8")
    found = re.search(rf"CREATE (OR REPLACE )?FUNCTION {re.escape(name)}\(", text)
    if found is None:
        raise ValueError(f"{path.name} does not define {name}")
    return text[found.start() : text.index("$function$;", found.start()) + len("$function$;")]
