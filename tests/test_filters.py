"""The metadata filter compiler: accepted expressions, the injection corpus, limits, the
tree contract, and property tests (round trip of generated trees, fuzzed text)."""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgmem.errors import InputError, PgmemError
from pgmem.params import ROLES
from pgmem.retrieval.filters import (
    COLUMNS,
    MAX_COMPARISONS,
    MAX_DEPTH,
    MAX_EXPRESSION_CHARS,
    MAX_IN_VALUES,
    Filter,
    _like_problem,
    check_tree,
    compile_filter,
)


def col(name: str) -> dict[str, str]:
    return {"name": name}


def meta(key: str) -> dict[str, str]:
    return {"metadata": key}


def cmp(op: str, column: dict[str, str], value: Any) -> dict[str, Any]:
    return {"op": op, "column": column, "value": value}


# --- accepted expressions and their exact trees -------------------------------------

ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    (
        "role = 'fact' AND source_ts >= '2023-05-01' AND metadata->>'lang' = 'en'",
        {
            "op": "and",
            "args": [
                cmp("=", col("role"), "fact"),
                cmp(">=", col("source_ts"), "2023-05-01"),
                cmp("=", meta("lang"), "en"),
            ],
        },
    ),
    ("role IN ('fact', 'event')", {"op": "in", "column": col("role"), "values": ["fact", "event"]}),
    (
        "role NOT IN ('claim')",
        {"op": "not", "arg": {"op": "in", "column": col("role"), "values": ["claim"]}},
    ),
    (
        "NOT (family = 'wiki' OR family = 'blog')",
        {
            "op": "not",
            "arg": {"op": "or", "args": [cmp("=", col("family"), "wiki"), cmp("=", col("family"), "blog")]},
        },
    ),
    (
        "(role = 'fact' OR role = 'event') AND confidence > 0.5",
        {
            "op": "and",
            "args": [
                {"op": "or", "args": [cmp("=", col("role"), "fact"), cmp("=", col("role"), "event")]},
                cmp(">", col("confidence"), 0.5),
            ],
        },
    ),
    (
        "role = 'fact' OR role = 'event' AND confidence > 0.5",
        {
            "op": "or",
            "args": [
                cmp("=", col("role"), "fact"),
                {"op": "and", "args": [cmp("=", col("role"), "event"), cmp(">", col("confidence"), 0.5)]},
            ],
        },
    ),
    (
        "confidence BETWEEN 0.25 AND 1",
        {"op": "and", "args": [cmp(">=", col("confidence"), 0.25), cmp("<=", col("confidence"), 1)]},
    ),
    (
        "role = 'fact' AND source_ts BETWEEN '2023-01-01' AND '2023-12-31T23:59:59Z'",
        {
            "op": "and",
            "args": [
                cmp("=", col("role"), "fact"),
                cmp(">=", col("source_ts"), "2023-01-01"),
                cmp("<=", col("source_ts"), "2023-12-31T23:59:59Z"),
            ],
        },
    ),
    (
        "confidence NOT BETWEEN 0.1 AND 0.2",
        {
            "op": "not",
            "arg": {"op": "and", "args": [cmp(">=", col("confidence"), 0.1), cmp("<=", col("confidence"), 0.2)]},
        },
    ),
    ("source_ts IS NULL", {"op": "is_null", "column": col("source_ts")}),
    ("external_id is not null", {"op": "is_not_null", "column": col("external_id")}),
    ("metadata->>'author' IS NULL", {"op": "is_null", "column": meta("author")}),
    ("context LIKE '%Paris%'", cmp("like", col("context"), "%Paris%")),
    ("document_id ILIKE 'doc-%'", cmp("ilike", col("document_id"), "doc-%")),
    ("context NOT LIKE '100\\%'", {"op": "not", "arg": cmp("like", col("context"), "100\\%")}),
    ("'fact' = role", cmp("=", col("role"), "fact")),
    ("0.5 < confidence", cmp(">", col("confidence"), 0.5)),
    ("'2024-01-01' >= created_at", cmp("<=", col("created_at"), "2024-01-01")),
    ("'en' <> metadata->>'lang'", cmp("!=", meta("lang"), "en")),
    ("family <> 'x'", cmp("!=", col("family"), "x")),
    ("family != 'x'", cmp("!=", col("family"), "x")),
    ("ROLE = 'fact'", cmp("=", col("role"), "fact")),
    ("\"role\" = 'fact'", cmp("=", col("role"), "fact")),
    (
        "role = 'fact' aNd NOT confidence < .2",
        {
            "op": "and",
            "args": [cmp("=", col("role"), "fact"), {"op": "not", "arg": cmp("<", col("confidence"), 0.2)}],
        },
    ),
    (
        "metadata ->> 'source.url' = 'https://example.org/a?b=1'",
        cmp("=", meta("source.url"), "https://example.org/a?b=1"),
    ),
    ("metadata->>'x-y_z.0' ILIKE 'é%'", cmp("ilike", meta("x-y_z.0"), "é%")),
    (
        "context = 'it''s -- not a comment /* nor this */'",
        cmp("=", col("context"), "it's -- not a comment /* nor this */"),
    ),
    ("confidence >= -1e-3", cmp(">=", col("confidence"), -0.001)),
    ("confidence = '0.75'", cmp("=", col("confidence"), 0.75)),
    ("confidence IN (0, 1, 0.5)", {"op": "in", "column": col("confidence"), "values": [0, 1, 0.5]}),
    ("created_at < '2023-05-01 10:00:00.5+02:00'", cmp("<", col("created_at"), "2023-05-01 10:00:00.5+02:00")),
    (
        "((role = 'fact'))\n\tAND (((family = 'a') AND family = 'b'))",
        {
            "op": "and",
            "args": [cmp("=", col("role"), "fact"), cmp("=", col("family"), "a"), cmp("=", col("family"), "b")],
        },
    ),
    ("NOT NOT role = 'fact'", {"op": "not", "arg": {"op": "not", "arg": cmp("=", col("role"), "fact")}}),
]


