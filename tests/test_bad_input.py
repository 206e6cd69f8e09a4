"""The bad-input catalogue: every bad value is a PgmemError naming the field and the
rule, and a refused batch leaves every pgmem table exactly as it was."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import psycopg
import pytest
from helpers import make_spans

import pgmem
from pgmem.embeddings import HashingEmbedder, get_embedder
from pgmem.embeddings.openai_http import OpenAIEmbedder
from pgmem.ingestion.entities import EntityTag
from pgmem.ingestion.handles import extract_handles
from pgmem.ingestion.roles import classify_role
from pgmem.ingestion.sources import spans_from_path
from pgmem.ingestion.spans import MAX_SPAN_BYTES
from pgmem.ingestion.split import sentence_ranges
from pgmem.ingestion.times import TimeTag

TABLES = (
    "embedding_models",
    "namespaces",
    "lexeme_stats",
    "notes",
    "pack_log",
    "pack_log_families",
    "namespace_grants",
    "forget_audit",
    "supersede_audit",
)


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every pgmem table, in a stable order (test-only fixed table names)."""
    return {table: sorted(conn.execute(f"SELECT t::text FROM pgmem.{table} AS t").fetchall()) for table in TABLES}


class BrokenEmbedder:
    """An embedder returning what a misbehaving model might: NaN, inf or the wrong shape."""

    name = "broken"
    dimension = 8

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.kind == "wrong-dimension":
            return np.ones((len(texts), 5), dtype=np.float32)
        value = np.nan if self.kind == "nan" else np.inf
        vectors = np.ones((len(texts), 8), dtype=np.float32)
        vectors[:, 3] = value
        return vectors


GOOD = {"document_id": "d", "text": "abcdefgh", "start": 100, "end": 108, "family": "f"}

SPAN_CASES = [
    ({"text": ""}, "text must not be empty"),
    ({"text": "   \n\t "}, "text must not be empty or whitespace only"),
    ({"text": "nul\x00byte", "end": 108}, "text must not contain NUL"),
    ({"text": "bad \udcff surrogate", "end": 100 + 20}, "text is not valid Unicode"),
    ({"start": -1}, "start must be >= 0"),
    ({"start": 108, "end": 100}, "end must be greater than start"),
    ({"end": 200}, "start/end must cover exactly the text's 8 UTF-8 bytes"),
    ({"start": 1.5}, "start must be a whole number"),
    ({"text": "x" * (MAX_SPAN_BYTES + 1), "end": 100 + MAX_SPAN_BYTES + 1}, f"at most {MAX_SPAN_BYTES}"),
    ({"family": ""}, "family must not be empty"),
    ({"family": None}, "family must be a string"),
    ({"document_id": "  "}, "document_id must not be empty"),
    ({"confidence": 1.01}, r"confidence must be a number in \[0, 1\]"),
    ({"confidence": -0.1}, r"confidence must be a number in \[0, 1\]"),
    ({"confidence": float("inf")}, "confidence must be a number"),
    ({"source_ts": "next tuesday"}, "source_ts must be an ISO 8601 timestamp"),
    ({"source_ts": "2023-05-08T10:00:00"}, "source_ts must be timezone-aware"),
    ({"source_ts": 1683540000}, "source_ts must be a datetime or ISO 8601 text"),
    ({"role": "gossip"}, "role must be one of fact, event"),
    ({"metadata": {"when": object()}}, "metadata must be JSON-serialisable"),
    ({"metadata": {"x": float("nan")}}, "metadata must be JSON-serialisable"),
    ({"metadata": ["not", "a", "mapping"]}, "metadata must be a mapping"),
]


