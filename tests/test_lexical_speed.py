"""Migration 0011 ranks the lexical candidates with a bound read from pgmem.lexeme_postings:
the rows must be exactly those of 0008's stage_one_v1, the bound must keep every note of
the lexical top k, and the postings follow the notes under row-level security.

0008's function (frozen in sql/migrations/0008_stage_one_speed.sql) is installed beside
the current one and both run on the same arguments, on a namespace where the screen
holds several terms, the query terms outside it can add to a note's score, and the top k
is a small part of the screened notes (so the bound leaves notes out).
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import as_role, assert_refused, make_spans, stage_one_as_of, stage_one_call, stats_are_consistent
from psycopg.rows import dict_row

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.stage_one import stage_one_arguments

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "pgmem_test_before_0011"
NAMESPACE = "lexical"
#: Query words and in how many of the 300 notes each occurs: the screen takes the rarest
#: while their postings fit lex_max_postings; the rest add to scores without screening.
WORDS = {"zephyr": 30, "quokka": 45, "marmot": 70, "lantern": 140, "river": 240}
QUESTIONS = [
    "zephyr quokka marmot lantern river",
    "Where did the quokka see a lantern by the river?",
    "marmot river",
    "zephyr lantern",
]
FILLER = ["the", "walk", "along", "a", "quiet", "path", "ended", "at", "an", "old", "stone", "bridge", "near", "town"]


def _spans() -> list[pgmem.Span]:
    chooser = random.Random(11)
    holders = {word: set(chooser.sample(range(300), count)) for word, count in WORDS.items()}
    texts = []
    for i in range(300):
        words = [word for word in WORDS for _ in range(1 + (i % 3 == 0)) if i in holders[word]]
        # Lengths from 3 to 14 filler words, so BM25's length normalisation matters.
        words += chooser.sample(FILLER, 3 + i % 12)
        chooser.shuffle(words)
        texts.append(f"Entry {i}: " + " ".join(words) + ".")
    spans = make_spans(texts, document_id="journal")
    return [
        pgmem.Span(
            document_id=f"journal-{i // 10}",
            text=span.text,
            start=span.start,
            end=span.end,
            family=f"f{i % 7}",
            metadata={"half": str(i % 2)},
        )
        for i, span in enumerate(spans)
    ]


def _before_function() -> str:
    return stage_one_as_of("0008", BEFORE)


def _call(schema: str) -> str:
    # 0008's function has no family cap (0018): compared with it off
    return stage_one_call(schema, family_cap=schema != BEFORE)


@pytest.fixture
def journal(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    pgmem.ingest(conn, _spans(), namespace=NAMESPACE, embedder=hashing)
    conn.execute(f"CREATE SCHEMA {BEFORE}")
    conn.execute(_before_function())
    conn.row_factory = dict_row  # type: ignore[assignment]
    return conn


def _arguments(hashing: HashingEmbedder, question: str, params: pgmem.StageOneParams, **hints: Any) -> dict[str, Any]:
    """stage_one_v1's arguments for ``question`` on the journal, as pgmem.pack derives them."""
    return stage_one_arguments(
        NAMESPACE, hashing.name, hashing.embed([question])[0], question, build_hints(question, **hints), params
    )


def _assert_same_rows(old: list[dict[str, Any]], new: list[dict[str, Any]], question: str) -> None:
    assert [row["note_id"] for row in new] == [row["note_id"] for row in old], question
    for before, after in zip(old, new, strict=True):
        for column, value in before.items():
            if isinstance(value, float):
                assert math.isclose(after[column], value, rel_tol=1e-12, abs_tol=1e-12), column
            else:
                assert after[column] == value, column