@pytest.mark.parametrize(("expression", "tree"), ACCEPTED, ids=[e for e, _ in ACCEPTED])
def test_accepted_expressions_compile_to_exact_trees(expression: str, tree: dict[str, Any]) -> None:
    compiled = compile_filter(expression)
    assert compiled.tree == tree
    assert compiled.expression == expression
    check_tree(compiled.tree)
    assert json.loads(compiled.as_json()) == tree


def test_as_json_is_compact_sorted_and_keeps_unicode() -> None:
    compiled = compile_filter("metadata->>'lang' = 'français' AND role = 'fact'")
    assert compiled.as_json() == (
        '{"args":[{"column":{"metadata":"lang"},"op":"=","value":"français"},'
        '{"column":{"name":"role"},"op":"=","value":"fact"}],"op":"and"}'
    )


def test_keyword_case_and_whitespace_do_not_change_the_tree() -> None:
    a = compile_filter("role = 'fact' and confidence between 0 and 1 or context is not null")
    b = compile_filter("ROLE='fact'   AND\nCONFIDENCE BETWEEN 0 AND 1\r\nOr CONTEXT IS NOT NULL")
    assert a.tree == b.tree
    assert a.as_json() == b.as_json()


# --- rejections with messages that name the offending part --------------------------

NAMED_ERRORS: list[tuple[str, str]] = [
    ("pg_sleep(10) IS NULL", "function 'pg_sleep' is not allowed"),
    ("embedding = '1'", "column 'embedding' is not allowed; filterable: confidence, context"),
    ("(SELECT 1) = 1", "subqueries"),
    ("role IN (SELECT role FROM pgmem.notes)", "subqueries"),
    ("ctid = '(0,1)'", "system column 'ctid'"),
    ("role::text = 'fact'", "casts"),
    ("CAST(role AS text) = 'fact'", "casts"),
    ("role = 'fact' -- trailing", "comments"),
    ("role = 'fact' /* x */", "comments"),
    ("role = 'fact'; DROP TABLE pgmem.notes", "semicolons"),
    ("n.role = 'fact'", "qualified names ('n.role')"),
    ("metadata->'a' = '1'", "JSON operator '->'"),
    ("metadata @> '{}'", "JSON operator '@>'"),
    ("metadata = '{}'", "metadata->>'key'"),
    ("role = $$fact$$", "dollar-quoted"),
    ("role = E'fact'", "escape strings"),
    ("role = $1", "parameters"),
    ("role = %s", "placeholder"),
    ("1 = 1", "needs a column on one side"),
    ("role = family", "column-to-column"),
    ("role", "is not a condition"),
    ("", "empty"),
    ("   \n ", "empty"),
    ("source_ts >= 'yesterday'", "source_ts needs an ISO 8601 date"),
    ("created_at > 'now'", "created_at needs an ISO 8601 date"),
    ("source_ts > '2023-13-01'", "source_ts needs an ISO 8601 date"),
    ("confidence > 'abc'", "confidence needs a finite number"),
    ("confidence > 'NaN'", "confidence needs a finite number"),
    ("confidence > TRUE", "confidence needs a number"),
    ("role = 'Fact'", "role must be one of fact, event"),
    ("role IN ('fact', 'rumour')", "role must be one of"),
    ("family = 1", "family is text; quote the value"),
    ("metadata->>'lang' = 1", "metadata->>'lang' is text"),
    ("role = NULL", "write role IS NULL"),
    ("role IS TRUE", "IS only takes NULL"),
    ("role LIKE 'f%'", "LIKE needs a text column"),
    ("confidence + 1 > 0.5", "arithmetic"),
    ("context = 'a' || 'b'", "concatenation"),
    ("metadata->>'a b' = 'x'", "metadata key 'a b' is not allowed"),
    ("metadata->>'" + "k" * 65 + "' = 'x'", "metadata key"),
    ("rоle = 'fact'", "non-ASCII character 'о' (U+043E)"),
    ("role = 'fact'\x00", "NUL"),
    ("role = fact", "a text value is quoted: 'fact'"),
    ("role = 'fa' 'ct'", "adjacent string literals"),
    ("role IN ('fact',)", "trailing comma"),
    ("' OR 1=1 --", "unterminated quoted string"),
    ("role = 'fact' AND", "cannot parse"),
    ("context LIKE 'a!%' ESCAPE '!'", "ESCAPE"),
    ("*", "'*' is not allowed"),
    ("confidence = 1e999", "out of range"),
]