@pytest.fixture
def seeded(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    pgmem.ingest(conn, make_spans(["an existing note", "and another"]), embedder=hashing)
    pgmem.pack(conn, "existing", embedder=hashing, log=True)
    return conn


@pytest.mark.parametrize(("change", "message"), SPAN_CASES)
def test_a_bad_span_is_refused_and_the_store_is_unchanged(
    seeded: psycopg.Connection[Any], hashing: HashingEmbedder, change: dict[str, Any], message: str
) -> None:
    before = snapshot(seeded)
    batch = [*make_spans(["a good span in the same batch"], document_id="fresh"), pgmem.Span(**(GOOD | change))]
    with pytest.raises(pgmem.InputError, match=message) as caught:
        pgmem.ingest(seeded, batch, embedder=hashing)
    assert str(caught.value).startswith("span 1 (")
    assert snapshot(seeded) == before


def test_the_same_note_id_with_different_content_is_refused(
    seeded: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    before = snapshot(seeded)
    twins = [pgmem.Span(**GOOD), pgmem.Span(**(GOOD | {"family": "other"}))]
    with pytest.raises(pgmem.InputError, match="span 1 has the same note id as span 0"):
        pgmem.ingest(seeded, twins, embedder=hashing)
    assert snapshot(seeded) == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"text": "abcdefgX"}, r"span 1 \(document 'd', bytes 100-108\): namespace 'default' holds note .* text"),
        ({"family": "g"}, "with a different family"),
        ({"metadata": {"m": 1}}, "with a different metadata"),
        ({"source_ts": "2023-05-08T10:00:00+00:00"}, "with a different source_ts"),
        ({"role": "claim", "external_id": "e"}, "with a different external_id, role"),
    ],
)
def test_a_span_holding_another_note_is_refused_and_the_store_is_unchanged(
    seeded: psycopg.Connection[Any], hashing: HashingEmbedder, change: dict[str, Any], message: str
) -> None:
    pgmem.ingest(seeded, [pgmem.Span(**GOOD)], embedder=hashing)
    before = snapshot(seeded)
    batch = [*make_spans(["a good span in the same batch"], document_id="fresh"), pgmem.Span(**(GOOD | change))]
    with pytest.raises(pgmem.InputError, match=message):
        pgmem.ingest(seeded, batch, embedder=hashing)
    assert snapshot(seeded) == before


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("", "reason must not be empty"),
        ("  ", "reason must not be empty"),
        (None, "reason must be a string"),
        ("why\x00", "reason must not contain NUL"),
        ("why \udcff", "reason is not valid Unicode"),
        ("x" * 1001, "at most 1000 characters, got 1001"),
    ],
)
def test_bad_supersede_reasons(
    seeded: psycopg.Connection[Any], hashing: HashingEmbedder, reason: Any, message: str
) -> None:
    before = snapshot(seeded)
    with pytest.raises(pgmem.InputError, match=message):
        pgmem.supersede(seeded, make_spans(["an existing note, corrected"]), namespace="default", reason=reason,
                        embedder=hashing)  # fmt: skip
    assert snapshot(seeded) == before


