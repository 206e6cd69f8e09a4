"""Read path against a real PostgreSQL: one round trip, SQL aggregates, hints, logging."""

from __future__ import annotations

import dataclasses
import math
import tempfile
import uuid
from typing import Any

import psycopg
import pytest
from helpers import make_spans
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

import pgmem
from pgmem.embeddings import HashingEmbedder
from pgmem.params import StageOneParams
from pgmem.retrieval.pool import Pool

FACTS = {
    "reuters": [
        "Acme Corp was founded by Ada Lovelace in Paris.",
        "Ada Lovelace started Acme Corp with two engineers.",
        "Acme Corp's founder Ada Lovelace announced a new product.",
    ],
    "blog": [
        "I think Acme Corp was founded by Charles Babbage.",
        "Cheese and wine pair well in autumn.",
        "The weather in Paris was rainy all week.",
    ],
    "forum": [
        "Someone said Acme Corp moved to Berlin.",
        "Berlin has many startups and cheap rents.",
        "My cat likes to sleep on the keyboard.",
        "Trains in Europe are often late in winter.",
    ],
}


@pytest.fixture
def store(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    for family, texts in FACTS.items():
        pgmem.ingest(
            conn,
            make_spans(
                texts,
                document_id=f"doc-{family}",
                family=family,
                source_ts="2023-05-08T10:00:00+00:00",
            ),
            embedder=hashing,
        )
    return conn


def _round_trips(conn: psycopg.Connection[Any], action: Any) -> int:
    with tempfile.TemporaryFile(mode="w+") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
        try:
            action()
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        messages = [line.split("\t") for line in trace.read().splitlines()]
    return sum(1 for m in messages if len(m) > 2 and m[0] == "B" and m[2].startswith("ReadyForQuery"))


def test_pack_is_exactly_one_round_trip(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    hashing.embed(["warm up"])
    for _ in range(7):  # past psycopg's prepare threshold too
        assert _round_trips(store, lambda: pgmem.pack(store, "Who founded Acme Corp?", embedder=hashing)) == 1


def test_pack_returns_ranked_grounded_items(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pack = pgmem.pack(store, "Who founded Acme Corp?", budget=4, embedder=hashing)
    assert 1 <= len(pack.items) <= 4
    assert [i.rank for i in pack.items] == list(range(1, len(pack.items) + 1))
    top = pack.items[0]
    assert "Acme" in top.text
    assert str(top.citation) == f"{top.document_id}[{top.citation.start}:{top.citation.end}]"
    assert all(i.decayed_score <= i.final_score for i in pack.items)
    d = pack.diagnostics
    assert d.pool_size >= len(pack.items)
    assert sum(f.count for f in d.families) == d.pool_size
    assert d.parameters["packing"]["budget"] == 4
    assert set(d.timings_ms) == {"embed", "stage_one", "calibrate_and_pack"}


def test_stage_one_read_as_tuples_gives_the_pool_its_dict_rows_give(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    # run_stage_one reads psycopg's tuples by the cursor's column names; the same
    # statement read as dict rows (by name, one dict a row) gives the same pool.
    from pgmem.db.queries import run
    from pgmem.retrieval.stage_one import Hints, pool_from_rows, run_stage_one, stage_one_arguments

    question = "Where is Acme Corp?"
    arguments = stage_one_arguments(
        "default", hashing.name, hashing.embed([question])[0], question, Hints(), StageOneParams()
    )
    with store.transaction():  # one now(): the same ages in both reads
        pool = run_stage_one(store, arguments)
        rows = run(store, "stage_one", arguments, prepare=False, binary=True).fetchall()
    assert pool.size == len(rows) > 0
    again = pool_from_rows(rows, query=question)
    assert pool == again
    assert [c.word_hashes for c in pool.candidates] == [c.word_hashes for c in again.candidates]
    assert [c.note_id for c in pool.candidates] == [str(row["note_id"]) for row in rows]


def test_sql_aggregates_equal_the_numpy_definition(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    from pgmem.retrieval.stage_one import Hints, run_stage_one, stage_one_arguments

    vector = hashing.embed(["Where is Acme Corp?"])[0]
    pool = run_stage_one(
        store,
        stage_one_arguments("default", hashing.name, vector, "Where is Acme Corp?", Hints(), StageOneParams()),
    )
    again = Pool.from_candidates(pool.candidates)
    assert pool.size == again.size == 10
    assert math.isclose(pool.mean, again.mean, abs_tol=1e-12)
    assert math.isclose(pool.variance, again.variance, abs_tol=1e-12)
    assert math.isclose(pool.entropy, again.entropy, abs_tol=1e-12)
    # The namespace statistics (family alarm) come from pgmem.family_stats, not the pool.
    assert all(f.namespace_count >= f.count and f.age_seconds is not None for f in pool.families)
    assert tuple(dataclasses.replace(f, namespace_count=0, age_seconds=None) for f in pool.families) == tuple(
        type(f)(
            f.family,
            f.count,
            pytest.approx(f.score_sum, abs=1e-12),
            pytest.approx(f.mean_confidence, abs=1e-6),
        )  # type: ignore[arg-type]
        for f in again.families
    )
    scores = [c.base_score for c in pool.candidates]
    assert scores == sorted(scores, reverse=True)
    for c in pool.candidates:
        assert math.isclose(
            c.base_score,
            0.7 * c.dense_score + 0.3 * c.lexical_score + c.facet_boost + c.link_boost,
            abs_tol=1e-9,
        )
        assert 0 <= c.lexical_score <= 1


def test_stage_one_defaults_in_sql_match_the_parameter_object(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    row = store.execute("SELECT pg_get_function_arguments('pgmem.stage_one_v1'::regproc)").fetchone()
    assert row is not None
    defaults = {}
    for argument in row[0].split(", "):
        name, _, rest = argument.partition(" ")
        if " DEFAULT " in rest:
            defaults[name] = rest.split(" DEFAULT ")[1]
    for name, value in StageOneParams().as_dict().items():
        assert float(defaults[name]) == float(value), name


def test_stage_one_is_callable_from_plain_sql(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    from pgmem.db.vectors import vector_literal

    vector = vector_literal(hashing.embed(["cheese"])[0])
    rows = store.execute(
        "SELECT text, pool_size FROM pgmem.stage_one_v1('default', %s, %s::vector, 'cheese',"
        " k_dense => 3, k_lex => 2, neighbour_seeds => 0)",
        (hashing.name, vector),
    ).fetchall()
    assert 1 <= len(rows) <= 5 and rows[0][1] == len(rows)
    assert any("Cheese" in r[0] for r in rows)


def test_unknown_namespace_gives_an_empty_degraded_pack(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pack = pgmem.pack(store, "anything at all", namespace="nobody-home", embedder=hashing)
    assert pack.items == ()
    assert pack.diagnostics.degraded and pack.diagnostics.degraded_reasons == ("pool_too_small",)
    assert pack.diagnostics.pool_size == 0


def test_pack_inside_a_callers_transaction_does_not_commit(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn) as conn:
        pgmem.ingest(conn, make_spans(["pending fact about Acme"]), embedder=hashing)
        pack = pgmem.pack(conn, "Acme", embedder=hashing, log=True)
        assert pack.items and pack.pack_id
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM pgmem.pack_log").fetchone() == (0,)
        assert not conn.closed


def test_modes_share_the_pool_and_relevance_ignores_families(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    packs = {
        m: pgmem.pack(store, "Who founded Acme Corp?", mode=m, embedder=hashing)
        for m in ("calibrated", "relevance", "raw_bonus")
    }
    assert len({p.diagnostics.pool_size for p in packs.values()}) == 1
    assert all(f.regularizer == 0 for f in packs["relevance"].diagnostics.families)
    assert all(abs(f.regularizer) <= 0.5 for p in packs.values() for f in p.diagnostics.families)
    with pytest.raises(pgmem.ConfigurationError, match="mode must be one of"):
        pgmem.pack(store, "x", mode="magic", embedder=hashing)


def test_family_cap_and_role_filter_reach_the_pack(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    capped = pgmem.pack(store, "Acme Corp founder", family_cap=1, budget=5, embedder=hashing)
    families = [i.family for i in capped.items]
    assert len(families) == len(set(families))
    assert any(r.reason == "family_cap" for r in capped.diagnostics.rejections)
    claims = pgmem.pack(store, "Acme Corp founder", roles=["claim"], embedder=hashing)
    assert claims.items and all(i.role == "claim" for i in claims.items)


def test_hints_add_bounded_boosts(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    plain = pgmem.pack(store, "who started it", embedder=hashing, budget=10, derive_hints=False)
    hinted = pgmem.pack(
        store,
        "who started it",
        entities=["Ada Lovelace"],
        keywords=["acme"],
        embedder=hashing,
        budget=10,
    )
    boosts = {i.note_id: i.facet_boost for i in hinted.items}
    assert max(boosts.values()) > 0
    assert all(0 <= b <= 0.05 * 4 for b in boosts.values())
    assert all(i.facet_boost == 0 for i in plain.items)
    assert hinted.diagnostics.hints["entities"] == ["Ada Lovelace"]


def test_logged_packs_feed_the_views(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    for question in ("Who founded Acme Corp?", "Where is Berlin?", "cheese"):
        pgmem.pack(store, question, embedder=hashing, log=True)
    pgmem.pack(store, "nothing here", namespace="empty-one", embedder=hashing, log=True)
    rates = {(r[0], r[2]): r[5] for r in store.execute("SELECT * FROM pgmem.pack_degraded_rate_v1").fetchall()}
    assert rates[("empty-one", "any")] == 1.0 and rates[("empty-one", "pool_too_small")] == 1.0
    assert store.execute(
        "SELECT packs FROM pgmem.pack_entropy_distribution_v1 WHERE namespace = 'default'"
    ).fetchone() == (3,)
    families = store.execute("SELECT family, pools FROM pgmem.family_regularizer_stats_v1 ORDER BY family").fetchall()
    assert {f for f, _ in families} == {"blog", "forum", "reuters"}
    floor = store.execute("SELECT packs FROM pgmem.pack_variance_floor_rate_v1 WHERE namespace = 'default'").fetchone()
    assert floor == (3,)
    store_families = store.execute("SELECT family, notes FROM pgmem.store_families_v1 ORDER BY family").fetchall()
    assert store_families == [("blog", 3), ("forum", 4), ("reuters", 3)]


def test_stage_one_leaves_the_sessions_search_settings_alone(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn) as conn:
        pgmem.ingest(conn, make_spans(["a note", "another note"]), embedder=hashing)
        conn.execute("SET LOCAL hnsw.ef_search = 7")
        pgmem.pack(conn, "note", embedder=hashing)
        settings = conn.execute(
            "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
        ).fetchone()
        assert settings == ("7", "off")
        conn.rollback()


def test_lexical_scores_are_bm25_over_english_lexemes(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    from pgmem.retrieval.stage_one import Hints, run_stage_one, stage_one_arguments

    texts = ["Zebras run fast.", "The zebra sleeps; zebras sleep a lot.", "Lions hunt zebras at night.", "Rain."]
    pgmem.ingest(conn, make_spans(texts), embedder=hashing)
    question = "Do zebras sleep at night?"
    pool = run_stage_one(
        conn,
        stage_one_arguments("default", hashing.name, hashing.embed([question])[0], question, Hints(), StageOneParams()),
    )
    # Recompute BM25 from the stored tsvectors: tf from positions, idf from document frequency.
    rows = conn.execute(
        "SELECT text, (SELECT array_agg(array[u.lexeme, coalesce(cardinality(u.positions), 1)::text])"
        " FROM unnest(lexemes) AS u), lexeme_count FROM pgmem.notes"
    ).fetchall()
    query_terms = {r[0] for r in conn.execute("SELECT lexeme FROM unnest(to_tsvector('english', %s))", (question,))}
    notes = {text: ({lex: int(tf) for lex, tf in pairs}, length) for text, pairs, length in rows}
    n = len(notes)
    average = sum(length for _, length in notes.values()) / n
    df = {t: sum(1 for tfs, _ in notes.values() if t in tfs) for t in query_terms}

    def bm25(text: str) -> float:
        tfs, length = notes[text]
        return sum(
            math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            * tfs[t]
            * 2.2
            / (tfs[t] + 1.2 * (0.25 + 0.75 * length / average))
            for t in query_terms
            if t in tfs
        )

    best = max(bm25(t) for t in texts)
    for candidate in pool.candidates:
        assert math.isclose(candidate.lexical_score, bm25(candidate.text) / best, rel_tol=1e-9, abs_tol=1e-12)


def test_lexical_screening_keeps_only_the_rarest_terms(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    from pgmem.retrieval.stage_one import Hints, run_stage_one, stage_one_arguments

    texts = [f"common word number {i}" for i in range(6)] + ["a rare aardvark with common fur"]
    pgmem.ingest(conn, make_spans(texts), embedder=hashing)
    question = "common aardvark"
    vector = hashing.embed(["unrelated vector for the dense side"])[0]
    screened = StageOneParams(k_dense=1, k_lex=10, lex_max_postings=1, neighbour_seeds=0)
    pool = run_stage_one(conn, stage_one_arguments("default", hashing.name, vector, question, Hints(), screened))
    lexical_hits = [c for c in pool.candidates if c.lexical_score > 0 and "aardvark" in c.text]
    assert len(lexical_hits) == 1 and pool.size <= 2
    everything = StageOneParams(k_dense=1, k_lex=10, neighbour_seeds=0)
    pool = run_stage_one(conn, stage_one_arguments("default", hashing.name, vector, question, Hints(), everything))
    assert pool.size == 7


VOCABULARY = ["acme", "founder", "paris", "zebra", "engine", "river", "music", "cheese", "rocket", "garden"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    notes=st.lists(
        st.tuples(st.integers(0, 3), st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6)),
        min_size=1,
        max_size=40,
    ),
    query=st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4),
    k=st.integers(1, 30),
)
def test_sql_pool_aggregates_match_numpy_on_any_store(
    conn: psycopg.Connection[Any],
    hashing: HashingEmbedder,
    notes: list[tuple[int, list[str]]],
    query: list[str],
    k: int,
) -> None:
    from pgmem.retrieval.stage_one import Hints, run_stage_one, stage_one_arguments

    namespace = f"prop-{uuid.uuid4().hex[:10]}"
    spans = []
    for i, (family, words) in enumerate(notes):
        text = " ".join(words) + f" n{i}"
        spans.append(
            pgmem.Span(
                document_id=f"d{i % 3}", text=text, start=i * 100, end=i * 100 + len(text), family=f"fam{family}"
            )
        )
    pgmem.ingest(conn, spans, namespace=namespace, embedder=hashing)
    question = " ".join(query)
    params = StageOneParams(k_dense=k, k_lex=k, neighbour_seeds=0)
    pool = run_stage_one(
        conn, stage_one_arguments(namespace, hashing.name, hashing.embed([question])[0], question, Hints(), params)
    )
    reference = Pool.from_candidates(pool.candidates)
    assert 1 <= pool.size <= min(len(notes), 2 * k)
    assert (pool.size, [f.family for f in pool.families], [f.count for f in pool.families]) == (
        reference.size,
        [f.family for f in reference.families],
        [f.count for f in reference.families],
    )
    assert math.isclose(pool.mean, reference.mean, abs_tol=1e-9)
    assert math.isclose(pool.variance, reference.variance, abs_tol=1e-9)
    assert math.isclose(pool.entropy, reference.entropy, abs_tol=1e-9)
    for mine, theirs in zip(pool.families, reference.families, strict=True):
        assert math.isclose(mine.score_sum, theirs.score_sum, abs_tol=1e-9)


def test_a_pack_past_its_timeout_is_cancelled_with_a_clear_error(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, psycopg.connect(dsn) as locker:
        pgmem.ingest(conn, make_spans(["a note to wait for"]), embedder=hashing)
        locker.execute("LOCK TABLE pgmem.notes IN ACCESS EXCLUSIVE MODE")  # stage one now blocks
        with pytest.raises(pgmem.DatabaseError, match=r"pack: exceeded its timeout of 0.3 s"):
            pgmem.pack(conn, "note", embedder=hashing, timeout=0.3)
        locker.rollback()
        assert pgmem.pack(conn, "note", embedder=hashing, timeout=30).items  # the connection is still usable
    with pytest.raises(pgmem.ConfigurationError, match="timeout must be > 0"):
        pgmem.pack(conn, "note", embedder=hashing, timeout=0)


def test_where_filters_apply_inside_stage_one(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    spans = []
    for i in range(200):
        text = f"Release note {i}: the widget pipeline changed in build {i}."
        spans.append(
            pgmem.Span(
                document_id=f"doc{i}",
                text=text,
                start=0,
                end=len(text),
                family=f"team{i % 4}",
                role="fact" if i % 20 else "claim",
                source_ts=f"2023-{1 + i % 12:02d}-10T00:00:00+00:00",
                metadata={"lang": "fr" if i % 50 == 0 else "en", "source": {"kind": "ci"}},
            )
        )
    pgmem.ingest(conn, spans, embedder=hashing)
    # A selective filter still fills the pool: 10 claims exist, k is 10.
    claims = pgmem.pack(
        conn,
        "widget pipeline",
        where="role = 'claim'",
        embedder=hashing,
        budget=10,
        stage_one=StageOneParams(k_dense=10, k_lex=10),
    )
    assert len(claims.items) == 10 and all(i.role == "claim" for i in claims.items)
    french = pgmem.pack(
        conn, "widget", where="metadata->>'lang' = 'fr' AND family IN ('team0', 'team2')", embedder=hashing
    )
    assert {i.document_id for i in french.items} == {"doc0", "doc50", "doc100", "doc150"}
    recent = pgmem.pack(
        conn, "widget", where="source_ts >= '2023-12-01' AND NOT role = 'claim'", embedder=hashing, budget=50
    )
    assert recent.items and all(i.source_ts is not None and i.source_ts.month == 12 for i in recent.items)
    assert recent.diagnostics.hints["where"] == "source_ts >= '2023-12-01' AND NOT role = 'claim'"
    with pytest.raises(pgmem.InputError, match="where"):
        pgmem.pack(conn, "widget", where="role = 'fact'; DROP TABLE pgmem.notes", embedder=hashing)
    assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (200,)


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_filter_times_without_offset_are_utc_in_every_session_time_zone(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, zone: str
) -> None:
    # 02:00 UTC on the 8th is still the 7th in New York: a session-zone reading would differ.
    texts = {"late": "2023-05-08T02:00:00+00:00", "early": "2023-05-07T20:00:00+00:00"}
    spans = [
        pgmem.Span(document_id=name, text=f"{name} widget", start=0, end=len(name) + 7, family="f", source_ts=ts)
        for name, ts in texts.items()
    ]
    pgmem.ingest(conn, spans, embedder=hashing)
    conn.execute(sql.SQL("SET TimeZone = {}").format(sql.Literal(zone)))
    for where in ("source_ts >= '2023-05-08'", "source_ts >= '2023-05-08 00:00'", "source_ts >= '2023-05-08T00:00Z'"):
        found = pgmem.pack(conn, "widget", where=where, embedder=hashing)
        assert {item.document_id for item in found.items} == {"late"}, where


@pytest.mark.parametrize(
    "tree",
    [
        {"op": "=", "column": {"name": "ctid"}, "value": "(0,1)"},
        {"op": "=", "column": {"name": "role; DROP TABLE pgmem.notes --"}, "value": "x"},
        {"op": "= 1 OR 1 =", "column": {"name": "role"}, "value": "x"},
        {"op": "=", "column": {"name": "role"}, "value": {"nested": "object"}},
        {"op": "like", "column": {"name": "confidence"}, "value": "1%"},
        {"op": "and", "args": []},
        "not an object",
    ],
)
def test_the_database_refuses_malformed_filter_trees(conn: psycopg.Connection[Any], tree: Any) -> None:
    from psycopg.types.json import Jsonb

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="filter"):
        conn.execute("SELECT pgmem.compile_filter_v1(%s)", (Jsonb(tree),))


def test_no_filter_value_becomes_sql_text(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    from psycopg.types.json import Jsonb

    hostile = "x'); DROP TABLE pgmem.notes; --"
    tree = {
        "op": "or",
        "args": [
            {"op": "=", "column": {"metadata": hostile}, "value": hostile},
            {"op": "in", "column": {"name": "family"}, "values": ["a,b", 'c"d', hostile]},
            {"op": "like", "column": {"name": "context"}, "value": hostile + "%"},
        ],
    }
    row = conn.execute("SELECT pgmem.compile_filter_v1(%s, '$26')", (Jsonb(tree),)).fetchone()
    assert row is not None
    compiled = row[0]
    assert "DROP" not in compiled and 'c"d' not in compiled and "a,b" not in compiled
    assert compiled.startswith(
        "((n.metadata ->> ($26 #>> '{args,0,column,metadata}')) = (($26 #>> '{args,0,value}'))::text)"
    )
    # The values still select what they say, read from the bind parameter at run time.
    text = "Hostile strings are data."
    span = pgmem.Span(document_id="d", text=text, start=0, end=len(text), family=hostile, metadata={hostile: hostile})
    pgmem.ingest(conn, [span], embedder=hashing)
    assert pgmem.pack(conn, "data", where=f"family = '{hostile.replace(chr(39), chr(39) * 2)}'", embedder=hashing).items
    assert conn.execute("SELECT count(*) FROM pgmem.notes").fetchone() == (1,)


def test_strong_candidates_pull_their_neighbours_into_the_pool(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    from pgmem.retrieval.stage_one import Hints, run_stage_one, stage_one_arguments

    turns = ["Did you go anywhere last weekend?", "Yes, we hiked up to the old lighthouse.", "How was it?", "Windy."]
    pgmem.ingest(conn, make_spans(turns[:2], document_id="session-1"), embedder=hashing)
    pgmem.ingest(conn, make_spans(turns, document_id="session-1")[2:], embedder=hashing)  # a later batch
    pgmem.ingest(conn, make_spans([f"unrelated chatter {i}" for i in range(30)], document_id="other"), embedder=hashing)
    question = "lighthouse hike"
    vector = hashing.embed([question])[0]

    def pool_texts(seeds: int) -> set[str]:
        params = StageOneParams(k_dense=1, k_lex=1, neighbour_seeds=seeds)
        pool = run_stage_one(conn, stage_one_arguments("default", hashing.name, vector, question, Hints(), params))
        return {c.text for c in pool.candidates}

    assert pool_texts(0) == {turns[1]}
    # The previous turn (same batch) and the next one (written later) come along.
    assert pool_texts(1) == {turns[0], turns[1], turns[2]}


def test_hints_are_derived_from_the_question(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    turns = [
        ("Caroline: I joined a pottery class last week!", "2023-05-20T10:00:00+00:00"),
        ("Caroline: I joined a choir in the spring.", "2023-08-02T10:00:00+00:00"),
    ]
    for i, (text, when) in enumerate(turns):
        span = pgmem.Span(
            document_id=f"s{i}",
            text=text,
            start=0,
            end=len(text),
            family=f"session_{i}",
            source_ts=when,
            metadata={"speaker": "Caroline"},
        )
        pgmem.ingest(conn, [span], embedder=hashing)
    pack = pgmem.pack(conn, "What did Caroline join in May 2023?", embedder=hashing)
    derived = pack.diagnostics.hints["derived"]
    assert derived["entities"] == ["Caroline"]
    assert (derived["time_from"], derived["time_to"]) == ("2023-05-01T00:00:00+00:00", "2023-06-01T00:00:00+00:00")
    boosts = {item.text: item.boosts for item in pack.items}
    # "last week" of 20 May 2023 falls in May 2023: a time boost; the August note gets none.
    assert boosts[turns[0][0]]["time"] > 0 and boosts[turns[1][0]]["time"] == 0
    assert pack.items[0].text == turns[0][0]
    quiet = pgmem.pack(conn, "What did Caroline join in May 2023?", embedder=hashing, derive_hints=False)
    assert quiet.diagnostics.hints["derived"] is None
    assert all(item.facet_boost == 0 for item in quiet.items)