@pytest.mark.parametrize(("expression", "message"), NAMED_ERRORS, ids=[e for e, _ in NAMED_ERRORS])
def test_rejections_name_the_offending_part(expression: str, message: str) -> None:
    with pytest.raises(InputError, match=r"^where") as raised:
        compile_filter(expression)
    assert message in str(raised.value)


def test_non_string_expression_is_an_input_error() -> None:
    with pytest.raises(InputError, match="where must be a string, got int"):
        compile_filter(42)  # type: ignore[arg-type]


# --- the injection corpus: every entry must be refused -------------------------------

INJECTIONS: list[str] = [
    "' OR 1=1 --",
    "' OR '1'='1",
    "role = 'fact' OR 1=1",
    "role = 'fact' OR 1=1 --",
    "role = '' OR ''=''",
    "role = 'fact'; DROP TABLE pgmem.notes",
    "role = 'fact'; DROP TABLE pgmem.notes; --",
    "role = 'fact';",
    "role = 'x' UNION SELECT note_id, text FROM pgmem.notes",
    "role = 'x' UNION ALL SELECT 1",
    "role IN (SELECT role FROM pgmem.notes)",
    "EXISTS (SELECT 1 FROM pg_user)",
    "(SELECT 1) = 1",
    "pg_sleep(10)",
    "role = 'fact' AND pg_sleep(10) IS NULL",
    "role = (SELECT current_user)",
    "role = current_user",
    "created_at > now()",
    "created_at > CURRENT_TIMESTAMP",
    "lower(role) = 'fact'",
    "ctid = '(0,1)'",
    "xmin = '1'",
    "tableoid = 1",
    "oid = 1",
    "role::text = 'fact'",
    "CAST(role AS text) = 'fact'",
    "role = 'fact'::text",
    "metadata->'a' = '1'",
    "metadata#>'{a}' = '1'",
    "metadata#>>'{a}' = '1'",
    "metadata @> '{}'",
    "metadata ? 'a'",
    "metadata ?| ARRAY['a']",
    "metadata->>'a'->>'b' = 'x'",
    "metadata->>0 = 'x'",
    "metadata->>('a') = 'x'",
    "(metadata)->>'a' = 'x'",
    "role->>'a' = 'x'",
    "role = $$fact$$",
    "role = $tag$fact$tag$",
    "role = E'\\x27'",
    "role = e'fact'",
    "role = U&'f\\0061ct'",
    "role = N'fact'",
    "role = B'1'",
    "role = X'41'",
    "confidence = 0x1F",
    "role = $1",
    "role = %s",
    "role = %(role)s",
    "role = ?",
    "role = :role",
    "role = @role",
    "1 = 1",
    "'a' = 'a'",
    "role = role",
    "role = family",
    "role",
    "'fact'",
    "TRUE",
    "NULL",
    "role = 'fact' AND TRUE",
    "n.role = 'fact'",
    "pgmem.notes.role = 'fact'",
    '"n"."role" = \'fact\'',
    "* = 1",
    "count(*) > 0",
    "confidence + 1 > 1",
    "confidence > 1 - 0.5",
    "confidence * 2 > 1",
    "confidence > - - 1",
    "confidence > -(1)",
    "context = 'a' || 'b'",
    "context = 'a' -- comment",
    "context = 'a' /* comment */",
    "/**/role = 'fact'",
    "role = 'fact' --",
    "role = 'fact' # comment",
    "r\u043ele = 'fact'",  # Cyrillic o
    "role = 'fact' \uff21ND role = 'event'",  # fullwidth A
    "role\u00a0= 'fact'",  # no-break space is not whitespace to PostgreSQL
    "role = 'fact'\u202e",  # right-to-left override outside a string
    "role = 'fa\x00ct'",
    "role = 'fact'\x00",
    "role = 'fact'\x1b",
    "role = 'x' " + "OR role = 'x' " * 400,
    "(" * 30 + "role = 'fact'" + ")" * 30,
    "NOT " * 1000 + "role = 'fact'",
    "confidence = " + "-" * 2000 + "1",
    "role = 'fact' AND " * 240 + "role = 'fact'",
    "x" * (MAX_EXPRESSION_CHARS + 1),
    "role = '" + "a" * MAX_EXPRESSION_CHARS + "'",
    "",
    " ",
    ";",
    "role == 'fact'",
    "role => 'fact'",
    "role <=> 'fact'",
    "role ! = 'fact'",
    "role IS DISTINCT FROM 'fact'",
    "context SIMILAR TO 'a'",
    "context ~ 'a'",
    "context ~* 'a'",
    "role = ANY(ARRAY['fact'])",
    "role = 'fact' COLLATE \"C\"",
    "context LIKE 'a' ESCAPE '!'",
    "role IN ()",
    "role IN ('fact',)",
    "role IN ('fact', role)",
    "role = 'fact' AND",
    "AND role = 'fact'",
    "role = 'fact' role = 'event'",
    "role = 'fact' AS x",
    "role ISNULL",
    "role NOTNULL",
    "role IS NOT TRUE",
    "source_ts = 'infinity'",
    "source_ts = 'epoch'",
    "source_ts = '2023-W01-1'",
    "source_ts = '20230501'",
    "source_ts > 1683000000",
    "confidence > 'Infinity'",
    "confidence = 1e",
    "confidence = 1_000",
    "metadata->>'a' = TRUE",
    "embedding <=> '[1,2,3]' < 0.5",
    "text = 'secret'",
    "namespace = 'other'",
    "note_id = '00000000-0000-0000-0000-000000000000'",
    "role = 'fact' OR namespace = 'other'",
]


