"""The bad-input catalogue: every bad value is a PgmemError naming the field and the
rule, and a refused batch leaves every pgmem table exactly as it was."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
import pytest
from helpers import make_spans

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.ingest.spans import MAX_SPAN_BYTES

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
        ("", "reason must be a non-empty string"),
        ("  ", "reason must be a non-empty string"),
        (None, "reason must be a non-empty string"),
        ("why\x00", "without NUL"),
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
    before = snapshot(seeded)
    with pytest.raises(error, match=message):
        pgmem.pack(seeded, "existing", embedder=hashing, **kwargs)
    assert snapshot(seeded) == before


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: pgmem.CalibrationParams(tau=0), "tau must be > 0"),
        (lambda: pgmem.CalibrationParams(tau=-1), "tau must be > 0"),
        (lambda: pgmem.CalibrationParams(alpha_prior=1.2), r"alpha_prior must be in \[0.0, 1.0\]"),
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


class CarelessEnricher:
    """A custom enricher with bugs: its output must be refused before the database."""

    def __init__(self, **wrong: Any) -> None:
        from pgmem.ingest.enricher import RuleEnricher

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
