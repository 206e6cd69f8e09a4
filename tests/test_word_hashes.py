"""Each note's word hashes are computed by the database when the note is written
(pgmem.word_hashes_v1, migration 0016), equal the read path's own hashing of the text,
come back from stage one, and cannot be chosen by the writer: the family alarm's echo,
near-duplicate and collusion inputs are computed from them."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import psycopg
import pytest
from finish_golden import FINISH_DIR
from helpers import make_spans
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import HashingEmbedder
from pgmem.ingestion.entities import COMMON_WORDS, STOPWORDS
from pgmem.retrieval.pipeline import finish_pack, prepare_pack
from pgmem.retrieval.pool import Pool
from pgmem.retrieval.stage_one import run_stage_one, stage_one_arguments
from pgmem.retrieval.words import DATABASE_HASHED_CHARACTERS, hashed_by_database, word_hash, word_hashes

TEXTS = [
    "Caroline went to the LGBTQ support group on 7 May 2023; she said it was powerful!",
    "Melanie painted a sunrise over the lake -- her first since the kids' camping trip.",
    "Caroline went to the LGBTQ support group on 7 May 2023, she said it was powerful.",
    "the of and a to",
    "x-ray_v2 3.14 a__b ... (tab\there) ACME-1042 https://example.org/notes?q=1",
    "Café NAÏVE 東京 données",  # letters beyond ASCII: NULL, the read path tokenises it
    "\u212aelvin",  # the Kelvin sign lower-cases to an ASCII k in Python, not in SQL: NULL
    "It\u2019s \u201cdone\u201d \u2013 20\u00a0% \u00d7 2\u2026 \U0001f389\ufe0f\u200d!",  # hashed
]


def _sql_hashes(conn: psycopg.Connection[Any], texts: list[str]) -> list[bytes | None]:
    rows = conn.execute(
        "SELECT pgmem.word_hashes_v1(t.body) FROM unnest(%s::text[]) WITH ORDINALITY AS t (body, n) ORDER BY t.n",
        (texts,),
    ).fetchall()
    return [None if row[0] is None else bytes(row[0]) for row in rows]


def _expected(text: str) -> bytes | None:
    return word_hashes(text) if hashed_by_database(text) else None


def test_the_database_hashes_only_text_it_splits_as_python_does(conn: psycopg.Connection[Any]) -> None:
    definition = conn.execute("SELECT pg_get_functiondef('pgmem.word_hashes_v1'::regproc)").fetchone()[0]
    assert f"!~ '[^{DATABASE_HASHED_CHARACTERS}]'" in definition
    # Every character beyond ASCII that it accepts is no word character for Python's \w
    # and is left alone by lower-casing, so [a-z0-9_]+ finds word_list's words.
    accepted = re.compile(f"[{DATABASE_HASHED_CHARACTERS}]")
    word = re.compile(r"\w")
    extra = [chr(code) for code in range(0x80, 0x110000) if accepted.match(chr(code))]
    assert len(extra) > 2000
    assert [c for c in extra if word.match(c) or c.lower() != c] == []
    assert hashed_by_database("\u2019\U0001f389") and not hashed_by_database("caf\u00e9")


def test_the_database_hashes_words_as_the_read_path_does(conn: psycopg.Connection[Any]) -> None:
    stop = " ".join(sorted(STOPWORDS))
    others = " ".join(sorted(COMMON_WORDS - STOPWORDS))
    golden = sorted(
        {row["text"] for path in FINISH_DIR.glob("*.json") for row in json.loads(path.read_text())["candidates"]}
    )
    texts = [*TEXTS, stop, stop.upper(), others, "".join(map(chr, range(1, 128))), *golden]
    assert _sql_hashes(conn, texts) == [_expected(text) for text in texts]
    # Stop words, and only they, carry the sign bit (the two word lists agree).
    assert all(word_hash(word) < 0 for word in STOPWORDS)
    assert all(word_hash(word) >= 0 for word in COMMON_WORDS - STOPWORDS)
    assert any(not hashed_by_database(text) for text in golden)  # the NULL case is exercised


# Accepted punctuation and emoji, and letters that send a text to the read path.
_BEYOND_ASCII = ["\u2019", "\u201c", "\u2014", "\u00a0", "\u00d7", "\U0001f389", "\ufe0f", "\u00e9", "\u212a", "\u0130"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.text(st.characters(min_codepoint=1, max_codepoint=127) | st.sampled_from(_BEYOND_ASCII), max_size=60),
        min_size=1,
        max_size=20,
    )
)
def test_any_text_hashes_alike_in_sql_and_python(conn: psycopg.Connection[Any], texts: list[str]) -> None:
    assert _sql_hashes(conn, texts) == [_expected(text) for text in texts]


def _stored(conn: psycopg.Connection[Any], namespace: str) -> dict[str, bytes | None]:
    rows = conn.execute("SELECT text, word_hashes FROM pgmem.notes WHERE namespace = %s", (namespace,)).fetchall()
    return {text: None if value is None else bytes(value) for text, value in rows}


def test_ingest_and_bulk_load_store_the_read_paths_hashes(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.ingest(conn, make_spans(TEXTS), namespace="ingested", embedder=hashing)
    pgmem.bulk_load(conn, make_spans(TEXTS), namespace="bulk", embedder=hashing)
    expected = {text: _expected(text) for text in TEXTS}
    assert _stored(conn, "ingested") == expected
    assert _stored(conn, "bulk") == expected


def _pool(conn: psycopg.Connection[Any], hashing: HashingEmbedder, question: str, namespace: str) -> Pool:
    vector = hashing.embed([question])[0]
    arguments = stage_one_arguments(
        namespace, hashing.name, vector, question, build_hints(question), pgmem.StageOneParams()
    )
    return run_stage_one(conn, arguments)


def _outcome(pool: Pool, question: str, hashing: HashingEmbedder) -> dict[str, Any]:
    request = prepare_pack(question, embedder=hashing, packing=pgmem.PackParams(budget=4))
    document = finish_pack(request, pool).to_dict()
    del document["diagnostics"]["timings_ms"]
    return document


def test_stage_one_returns_the_hashes_and_a_mixed_pool_packs_as_a_tokenised_one(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    # Notes written before migration 0016 have no hashes: the owner writes some with the
    # trigger off, as they were then.
    old = [f"Old note {i}: Caroline went to the support group on day {i}." for i in range(6)]
    conn.execute("ALTER TABLE pgmem.notes DISABLE TRIGGER notes_word_hashes")
    pgmem.ingest(conn, make_spans(old, document_id="old", family="old"), namespace="mixed", embedder=hashing)
    conn.execute("ALTER TABLE pgmem.notes ENABLE TRIGGER notes_word_hashes")
    pgmem.ingest(conn, make_spans(TEXTS, document_id="new", family="new"), namespace="mixed", embedder=hashing)
    question = "What did Caroline say about the support group?"
    pool = _pool(conn, hashing, question, "mixed")
    by_text = {c.text: c.word_hashes for c in pool.candidates}
    assert {text: by_text[text] for text in old if text in by_text} == {text: None for text in old if text in by_text}
    assert any(by_text.get(text) is None for text in old)
    assert all(by_text[text] == _expected(text) for text in TEXTS if text in by_text)
    assert any(by_text.get(text) is not None for text in TEXTS)
    tokenised = dataclasses.replace(
        pool, candidates=tuple(dataclasses.replace(c, word_hashes=None) for c in pool.candidates)
    )
    assert _outcome(pool, question, hashing) == _outcome(tokenised, question, hashing)


def _login(dsn: str, role: str, namespace: str) -> psycopg.Connection[Any]:
    return pgmem.connect(psycopg.conninfo.make_conninfo(dsn, user=role), namespace=namespace, migrate=False)


FORGED_NOTE = (
    "INSERT INTO pgmem.notes (namespace, note_id, document_id, span_start, span_end, text, family, role,"
    " confidence, model_id, embedding{column})"
    " SELECT 'a', gen_random_uuid(), %s, 0, octet_length(%s), %s, 'fa', 'fact', 0.5, model_id, embedding{value}"
    " FROM pgmem.notes WHERE namespace = 'a' LIMIT 1"
)


def test_a_writer_cannot_choose_its_notes_word_hashes(
    dsn: str, tenants: psycopg.Connection[Any], roles: dict[str, str]
) -> None:
    # A colluding writer would write near-copies with empty or random hashes, so that the
    # family alarm sees no echo of the question and no near-duplicates.
    copy = "Alpha tenant secret: the launch code is 1234, says the council."
    with _login(dsn, roles["writer"], "a") as writer:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute(FORGED_NOTE.format(column=", word_hashes", value=", ''::bytea"), ("forged", copy, copy))
        writer.rollback()
        # The column cannot be reached by a search_path either: the hash function's body was
        # bound when it was created, and the trigger sets its own search_path.
        tenants.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(roles["writer"])))
        writer.execute(
            "CREATE FUNCTION public.sha256(bytea) RETURNS bytea LANGUAGE sql IMMUTABLE RETURN '\\x00'::bytea"
        )
        writer.execute("CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE sql IMMUTABLE RETURN ''")
        writer.execute("SET search_path = public, pg_catalog")
        assert writer.execute("SELECT lower('ABC'), sha256('x'::bytea)").fetchone() == ("", b"\x00")
        writer.execute(FORGED_NOTE.format(column="", value=""), ("honest", copy, copy))
        writer.commit()
    # Whoever inserts a value (here the owner, who may name every column), the trigger
    # replaces it with the text's own hashes.
    tenants.execute(FORGED_NOTE.format(column=", word_hashes", value=", '\\x0102'::bytea"), ("owner", copy, copy))
    stored = tenants.execute(
        "SELECT document_id, word_hashes FROM pgmem.notes WHERE document_id IN ('honest', 'owner')"
    ).fetchall()
    assert sorted((document, bytes(value)) for document, value in stored) == [
        ("honest", word_hashes(copy)),
        ("owner", word_hashes(copy)),
    ]
    tenants.execute("DROP FUNCTION public.sha256(bytea), public.lower(text)")
    tenants.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM {}").format(sql.Identifier(roles["writer"])))