def test_the_injection_corpus_is_large_and_distinct() -> None:
    assert len(INJECTIONS) >= 40
    assert len(set(INJECTIONS)) == len(INJECTIONS)


@pytest.mark.parametrize("expression", INJECTIONS, ids=[repr(e)[:60] for e in INJECTIONS])
def test_injection_corpus_is_refused(expression: str) -> None:
    with pytest.raises(InputError, match=r"^where"):
        compile_filter(expression)


# --- limits ---------------------------------------------------------------------------


def _chain(n: int, op: str = "AND") -> str:
    return f" {op} ".join(f"confidence > {i}" for i in range(n))


def test_comparison_limit() -> None:
    assert len(compile_filter(_chain(MAX_COMPARISONS)).tree["args"]) == MAX_COMPARISONS
    with pytest.raises(InputError, match=f"more than {MAX_COMPARISONS} comparisons"):
        compile_filter(_chain(MAX_COMPARISONS + 1))


def test_between_counts_as_two_comparisons() -> None:
    text = _chain(MAX_COMPARISONS - 2) + " AND confidence BETWEEN 0 AND 1"
    assert len(compile_filter(text).tree["args"]) == MAX_COMPARISONS
    with pytest.raises(InputError, match="comparisons"):
        compile_filter(_chain(MAX_COMPARISONS - 1) + " AND confidence BETWEEN 0 AND 1")