@pytest.mark.parametrize(
    ("where", "roles", "params"),
    [
        (None, None, pgmem.StageOneParams(k_lex=10, lex_max_postings=200)),
        (None, None, pgmem.StageOneParams(k_lex=5, lex_max_terms=2, bm25_k1=2.0, bm25_b=1.0)),
        (None, None, pgmem.StageOneParams(k_lex=20, lex_max_postings=100, bm25_k1=0.0, bm25_b=0.0)),
        (None, None, pgmem.StageOneParams()),
        (None, None, pgmem.StageOneParams(k_lex=50, lex_max_postings=200)),
        (None, None, pgmem.StageOneParams(k_lex=80, lex_max_terms=3)),
        # One screen term, the others' postings far more: the bound, then the kept notes
        # (ranked from their postings since 0023; lex_max_postings below the others').
        (None, None, pgmem.StageOneParams(k_lex=5, lex_max_terms=1)),
        (None, None, pgmem.StageOneParams(k_lex=5, lex_max_postings=40)),
        (None, None, pgmem.StageOneParams(k_lex=25, lex_max_postings=100)),
        (None, None, pgmem.StageOneParams(k_lex=20, lex_max_terms=1, bm25_b=0.3)),
        # Filters that remove kept notes: the bound may not hold, and every screened note is ranked.
        ("metadata->>'half' = '1'", None, pgmem.StageOneParams(k_lex=10, lex_max_postings=200)),
        (None, ("procedure",), pgmem.StageOneParams(k_lex=10, lex_max_postings=200)),
        (None, None, pgmem.StageOneParams(k_lex=0)),
    ],
)
def test_the_rows_are_those_of_0008(
    journal: psycopg.Connection[Any],
    hashing: HashingEmbedder,
    where: str | None,
    roles: tuple[str, ...] | None,
    params: pgmem.StageOneParams,
) -> None:
    for question in QUESTIONS:
        arguments = _arguments(
            hashing, question, dataclasses.replace(params, family_candidates=None), where=where, roles=roles
        )
        _assert_same_rows(
            journal.execute(_call(BEFORE), arguments).fetchall(),
            journal.execute(_call("pgmem"), arguments).fetchall(),
            question,
        )


BEFORE_0023 = "pgmem_test_before_0023"


@pytest.mark.parametrize("cap", [2, 12, None])
@pytest.mark.parametrize(
    "params",
    [
        pgmem.StageOneParams(k_lex=5, lex_max_postings=40),
        pgmem.StageOneParams(k_lex=10, lex_max_postings=100),
        pgmem.StageOneParams(k_lex=20, lex_max_postings=100, bm25_b=0.3),
    ],
)
def test_the_kept_notes_ranked_from_postings_are_the_rows_of_0019(
    journal: psycopg.Connection[Any], hashing: HashingEmbedder, cap: int | None, params: pgmem.StageOneParams
) -> None:
    # Migration 0023 ranks the notes the bound keeps from their postings (no filter); 0019
    # fetched them and scored their tsvectors, or read every screened note. Each question
    # here screens fewer postings than the other terms hold (lex_max_postings below them),
    # so both take the bound, with the family cap (seven families) binding or not.
    journal.execute(f"CREATE SCHEMA {BEFORE_0023}")
    journal.execute(stage_one_as_of("0019", BEFORE_0023))
    for question in QUESTIONS:
        arguments = _arguments(hashing, question, dataclasses.replace(params, family_candidates=cap))
        old = journal.execute(stage_one_call(BEFORE_0023), arguments).fetchall()
        assert old
        _assert_same_rows(old, journal.execute(stage_one_call("pgmem"), arguments).fetchall(), question)