@pytest.mark.parametrize(
    ("kind", "error", "message"),
    [
        ("nan", pgmem.EmbeddingError, "non-finite vector"),
        ("inf", pgmem.EmbeddingError, "non-finite vector"),
        ("wrong-dimension", pgmem.EmbeddingError, "dimension"),
    ],
)
def test_bad_embeddings_are_refused(
    seeded: psycopg.Connection[Any], kind: str, error: type[Exception], message: str
) -> None:
    before = snapshot(seeded)
    with pytest.raises(error, match=message):
        pgmem.ingest(
            seeded, make_spans(["fresh text"], document_id="n"), namespace="other", embedder=BrokenEmbedder(kind)
        )  # type: ignore[arg-type]
    assert snapshot(seeded) == before


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"budget": 0}, pgmem.ConfigurationError, r"budget must be in \[1, 1000\], got 0"),
        ({"budget": -3}, pgmem.ConfigurationError, "budget must be in"),
        ({"token_budget": 0}, pgmem.ConfigurationError, "token_budget must be >= 1"),
        ({"family_cap": 0}, pgmem.ConfigurationError, "family_cap must be >= 1"),
        ({"role_quotas": {"fact": -1}}, pgmem.ConfigurationError, r"role_quotas\['fact'\] must be >= 0"),
        ({"role_quotas": {"rumour": 1}}, pgmem.ConfigurationError, "role_quotas has unknown role 'rumour'"),
        ({"calibration": pgmem.CalibrationParams}, pgmem.ConfigurationError, "calibration must be a CalibrationParams"),
        ({"mode": "beta-ish"}, pgmem.ConfigurationError, "mode must be one of"),
        ({"timeout": -1}, pgmem.ConfigurationError, "timeout must be > 0"),
        ({"roles": []}, pgmem.InputError, "roles must be a non-empty list"),
        ({"entities": "Ada"}, pgmem.InputError, "entities must be a list of non-empty strings"),
        ({"time_range": ("2023-05-08", None)}, pgmem.InputError, "time_range start must be timezone-aware"),
        ({"namespace": ""}, pgmem.InputError, "namespace must be"),
        ({"namespace": "x" * 200}, pgmem.InputError, "namespace must be"),
    ],
)
def test_bad_pack_arguments(
    seeded: psycopg.Connection[Any],
    hashing: HashingEmbedder,
    kwargs: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    arguments = {"question": "existing"} | kwargs
    before = snapshot(seeded)
    with pytest.raises(error, match=message):
        pgmem.pack(seeded, embedder=hashing, log=True, **arguments)
    assert snapshot(seeded) == before


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: pgmem.CalibrationParams(tau=0), "tau must be > 0"),
        (lambda: pgmem.CalibrationParams(tau=-1), "tau must be > 0"),
        (lambda: pgmem.CalibrationParams(alpha_prior=1.2), r"alpha_prior must be in \[0.0, 1.0\]"),
        (lambda: pgmem.CalibrationParams(use_uncertainty="no"), "use_uncertainty must be True or False"),
        (lambda: pgmem.CalibrationParams(alpha_prior=-0.1), "alpha_prior must be in"),
        (lambda: pgmem.CalibrationParams(shrinkage=-2), "shrinkage must be >= 0"),
        (lambda: pgmem.CalibrationParams(gamma=float("nan")), "gamma must be finite"),
        (lambda: pgmem.CalibrationParams(n_min=0), "n_min must be >= 1"),
        (lambda: pgmem.CalibrationParams(eps=0), "eps must be > 0"),
        (lambda: pgmem.PackParams(overlap_hard_threshold=1.5), "overlap_hard_threshold must be in"),
        (lambda: pgmem.PackParams(overlap_decay=-1), "overlap_decay must be >= 0"),
        (lambda: pgmem.StageOneParams(k_lex=-1), "k_lex must be in"),
        (lambda: pgmem.StageOneParams(bm25_b=2), "bm25_b must be in"),
        (lambda: pgmem.StageOneParams(dense_weight=0, lexical_weight=0), "no relevance signal left"),
        (lambda: pgmem.StageOneParams(entity_boost=3), "entity_boost must be in"),
        (lambda: pgmem.StageOneParams(k_dense=True), "k_dense must be a whole number"),
    ],
)
def test_bad_parameter_objects(build: Any, message: str) -> None:
    with pytest.raises(pgmem.ConfigurationError, match=message):
        build()


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ("", "question must not be empty"),
        (" \n ", "must not be empty"),
        ("q" * 5000, "at most 4096"),
        ("a\x00b", "NUL"),
        (None, "must be a string"),
    ],
)
def test_bad_questions(seeded: psycopg.Connection[Any], hashing: HashingEmbedder, question: Any, message: str) -> None:
    with pytest.raises(pgmem.InputError, match=message):
        pgmem.pack(seeded, question, embedder=hashing)