def _alternating(levels: int) -> str:
    # family = 'x' AND (family = 'x' OR (...)): every AND and OR is one level.
    text = "role = 'fact'"
    for level in range(levels - 1):
        op = "AND" if level % 2 == 0 else "OR"
        text = f"family = 'x' {op} ({text})"
    return text


def _depth(tree: dict[str, Any]) -> int:
    if tree["op"] in ("and", "or"):
        return 1 + max(_depth(arg) for arg in tree["args"])
    if tree["op"] == "not":
        return 1 + _depth(tree["arg"])
    return 1


def test_depth_limit() -> None:
    assert _depth(compile_filter(_alternating(MAX_DEPTH)).tree) == MAX_DEPTH
    with pytest.raises(InputError, match=f"nest more than {MAX_DEPTH} levels"):
        compile_filter(_alternating(MAX_DEPTH + 1))


def test_depth_counts_not() -> None:
    text = "NOT " * (MAX_DEPTH - 1) + "role = 'fact'"
    assert _depth(compile_filter(text).tree) == MAX_DEPTH
    with pytest.raises(InputError, match=f"nest more than {MAX_DEPTH} levels"):
        compile_filter("NOT " + text)


def test_redundant_parentheses_are_fine_up_to_the_nesting_bound() -> None:
    assert compile_filter("(" * 20 + "role = 'fact'" + ")" * 20).tree == cmp("=", col("role"), "fact")
    with pytest.raises(InputError, match="nest more than"):
        compile_filter("(" * 25 + "role = 'fact'" + ")" * 25)


def test_in_list_limit() -> None:
    values = ", ".join(str(i) for i in range(MAX_IN_VALUES))
    assert len(compile_filter(f"confidence IN ({values})").tree["values"]) == MAX_IN_VALUES
    with pytest.raises(InputError, match=f"at most {MAX_IN_VALUES} values, got {MAX_IN_VALUES + 1}"):
        compile_filter(f"confidence IN ({values}, 100)")


def test_length_limit() -> None:
    padding = " " * (MAX_EXPRESSION_CHARS - len("role = 'fact'"))
    assert compile_filter("role = 'fact'" + padding).tree == cmp("=", col("role"), "fact")
    with pytest.raises(InputError, match=f"at most {MAX_EXPRESSION_CHARS}"):
        compile_filter("role = 'fact'" + padding + " ")


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 2000,
        "(" * 1990 + "role = 'fact'" + ")" * 1990,
        "NOT (" * 600 + "role = 'fact'" + ")" * 600,
        "NOT " * 999 + "role",
        "confidence = " + "- " * 1990 + "1",
        " OR ".join(["role = 'fact'"] * 280),
        "metadata" + "->>'a'" * 600 + " = 'x'",
        "confidence = 1" + " - 1" * 990,
    ],
    ids=["open", "parens", "not-parens", "nots", "signs", "or-chain", "arrows", "minus-chain"],
)
def test_pathological_nesting_is_an_input_error_not_a_recursion_error(expression: str) -> None:
    with pytest.raises(InputError):
        compile_filter(expression[:MAX_EXPRESSION_CHARS])


# --- the tree contract ----------------------------------------------------------------