def test_the_ranking_leaves_the_callers_planner_settings_as_they_were(
    journal: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    # The kept notes' ranking is planned with nested loops and merge joins off (0023);
    # the caller's values, the defaults or its own, are back when stage one returns. The
    # screen holds "zephyr" (30 postings) alone, the other terms 495: the bound route.
    arguments = _arguments(hashing, QUESTIONS[0], pgmem.StageOneParams(k_lex=5, lex_max_postings=40))
    settings = ("enable_nestloop", "enable_mergejoin", "plan_cache_mode")
    for values in (("on", "on", "auto"), ("off", "on", "force_custom_plan")):
        # Inside one transaction: the function's settings are local to the transaction.
        with journal.transaction():
            for name, value in zip(settings, values, strict=True):
                journal.execute(f"SET LOCAL {name} = {value}")
            assert journal.execute(stage_one_call("pgmem"), arguments).fetchall()
            assert [journal.execute(f"SHOW {name}").fetchone()[name] for name in settings] == list(values)


def _terms(conn: psycopg.Connection[Any], rarest: int) -> tuple[list[str], list[float], list[str], list[float]]:
    """The query's terms by document frequency: the ``rarest`` screen, the rest not; BM25 idf."""
    rows = conn.execute(
        "SELECT s.lexeme, ln(1 + (n.note_count - s.document_frequency + 0.5) / (s.document_frequency + 0.5)) AS idf"
        " FROM pgmem.lexeme_stats AS s JOIN pgmem.namespaces AS n USING (namespace)"
        " WHERE s.namespace = %s AND s.lexeme = ANY (%s) ORDER BY s.document_frequency, s.lexeme",
        (NAMESPACE, list(WORDS)),
    ).fetchall()
    terms, idf = [row["lexeme"] for row in rows], [float(row["idf"]) for row in rows]
    return terms[:rarest], idf[:rarest], terms[rarest:], idf[rarest:]


def test_the_bound_keeps_the_top_k_and_leaves_out_the_rest(journal: psycopg.Connection[Any]) -> None:
    k, k1, b = 10, 1.2, 0.75
    screen, screen_idf, others, other_idf = _terms(journal, 3)
    average = journal.execute(
        "SELECT lexeme_total::float8 / note_count AS average FROM pgmem.namespaces WHERE namespace = %s", (NAMESPACE,)
    ).fetchone()["average"]
    bound = journal.execute(
        "SELECT * FROM pgmem.lexical_bound_v1(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (NAMESPACE, screen, screen_idf, others, other_idf, k, k1, b, average),
    ).fetchone()
    # Every screened note's exact BM25 over all the query terms, as stage one ranks them.
    scores = {
        row["note_id"]: row["bm25"]
        for row in journal.execute(
            "SELECT n.note_id, s.bm25 FROM pgmem.notes AS n"
            " CROSS JOIN LATERAL pgmem.bm25_v1(n.lexemes, n.lexeme_count, %s, %s, %s, %s, %s) AS s"
            " WHERE n.namespace = %s AND n.lexemes @@ %s::tsquery",
            (screen + others, screen_idf + other_idf, k1, b, average, NAMESPACE, " | ".join(screen)),
        )
    }
    top = sorted(scores, key=lambda note: (-scores[note], str(note)))[:k]
    kept = set(bound["kept_notes"])
    assert set(top) <= kept
    assert bound["screened_notes"] == len(scores)
    # The bound leaves out more than half: stage one ranks the kept notes alone.
    assert len(kept) * 2 < len(scores)
    assert all(scores[note] >= bound["score_floor"] for note in top)
    assert all(scores[note] < bound["score_floor"] for note in set(scores) - kept)


def test_the_bound_is_not_claimed_when_bm25_parameters_leave_it_open(journal: psycopg.Connection[Any]) -> None:
    screen, screen_idf, _, _ = _terms(journal, 2)
    for k1, b in ((-0.5, 0.75), (1.2, 1.5)):
        rows = journal.execute(
            "SELECT * FROM pgmem.lexical_bound_v1(%s, %s, %s, '{}', '{}', 10, %s, %s, 10.0)",
            (NAMESPACE, screen, screen_idf, k1, b),
        ).fetchall()
        assert rows == []


def test_fewer_screened_notes_than_k_are_all_kept(journal: psycopg.Connection[Any]) -> None:
    screen, screen_idf, _, _ = _terms(journal, 1)
    bound = journal.execute(
        "SELECT * FROM pgmem.lexical_bound_v1(%s, %s, %s, '{river}', '{0.2}', 1000, 1.2, 0.75, 10.0)",
        (NAMESPACE, screen, screen_idf),
    ).fetchone()
    holders = journal.execute(
        "SELECT count(*) AS n FROM pgmem.notes WHERE namespace = %s AND lexemes @@ %s::tsquery",
        (NAMESPACE, screen[0]),
    ).fetchone()
    assert len(bound["kept_notes"]) == holders["n"] == WORDS["zephyr"]
    assert bound["score_floor"] is None


def test_postings_follow_ingest_supersede_and_forget(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    ids = pgmem.ingest(
        conn, make_spans(["Quokka quokka by the river.", "Zephyr lantern secret of Brevaldo."]), embedder=hashing
    ).note_ids
    stats_are_consistent(conn)
    assert conn.execute("SELECT term_frequency FROM pgmem.lexeme_postings WHERE lexeme = 'quokka'").fetchall() == [(2,)]
    pgmem.forget(conn, namespace="default", note_ids=[ids[1]], reason="erasure")
    stats_are_consistent(conn)
    # No lexeme of the erased note stays readable, nor any posting of its id.
    assert conn.execute("SELECT count(*) FROM pgmem.lexeme_postings WHERE lexeme = 'brevaldo'").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM pgmem.lexeme_postings WHERE note_id = %s", (ids[1],)).fetchone() == (0,)


def test_readers_and_writers_see_postings_of_their_namespace_only_and_never_write_them(
    dsn: str, tenants: Any, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    with as_role(dsn, roles["reader"], "a") as reader:
        visible = {row[0] for row in reader.execute("SELECT DISTINCT namespace FROM pgmem.lexeme_postings")}
        assert visible == {"a"}
        assert reader.execute("SELECT count(*) FROM pgmem.lexeme_postings WHERE lexeme = 'vault'").fetchone() == (0,)
        # Asking for 'b' by name through the bound function reads nothing either.
        bound = reader.execute(
            "SELECT * FROM pgmem.lexical_bound_v1('b', '{vault}', '{1.0}', '{}', '{}', 1, 1.2, 0.75, 5.0)"
        ).fetchone()
        assert bound == ([], None, 0)
        reader.execute("SET pgmem.namespace = 'b'")
        assert reader.execute("SELECT count(*) FROM pgmem.lexeme_postings").fetchone() == (0,)
    with as_role(dsn, roles["writer"], "a") as writer:
        assert_refused(
            writer,
            "INSERT INTO pgmem.lexeme_postings VALUES ('a', 'forged', gen_random_uuid(), 99, 1)",
            "UPDATE pgmem.lexeme_postings SET term_frequency = 99",
            "DELETE FROM pgmem.lexeme_postings",
        )
        # Its own ingest maintains the postings (owner-rights trigger) in its transaction.
        pgmem.ingest(
            writer, make_spans(["Alpha writes a quokka note."], document_id="w"), namespace="a", embedder=hashing
        )
        assert writer.execute("SELECT count(*) FROM pgmem.lexeme_postings WHERE lexeme = 'quokka'").fetchone() == (1,)
    with as_role(dsn, roles["stranger"], "a") as stranger, pytest.raises(psycopg.errors.InsufficientPrivilege):
        stranger.execute("SELECT count(*) FROM pgmem.lexeme_postings")
    stats_are_consistent(tenants)


def test_the_bound_and_the_candidate_search_read_only_their_namespace() -> None:
    """Every statement of 0011 that reads pgmem tables names the namespace (distribution key)."""
    from test_distribution import _unrouted_tables

    text = (ROOT / "sql" / "migrations" / "0011_lexical_speed.sql").read_text()
    start = text.index("CREATE FUNCTION pgmem.lexical_bound_v1(")
    body = text[start : text.index("$function$;", start)]
    statement = body[body.index("    WITH\n") : body.index("GROUP BY t.score, t.rounding;")]
    seen, unrouted = _unrouted_tables(re.sub(r"\bp_namespace\b", "$1", statement))
    assert seen == ["lexeme_postings", "lexeme_postings"] and unrouted == []
    start = text.index("CREATE OR REPLACE FUNCTION pgmem.stage_one_v1(")
    body = text[start : text.index("$function$;", start)]
    ranked = re.search(r"\$ranked\$(.*?)\$ranked\$", body, flags=re.DOTALL)
    candidates = re.search(r"EXECUTE format\(\$candidates\$(.*?)\$candidates\$", body, flags=re.DOTALL)
    lexical = re.findall(r"\$lexical\$(.*?)\$lexical\$", body, flags=re.DOTALL)
    assert ranked is not None and candidates is not None and len(lexical) == 4
    # format() arguments: the row filter (model, roles, compiled filter), the vector type,
    # the lexical search (kept notes, screened notes: the ranked search with its condition).
    kept = ranked.group(1).replace("%2$s", "n.note_id = ANY ($3)")
    screened = ranked.group(1).replace("%2$s", "n.lexemes @@ $4")
    for search in lexical:
        statement = candidates.group(1).replace("%3$s", search.replace("%1$s", kept).replace("%2$s", screened))
        statement = statement.replace("%1$s", "TRUE").replace("%2$s", "vector")
        assert not re.search(r"%\d\$", statement)
        seen, unrouted = _unrouted_tables(statement)
        assert set(seen) == {"notes"} and len(seen) >= 6 and unrouted == []


def test_the_kept_notes_ranking_reads_only_its_namespace() -> None:
    """0023's ranking of the bound's kept notes names the namespace (distribution key)."""
    from test_distribution import _unrouted_tables

    text = (ROOT / "sql" / "migrations" / "0023_lexical_scale.sql").read_text()
    start = text.index("SELECT coalesce(array_agg(s.note_id", text.index("v_lexical_kept IS NOT NULL THEN"))
    statement = text[start : text.index("LIMIT v_fetch_lex) AS s;", start) + len("LIMIT v_fetch_lex) AS s")]
    statement = re.sub(r"\bp_namespace\b", "$1", statement.replace("INTO v_lexical_top", ""))
    seen, unrouted = _unrouted_tables(statement)
    assert seen == ["lexeme_postings"] and unrouted == []


def test_a_reader_cannot_rank_another_namespaces_kept_notes(
    journal: psycopg.Connection[Any], tenants: Any, dsn: str, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    # The journal's question on the bound route (0023's ranking), asked by a reader granted
    # namespace 'a' only, naming the journal's namespace: no row, with or without the setting.
    arguments = _arguments(hashing, QUESTIONS[0], pgmem.StageOneParams(k_lex=5, lex_max_postings=40))
    assert journal.execute(stage_one_call("pgmem"), arguments).fetchall()
    with as_role(dsn, roles["reader"], "a") as reader:
        assert reader.execute(stage_one_call("pgmem"), arguments).fetchall() == []
        reader.execute(f"SET pgmem.namespace = '{NAMESPACE}'")
        assert reader.execute(stage_one_call("pgmem"), arguments).fetchall() == []


def _reltuples(conn: psycopg.Connection[Any]) -> dict[str, float]:
    rows = conn.execute(
        "SELECT relname, reltuples FROM pg_class WHERE oid IN"
        " ('pgmem.notes'::regclass, 'pgmem.lexeme_stats'::regclass, 'pgmem.lexeme_postings'::regclass)"
    ).fetchall()
    return {str(name): float(count) for name, count in rows}


def test_the_first_write_analyzes_what_stage_one_plans_on_once(
    conn: psycopg.Connection[Any], dsn: str, roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    # A new database's tables were never analyzed: the planner would guess their sizes.
    assert set(_reltuples(conn).values()) == {-1.0}
    pgmem.register_model(conn, hashing)
    conn.execute("SELECT pgmem.grant_namespace_v1(%s, 'w')", (roles["writer"],))
    conn.commit()
    # A writer's first ingest analyzes them (with owner rights), inside its own transaction.
    with as_role(dsn, roles["writer"], "w") as writer:
        pgmem.ingest(
            writer,
            make_spans(["Quokka lantern by the river.", "Zephyr over Brevaldo."]),
            namespace="w",
            embedder=hashing,
        )
    first = _reltuples(conn)
    postings = conn.execute("SELECT count(*) FROM pgmem.lexeme_postings").fetchone()
    assert first["lexeme_postings"] == float(postings[0]) > 0
    assert first["notes"] == 2.0
    # Once analyzed, later writes leave the statistics to autovacuum.
    pgmem.ingest(conn, make_spans(["A third note about otters."], document_id="d2"), namespace="w", embedder=hashing)
    assert _reltuples(conn) == first


def test_a_first_writer_never_waits_for_another_ones_analysis(
    conn: psycopg.Connection[Any], dsn: str, hashing: HashingEmbedder
) -> None:
    conn.commit()
    with psycopg.connect(dsn) as other:
        # Another session holds the lock an analysis needs (as a concurrent first writer would).
        other.execute("LOCK TABLE pgmem.lexeme_postings IN SHARE UPDATE EXCLUSIVE MODE")
        conn.execute("SET lock_timeout = '5s'")
        pgmem.ingest(conn, make_spans(["Quokka lantern by the river."]), embedder=hashing)
        conn.commit()
        assert _reltuples(conn)["lexeme_postings"] == -1.0
        other.rollback()
