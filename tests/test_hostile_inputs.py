"""Property tests: hostile values fed to every public entry point come out as a
PgmemError raised by pgmem's own checks, never as TypeError, ValueError,
OverflowError, UnicodeEncodeError, RecursionError or a database error."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.filters import compile_filter

# Any code point, lone surrogates and NUL included (hypothesis leaves surrogates out by default).
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=40)
# Built lazily: hypothesis shows a sampled_from's values, and repr() fails past 4,300 digits.
HUGE_INTS = st.sampled_from([31, 53, 63, 64, 1400, 17000]).flatmap(
    lambda bits: st.sampled_from([2**bits, 2**bits - 1, -(2**bits)])
)
NUMBERS = (
    st.integers()
    | HUGE_INTS
    | st.floats()
    | st.sampled_from([1e39, -1e39, 1e-50, 3.4e38, 1e-45, 1e308, 5e-324, 2**33 + 0.5, 1e10])
)
OFFSETS = st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59))
DATETIMES = st.builds(
    lambda moment, offset: moment.replace(tzinfo=timezone(offset)),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    OFFSETS,
)
TIMESTAMP_TEXT = DATETIMES.map(datetime.isoformat)


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | NUMBERS | ANY_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(ANY_TEXT, children, max_size=4),
    max_leaves=12,
) | st.sampled_from([_deep(40), _deep(3000), {"k": "x" * 70_000}])
HOSTILE = st.none() | st.booleans() | NUMBERS | ANY_TEXT | JSON_VALUES | DATETIMES | TIMESTAMP_TEXT
STRING_LISTS = st.none() | st.lists(ANY_TEXT, max_size=5) | ANY_TEXT | st.just(["k"] * 100_000) | HOSTILE

SLOW = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


def only_pgmem_checks(call: Any, *args: Any, **kwargs: Any) -> None:
    """Run ``call``: it may succeed or raise a PgmemError of its own checks, not a database error."""
    try:
        call(*args, **kwargs)
    except pgmem.DatabaseError:
        raise
    except pgmem.PgmemError:
        return


@pytest.mark.parametrize("params", [pgmem.StageOneParams, pgmem.CalibrationParams, pgmem.PackParams])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_parameter_objects_refuse_hostile_values_with_configuration_errors(params: Any, data: st.DataObject) -> None:
    field = data.draw(st.sampled_from([f.name for f in dataclasses.fields(params)]))
    value = data.draw(HOSTILE | st.dictionaries(ANY_TEXT, NUMBERS, max_size=3))
    try:
        params(**{field: value})
    except pgmem.ConfigurationError as exc:
        assert field in str(exc)


WHERE = st.one_of(
    ANY_TEXT,
    NUMBERS.filter(lambda x: abs(x) < 10**4000).map(lambda x: f"confidence > {x!r}"),
    NUMBERS.filter(lambda x: abs(x) < 10**4000).map(lambda x: f"confidence IN (0.5, '{x!r}')"),
    ANY_TEXT.map(lambda s: "family LIKE '" + s.replace("'", "''") + "'"),
    ANY_TEXT.map(lambda s: "metadata->>'k' ILIKE '" + s.replace("'", "''") + "\\'"),
    TIMESTAMP_TEXT.map(lambda t: f"source_ts >= '{t}'"),
    st.text("()NOT AND OR family = 'x'", max_size=200),
)
PACK_ARGUMENTS = st.fixed_dictionaries(
    {},
    optional=dict.fromkeys(("question", "namespace", "mode"), HOSTILE)
    | dict.fromkeys(("budget", "token_budget", "family_cap", "timeout"), NUMBERS)
    | dict.fromkeys(("roles", "entities", "keywords", "handles"), STRING_LISTS)
    | {
        "role_quotas": st.dictionaries(st.sampled_from(pgmem.ROLES), NUMBERS, max_size=2),
        "time_range": st.tuples(HOSTILE, HOSTILE) | HOSTILE,
        "where": WHERE,
    },
)


@SLOW
@given(arguments=PACK_ARGUMENTS)
def test_pack_refuses_hostile_arguments_before_the_database(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, arguments: dict[str, Any]
) -> None:
    arguments = {"question": "what about Ada?"} | arguments
    try:
        only_pgmem_checks(pgmem.pack, conn, embedder=hashing, log=True, **arguments)
    except pgmem.DatabaseError as exc:
        # A valid timeout shorter than the pack (5e-324 s) is honoured: the statement is
        # cancelled, or not when it ends first (a race a fast machine wins at times).
        if "timeout" not in arguments or "exceeded its timeout" not in str(exc):
            raise


SPAN_FIELDS = st.fixed_dictionaries(
    {},
    optional=dict.fromkeys(("document_id", "family", "source_ts", "external_id", "role", "context"), HOSTILE)
    | dict.fromkeys(("start", "confidence"), NUMBERS)
    | {"metadata": st.dictionaries(ANY_TEXT, JSON_VALUES, max_size=3) | HOSTILE},
)


@SLOW
@given(fields=SPAN_FIELDS, text=ANY_TEXT.filter(str.strip))
def test_ingest_refuses_hostile_spans_before_the_database(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, fields: dict[str, Any], text: str
) -> None:
    start = fields.pop("start", 0)
    try:
        end = start + len(text.encode("utf-8", "surrogatepass")) if isinstance(start, int) else 1
    except TypeError:
        end = 1
    span = {"document_id": "d", "family": "f", "text": text, "start": start, "end": end} | fields
    only_pgmem_checks(pgmem.ingest, conn, [pgmem.Span(**span)], embedder=hashing)


@SLOW
@given(
    selector=st.sampled_from(["note_ids", "document_id", "family"]),
    value=HOSTILE | st.lists(HOSTILE | st.uuids().map(str), max_size=3),
    reason=HOSTILE,
    families=STRING_LISTS,
    helpful=st.none() | st.lists(HOSTILE | st.uuids().map(str), max_size=3) | HOSTILE,
    weight=NUMBERS,
    pack_id=st.none() | HOSTILE,
)
def test_forget_feedback_and_reset_refuse_hostile_arguments(
    conn: psycopg.Connection[Any],
    selector: str,
    value: Any,
    reason: Any,
    families: Any,
    helpful: Any,
    weight: Any,
    pack_id: Any,
) -> None:
    only_pgmem_checks(pgmem.forget, conn, namespace="default", reason=reason, **{selector: value})
    only_pgmem_checks(pgmem.reset_feedback, conn, namespace="default", families=families)
    unhelpful = [str(uuid.uuid4())]
    only_pgmem_checks(pgmem.feedback, conn, helpful=helpful, unhelpful=unhelpful, weight=weight, pack_id=pack_id)


@settings(max_examples=300, deadline=None)
@given(where=WHERE | HOSTILE)
def test_compile_filter_raises_only_input_errors(where: Any) -> None:
    with contextlib.suppress(pgmem.InputError):
        compile_filter(where)