BAD_TREES: list[tuple[object, str]] = [
    ([], "must be an object"),
    ({"op": "xor", "args": []}, "not a filter operator"),
    ({"op": "and", "args": [cmp("=", col("role"), "fact")]}, "at least two"),
    ({"op": "and", "args": "x"}, "at least two"),
    ({"op": "not", "arg": cmp("=", col("role"), "fact"), "extra": 1}, "exactly the keys"),
    ({"op": "=", "column": col("embedding"), "value": "x"}, "column must be"),
    ({"op": "=", "column": {"name": "role", "metadata": "a"}, "value": "fact"}, "column must be"),
    ({"op": "=", "column": meta("a b"), "value": "x"}, "column must be"),
    ({"op": "=", "column": col("role"), "value": "rumour"}, "must be one of"),
    ({"op": "=", "column": col("role"), "value": None}, "needs a quoted value"),
    ({"op": "=", "column": col("confidence"), "value": True}, "needs a number"),
    ({"op": "=", "column": col("confidence"), "value": float("nan")}, "finite"),
    ({"op": "=", "column": col("confidence"), "value": "0.5"}, "needs a number"),
    ({"op": "=", "column": col("confidence"), "value": 2**60}, "within ±2**53"),
    ({"op": "=", "column": col("source_ts"), "value": "tomorrow"}, "ISO 8601"),
    ({"op": "=", "column": col("family"), "value": 1}, "is text"),
    ({"op": "=", "column": col("family"), "value": "a\x00b"}, "NUL"),
    ({"op": "like", "column": col("confidence"), "value": "1%"}, "text column"),
    ({"op": "like", "column": col("context"), "value": 1}, "must be a string"),
    ({"op": "in", "column": col("role"), "values": []}, "1 to 100"),
    ({"op": "in", "column": col("role"), "values": ["fact"] * 101}, "1 to 100"),
    ({"op": "in", "column": col("role"), "values": ["fact", 1]}, "values[1]"),
    ({"op": "is_null", "column": col("role"), "value": "x"}, "exactly the keys"),
    ({"op": "and", "args": [cmp("=", col("role"), "fact")] * 65}, "more than 64"),
]


@pytest.mark.parametrize(("tree", "message"), BAD_TREES, ids=[m for _, m in BAD_TREES])
def test_check_tree_rejects_malformed_trees(tree: object, message: str) -> None:
    with pytest.raises(InputError, match=r"^filter tree") as raised:
        check_tree(tree)
    assert message in str(raised.value)


def test_check_tree_bounds_recursion_on_hostile_json() -> None:
    hostile: dict[str, Any] = {"op": "is_null", "column": col("role")}
    for _ in range(100_000):
        hostile = {"op": "not", "arg": hostile}
    with pytest.raises(InputError, match=f"nest more than {MAX_DEPTH} levels"):
        check_tree(hostile)


def test_filter_checks_its_tree() -> None:
    with pytest.raises(InputError, match="column must be"):
        Filter("x", {"op": "=", "column": col("text"), "value": "x"})


def test_input_error_is_a_pgmem_error() -> None:
    with pytest.raises(PgmemError):
        compile_filter("role = role")


# --- property tests -----------------------------------------------------------------

METADATA_KEYS = st.text(alphabet=string.ascii_letters + string.digits + "_.-", min_size=1, max_size=64)
TEXT_VALUES = st.text(alphabet=st.characters(exclude_categories=("Cc", "Cs")), max_size=24)
# What the number column (confidence, a PostgreSQL real) can be compared with.
NUMBERS = st.integers(min_value=-(2**53), max_value=2**53) | st.floats(
    min_value=-3.4e38, max_value=3.4e38, allow_nan=False, allow_subnormal=False
).filter(lambda value: value == 0 or abs(value) >= 1e-45)
OFFSETS: st.SearchStrategy[tzinfo | None] = st.sampled_from(
    [None, UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))]
)


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    moment = draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
    moment = moment.replace(tzinfo=draw(OFFSETS))
    style = draw(st.sampled_from(["date", "minutes", "seconds", "auto"]))
    if style == "date":
        return moment.date().isoformat()
    text = moment.isoformat(sep=draw(st.sampled_from(["T", " "])), timespec=style)
    if text.endswith("+00:00") and draw(st.booleans()):
        text = text[: -len("+00:00")] + "Z"
    return text


