"""pgmem.feedback(): judgements stored atomically, family totals kept, the beta mode reads them."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from helpers import make_spans

import pgmem
from pgmem.embeddings import HashingEmbedder

# Two families say the same thing about the bridge; the 'tabloid' family is as relevant
# as 'wire' on the words alone, so only feedback can tell them apart.
TEXTS = {
    "wire": [f"The harbour bridge opened to traffic on Monday, report {i}." for i in range(4)],
    "tabloid": [f"The harbour bridge opened to traffic on Monday, rumour {i}." for i in range(4)],
    "misc": [
        "Ferries kept running across the harbour all week.",
        "The city council met on Tuesday about bus lanes.",
        "A new bakery opened near the bridge.",
        "Traffic was light on Monday morning.",
    ],
}
QUESTION = "When did the harbour bridge open to traffic?"
# The wire and tabloid notes are templated copies that repeat the question: the family
# alarm (test_alarm.py) quarantines both in every mode but relevance, so the tests of what
# the beta mode learns switch it off.
UNGUARDED = pgmem.CalibrationParams(alarm_threshold=None)


@pytest.fixture
def store(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> psycopg.Connection[Any]:
    for family, texts in TEXTS.items():
        pgmem.ingest(conn, make_spans(texts, document_id=f"doc-{family}", family=family), embedder=hashing)
    return conn


def _ids(conn: psycopg.Connection[Any], family: str) -> list[str]:
    rows = conn.execute("SELECT note_id FROM pgmem.notes WHERE family = %s ORDER BY note_id", (family,))
    return [str(row[0]) for row in rows]


def _totals(conn: psycopg.Connection[Any]) -> dict[str, tuple[float, float]]:
    rows = conn.execute("SELECT family, helpful, unhelpful FROM pgmem.family_reliability ORDER BY family")
    return {family: (helpful, unhelpful) for family, helpful, unhelpful in rows}


def test_feedback_is_stored_and_summed_per_family(store: psycopg.Connection[Any]) -> None:
    wire, tabloid = _ids(store, "wire"), _ids(store, "tabloid")
    result = pgmem.feedback(store, helpful=wire[:2], unhelpful=tabloid[:3], weight=0.5)
    assert result.recorded == 5
    assert result.families == {"tabloid": (0.0, 1.5), "wire": (1.0, 0.0)}
    pgmem.feedback(store, helpful=[tabloid[3]])
    assert _totals(store) == {"tabloid": (1.0, 1.5), "wire": (1.0, 0.0)}
    assert store.execute(
        "SELECT feedback_helpful, feedback_unhelpful FROM pgmem.namespaces WHERE namespace = 'default'"
    ).fetchone() == (2.0, 1.5)
    rows = store.execute("SELECT note_id::text, family, helpful, weight FROM pgmem.feedback ORDER BY feedback_id")
    assert {(r[0], r[1], r[2], r[3]) for r in rows} >= {
        (wire[0], "wire", True, 0.5),
        (tabloid[3], "tabloid", True, 1.0),
    }


def test_an_unknown_note_records_nothing(store: psycopg.Connection[Any]) -> None:
    wire = _ids(store, "wire")
    missing = "00000000-0000-4000-8000-000000000001"
    with pytest.raises(pgmem.InputError, match=r"1 note id.* not notes of namespace default"):
        pgmem.feedback(store, helpful=wire, unhelpful=[missing])
    assert _totals(store) == {}
    assert store.execute("SELECT count(*) FROM pgmem.feedback").fetchone() == (0,)


def test_notes_of_another_namespace_are_unknown(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    pgmem.ingest(store, make_spans(["elsewhere"], document_id="x", family="other"), namespace="other", embedder=hashing)
    with pytest.raises(pgmem.InputError, match="not notes of namespace default"):
        pgmem.feedback(store, helpful=_ids(store, "other"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "at least one"),
        ({"helpful": "not-a-list"}, "list of note ids"),
        ({"helpful": ["nope"]}, r"helpful\[0\] must be a UUID"),
        ({"helpful": ["00000000-0000-4000-8000-000000000001"] * 2}, "twice"),
        ({"helpful": ["00000000-0000-4000-8000-000000000001"], "weight": 0}, "weight"),
        ({"helpful": ["00000000-0000-4000-8000-000000000001"], "weight": float("nan")}, "weight"),
        ({"helpful": ["00000000-0000-4000-8000-000000000001"], "pack_id": "p"}, "pack_id"),
        (
            {
                "helpful": ["00000000-0000-4000-8000-000000000001"],
                "unhelpful": ["00000000-0000-4000-8000-000000000001"],
            },
            "both helpful and unhelpful",
        ),
    ],
)
def test_bad_feedback_arguments_are_input_errors(
    conn: psycopg.Connection[Any], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(pgmem.InputError, match=message):
        pgmem.feedback(conn, **kwargs)


def test_beta_without_feedback_packs_like_relevance(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    beta = pgmem.pack(store, QUESTION, mode="beta", embedder=hashing, calibration=UNGUARDED)
    relevance = pgmem.pack(store, QUESTION, mode="relevance", embedder=hashing)
    assert [i.note_id for i in beta.items] == [i.note_id for i in relevance.items]
    assert all(f.regularizer == 0.0 for f in beta.diagnostics.families)


def test_beta_learns_from_feedback_and_reset_forgets(store: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    # Alarm off: what is measured here is what the beta mode learns (see UNGUARDED).
    before = pgmem.pack(store, QUESTION, mode="beta", budget=4, embedder=hashing, calibration=UNGUARDED)
    calibrated_before = pgmem.pack(store, QUESTION, budget=4, embedder=hashing, calibration=UNGUARDED)
    assert not before.diagnostics.degraded
    for _ in range(5):
        pgmem.feedback(store, helpful=_ids(store, "wire"), unhelpful=_ids(store, "tabloid"))
    after = pgmem.pack(store, QUESTION, mode="beta", budget=4, embedder=hashing, log=True, calibration=UNGUARDED)
    tabloid = after.diagnostics.family("tabloid")
    assert tabloid.feedback_unhelpful == 20.0
    assert tabloid.feedback_z < 0 < after.diagnostics.family("wire").feedback_z
    assert tabloid.regularizer < 0 < after.diagnostics.family("wire").regularizer
    assert [i.family for i in after.items].count("wire") == 4
    assert [i.family for i in before.items].count("wire") < 4
    logged = store.execute(
        "SELECT feedback_unhelpful, feedback_z < 0, regularizer < 0 FROM pgmem.pack_log_families"
        " WHERE pack_id = %s AND family = 'tabloid'",
        (after.pack_id,),
    ).fetchone()
    assert logged == (20.0, True, True)
    # The calibrated mode does not read feedback: the same pack as before it was given.
    calibrated = pgmem.pack(store, QUESTION, budget=4, embedder=hashing, calibration=UNGUARDED)
    assert [i.note_id for i in calibrated.items] == [i.note_id for i in calibrated_before.items]
    assert calibrated.diagnostics.families[0].regularizer == calibrated_before.diagnostics.families[0].regularizer
    assert pgmem.reset_feedback(store, namespace="default", families=["tabloid"]) == 20
    assert set(_totals(store)) == {"wire"}
    assert pgmem.reset_feedback(store, namespace="default") == 20
    assert _totals(store) == {}
    again = pgmem.pack(store, QUESTION, mode="beta", budget=4, embedder=hashing, calibration=UNGUARDED)
    assert [i.note_id for i in again.items] == [i.note_id for i in before.items]


def test_the_feedback_rides_in_the_one_stage_one_statement(
    store: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    pgmem.feedback(store, unhelpful=_ids(store, "tabloid"))
    from pgmem.db.queries import query

    # The statement calls stage_one_pool_v1, which joins the feedback to stage one's rows.
    assert "pgmem.stage_one_pool_v1" in query("stage_one")
    (definition,) = store.execute("SELECT pg_get_functiondef('pgmem.stage_one_pool_v1'::regproc)").fetchone()
    assert "pgmem.family_reliability" in definition
    pack = pgmem.pack(store, QUESTION, mode="beta", embedder=hashing)
    assert pack.diagnostics.family("tabloid").feedback_unhelpful == 4.0