def test_an_unknown_namespace_is_an_empty_pack_not_a_crash(
    seeded: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pack = pgmem.pack(seeded, "existing", namespace="never-written", embedder=hashing)
    assert pack.items == () and pack.diagnostics.degraded_reasons == ("pool_too_small",)


def test_every_error_shares_the_root() -> None:
    for error in (
        pgmem.InputError,
        pgmem.ConfigurationError,
        pgmem.EmbeddingError,
        pgmem.EmbeddingMismatchError,
        pgmem.SchemaError,
        pgmem.DatabaseError,
    ):
        assert issubclass(error, pgmem.PgmemError)


LATE = timezone(timedelta(hours=-5))


class CarelessEnricher:
    """A custom enricher with bugs: its output must be refused before the database."""

    def __init__(self, **wrong: Any) -> None:
        from pgmem.ingestion.enricher import RuleEnricher

        self.inner = RuleEnricher()
        self.wrong = wrong

    def enrich(self, span: Any) -> Any:
        import dataclasses

        return dataclasses.replace(self.inner.enrich(span), **self.wrong)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        ({"role": "rumour"}, "the enricher returned role 'rumour'"),
        ({"confidence": 1.7}, r"the enricher returned confidence 1.7; it must be a number in \[0, 1\]"),
        ({"context": "x\x00y"}, "the enricher returned an invalid context"),
        ({"context": "x\udcff"}, "the enricher returned an invalid context"),
        ({"confidence": 10**400}, "the enricher returned confidence an integer of about 401 digits"),
        ({"confidence": 1e-50}, "the enricher returned confidence 1e-50; it must be a number in"),
        ({"keywords": ("ok", "k\ud800")}, "the enricher returned a keyword or handle that is not valid text"),
        ({"handles": ("h\x00",)}, "the enricher returned a keyword or handle that is not valid text"),
        ({"entities": (EntityTag("Ada\udcff", 0.9),)}, r"the enricher returned entity 'Ada\\udcff' with confidence"),
        ({"entities": (EntityTag("Ada", "high"),)}, "the enricher returned entity 'Ada' with confidence 'high'"),
        (
            {
                "time_tags": (
                    TimeTag("soon", datetime(2023, 1, 1, tzinfo=UTC), datetime.max.replace(tzinfo=LATE), "day", 1.0),
                )
            },
            "the enricher returned an invalid time tag 'soon'",
        ),
    ],
)
def test_a_custom_enrichers_mistakes_are_input_errors(
    seeded: psycopg.Connection[Any], hashing: HashingEmbedder, wrong: dict[str, Any], message: str
) -> None:
    before = snapshot(seeded)
    with pytest.raises(pgmem.InputError, match=f"span 0: {message}"):
        pgmem.ingest(
            seeded, make_spans(["new text"], document_id="e"), embedder=hashing, enricher=CarelessEnricher(**wrong)
        )
    assert snapshot(seeded) == before


# --- hostile inputs (regression tests of the attacker-style probe) --------------------

PLUS_FIVE = timezone(timedelta(hours=5))
MINUS_FIVE = timezone(timedelta(hours=-5))


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


HOSTILE_SPAN_CASES = [
    ({"metadata": nested(5000)}, "metadata must nest at most 32 levels deep"),
    ({"metadata": nested(33)}, "metadata must nest at most 32 levels deep"),
    ({"metadata": {"a": ["ok", "x\x00y"]}}, r"metadata\['a'\]\[1\] must not contain NUL"),
    ({"metadata": {"k\x00": 1}}, "metadata has a key that must not contain NUL"),
    ({"metadata": {"a": {"b": "\udcff"}}}, r"metadata\['a'\]\['b'\] is not valid Unicode"),
    ({"metadata": {"\ud800": 1}}, "metadata has a key that is not valid Unicode"),
    ({"metadata": {"a": "x" * 70_000}}, "metadata must be at most 65536 characters"),
    ({"metadata": {"a": list(range(100_000))}}, "metadata must be at most 65536 characters"),
    ({"family": "f\udcff"}, "family is not valid Unicode"),
    ({"context": "c\ud800"}, "context is not valid Unicode"),
    ({"source_ts": "2023-05-08T10:00:00+23:59"}, "source_ts must have a UTC offset of whole seconds within"),
    ({"source_ts": datetime(2023, 5, 8, tzinfo=timezone(timedelta(hours=1, microseconds=5)))}, "UTC offset"),
    ({"source_ts": datetime(1, 1, 1, tzinfo=PLUS_FIVE)}, "source_ts must lie between 0001-01-01 and 9999-12-31"),
    ({"source_ts": datetime(9999, 12, 31, 23, tzinfo=MINUS_FIVE)}, "source_ts must lie between"),
    ({"source_ts": "2023-05-08\udcff"}, "source_ts is not valid Unicode"),
    ({"start": 2**31, "end": 2**31 + 8}, "start must be at most 2147483647"),
    ({"start": 2**31 - 4, "end": 2**31 + 4}, "end must be at most 2147483647"),
    ({"start": 10**5000}, "start must be at most 2147483647.*an integer of about 5001 digits"),
    ({"start": -(10**5000)}, "start must be >= 0"),
    ({"confidence": 10**400}, r"confidence must be a number in \[0, 1\]"),
    ({"confidence": 5e-161}, r"confidence must be a number in \[0, 1\], 0 or at least 1e-45 \(PostgreSQL real\)"),
]


