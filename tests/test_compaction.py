"""The compactor on a real database with a scripted chat model: triggers, archive, cited
summaries, rebuild, recall and telemetry (with row-level security)."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
import pytest
from helpers import as_role

from pgmem import ConfigurationError, InputError, forget
from pgmem.compaction import ChatResult, Compactor, Gates
from pgmem.compaction.controller import CONTINUE_TEXT
from pgmem.compaction.policy import SWITCH_STRATEGY_HINT
from pgmem.compaction.summary import UNCITED
from pgmem.embeddings import HashingEmbedder
from pgmem.errors import ChatError

Reply = str | Exception | Callable[[Sequence[Mapping[str, Any]]], str]

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a research agent."},
    {"role": "user", "content": "Find the capital of Australia and its population."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "capital"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "Canberra is the capital of Australia."},
    {"role": "assistant", "content": "The capital is Canberra. Next I look up its population."},
]

FIRE = json.dumps(
    {
        "C1": {"answer": "yes", "evidence": "Canberra is the capital of Australia."},
        "C2": {"answer": "yes", "evidence": "The capital is Canberra."},
        "C3": {"answer": "yes", "evidence": "Next I look up its population"},
        "N1": {"answer": "no", "evidence": ""},
    }
)
CONTINUE = json.dumps({"C1": {"answer": "no"}, "C2": {"answer": "no"}, "C3": {"answer": "no"}, "N1": {"answer": "no"}})
STUCK = json.dumps(
    {
        "C1": {"answer": "yes", "evidence": "Canberra"},
        "C2": {"answer": "yes", "evidence": "Canberra"},
        "C3": {"answer": "yes", "evidence": "Canberra"},
        "N1": {"answer": "yes", "evidence": "capital"},
    }
)


def refs_in(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    text = "\n".join(str(m["content"]) for m in messages)
    return re.findall(r"^\[#([0-9a-f]+)\]", text, re.MULTILINE)


def cited_summary(messages: Sequence[Mapping[str, Any]]) -> str:
    refs = refs_in(messages)
    cite = f" [#{refs[-1]}]" if refs else ""
    return f"The capital of Australia is Canberra{cite}.\nOpen questions:\nWhat is the population of Canberra?"


class ScriptedChat:
    """A chat model answering from a script: text, a function of the messages, or an error."""

    model = "scripted"

    def __init__(self, replies: Sequence[Reply]) -> None:
        self.replies = list(replies)
        self.calls: list[list[Mapping[str, Any]]] = []

    def complete(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None) -> ChatResult:
        self.calls.append(list(messages))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        text = reply(messages) if callable(reply) else reply
        return ChatResult(text, 100, 20, self.model, 2.5)


def make(conn: psycopg.Connection[Any], chat: ScriptedChat, hashing: HashingEmbedder, **kw: Any) -> Compactor:
    kw.setdefault("gates", Gates(min_round=1))
    kw.setdefault("context_window", 100_000)
    return Compactor(conn, chat=chat, namespace=kw.pop("namespace", "agent-1"), embedder=hashing, **kw)


def events(conn: psycopg.Connection[Any], namespace: str = "agent-1") -> list[dict[str, Any]]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(
            "SELECT * FROM pgmem.compaction_events WHERE namespace = %s ORDER BY event_id", (namespace,)
        ).fetchall()


def archived_notes(conn: psycopg.Connection[Any], namespace: str = "agent-1") -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT note_id::text, text, family, metadata FROM pgmem.notes WHERE namespace = %s"
        " AND metadata->>'kind' = 'archived_message' ORDER BY note_id",
        (namespace,),
    ).fetchall()


# --- triggers ------------------------------------------------------------------------------


def test_rubric_continue_removes_the_probe_and_logs_it(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    chat = ScriptedChat([CONTINUE])
    compactor = make(conn, chat, hashing)
    assert compactor.step(MESSAGES) == MESSAGES
    assert chat.calls[0][:-1] == MESSAGES and "C1:" in chat.calls[0][-1]["content"]
    [row] = events(conn)
    assert (row["kind"], row["fired"], row["reason"], row["raw_verdict"]) == ("probe", False, None, CONTINUE)
    assert row["predicates"]["answers"][0]["name"] == "C1" and row["gates"]["min_round"] == 1
    assert (row["probe_prompt_tokens"], row["probe_completion_tokens"], row["model"]) == (100, 20, "scripted")
    assert archived_notes(conn) == []


def test_gates_closed_means_no_probe(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    chat = ScriptedChat([CONTINUE])
    compactor = make(conn, chat, hashing, gates=Gates(min_round=2, probe_period=2))
    assert compactor.step(MESSAGES) == MESSAGES and chat.calls == []  # round 1 < min_round
    compactor.step(MESSAGES)  # round 2: probe
    compactor.step(MESSAGES)  # one round since the probe < probe_period
    assert len(chat.calls) == 1 and len(events(conn)) == 1


def test_rubric_fires_archives_summarises_and_rebuilds(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    chat = ScriptedChat([FIRE, cited_summary])
    compactor = make(conn, chat, hashing)
    live = compactor.step(MESSAGES)
    # [system, task, summary with citations, evidence pack, continue]
    assert live[:2] == MESSAGES[:2]
    assert live[2]["role"] == "assistant" and "Canberra [#" in live[2]["content"] and "recall" in live[2]["content"]
    assert live[3]["role"] == "user" and live[3]["content"].startswith("Evidence from memory")
    assert "Canberra is the capital of Australia." in live[3]["content"]
    assert live[4] == {"role": "user", "content": CONTINUE_TEXT} and len(live) == 5
    notes = archived_notes(conn)
    assert {n[1] for n in notes} == {
        'call search({"q": "capital"})',
        "Canberra is the capital of Australia.",
        "The capital is Canberra. Next I look up its population.",
    }
    assert {n[2] for n in notes} == {"search", "assistant"}  # the call and its observation: the tool's family
    meta = notes[0][3]
    assert meta["trajectory"] == compactor.trajectory_id and meta["generation"] == 0 and meta["round"] == 1
    probe, compaction = events(conn)
    assert probe["kind"] == "probe" and probe["fired"] and probe["reason"] == "rubric"
    assert compaction["kind"] == "compaction" and compaction["reason"] == "rubric" and compaction["archived"] == 3
    assert compaction["tokens_before"] > 0 and compaction["tokens_after"] > 0
    assert compaction["summary_prompt_tokens"] == 100 and compaction["summary_note_id"] is not None
    assert compactor.generation == 1 and compactor.last_event is not None and compactor.last_event.kind == "compaction"


def test_stuck_returns_the_switch_strategy_hint(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(conn, ScriptedChat([STUCK]), hashing)
    live = compactor.step(MESSAGES)
    assert live == [*MESSAGES, {"role": "user", "content": SWITCH_STRATEGY_HINT}]
    assert events(conn)[0]["fired"] is False


def test_backstop_bypasses_the_rubric(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    chat = ScriptedChat([cited_summary])  # no probe answer scripted: a probe would fail
    compactor = make(conn, chat, hashing, context_window=100, backstop_fraction=0.5)
    live = compactor.step(MESSAGES)
    [row] = events(conn)
    assert row["reason"] == "backstop" and len(chat.calls) == 1 and live[-1]["content"] == CONTINUE_TEXT
    assert row["gates"]["backstop"] == 50 and row["prompt_tokens"] >= 50


@pytest.mark.parametrize("policy", ["fixed", "delete_all", "keep_last"])
def test_threshold_baselines(conn: psycopg.Connection[Any], hashing: HashingEmbedder, policy: str) -> None:
    chat = ScriptedChat([cited_summary])
    compactor = make(conn, chat, hashing, policy=policy, rebuild="reset", fixed_threshold=50, keep_last=1)
    live = compactor.step(MESSAGES)
    [row] = events(conn)
    assert row["reason"] == "fixed" and row["policy"] == policy and row["archived"] == 0
    assert live[:2] == MESSAGES[:2]
    if policy == "fixed":
        assert live[2]["role"] == "assistant" and live[3]["content"] == CONTINUE_TEXT and len(chat.calls) == 1
    elif policy == "delete_all":
        assert live[2:] == [{"role": "user", "content": CONTINUE_TEXT}] and chat.calls == []
    else:
        assert live[2:] == MESSAGES[4:] and chat.calls == []


def test_keep_last_never_orphans_a_tool_result(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(
        conn, ScriptedChat([]), hashing, policy="keep_last", rebuild="reset", fixed_threshold=50, keep_last=1
    )
    live = compactor.step(MESSAGES[:4])  # the last message is a tool result
    assert live[2:] == MESSAGES[2:4]


def test_below_threshold_and_none_do_nothing(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    for policy in ("fixed", "none"):
        compactor = make(conn, ScriptedChat([]), hashing, policy=policy, fixed_threshold=10_000)
        assert compactor.step(MESSAGES) == MESSAGES
    tiny = make(conn, ScriptedChat([]), hashing, policy="none", context_window=10)  # no backstop for none
    assert tiny.step(MESSAGES) == MESSAGES
    assert events(conn) == []


def test_free_tool_compacts_when_the_model_calls_it(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(conn, ScriptedChat([cited_summary]), hashing, policy="free_tool")
    assert [t["function"]["name"] for t in compactor.tools] == ["recall", "compact_context"]
    assert compactor.step(MESSAGES) == MESSAGES
    call = {"id": "c9", "type": "function", "function": {"name": "compact_context", "arguments": "{}"}}
    live = compactor.step([*MESSAGES, {"role": "assistant", "content": "", "tool_calls": [call]}])
    assert events(conn)[0]["reason"] == "tool" and live[-1]["content"] == CONTINUE_TEXT


def test_manual_compaction_and_bad_reason(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(conn, ScriptedChat([cited_summary]), hashing, policy="none")
    compactor.compact(MESSAGES)
    assert events(conn)[0]["reason"] == "manual"
    with pytest.raises(InputError, match="reason"):
        compactor.compact(MESSAGES, reason="whim")


# --- archive -------------------------------------------------------------------------------


def test_re_archiving_is_a_no_op(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(conn, ScriptedChat([cited_summary, cited_summary]), hashing, policy="none")
    compactor.compact(MESSAGES)
    first = archived_notes(conn)
    compactor.compact(MESSAGES)  # the same messages dropped again (e.g. after a retry)
    assert archived_notes(conn) == first and len(first) == 3


LATER = [
    {"role": "assistant", "content": "Now the population of Canberra."},
    {"role": "tool", "tool_call_id": "call_2", "name": "search", "content": "Canberra has 467,000 inhabitants. " * 70},
]


def archive_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT document_id, span_start, span_end, text, metadata, note_id::text, links::text[] FROM pgmem.notes"
        " WHERE namespace = 'agent-1' AND metadata->>'kind' = 'archived_message' ORDER BY span_start"
    ).fetchall()


def test_a_trajectory_is_one_document_its_messages_spans_in_order(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    compactor = make(conn, ScriptedChat([cited_summary, cited_summary]), hashing, policy="none")
    live = compactor.compact(MESSAGES)
    compactor.compact([*live, *LATER])  # generation 1 drops the later messages, not pgmem's own
    rows = archive_rows(conn)
    assert {r[0] for r in rows} == {f"{compactor.trajectory_id}:archive"}
    # Trajectory order, generations in sequence; the long observation is two pieces of one message.
    assert [(r[4]["generation"], r[4]["position"], r[4]["part"]) for r in rows] == [
        (0, 0, 0), (0, 1, 0), (0, 2, 0), (1, 3, 0), (1, 4, 0), (1, 4, 1)
    ]  # fmt: skip
    assert rows[2][3] == MESSAGES[4]["content"] and rows[3][3] == LATER[0]["content"]
    assert " ".join(r[3] for r in rows[4:]).split() == LATER[1]["content"].split()
    # Offsets: increasing, never overlapping, one gap between messages; pieces keep their offsets.
    assert all(a[2] < b[1] for a, b in itertools.pairwise(rows))
    assert [b[1] - a[2] for a, b in itertools.pairwise(rows[:4])] == [1, 1, 1]
    assert rows[4][4]["digest"] == rows[5][4]["digest"] != rows[3][4]["digest"]
    # Neighbours across generations: the first message of generation 1 links to the last of generation 0.
    assert rows[2][5] in rows[3][6]
    # A restarted agent (a new compactor, same trajectory) continues the document after its end.
    again = make(conn, ScriptedChat([cited_summary]), hashing, policy="none", trajectory_id=compactor.trajectory_id)
    extra = {"role": "assistant", "content": "Done: Canberra, about 467,000 people."}
    again.compact([*MESSAGES[:2], *LATER, extra])  # LATER again: a no-op; only the new message is written
    after = archive_rows(conn)
    assert after[:-1] == rows and after[-1][3] == extra["content"] and after[-1][1] == rows[-1][2] + 1


def test_a_crash_between_archive_and_reset_loses_nothing(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    failing = ScriptedChat([ChatError("summary model down")])
    compactor = make(conn, failing, hashing, policy="none")
    with pytest.raises(ChatError):
        compactor.compact(MESSAGES)
    # The archive is written; the caller still holds every message; nothing was reset.
    assert len(archived_notes(conn)) == 3 and compactor.generation == 0 and events(conn) == []
    compactor.chat = ScriptedChat([cited_summary])
    live = compactor.compact(MESSAGES)
    assert len(archived_notes(conn)) == 3 and live[-1]["content"] == CONTINUE_TEXT
    assert events(conn)[0]["archived"] == 3


def test_archive_in_one_transaction_of_the_callers(dsn: str, hashing: HashingEmbedder) -> None:
    with psycopg.connect(dsn) as own:  # not autocommit: pgmem must neither commit nor roll back
        compactor = make(own, ScriptedChat([cited_summary]), hashing, policy="none")
        compactor.compact(MESSAGES)
        assert own.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert len(archived_notes(own)) == 3
        own.rollback()
        assert archived_notes(own) == [] and events(own) == []


# --- cited summaries -----------------------------------------------------------------------


def test_summary_note_is_linked_to_what_it_cites(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(conn, ScriptedChat([cited_summary]), hashing, policy="none")
    compactor.compact(MESSAGES)
    event = compactor.last_event
    assert event is not None and event.summary_note_id is not None
    row = conn.execute(
        "SELECT family, role, metadata FROM pgmem.notes WHERE namespace = 'agent-1' AND note_id = %s",
        (event.summary_note_id,),
    ).fetchone()
    assert row is not None and row[0] == "compaction-summary" and row[1] == "summary"
    archived_ids = {n[0] for n in archived_notes(conn)}
    assert row[2]["cites"] and set(row[2]["cites"]) <= archived_ids
    assert events(conn)[0]["citations"]["cited"] == row[2]["cites"]


def test_bad_citations_are_re_asked_once_then_flagged(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    bad = "Canberra is the capital [#deadbeef]. Its population is unknown so far."
    chat = ScriptedChat([bad, bad])
    compactor = make(conn, chat, hashing, policy="none")
    live = compactor.compact(MESSAGES)
    assert len(chat.calls) == 2 and "[#deadbeef]" in chat.calls[1][-1]["content"]
    summary = live[2]["content"]
    assert "[#deadbeef]" not in summary and summary.count(UNCITED) == 2
    citations = events(conn)[0]["citations"]
    assert citations["reasked"] and citations["rejected"] == ["deadbeef"] and citations["flagged"] == 2
    assert citations["cited"] == []


def test_a_re_ask_that_fixes_the_citations_is_kept(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    chat = ScriptedChat(["Canberra is the capital [#deadbeef].", cited_summary])
    compactor = make(conn, chat, hashing, policy="none")
    live = compactor.compact(MESSAGES)
    assert UNCITED not in live[2]["content"]
    citations = events(conn)[0]["citations"]
    assert citations["reasked"] and citations["rejected_after_reask"] == [] and len(citations["cited"]) == 1


def test_reset_rebuild_has_no_archive_no_citations(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    chat = ScriptedChat(["Canberra is the capital. Open questions:\nPopulation?"])
    compactor = make(conn, chat, hashing, policy="none", rebuild="reset")
    live = compactor.compact(MESSAGES)
    assert [m["role"] for m in live] == ["system", "user", "assistant", "user"]
    assert "[#" not in chat.calls[0][-1]["content"] and archived_notes(conn) == []
    assert compactor.tools == []


# --- recall --------------------------------------------------------------------------------


def test_recall_by_id_ref_and_query(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(conn, ScriptedChat([cited_summary]), hashing, policy="none")
    compactor.compact(MESSAGES)
    notes = archived_notes(conn)
    by_id = compactor.recall(note_ids=[notes[0][0]])
    assert [n.text for n in by_id] == [notes[0][1]]
    assert [n.note_id for n in compactor.recall(note_ids=[f"[#{notes[1][0][:8]}]"])] == [notes[1][0]]
    found = compactor.recall(query="capital of Australia Canberra")
    assert "Canberra is the capital of Australia." in [n.text for n in found]
    call = {"id": "r1", "function": {"name": "recall", "arguments": json.dumps({"note_ids": [notes[0][0]]})}}
    answer = compactor.handle_tool_call(call)
    assert answer["role"] == "tool" and answer["tool_call_id"] == "r1" and notes[0][1] in answer["content"]
    with pytest.raises(InputError, match="note_ids"):
        compactor.recall(note_ids=["not-an-id!"])
    with pytest.raises(InputError):
        compactor.recall()


# --- telemetry -----------------------------------------------------------------------------


def test_telemetry_views(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(conn, ScriptedChat([CONTINUE, FIRE, cited_summary]), hashing)
    compactor.step(MESSAGES)
    compactor.step(MESSAGES)
    mix = conn.execute("SELECT policy, reason, compactions, share FROM pgmem.compaction_trigger_mix_v1").fetchall()
    assert mix == [("rubric", "rubric", 1, 1.0)]
    ratio = conn.execute("SELECT compactions, mean_ratio FROM pgmem.compaction_ratio_v1").fetchone()
    assert ratio is not None and ratio[0] == 1 and ratio[1] > 0
    cost = conn.execute(
        "SELECT generations, probes, compactions, probe_tokens, summary_tokens FROM pgmem.compaction_cost_v1"
    ).fetchone()
    assert cost == (1, 2, 1, 240, 120)
    per_generation = conn.execute(
        "SELECT generation, probes, probes_fired, compactions FROM pgmem.compaction_cost_by_generation_v1"
    ).fetchall()
    assert per_generation == [(0, 2, 1, 1)]


def test_readers_see_only_their_namespace_telemetry(
    dsn: str, tenants: psycopg.Connection[Any], roles: dict[str, str], hashing: HashingEmbedder
) -> None:
    for namespace in ("a", "b"):
        make(tenants, ScriptedChat([CONTINUE]), hashing, namespace=namespace).step(MESSAGES)
    # A writer of 'a' logs through the compactor (archive included).
    with as_role(dsn, roles["writer"], "a") as writer:
        writer.autocommit = True
        make(writer, ScriptedChat([cited_summary]), hashing, namespace="a", policy="none").compact(MESSAGES)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            writer.execute(
                "INSERT INTO pgmem.compaction_log (namespace, trajectory_id, generation, round, kind, policy,"
                " rebuild, fired, prompt_tokens, logged_by) VALUES ('a', 't', 0, 0, 'probe', 'rubric', 'pgmem',"
                " false, 1, 'someone_else')"
            )
    with as_role(dsn, roles["reader"], "a") as reader:
        seen = reader.execute("SELECT DISTINCT namespace FROM pgmem.compaction_events").fetchall()
        assert seen == [("a",)]
        assert reader.execute("SELECT count(*) FROM pgmem.compaction_log").fetchone() == (2,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute(
                "INSERT INTO pgmem.compaction_log (namespace, trajectory_id, generation, round, kind, policy,"
                " rebuild, fired, prompt_tokens) VALUES ('a', 't', 0, 0, 'probe', 'rubric', 'pgmem', false, 1)"
            )
    with as_role(dsn, roles["stranger"], "a") as stranger, pytest.raises(psycopg.errors.InsufficientPrivilege):
        stranger.execute("SELECT count(*) FROM pgmem.compaction_events")


# --- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"policy": "sometimes"}, "policy must be one of"),
        ({"rebuild": "magic"}, "rebuild must be one of"),
        ({"rubric": "vibes"}, "rubric must be one of"),
        ({"gates": Gates(min_prompt_tokens=40_000), "context_window": 128_000}, "min_prompt_tokens=40000.*38400"),
        ({"fixed_threshold": 90_000, "context_window": 128_000}, "fixed_threshold=90000.*38400"),
        ({"keep_last": 0}, "keep_last"),
        ({"summary_max_tokens": 1}, "summary_max_tokens"),
    ],
)
def test_bad_configuration_is_refused(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder, kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        make(conn, ScriptedChat([]), hashing, **kwargs)


def test_forgetting_a_trajectorys_notes_erases_its_telemetry(
    conn: psycopg.Connection[Any], hashing: HashingEmbedder
) -> None:
    kept = make(conn, ScriptedChat([CONTINUE]), hashing)
    kept.step(MESSAGES)
    gone = make(conn, ScriptedChat([FIRE, cited_summary]), hashing)
    gone.step(MESSAGES)
    ids = [n[0] for n in archived_notes(conn)]
    forget(conn, namespace="agent-1", note_ids=ids[:1], reason="user asked")
    assert {e["trajectory_id"] for e in events(conn)} == {kept.trajectory_id}


def test_recall_by_query_fits_its_token_budget(conn: psycopg.Connection[Any], hashing: HashingEmbedder) -> None:
    compactor = make(conn, ScriptedChat([cited_summary]), hashing, policy="none")
    compactor.compact(MESSAGES)
    everything = compactor.recall(query="Canberra capital population", limit=10)
    assert len(everything) >= 2
    budget = compactor.counter.text(compactor.render(everything[:1]))
    fitted = compactor.recall(query="Canberra capital population", limit=10, token_budget=budget)
    assert fitted == everything[:1]
    assert compactor.counter.text(compactor.render(fitted)) <= budget
