"""sql/schema.sql reads top-down: one section per kind of object, in a fixed order, each
object defined once, each function under a one-line purpose.

That the file builds the same schema as the migration chain is tests/test_migrations.py's
job; this checks only how it is laid out, from its text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import pytest

from pgmem.db.resources import sql_dir

#: The section headers (``-- == Name ==``) in the order they must appear, and how the
#: statements each may hold begin. COMMENT ON goes with its object, in any section.
SECTIONS: dict[str, tuple[str, ...]] = {
    "Extensions, schema and group roles": ("CREATE EXTENSION ", "CREATE SCHEMA ", "DO "),
    "Types": ("CREATE TYPE ", "CREATE DOMAIN "),
    "Functions that table definitions call": ("CREATE FUNCTION ",),
    "Tables": ("CREATE TABLE ",),
    "Indexes": ("CREATE INDEX ", "CREATE UNIQUE INDEX "),
    "Functions": ("CREATE FUNCTION ",),
    "Triggers": ("CREATE TRIGGER ", "CREATE CONSTRAINT TRIGGER "),
    "Views": ("CREATE VIEW ",),
    "Row-level security": ("ALTER TABLE ", "CREATE POLICY "),
    "Role memberships and grants": ("GRANT ", "REVOKE "),
}
# A statement starts at the beginning of a line with one of these words (bodies of
# functions and DO blocks are indented; view bodies start with SELECT, WITH, FROM ...).
_STATEMENT = re.compile(r"^(CREATE|ALTER|DROP|GRANT|REVOKE|DO|COMMENT|INSERT|UPDATE|DELETE|TRUNCATE)\b")
_HEADER = re.compile(r"^-- == (.+) ==$")
_DEFINED = re.compile(
    r"^CREATE (?:UNIQUE )?(?:CONSTRAINT )?(FUNCTION|TABLE|INDEX|TRIGGER|VIEW|POLICY|TYPE|DOMAIN) ([\w.]+)"
    r"(?:.* ON ([\w.]+))?"
)


def layout_problems(text: str) -> list[str]:
    """Every way ``text`` departs from the layout above, one line each; empty when none."""
    problems: list[str] = []
    lines = text.splitlines()
    headers = [match.group(1) for line in lines if (match := _HEADER.match(line))]
    if headers != list(SECTIONS):
        problems.append(f"sections {headers}, expected {list(SECTIONS)}")
    section = None
    defined: Counter[str] = Counter()
    for number, line in enumerate(lines, 1):
        if header := _HEADER.match(line):
            section = header.group(1)
            continue
        if not _STATEMENT.match(line) or line.startswith("COMMENT ON "):
            continue
        allowed = SECTIONS.get(section or "", ())
        if not line.startswith(allowed):
            problems.append(f"line {number}: {line!r} does not belong in section {section!r}")
        if section == "Row-level security" and line.startswith("ALTER TABLE ") and "ROW LEVEL SECURITY" not in line:
            problems.append(f"line {number}: only ENABLE/FORCE ROW LEVEL SECURITY belongs in {section!r}")
        if line.startswith("CREATE FUNCTION ") and not (
            number >= 3 and lines[number - 2].startswith("-- ") and not lines[number - 3].startswith("--")
        ):
            problems.append(f"line {number}: {line!r} needs a one-line purpose comment right above it")
        if definition := _DEFINED.match(line):
            kind, name, table = definition.groups()
            # Functions are unique by name here (no overloads); policies and triggers per table.
            defined[f"{kind} {name.split('(')[0]}" + (f" ON {table}" if kind in ("POLICY", "TRIGGER") else "")] += 1
    problems += [f"{what} is defined {count} times" for what, count in defined.items() if count > 1]
    return problems


def _schema_text() -> str:
    return (sql_dir() / "schema.sql").read_text(encoding="utf-8")


def test_schema_sql_reads_top_down() -> None:
    assert layout_problems(_schema_text()) == []


def _move_first_grant_into_tables(text: str) -> str:
    grant = "GRANT pgmem_reader TO pgmem_writer;\n"
    return text.replace(grant, "").replace("-- == Tables ==\n", "-- == Tables ==\n" + grant)


# Each edit breaks the layout in one way; the check must say so.
MISLAID = [
    ("a grant among the tables", _move_first_grant_into_tables),
    (
        "a function without its purpose",
        lambda text: text.replace("-- BM25 weight of one query term in one note.\n", ""),
    ),
    (
        "a function with two purpose lines",
        lambda text: text.replace(
            "-- BM25 weight of one query term in one note.\n", "-- BM25 weight of one query term\n-- in one note.\n"
        ),
    ),
    (
        "a function defined twice",
        lambda text: text.replace(
            "-- == Triggers ==\n",
            "-- Again.\nCREATE FUNCTION pgmem.bm25_term_v1() RETURNS integer\n    LANGUAGE sql RETURN 1;\n\n"
            "-- == Triggers ==\n",
        ),
    ),
    (
        "a replaced function",
        lambda text: text.replace("CREATE FUNCTION pgmem.bm25_v1(", "CREATE OR REPLACE FUNCTION pgmem.bm25_v1("),
    ),
    (
        "a constraint added after its table",
        lambda text: text.replace(
            "-- == Indexes ==\n", "-- == Indexes ==\nALTER TABLE pgmem.notes ADD CONSTRAINT c CHECK (true);\n"
        ),
    ),
    (
        "data in the schema",
        lambda text: text.replace("-- == Views ==\n", "-- == Views ==\nINSERT INTO pgmem.family_stats VALUES (1);\n"),
    ),
    (
        "sections out of order",
        lambda text: (
            text.replace("-- == Views ==", "-- == Triggers2 ==")
            .replace("-- == Triggers ==", "-- == Views ==")
            .replace("-- == Triggers2 ==", "-- == Triggers ==")
        ),
    ),
]


@pytest.mark.parametrize(("what", "edit"), MISLAID, ids=[what for what, _ in MISLAID])
def test_the_layout_check_sees(what: str, edit: Callable[[str], str]) -> None:
    text = _schema_text()
    mislaid = edit(text)
    assert mislaid != text, what
    assert layout_problems(mislaid) != [], what