@pytest.mark.parametrize(("change", "message"), HOSTILE_SPAN_CASES)
def test_a_hostile_span_is_refused_and_the_store_is_unchanged(
    seeded: psycopg.Connection[Any], hashing: HashingEmbedder, change: dict[str, Any], message: str
) -> None:
    test_a_bad_span_is_refused_and_the_store_is_unchanged(seeded, hashing, change, message)


HOSTILE_PACK_CASES = [
    ({"question": "who\udcff?"}, pgmem.InputError, "question is not valid Unicode"),
    ({"entities": ["Ada\udcff"]}, pgmem.InputError, r"entities\[0\] is not valid Unicode"),
    ({"keywords": ["ok", "a\x00"]}, pgmem.InputError, r"keywords\[1\] must not contain NUL"),
    ({"handles": ["x" * 600]}, pgmem.InputError, r"handles\[0\] must be at most 512 characters"),
    ({"keywords": [f"k{i}" for i in range(200_000)]}, pgmem.InputError, "keywords must hold at most 64 values"),
    ({"entities": (f"e{i}" for i in range(10**9))}, pgmem.InputError, "entities must hold at most 64 values"),
    ({"handles": 17}, pgmem.InputError, "handles must be a list of non-empty strings"),
    ({"roles": ["fact\udcff"]}, pgmem.InputError, r"roles\[0\] is not valid Unicode"),
    (
        {"time_range": ("2023-05-08T00:00:00+16:00", None)},
        pgmem.InputError,
        "time_range start must have a UTC offset of whole seconds within",
    ),
    (
        {"time_range": (None, datetime(9999, 12, 31, 23, tzinfo=MINUS_FIVE))},
        pgmem.InputError,
        "time_range end must lie",
    ),
    ({"timeout": 1e10}, pgmem.ConfigurationError, r"timeout must be in \[0.0, 86400.0\], got 10000000000.0"),
    ({"timeout": 2**70}, pgmem.ConfigurationError, r"timeout must be in \[0.0, 86400.0\]"),
    ({"timeout": float("inf")}, pgmem.ConfigurationError, "timeout must be finite"),
    ({"timeout": 10**400}, pgmem.ConfigurationError, "timeout must be finite"),
    ({"token_budget": 2**31}, pgmem.ConfigurationError, "token_budget must be at most 2147483647"),
    (
        {"family_cap": 10**5000},
        pgmem.ConfigurationError,
        r"family_cap must be at most 2147483647 \(PostgreSQL integer\), got an integer of about 5001 digits",
    ),
    ({"role_quotas": {"fact": 2**63}}, pgmem.ConfigurationError, r"role_quotas\['fact'\] must be at most 2147483647"),
    ({"where": "confidence > 1e39"}, pgmem.InputError, "where: confidence needs 0 or a magnitude in"),
    ({"where": "confidence IN (0.5, -1e39)"}, pgmem.InputError, r"PostgreSQL real\), got -1e39"),
    ({"where": "confidence > 1e-50"}, pgmem.InputError, "where: confidence needs 0 or a magnitude in"),
    ({"where": "confidence = '1e39'"}, pgmem.InputError, "where: confidence needs 0 or a magnitude in"),
    ({"where": "family LIKE 'abc\\'"}, pgmem.InputError, "where: LIKE pattern must not end with the escape character"),
    ({"where": "metadata->>'k' ILIKE '\\\\\\'"}, pgmem.InputError, "where: ILIKE pattern must not end with the escape"),
    (
        {"where": "source_ts >= '2023-05-01T00:00:00+23:00'"},
        pgmem.InputError,
        "where: source_ts must have a UTC offset of whole seconds within",
    ),
    ({"where": "created_at < '9999-12-31T23:00:00-05:00'"}, pgmem.InputError, "where: created_at must lie between"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), HOSTILE_PACK_CASES)