def values_for(kind: str) -> st.SearchStrategy[Any]:
    if kind == "role":
        return st.sampled_from(ROLES)
    if kind == "timestamptz":
        return timestamps()
    if kind == "number":
        return NUMBERS
    return TEXT_VALUES


COLUMN_CHOICES = st.sampled_from([*((name, kind) for name, kind in COLUMNS.items()), ("metadata", "text")])


@st.composite
def leaves(draw: st.DrawFn) -> dict[str, Any]:
    name, kind = draw(COLUMN_CHOICES)
    column = meta(draw(METADATA_KEYS)) if name == "metadata" else col(name)
    ops = ["=", "!=", "<", "<=", ">", ">=", "in", "is_null", "is_not_null"]
    if kind == "text":
        ops += ["like", "ilike"]
    op = draw(st.sampled_from(ops))
    if op in ("is_null", "is_not_null"):
        return {"op": op, "column": column}
    if op == "in":
        return {"op": "in", "column": column, "values": draw(st.lists(values_for(kind), min_size=1, max_size=5))}
    value = draw(values_for(kind))
    if op in ("like", "ilike") and isinstance(value, str) and _like_problem(value):
        value += "\\"  # a pattern may not end in its escape character: escape it
    return {"op": op, "column": column, "value": value}


@st.composite
def trees(draw: st.DrawFn, depth: int = 1, parent: str = "") -> dict[str, Any]:
    """Trees in normal form: and/or never directly inside the same op."""
    choices = ["leaf"] if depth >= 6 else ["leaf", "leaf", "and", "or", "not"]
    shape = draw(st.sampled_from([c for c in choices if c != parent]))
    if shape == "leaf":
        return draw(leaves())
    if shape == "not":
        return {"op": "not", "arg": draw(trees(depth + 1))}
    args = draw(st.lists(trees(depth + 1, parent=shape), min_size=2, max_size=3))
    return {"op": shape, "args": args}


def keyword(draw: st.DrawFn, word: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in word)


def space(draw: st.DrawFn, required: bool = True) -> str:
    options = [" ", "  ", "\n", "\t", "\r\n"] + ([] if required else [""])
    return draw(st.sampled_from(options))


