"""Metadata filters: a small WHERE language compiled to a JSON tree, never to SQL text.

``pack(..., where="role = 'fact' AND metadata->>'lang' = 'en'")`` goes through
:func:`compile_filter`, which reads the expression with sqlglot (postgres dialect) and
accepts only what it explicitly recognises, in three passes:

1. characters: length, control characters, comments anywhere outside quoted strings;
2. tokens: every token must be on an allowlist (plain strings, numbers, allowlisted
   keywords and operators), the text between tokens must be whitespace, and nesting is
   bounded *before* the recursive parser runs;
3. syntax tree: a walk over an allowlist of sqlglot node types, each checked for
   arguments it does not expect, builds the normalised tree described in
   ``docs/filters.md``; :func:`check_tree` then validates the result.

The tree is turned into SQL inside the database, which quotes every identifier and
literal itself, so this module is the first line of defence, not the only one.
Nothing here touches the database.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import types
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeAlias

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from pgmem.errors import InputError
from pgmem.params import ROLES
from pgmem.validate import real_problem, text_problem, timestamp_problem

__all__ = [
    "COLUMNS",
    "COMPARISON_OPS",
    "MAX_COMPARISONS",
    "MAX_DEPTH",
    "MAX_EXPRESSION_CHARS",
    "MAX_IN_VALUES",
    "MAX_METADATA_KEY_CHARS",
    "MAX_NESTING",
    "Filter",
    "check_tree",
    "compile_filter",
]

ColumnKind: TypeAlias = Literal["role", "text", "timestamptz", "number"]
Scalar: TypeAlias = str | int | float | bool

MAX_EXPRESSION_CHARS: Final = 4000
MAX_COMPARISONS: Final = 64
MAX_DEPTH: Final = 16
MAX_IN_VALUES: Final = 100
MAX_METADATA_KEY_CHARS: Final = 64
# Parentheses plus runs of NOT, counted on tokens: sqlglot's parser recurses on both, so
# this bound keeps any input far from Python's recursion limit. It is looser than
# MAX_DEPTH so that redundant parentheses around a deep but valid tree still fit.
MAX_NESTING: Final = 24

COLUMNS: Final[Mapping[str, ColumnKind]] = types.MappingProxyType(
    {
        "confidence": "number",
        "context": "text",
        "created_at": "timestamptz",
        "document_id": "text",
        "external_id": "text",
        "family": "text",
        "role": "role",
        "source_ts": "timestamptz",
    }
)
COMPARISON_OPS: Final = ("=", "!=", "<", "<=", ">", ">=")

_FILTERABLE = ", ".join([*COLUMNS, "metadata->>'key'"])
_SYSTEM_COLUMNS = frozenset({"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid", "oid"})
_MIRRORED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NULL_OPS = ("is_null", "is_not_null")
_LIKE_OPS = ("like", "ilike")

_METADATA_KEY = re.compile(rf"[A-Za-z0-9_.\-]{{1,{MAX_METADATA_KEY_CHARS}}}")
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[0-9]+")
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)?)?"
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WHITESPACE = frozenset(" \t\n\r")
# Integers beyond this lose precision as JSON numbers read by other tools.
_MAX_EXACT_INTEGER = 2**53

_DIALECT = Postgres()

# Tokens a filter may contain, with the exact spellings accepted for each (keywords
# compared case-insensitively). sqlglot maps several spellings to one token type
# ('==' to EQ, '!' to NOT), so the type alone is not enough.
_FIXED_TOKENS: Final[Mapping[TokenType, frozenset[str]]] = {
    TokenType.AND: frozenset({"AND"}),
    TokenType.OR: frozenset({"OR"}),
    TokenType.NOT: frozenset({"NOT"}),
    TokenType.IN: frozenset({"IN"}),
    TokenType.IS: frozenset({"IS"}),
    TokenType.NULL: frozenset({"NULL"}),
    TokenType.LIKE: frozenset({"LIKE"}),
    TokenType.ILIKE: frozenset({"ILIKE"}),
    TokenType.BETWEEN: frozenset({"BETWEEN"}),
    TokenType.TRUE: frozenset({"TRUE"}),
    TokenType.FALSE: frozenset({"FALSE"}),
    TokenType.EQ: frozenset({"="}),
    TokenType.NEQ: frozenset({"<>", "!="}),
    TokenType.LT: frozenset({"<"}),
    TokenType.LTE: frozenset({"<="}),
    TokenType.GT: frozenset({">"}),
    TokenType.GTE: frozenset({">="}),
    TokenType.DARROW: frozenset({"->>"}),
    TokenType.L_PAREN: frozenset({"("}),
    TokenType.R_PAREN: frozenset({")"}),
    TokenType.COMMA: frozenset({","}),
}
# Token types after which '+' or '-' would be binary arithmetic, not a sign.
_OPERAND_END = frozenset(
    {
        TokenType.VAR,
        TokenType.IDENTIFIER,
        TokenType.STRING,
        TokenType.NUMBER,
        TokenType.R_PAREN,
        TokenType.NULL,
        TokenType.TRUE,
        TokenType.FALSE,
    }
)
_JSON_OPERATORS = frozenset({"->", "#>", "#>>", "@>", "<@", "?", "?|", "?&", "#-", "@?", "@@"})
_STATEMENT_WORDS = frozenset(
    {
        "SELECT", "WITH", "UNION", "INTERSECT", "EXCEPT", "VALUES", "EXISTS", "FROM", "WHERE",
        "TABLE", "INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER", "TRUNCATE", "GRANT",
        "REVOKE", "COPY", "DO", "CALL", "EXECUTE", "EXEC", "MERGE", "SET", "RESET", "LOCK",
        "BEGIN", "COMMIT", "ROLLBACK", "VACUUM", "ANALYZE", "PREPARE", "DECLARE", "NOTIFY",
        "LISTEN", "RETURNING", "INTO",
    }
)  # fmt: skip
_COMPARISON_NODES: Final[Mapping[type[exp.Expr], str]] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}


@dataclass(frozen=True)
class Filter:
    """A compiled metadata filter.

    Attributes
    ----------
    expression : str
        The expression as the caller wrote it, kept for diagnostics.
    tree : dict
        The normalised, JSON-ready tree (grammar in ``docs/filters.md``); checked with
        :func:`check_tree` when the object is built.
    """

    expression: str
    tree: dict[str, Any]

    def __post_init__(self) -> None:
        check_tree(self.tree)

    def as_json(self) -> str:
        """Return the tree as compact JSON with sorted keys, ready to bind as ``jsonb``.

        Returns
        -------
        str
            The serialised tree; equal trees give equal strings.
        """
        return json.dumps(self.tree, ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True)


def compile_filter(expression: str) -> Filter:
    """Compile a ``where`` expression into a :class:`Filter`.

    The expression is parsed with sqlglot (postgres dialect) and compiled against an
    allowlist: comparisons (``=``, ``!=``/``<>``, ``<``, ``<=``, ``>``, ``>=``), ``IN``,
    ``BETWEEN``, ``IS [NOT] NULL``, ``[NOT] LIKE``/``ILIKE``, combined with ``AND``,
    ``OR``, ``NOT`` and parentheses, over the columns in :data:`COLUMNS` and
    ``metadata->>'key'``. Pure: reads nothing and writes nothing.

    Parameters
    ----------
    expression : str
        The filter text, at most :data:`MAX_EXPRESSION_CHARS` characters.

    Returns
    -------
    Filter
        The original text and its normalised tree.

    Raises
    ------
    InputError
        If the expression uses anything outside the allowlist or breaks a limit; the
        message names the offending fragment.
    """
    if not isinstance(expression, str):
        raise InputError(f"where must be a string, got {type(expression).__name__}")
    _check_characters(expression)
    tokens = _tokenize(expression)
    _check_tokens(expression, tokens)
    try:
        statements = _DIALECT.parser().parse(tokens, expression)
    except SqlglotError as exc:
        raise InputError(f"where: cannot parse the expression: {_parse_error_text(exc)}") from exc
    parsed = [statement for statement in statements if statement is not None]
    if len(parsed) != 1:
        raise InputError("where: expected exactly one condition")
    tree = _Compiler().condition(parsed[0])
    _check_node(tree, "where", "$", 1, _Counter())
    return Filter(expression=expression, tree=tree)


def check_tree(tree: object) -> None:
    """Validate a filter tree against the grammar, the column types and the limits.

    This is the contract between :func:`compile_filter` and the SQL function that turns
    a tree into a ``WHERE`` clause; the SQL side applies the same rules. Pure.

    Parameters
    ----------
    tree : object
        A tree as produced by :func:`compile_filter` or read back from its JSON.

    Raises
    ------
    InputError
        If any node has an unknown op, unexpected or missing keys, a column outside the
        allowlist, a value of the wrong type for its column, or the tree breaks
        :data:`MAX_DEPTH`, :data:`MAX_COMPARISONS` or :data:`MAX_IN_VALUES`.
    """
    _check_node(tree, "filter tree", "$", 1, _Counter())


# --- pass 1: characters -------------------------------------------------------------


def _check_characters(text: str) -> None:
    if len(text) > MAX_EXPRESSION_CHARS:
        raise InputError(f"where: the expression is {len(text)} characters long; at most {MAX_EXPRESSION_CHARS}")
    if not text.strip():
        raise InputError("where: the expression is empty")
    for char in text:
        problem = _character_problem(char)
        if problem:
            raise InputError(f"where: {problem}")
    # sqlglot keeps comments aside (or drops them); look for them in the raw text too,
    # skipping only '...' strings and "..." identifiers.
    quote = ""
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == quote:
                if text.startswith(quote * 2, index):
                    index += 2
                    continue
                quote = ""
        elif char in "'\"":
            quote = char
        elif text.startswith(("--", "/*", "*/"), index):
            raise InputError(f"where: comments are not allowed (found {text[index : index + 2]!r})")
        index += 1
    if quote:
        raise InputError(f"where: unterminated quoted string: a {quote} is never closed")


def _character_problem(char: str) -> str | None:
    if char == "\x00":
        return "NUL bytes are not allowed"
    category = unicodedata.category(char)
    if category == "Cc" and char not in "\t\n\r":
        return f"control character U+{ord(char):04X} is not allowed"
    if category == "Cs":
        return f"unpaired surrogate U+{ord(char):04X} is not allowed"
    return None


# --- pass 2: tokens -----------------------------------------------------------------


def _tokenize(text: str) -> list[Token]:
    try:
        return _DIALECT.tokenize(text)
    except SqlglotError as exc:
        raise InputError(f"where: cannot read the expression: {_parse_error_text(exc)}") from exc


def _check_tokens(text: str, tokens: list[Token]) -> None:
    previous: Token | None = None
    position = 0
    open_weights: list[int] = []
    nesting = 0
    not_run = 0
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        _check_gap(text[position : token.start])
        position = token.end + 1
        raw = text[token.start : token.end + 1]
        if token.comments:
            raise InputError("where: comments are not allowed")
        if token.token_type != TokenType.STRING and not raw.isascii():
            char = next(c for c in raw if not c.isascii())
            raise InputError(
                f"where: non-ASCII character {char!r} (U+{ord(char):04X}) in {raw!r}; "
                "only quoted string values may contain non-ASCII text"
            )
        _check_token(token, raw, previous, following)

        if token.token_type == TokenType.NOT:
            not_run += 1
        elif token.token_type == TokenType.L_PAREN:
            open_weights.append(1 + not_run)
            nesting += open_weights[-1]
            not_run = 0
        elif token.token_type == TokenType.R_PAREN:
            nesting -= open_weights.pop() if open_weights else 0
            not_run = 0
        else:
            not_run = 0
        if nesting + not_run > MAX_NESTING:
            raise InputError(f"where: parentheses and NOT nest more than {MAX_NESTING} levels deep")
        previous = token
    _check_gap(text[position:])


def _check_gap(gap: str) -> None:
    if all(char in _WHITESPACE for char in gap):
        return
    if "--" in gap or "/*" in gap:
        raise InputError("where: comments are not allowed")
    char = next(c for c in gap if c not in _WHITESPACE)
    raise InputError(f"where: unexpected character {char!r} (U+{ord(char):04X}) between tokens")


def _check_token(token: Token, raw: str, previous: Token | None, following: Token | None) -> None:
    kind = token.token_type
    if kind in _FIXED_TOKENS:
        spelled = raw.upper() if raw.isalpha() else raw
        if spelled not in _FIXED_TOKENS[kind]:
            raise InputError(f"where: {raw!r} is not allowed here")
        if kind == TokenType.COMMA and following is not None and following.token_type == TokenType.R_PAREN:
            raise InputError("where: a trailing comma before ')' is not allowed")
        return
    if kind == TokenType.STRING:
        if not (len(raw) >= 2 and raw[0] == "'" and raw[-1] == "'"):
            raise InputError(f"where: only plain '...' string literals are allowed, got {raw[:40]!r}")
        if previous is not None and previous.token_type == TokenType.STRING:
            raise InputError("where: adjacent string literals are not allowed; write one '...' string")
        return
    if kind == TokenType.IDENTIFIER:
        if not (len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"'):
            raise InputError(f"where: {raw[:40]!r} is not allowed here")
        if following is not None and following.token_type == TokenType.L_PAREN:
            raise InputError(f"where: function {raw[:40]} is not allowed")
        return
    if kind == TokenType.VAR:
        if raw.lower() in _SYSTEM_COLUMNS:
            raise InputError(f"where: system column {raw.lower()!r} is not allowed; filterable: {_FILTERABLE}")
        if not _WORD.fullmatch(raw):
            raise InputError(f"where: {raw!r} is not allowed here")
        if following is not None and following.token_type == TokenType.L_PAREN:
            raise InputError(f"where: {_describe_token(kind, raw, following)}")
        return
    if kind == TokenType.NUMBER:
        after_dot = previous is not None and previous.token_type == TokenType.DOT and previous.end + 1 == token.start
        # PostgreSQL (15+) also refuses a number run into a word, as in 1and or 0o17.
        if following is not None and following.start == token.end + 1 and _WORD.match(following.text):
            raise InputError(f"where: malformed number {(raw + following.text)[:40]!r}")
        if not _NUMBER.fullmatch(("." if after_dot else "") + raw):
            raise InputError(f"where: malformed number {raw!r}")
        return
    if kind == TokenType.DOT:
        # Only the leading dot of a number such as .5; a dot after a name qualifies it.
        if previous is not None and previous.token_type in (TokenType.VAR, TokenType.IDENTIFIER):
            qualified = f"{previous.text}.{following.text if following is not None else ''}"
            raise InputError(f"where: qualified names ({qualified[:60]!r}) are not allowed; write the bare column")
        if (
            following is None
            or following.token_type != TokenType.NUMBER
            or following.start != token.end + 1
            or (previous is not None and previous.token_type in _OPERAND_END)
        ):
            raise InputError("where: '.' is not allowed here")
        return
    if kind in (TokenType.PLUS, TokenType.DASH):
        if previous is not None and previous.token_type in _OPERAND_END:
            raise InputError(f"where: arithmetic ({raw!r}) is not allowed")
        if following is None or following.token_type not in (TokenType.NUMBER, TokenType.DOT):
            raise InputError(f"where: a sign ({raw!r}) may only precede a number")
        return
    raise InputError(f"where: {_describe_token(kind, raw, following)}")


def _describe_token(kind: TokenType, raw: str, following: Token | None) -> str:
    word = raw.upper()
    if kind == TokenType.SEMICOLON:
        return "semicolons are not allowed (one condition, not statements)"
    if kind == TokenType.DCOLON or word in ("CAST", "TRY_CAST", "CONVERT"):
        return f"casts ({raw!r}) are not allowed"
    if kind == TokenType.HEREDOC_STRING:
        return "dollar-quoted strings are not allowed; use '...'"
    if kind == TokenType.BYTE_STRING:
        return "escape strings (E'...') are not allowed; use '...'"
    if kind in (
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
        TokenType.NATIONAL_STRING,
        TokenType.UNICODE_STRING,
        TokenType.RAW_STRING,
    ):
        return f"only plain '...' string literals are allowed, got {raw[:40]!r}"
    if raw == "?":
        return "'?' (a placeholder, or a JSON operator) is not allowed"
    if word == "ESCAPE":
        return "LIKE ... ESCAPE is not allowed; the escape character is '\\'"
    if word == "COLLATE":
        return "COLLATE is not allowed"
    if raw in _JSON_OPERATORS:
        return f"JSON operator {raw!r} is not allowed; filter metadata with metadata->>'key'"
    if raw == "%":
        return "'%' (a placeholder, or the modulo operator) is not allowed"
    if kind in (TokenType.PARAMETER, TokenType.PLACEHOLDER, TokenType.COLON):
        return f"parameters and placeholders ({raw!r}) are not allowed; write the value itself"
    if kind == TokenType.STAR:
        return "'*' is not allowed"
    if kind == TokenType.DPIPE:
        return "string concatenation ('||') is not allowed"
    if word in _STATEMENT_WORDS:
        return f"subqueries and statements are not allowed (found {word})"
    if raw.lower() in _SYSTEM_COLUMNS:
        return f"system column {raw.lower()!r} is not allowed; filterable: {_FILTERABLE}"
    if following is not None and following.token_type == TokenType.L_PAREN and _WORD.fullmatch(raw):
        return f"function {raw.lower()!r} is not allowed"
    if not _WORD.fullmatch(raw):
        return f"operator {raw[:40]!r} is not allowed"
    return f"{raw!r} is not allowed here"


def _parse_error_text(exc: SqlglotError) -> str:
    if isinstance(exc, ParseError) and exc.errors:
        first = exc.errors[0]
        description = str(first.get("description", "invalid syntax"))
        near = str(first.get("highlight", ""))
        text = f"{description} near {near!r}" if near else description
    else:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # sqlglot highlights with ANSI escapes; keep messages plain.
    return re.sub(r"\x1b\[[0-9;]*m", "", text)[:200]


# --- pass 3: syntax tree ------------------------------------------------------------


@dataclass(frozen=True)
class _Column:
    ref: dict[str, str]
    kind: ColumnKind
    label: str


@dataclass(frozen=True)
class _Value:
    value: Scalar | None
    text: str


class _Compiler:
    """Walks the sqlglot tree; every node type it accepts is named here, the rest is an error."""

    def condition(self, node: exp.Expr) -> dict[str, Any]:
        node = _unparen(node)
        if isinstance(node, exp.And | exp.Or):
            op = "and" if isinstance(node, exp.And) else "or"
            args: list[dict[str, Any]] = []
            for operand in _connective_operands(node):
                child = self.condition(operand)
                # a AND (b AND c) and BETWEEN inside AND flatten to one list.
                args.extend(child["args"] if child["op"] == op else [child])
            return {"op": op, "args": args}
        if isinstance(node, exp.Not):
            _expect_args(node, "this")
            return {"op": "not", "arg": self.condition(node.this)}
        return self.predicate(node)

    def predicate(self, node: exp.Expr) -> dict[str, Any]:
        op = _COMPARISON_NODES.get(type(node))
        if op is not None:
            _expect_args(node, "this", "expression")
            return self.comparison(node, op)
        if isinstance(node, exp.In):
            _expect_args(node, "this", "expressions")
            return self.in_list(node)
        if isinstance(node, exp.Is):
            _expect_args(node, "this", "expression", "negate")
            column = self.column_operand(node.this, node)
            if not isinstance(node.expression, exp.Null):
                raise InputError(f"where: IS only takes NULL or NOT NULL, got {_fragment(node)!r}")
            _expect_args(node.expression)
            return {"op": "is_not_null" if node.args.get("negate") else "is_null", "column": column.ref}
        if isinstance(node, exp.Like | exp.ILike):
            _expect_args(node, "this", "expression", "negate")
            like = self.like(node, "like" if isinstance(node, exp.Like) else "ilike")
            return {"op": "not", "arg": like} if node.args.get("negate") else like
        if isinstance(node, exp.Between):
            _expect_args(node, "this", "low", "high")
            column = self.column_operand(node.this, node)
            low = _coerce(column, self.value_operand(node.args["low"], node))
            high = _coerce(column, self.value_operand(node.args["high"], node))
            return {
                "op": "and",
                "args": [
                    {"op": ">=", "column": column.ref, "value": low},
                    {"op": "<=", "column": column.ref, "value": high},
                ],
            }
        if isinstance(node, exp.Column | exp.JSONExtractScalar | exp.Literal | exp.Boolean | exp.Null | exp.Neg):
            raise InputError(f"where: {_fragment(node)!r} is not a condition; write a comparison such as role = 'fact'")
        raise InputError(f"where: {_describe_node(node)}")

    def comparison(self, node: exp.Expr, op: str) -> dict[str, Any]:
        left, right = self.operand(node.this), self.operand(node.expression)
        if isinstance(left, _Column) and isinstance(right, _Column):
            raise InputError(f"where: column-to-column comparisons are not allowed: {_fragment(node)!r}")
        if isinstance(left, _Value) and isinstance(right, _Value):
            raise InputError(f"where: a comparison needs a column on one side: {_fragment(node)!r}")
        if isinstance(left, _Value) and isinstance(right, _Column):
            left, right, op = right, left, _MIRRORED[op]
        if not isinstance(left, _Column) or not isinstance(right, _Value):
            raise InputError(f"where: {_describe_node(node)}")  # unreachable: operand() returns one of the two
        return {"op": op, "column": left.ref, "value": _coerce(left, right)}

    def in_list(self, node: exp.In) -> dict[str, Any]:
        column = self.column_operand(node.this, node)
        items = node.expressions
        if not items:
            raise InputError(f"where: IN needs at least one value: {_fragment(node)!r}")
        if len(items) > MAX_IN_VALUES:
            raise InputError(f"where: IN lists at most {MAX_IN_VALUES} values, got {len(items)}")
        values = [_coerce(column, self.value_operand(item, node)) for item in items]
        return {"op": "in", "column": column.ref, "values": values}

    def like(self, node: exp.Expr, op: str) -> dict[str, Any]:
        column = self.column_operand(node.this, node)
        if column.kind != "text":
            raise InputError(
                f"where: {op.upper()} needs a text column (context, document_id, external_id, family "
                f"or metadata->>'key'), got {column.label}"
            )
        pattern = self.value_operand(node.expression, node)
        if not isinstance(pattern.value, str):
            raise InputError(f"where: {op.upper()} needs a quoted pattern, got {pattern.text}")
        problem = _text_problem(pattern.value) or _like_problem(pattern.value)
        if problem:
            raise InputError(f"where: {op.upper()} {problem}, got {pattern.text[:80]}")
        return {"op": op, "column": column.ref, "value": pattern.value}

    def column_operand(self, node: exp.Expr, context: exp.Expr) -> _Column:
        operand = self.operand(node)
        if not isinstance(operand, _Column):
            raise InputError(f"where: {_fragment(context)!r} needs a column on the left")
        return operand

    def value_operand(self, node: exp.Expr, context: exp.Expr) -> _Value:
        operand = self.operand(node)
        if not isinstance(operand, _Value):
            raise InputError(f"where: column-to-column comparisons are not allowed: {_fragment(context)!r}")
        return operand

    def operand(self, node: exp.Expr) -> _Column | _Value:
        if isinstance(node, exp.Column):
            return _column(node)
        if isinstance(node, exp.JSONExtractScalar):
            return _metadata_column(node)
        if isinstance(node, exp.Literal):
            _expect_args(node, "this", "is_string")
            if node.is_string:
                return _Value(str(node.this), _fragment(node))
            return _Value(_number(str(node.this)), _fragment(node))
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            _expect_args(node, "this")
            _expect_args(node.this, "this", "is_string")
            return _Value(-_number(str(node.this.this)), _fragment(node))
        if isinstance(node, exp.Boolean):
            _expect_args(node, "this")
            return _Value(bool(node.this), _fragment(node))
        if isinstance(node, exp.Null):
            _expect_args(node)
            return _Value(None, "NULL")
        if isinstance(node, exp.Paren):
            raise InputError(f"where: parentheses around a column or value are not allowed: {_fragment(node)!r}")
        raise InputError(f"where: {_describe_node(node)}")


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        _expect_args(node, "this")
        node = node.this
    return node


def _connective_operands(node: exp.Expr) -> list[exp.Expr]:
    # Iterative: sqlglot nests a chain of n ANDs n levels deep.
    connective = type(node)
    operands: list[exp.Expr] = []
    stack = [node]
    while stack:
        current = _unparen(stack.pop())
        if type(current) is connective:
            _expect_args(current, "this", "expression")
            stack.append(current.expression)
            stack.append(current.this)
        else:
            operands.append(current)
    return operands


def _expect_args(node: exp.Expr, *allowed: str) -> None:
    """Reject a recognised node type used in a form this module does not handle."""
    if node.comments:
        raise InputError("where: comments are not allowed")
    for name, value in node.args.items():
        if name not in allowed and value not in (None, False, []):
            raise InputError(f"where: {_fragment(node)!r} uses a form that is not allowed ({name})")


def _column(node: exp.Column) -> _Column:
    _expect_args(node, "this", "table", "db", "catalog")
    if node.args.get("table") or node.args.get("db") or node.args.get("catalog"):
        raise InputError(f"where: qualified names are not allowed: {_fragment(node)!r}; write the bare column")
    identifier = node.this
    if isinstance(identifier, exp.Star):
        raise InputError("where: '*' is not allowed")
    if not isinstance(identifier, exp.Identifier):
        raise InputError(f"where: {_describe_node(node)}")
    _expect_args(identifier, "this", "quoted")
    written = str(identifier.this)
    # PostgreSQL folds unquoted names to lower case (ASCII only); quoted names are exact.
    name = written if identifier.args.get("quoted") else written.lower()
    if name in COLUMNS:
        return _Column({"name": name}, COLUMNS[name], name)
    if name in _SYSTEM_COLUMNS:
        raise InputError(f"where: system column {name!r} is not allowed; filterable: {_FILTERABLE}")
    if name == "metadata":
        raise InputError("where: metadata is filtered one key at a time: write metadata->>'key'")
    hint = "" if identifier.args.get("quoted") else f" (a text value is quoted: '{written}')"
    raise InputError(f"where: column {written!r} is not allowed; filterable: {_FILTERABLE}{hint}")


def _metadata_column(node: exp.JSONExtractScalar) -> _Column:
    _expect_args(node, "this", "expression", "only_json_types")
    target, path = node.this, node.expression
    if not (isinstance(target, exp.Column) and _column_name(target) == "metadata"):
        raise InputError(f"where: '->>' is only allowed on metadata, as metadata->>'key': {_fragment(node)!r}")
    parts = path.expressions if isinstance(path, exp.JSONPath) else []
    if not (
        len(parts) == 2
        and isinstance(parts[0], exp.JSONPathRoot)
        and isinstance(parts[1], exp.JSONPathKey)
        and isinstance(parts[1].this, str)
    ):
        raise InputError(f"where: metadata keys are quoted strings, as metadata->>'key': {_fragment(node)!r}")
    _expect_args(path, "expressions")
    _expect_args(parts[0])
    _expect_args(parts[1], "this")
    key = parts[1].this
    if not _METADATA_KEY.fullmatch(key):
        raise InputError(
            f"where: metadata key {key[:80]!r} is not allowed; keys are 1 to {MAX_METADATA_KEY_CHARS} "
            "characters of A-Z a-z 0-9 _ . -"
        )
    return _Column({"metadata": key}, "text", f"metadata->>'{key}'")


def _column_name(node: exp.Column) -> str | None:
    _expect_args(node, "this")
    identifier = node.this
    if not isinstance(identifier, exp.Identifier):
        return None
    _expect_args(identifier, "this", "quoted")
    written = str(identifier.this)
    return written if identifier.args.get("quoted") else written.lower()


def _number(text: str) -> int | float:
    if not _NUMBER.fullmatch(text):
        raise InputError(f"where: malformed number {text[:40]!r}")
    if _INTEGER.fullmatch(text) and int(text) <= _MAX_EXACT_INTEGER:
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"where: number {text[:40]!r} is out of range")
    return value


def _coerce(column: _Column, value: _Value) -> Scalar:
    """The value as the tree stores it for this column, or an error naming both."""
    if value.value is None:
        raise InputError(f"where: {column.label} compared with NULL is never true; write {column.label} IS NULL")
    raw = value.value
    if column.kind == "number" and isinstance(raw, str):
        # A quoted number is coerced, as PostgreSQL would; 'NaN' and 'Infinity' are not.
        unsigned = raw[1:] if raw[:1] in ("+", "-") else raw
        if not _NUMBER.fullmatch(unsigned) or not math.isfinite(float(unsigned)):
            raise InputError(f"where: {column.label} needs a finite number, got {value.text[:80]}")
        raw = _number(unsigned) * (-1 if raw[:1] == "-" else 1)
    problem = _value_problem(column.kind, raw)
    if problem:
        raise InputError(f"where: {column.label} {problem}, got {value.text[:80]}")
    return raw


def _value_problem(kind: ColumnKind, value: object) -> str | None:
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "needs a number"
        if isinstance(value, float) and not math.isfinite(value):
            return "needs a finite number"
        if isinstance(value, int) and abs(value) > _MAX_EXACT_INTEGER:
            return "needs an integer within ±2**53 (or a float)"
        # The database compares the number column (confidence) as a real.
        return real_problem(value)
    if not isinstance(value, str):
        return "is text; quote the value" if kind == "text" else "needs a quoted value"
    text_problem = _text_problem(value)
    if text_problem:
        return text_problem
    if kind == "role" and value not in ROLES:
        return f"must be one of {', '.join(ROLES)}"
    if kind == "timestamptz":
        return _timestamp_problem(value)
    return None


def _text_problem(value: str) -> str | None:
    problem = text_problem(value, max_chars=MAX_EXPRESSION_CHARS, optional=True)
    if problem:
        return problem
    for char in value:
        problem = _character_problem(char)
        if problem:
            return f"contains a bad character ({problem})"
    return None


def _timestamp_problem(value: str) -> str | None:
    if _TIMESTAMP.fullmatch(value):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            # Without an offset the database reads the value as UTC.
            return timestamp_problem(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))
    return "needs an ISO 8601 date or timestamp such as '2023-05-01' or '2023-05-01T12:00:00Z'"


def _like_problem(pattern: str) -> str | None:
    """A LIKE pattern the database refuses: one ending in its escape character."""
    escaped = False
    for char in pattern:
        escaped = not escaped and char == "\\"
    return "pattern must not end with the escape character '\\' (write '\\\\' for a backslash)" if escaped else None


def _fragment(node: exp.Expr) -> str:
    """The node as SQL for a message; large trees (deep recursion) are summarised."""
    if sum(1 for _ in itertools.islice(node.walk(), 41)) > 40:
        return f"<{type(node).__name__.lower()} expression>"
    try:
        text = node.sql(dialect="postgres", unsupported_level=ErrorLevel.IGNORE)
    except SqlglotError:
        return f"<{type(node).__name__.lower()} expression>"
    return text if len(text) <= 80 else text[:77] + "..."


def _describe_node(node: exp.Expr) -> str:
    # The token pass already refuses most of these; the walk does not rely on it.
    if isinstance(node, exp.Subquery | exp.Query | exp.Exists):
        return "subqueries are not allowed"
    if isinstance(node, exp.Cast):
        return f"casts are not allowed: {_fragment(node)!r}"
    if isinstance(node, exp.Anonymous):
        return f"function {str(node.this).lower()!r} is not allowed"
    if isinstance(node, exp.Func):
        return f"function {node.sql_name().lower()!r} is not allowed"
    return f"{_fragment(node)!r} is not allowed here"


# --- the tree contract --------------------------------------------------------------


class _Counter:
    def __init__(self) -> None:
        self.comparisons = 0


def _check_node(node: object, prefix: str, path: str, depth: int, counter: _Counter) -> None:
    if depth > MAX_DEPTH:
        raise InputError(f"{prefix}: conditions nest more than {MAX_DEPTH} levels deep")
    if not isinstance(node, dict):
        raise InputError(f"{prefix}: {path} must be an object, got {type(node).__name__}")
    op = node.get("op")
    if op in ("and", "or"):
        _check_keys(node, {"op", "args"}, prefix, path)
        args = node["args"]
        if not isinstance(args, list) or len(args) < 2:
            raise InputError(f"{prefix}: {path}.args of {op!r} must be a list of at least two conditions")
        for index, arg in enumerate(args):
            _check_node(arg, prefix, f"{path}.args[{index}]", depth + 1, counter)
        return
    if op == "not":
        _check_keys(node, {"op", "arg"}, prefix, path)
        _check_node(node["arg"], prefix, f"{path}.arg", depth + 1, counter)
        return
    counter.comparisons += 1
    if counter.comparisons > MAX_COMPARISONS:
        raise InputError(f"{prefix}: more than {MAX_COMPARISONS} comparisons")
    if op in COMPARISON_OPS or op in _LIKE_OPS:
        _check_keys(node, {"op", "column", "value"}, prefix, path)
        kind = _check_column(node["column"], prefix, path)
        if op in _LIKE_OPS and kind != "text":
            raise InputError(f"{prefix}: {path}: {op} needs a text column")
        value = node["value"]
        if op in COMPARISON_OPS:
            problem = _value_problem(kind, value)
        elif isinstance(value, str):
            problem = _text_problem(value) or _like_problem(value)
        else:
            problem = "must be a string"
        if problem:
            raise InputError(f"{prefix}: {path}.value {problem}")
        return
    if op == "in":
        _check_keys(node, {"op", "column", "values"}, prefix, path)
        kind = _check_column(node["column"], prefix, path)
        values = node["values"]
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_IN_VALUES:
            raise InputError(f"{prefix}: {path}.values must be a list of 1 to {MAX_IN_VALUES} values")
        for index, value in enumerate(values):
            problem = _value_problem(kind, value)
            if problem:
                raise InputError(f"{prefix}: {path}.values[{index}] {problem}")
        return
    if op in _NULL_OPS:
        _check_keys(node, {"op", "column"}, prefix, path)
        _check_column(node["column"], prefix, path)
        return
    raise InputError(f"{prefix}: {path}.op {str(op)[:40]!r} is not a filter operator")


def _check_keys(node: dict[Any, Any], expected: set[str], prefix: str, path: str) -> None:
    if set(node) != expected:
        raise InputError(
            f"{prefix}: {path} ({node.get('op')!r}) must have exactly the keys {', '.join(sorted(expected))}"
        )


def _check_column(column: object, prefix: str, path: str) -> ColumnKind:
    if isinstance(column, dict) and len(column) == 1:
        if isinstance(column.get("name"), str) and column["name"] in COLUMNS:
            kind: ColumnKind = COLUMNS[column["name"]]
            return kind
        key = column.get("metadata")
        if isinstance(key, str) and _METADATA_KEY.fullmatch(key):
            return "text"
    raise InputError(f"{prefix}: {path}.column must be {{'name': one of {', '.join(COLUMNS)}}} or {{'metadata': key}}")