def test_hostile_pack_arguments(
    seeded: psycopg.Connection[Any],
    hashing: HashingEmbedder,
    kwargs: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    test_bad_pack_arguments(seeded, hashing, kwargs, error, message)


def test_valid_edge_values_still_pack(seeded: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pack = pgmem.pack(
        seeded,
        "existing",
        embedder=hashing,
        keywords=[f"k{i}" for i in range(64)],
        time_range=("2023-05-08T00:00:00+15:59:59", datetime(9999, 12, 31, 23, tzinfo=UTC)),
        where="confidence >= 1e-45 AND family NOT LIKE 'a\\\\' AND source_ts IS NULL",
        timeout=86_400,
    )
    assert pack.items


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: pgmem.StageOneParams(lex_max_postings=2**63), "lex_max_postings must be at most 2147483647"),
        (lambda: pgmem.CalibrationParams(n_min=2**31), "n_min must be at most 2147483647"),
        (lambda: pgmem.CalibrationParams(tau=10**400), "tau must be finite, got an integer of about 401 digits"),
        (lambda: pgmem.CalibrationParams(gamma=-(10**400)), "gamma must be finite"),
        (lambda: pgmem.PackParams(minimum_effective_score=10**400), "minimum_effective_score must be finite"),
        (lambda: pgmem.StageOneParams(bm25_b=10**400), "bm25_b must be finite"),
        (lambda: pgmem.StageOneParams(bm25_k1=1e308), r"bm25_k1 must be in \[0.0, 100.0\]"),
        (lambda: pgmem.StageOneParams(dense_weight=1e308), r"dense_weight must be in \[0.0, 1000.0\]"),
        (lambda: pgmem.StageOneParams(lexical_weight=1e4), r"lexical_weight must be in \[0.0, 1000.0\]"),
        (lambda: OpenAIEmbedder("m", timeout=1e10), r"OpenAIEmbedder timeout must be in \[0.0, 86400.0\]"),
        (lambda: OpenAIEmbedder("m", timeout=10**400), "OpenAIEmbedder timeout must be finite"),
        (lambda: OpenAIEmbedder("m", dimension=2**40), r"OpenAIEmbedder dimension must be in \[1, 4000\]"),
    ],
)
def test_hostile_parameter_objects(build: Any, message: str) -> None:
    with pytest.raises(pgmem.ConfigurationError, match=message):
        build()


def forget(conn: psycopg.Connection[Any], **kwargs: Any) -> Any:
    return pgmem.forget(conn, namespace="default", **kwargs)