def render_value(draw: st.DrawFn, value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    text = repr(value)
    # A number compared with confidence may also be written as a quoted string.
    return f"'{text}'" if draw(st.integers(0, 4)) == 0 else text


def render_column(draw: st.DrawFn, column: dict[str, str]) -> str:
    if "metadata" in column:
        return f"{keyword(draw, 'metadata')}{space(draw, False)}->>{space(draw, False)}'{column['metadata']}'"
    if draw(st.integers(0, 4)) == 0:
        return f'"{column["name"]}"'
    return keyword(draw, column["name"])


MIRROR = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
PRECEDENCE = {"or": 1, "and": 2, "not": 3}


def render(draw: st.DrawFn, node: dict[str, Any], context: int = 0) -> str:
    op = node["op"]
    if op in ("and", "or"):
        between = _between_form(node)
        if between is not None and draw(st.booleans()):
            text = between(draw)
            precedence = 4
        else:
            joiner = f"{space(draw)}{keyword(draw, op)}{space(draw)}"
            text = joiner.join(render(draw, arg, PRECEDENCE[op]) for arg in node["args"])
            precedence = PRECEDENCE[op]
    elif op == "not":
        arg = node["arg"]
        if arg["op"] in ("in", "like", "ilike") and draw(st.booleans()):
            text = render_leaf(draw, arg, negated=True)
        else:
            text = f"{keyword(draw, 'not')}{space(draw)}{render(draw, arg, PRECEDENCE['not'])}"
        precedence = PRECEDENCE["not"]
    else:
        text = render_leaf(draw, node)
        precedence = 4
    needs_parens = precedence < context or (precedence == context and context == PRECEDENCE["not"] and op != "not")
    if needs_parens or (context and draw(st.integers(0, 6)) == 0):
        return f"({space(draw, False)}{text}{space(draw, False)})"
    return text


def _between_form(node: dict[str, Any]) -> Callable[[st.DrawFn], str] | None:
    if node["op"] != "and" or len(node["args"]) != 2:
        return None
    low, high = node["args"]
    if not (low["op"] == ">=" and high["op"] == "<=" and low["column"] == high["column"]):
        return None

    def between(draw: st.DrawFn) -> str:
        return (
            f"{render_column(draw, low['column'])} {keyword(draw, 'between')} {render_value(draw, low['value'])}"
            f" {keyword(draw, 'and')} {render_value(draw, high['value'])}"
        )

    return between


def render_leaf(draw: st.DrawFn, node: dict[str, Any], negated: bool = False) -> str:
    op, column = node["op"], render_column(draw, node["column"])
    sp = space(draw)
    not_ = f"{keyword(draw, 'not')}{sp}" if negated else ""
    if op == "in":
        values = f",{space(draw, False)}".join(render_value(draw, v) for v in node["values"])
        return f"{column}{sp}{not_}{keyword(draw, 'in')}{space(draw, False)}({values})"
    if op == "is_null":
        return f"{column}{sp}{keyword(draw, 'is')}{sp}{keyword(draw, 'null')}"
    if op == "is_not_null":
        return f"{column}{sp}{keyword(draw, 'is')}{sp}{keyword(draw, 'not')}{sp}{keyword(draw, 'null')}"
    if op in ("like", "ilike"):
        return f"{column}{sp}{not_}{keyword(draw, op)}{sp}{render_value(draw, node['value'])}"
    symbol = op if op != "!=" else draw(st.sampled_from(["!=", "<>"]))
    value = render_value(draw, node["value"])
    if draw(st.booleans()):
        mirrored = MIRROR[op] if op != "!=" else symbol
        return f"{value}{space(draw, False)}{mirrored}{space(draw, False)}{column}"
    return f"{column}{space(draw, False)}{symbol}{space(draw, False)}{value}"


@st.composite
def rendered_trees(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    tree = draw(trees())
    return tree, render(draw, tree)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rendered_trees())
def test_generated_trees_round_trip(case: tuple[dict[str, Any], str]) -> None:
    tree, text = case
    check_tree(tree)
    compiled = compile_filter(text)
    assert compiled.tree == tree, text
    assert json.loads(compiled.as_json()) == tree


def _assert_compiles_or_refuses(text: str) -> None:
    try:
        compiled = compile_filter(text)
    except InputError:
        return
    check_tree(compiled.tree)
    json.loads(compiled.as_json())


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_compiles_or_raises_input_error(text: str) -> None:
    _assert_compiles_or_refuses(text)


SQL_WORDS = [
    "role", "confidence", "context", "source_ts", "metadata", "ctid", "x", "n.role", "'fact'", "'2023-05-01'",
    "'a''b'", "'", '"', '"role"', "1", "-", "+", ".5", "1e3", "0x1", "=", "!=", "<>", "<", "<=", ">", ">=", "->>",
    "->", "#>", "@>", "?", "::", "||", "*", "/", "%", "%s", "$1", "$$", "$$x$$", "E'x'", "(", ")", ",", ";",
    "--", "/*", "*/", "AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "ILIKE", "BETWEEN", "TRUE", "FALSE",
    "SELECT", "UNION", "FROM", "EXISTS", "CAST", "AS", "text", "pg_sleep", "now()", "ESCAPE", "COLLATE",
    "\x00", "\n", "о", "\u202e",
]  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(SQL_WORDS), max_size=24), st.sampled_from([" ", "", "\n"]))
def test_token_soup_compiles_or_raises_input_error(words: list[str], separator: str) -> None:
    _assert_compiles_or_refuses(separator.join(words))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rendered_trees(), st.integers(min_value=0), st.text(max_size=3))
def test_mutated_valid_expressions_compile_or_raise_input_error(
    case: tuple[dict[str, Any], str], position: int, insert: str
) -> None:
    _, text = case
    cut = position % (len(text) + 1)
    _assert_compiles_or_refuses(text[:cut] + insert + text[cut:])
