"""Migration 0018: stage one puts at most ``family_candidates`` notes of one provenance
family ahead of other families' notes in its dense top k and in its lexical top k
(issue 13, pool crowding); a family alone in its namespace loses nothing.

Checked on every candidate path of stage_one_v1 (the lexical top k from postings, under
a bound, with a metadata or role filter, the lexical side off), as properties that hold
whatever the order of tied scores: no family above the cap in either list while other
families are there, nothing outside a deeper uncapped search, nothing lost by a family
under the cap; a single-family namespace gets the uncapped pool. Then the function that
spreads the lists, as an attacker with a login role would call it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import psycopg
import pytest
from helpers import as_role, make_spans
from psycopg.rows import dict_row
from test_lexical_speed import NAMESPACE, QUESTIONS, _call, _spans

import pgmem
from pgmem.api import build_hints
from pgmem.embeddings import HashingEmbedder
from pgmem.retrieval.stage_one import stage_one_arguments

CAP = 3
PATHS = [
    (None, None, pgmem.StageOneParams(k_dense=10, k_lex=10, lex_max_postings=200)),
    (None, None, pgmem.StageOneParams(k_dense=10, k_lex=20, lex_max_terms=1)),
    (None, None, pgmem.StageOneParams(k_dense=12, k_lex=10)),
    ("metadata->>'half' = '1'", None, pgmem.StageOneParams(k_dense=10, k_lex=10, lex_max_postings=200)),
    (None, ("fact", "event", "other"), pgmem.StageOneParams(k_dense=10, k_lex=10, lex_max_postings=200)),
    (None, None, pgmem.StageOneParams(k_dense=10, k_lex=0)),
]


@pytest.fixture
def journal(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    """300 notes in 7 families of about 43 each: any cap below 43 binds."""
    pgmem.ingest(conn, _spans(), namespace=NAMESPACE, embedder=hashing)
    conn.row_factory = dict_row  # type: ignore[assignment]
    return conn


def _pool(
    conn: psycopg.Connection[Any],
    hashing: HashingEmbedder,
    question: str,
    hints: Any,
    params: pgmem.StageOneParams,
) -> list[dict[str, Any]]:
    arguments = stage_one_arguments(NAMESPACE, hashing.name, hashing.embed([question])[0], question, hints, params)
    return conn.execute(_call("pgmem"), arguments).fetchall()


@pytest.mark.parametrize(("where", "roles", "params"), PATHS)
def test_no_family_fills_a_candidate_search(
    journal: psycopg.Connection[Any],
    hashing: HashingEmbedder,
    where: str | None,
    roles: tuple[str, ...] | None,
    params: pgmem.StageOneParams,
) -> None:
    # Without neighbours every candidate comes from the dense or the lexical top k.
    plain = dataclasses.replace(params, neighbour_seeds=0, family_candidates=None)
    capped = dataclasses.replace(plain, family_candidates=CAP)
    deep = dataclasses.replace(plain, k_dense=8 * plain.k_dense, k_lex=8 * plain.k_lex)
    for question in QUESTIONS:
        hints = build_hints(question, where=where, roles=roles)
        before = _pool(journal, hashing, question, hints, plain)
        after = _pool(journal, hashing, question, hints, capped)
        wide = {row["note_id"] for row in _pool(journal, hashing, question, hints, deep)}
        assert before and after, question
        families = Counter(row["family"] for row in after)
        # At most CAP of a family from each list, and the dense list is full (7 families x CAP >= k).
        assert max(families.values()) <= 2 * CAP, (question, families)
        assert len(after) >= min(plain.k_dense, 7 * CAP)
        # The cap only reaches deeper into the same searches.
        assert {row["note_id"] for row in after} <= wide, question
        # A family with at most CAP notes in the uncapped pool keeps every one of them.
        counts = Counter(row["family"] for row in before)
        kept = {row["note_id"] for row in after}
        assert all(row["note_id"] in kept for row in before if counts[row["family"]] <= CAP), question
        uncapped = Counter(row["family"] for row in before)
        if max(uncapped.values()) > 2 * CAP:
            assert families != uncapped  # the cap did something where it had to


def test_a_cap_as_large_as_k_changes_nothing(journal: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    params = pgmem.StageOneParams(k_dense=10, k_lex=10, lex_max_postings=200, family_candidates=None)
    for question in QUESTIONS:
        hints = build_hints(question)
        expected = _pool(journal, hashing, question, hints, params)
        got = _pool(journal, hashing, question, hints, dataclasses.replace(params, family_candidates=10))
        assert {row["note_id"] for row in got} == {row["note_id"] for row in expected}


def test_a_cap_below_one_is_refused(journal: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    with pytest.raises(pgmem.ConfigurationError, match="family_candidates"):
        pgmem.StageOneParams(family_candidates=0)
    question = QUESTIONS[0]
    arguments = stage_one_arguments(
        NAMESPACE, hashing.name, hashing.embed([question])[0], question, build_hints(question), pgmem.StageOneParams()
    )
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="family_candidates must be >= 1"):
        journal.execute(_call("pgmem"), {**arguments, "family_candidates": 0})


def test_a_family_alone_in_its_namespace_loses_nothing(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    """One family (an agent's own notes, a single source): the cap has nothing to spread."""
    texts = [f"Entry {i}: the lantern by the river was lit on day {i}." for i in range(80)]
    pgmem.ingest(conn, make_spans(texts, family="only"), namespace="alone", embedder=hashing)
    conn.row_factory = dict_row  # type: ignore[assignment]
    question = "When was the lantern by the river lit?"
    arguments = stage_one_arguments(
        "alone", hashing.name, hashing.embed([question])[0], question, build_hints(question), pgmem.StageOneParams()
    )
    capped = conn.execute(_call("pgmem"), {**arguments, "family_candidates": 3}).fetchall()
    plain = conn.execute(_call("pgmem"), {**arguments, "family_candidates": None}).fetchall()
    assert len(capped) >= 50
    assert {row["note_id"] for row in capped} == {row["note_id"] for row in plain}


def test_the_spreading_function(journal: psycopg.Connection[Any]) -> None:
    rows = journal.execute(
        "SELECT note_id, family FROM pgmem.notes WHERE namespace = %s ORDER BY note_id", (NAMESPACE,)
    ).fetchall()
    ids = [row["note_id"] for row in rows]
    family = {row["note_id"]: row["family"] for row in rows}
    families = [family[note] for note in ids]

    def spread(cap: int | None, keep: int) -> dict[str, Any]:
        row = journal.execute(
            "SELECT * FROM pgmem.family_spread_v1(%s, %s::uuid[], %s, %s)", (NAMESPACE, ids, cap, keep)
        ).fetchone()
        assert row is not None
        return dict(row)

    assert spread(None, 25)["notes"] == ids[:25]
    within, past, seen = [], [], Counter[str]()
    for note in ids:
        seen[family[note]] += 1
        (within if seen[family[note]] <= 2 else past).append(note)
    # 7 families x 2 first, in input order, then everything else in input order.
    got = spread(2, 300)
    assert got["notes"] == within + past
    assert (got["under_cap"], got["other_notes"]) == (14, 0)
    assert got["crowding"] == sorted(set(families))
    assert spread(2, 5)["notes"] == within[:5]


def test_the_spreading_function_reads_only_the_callers_namespace(
    tenants: psycopg.Connection[Any], dsn: str, roles: dict[str, str]
) -> None:
    """An attacker cannot learn another tenant's families through it, nor call it without a pgmem role."""
    hidden = [row[0] for row in tenants.execute("SELECT note_id FROM pgmem.notes WHERE namespace = 'b'")]
    own = [row[0] for row in tenants.execute("SELECT note_id FROM pgmem.notes WHERE namespace = 'a'")]
    assert hidden and own
    probe = "SELECT notes, crowding FROM pgmem.family_spread_v1(%s, %s::uuid[], 1, 10)"
    with as_role(dsn, roles["reader"], "a") as reader:
        assert reader.execute(probe, ("b", hidden)).fetchone() == ([], [])
        assert reader.execute(probe, ("a", hidden)).fetchone() == ([], [])
        assert reader.execute(probe, ("a", own)).fetchone() == (own[:1], [])
        # Another tenant's statistics stay hidden too: its note count reads as nothing.
        assert reader.execute("SELECT pgmem.notes_outside_v1('b', '{}')").fetchone() == (None,)
    with as_role(dsn, roles["stranger"], "a") as stranger, pytest.raises(psycopg.errors.InsufficientPrivilege):
        stranger.execute(probe, ("a", own))