def feedback(conn: psycopg.Connection[Any], **kwargs: Any) -> Any:
    return pgmem.feedback(conn, helpful=[str(uuid.uuid4())], **kwargs)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: forget(c, family="f", reason="why\udcff"), "forget: reason is not valid"),
        (
            lambda c: forget(c, family="f", reason="a\x00b"),
            "forget: reason must not contain",
        ),
        (lambda c: forget(c, family="f", reason="x" * 5000), "reason must be at most 4096"),
        (lambda c: forget(c, family="f\udcff", reason="r"), "forget: family is not valid"),
        (
            lambda c: forget(c, document_id="d\x00", reason="r"),
            "forget: document_id must not",
        ),
        (
            lambda c: forget(c, note_ids=[10**5000], reason="r"),
            r"forget: note_ids\[0\] must be a UUID, got an integer of about 5001 digits",
        ),
        (lambda c: pgmem.reset_feedback(c, namespace="default", families=["f\udcff"]), r"families\[0\] is not valid"),
        (lambda c: pgmem.reset_feedback(c, namespace="default", families=["\x00"]), r"families\[0\] must not contain"),
        (lambda c: pgmem.feedback(c, helpful=["\udcff"]), r"feedback: helpful\[0\] must be a UUID"),
        (
            lambda c: pgmem.feedback(c, unhelpful=[[10**5000]]),
            r"feedback: unhelpful\[0\] must be a UUID, got \[an integer of about 5001 digits\]",
        ),
        (
            lambda c: feedback(c, weight=10**5000),
            r"feedback: weight must be in \(0, 1000\], got an integer of about 5001 digits",
        ),
        (
            lambda c: feedback(c, pack_id="\udcff"),
            "feedback: pack_id must be a UUID",
        ),
        (lambda c: pgmem.pack(c, "q", namespace="\udcff"), "namespace must be"),
    ],
)
def test_hostile_forget_feedback_and_reset_arguments(seeded: psycopg.Connection[Any], call: Any, message: str) -> None:
    before = snapshot(seeded)
    with pytest.raises(pgmem.InputError, match=message):
        call(seeded)
    assert snapshot(seeded) == before


CRAFTED_SPANS = {
    "e-mail local parts": (extract_handles, ("a." * 8192)[:16383] + "@"),
    "numbers with thousands separators": (extract_handles, ("1," * 8192)[:16384]),
    "dotted names": (extract_handles, ("a." * 8192)[:16384]),
    "thousands of handles": (extract_handles, ("$1" * 8192)[:16384]),
    "a run of dashes": (lambda text: classify_role(text, {}, False), "-" * 16384),
    "a run of full stops": (sentence_ranges, "." * 16384),
}


@pytest.mark.parametrize(("extract", "text"), CRAFTED_SPANS.values(), ids=CRAFTED_SPANS.keys())
def test_extractors_are_linear_on_crafted_spans(extract: Any, text: str) -> None:
    # Before the fix these took 5.7 s, 171 s, 4.4 s, 3.9 s, 16 s and 6.2 s; now 0.2 s at most.
    started = time.perf_counter()
    extract(text)
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: get_embedder("hashing:" + "9" * 5000), r"hashing dimension must be a whole number in \[2, 4000\]"),
        (lambda: get_embedder("hashing:²"), r"hashing dimension must be a whole number in \[2, 4000\]"),
        (lambda: get_embedder("hashing:99999999999"), r"hashing dimension must be a whole number in \[2, 4000\]"),
        (lambda: HashingEmbedder(10**11), r"HashingEmbedder dimension must be in \[2, 4000\]"),
        (lambda: OpenAIEmbedder("m\udcff"), "OpenAIEmbedder model must be a non-empty name"),
        (lambda: get_embedder("openai:\x00"), "OpenAIEmbedder model must be a non-empty name"),
    ],
)
def test_hostile_embedder_specs(build: Any, message: str) -> None:
    with pytest.raises(pgmem.ConfigurationError, match=message):
        build()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("deep.jsonl", "[" * 100_000 + "]" * 100_000, "deep.jsonl:1: not a span record"),
        ("digits.jsonl", '{"start": ' + "1" * 5000 + "}", "digits.jsonl:1: not a span record"),
        ("deep.json", '{"a":' * 100_000 + "1" + "}" * 100_000, "deep.json:1: JSON nested too deeply"),
        ("turns.jsonl", '{"speaker": "a", "text": "b"}\n' + "[" * 100_000, "turns.jsonl:2: JSON nested too deeply"),
        ("digits.json", "[" + "1" * 5000 + "]", "digits.json:1: not usable JSON"),
    ],
)
def test_hostile_source_files(tmp_path: Any, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(pgmem.InputError, match=message):
        spans_from_path(path)
