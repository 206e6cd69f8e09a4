"""pgmem eval-compaction on a tiny slice of the LoCoMo dev data (the stand-in summariser)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import FakeChatServer

from pgmem import ConfigurationError
from pgmem.cli import main
from pgmem.compaction.policy import PROBE_OPENING, SEARCH_RUBRIC, build_probe, parse_verdict
from pgmem.compaction.tokens import TokenCounter
from pgmem.embeddings import HashingEmbedder
from pgmem.eval.compaction import (
    ANSWER_MAX_TOKENS,
    ANSWER_PROMPT,
    PACK_ONLY,
    SYSTEMS,
    CompactionEvalConfig,
    ExtractiveChat,
    render_compaction_markdown,
    run_compaction_eval,
)
from pgmem.eval.datasets import load_locomo
from pgmem.eval.metrics import contains_answer, normalise_answer

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev5.json"


@pytest.fixture
def tiny_locomo(tmp_path: Path) -> Path:
    """The first conversation cut to its first four sessions and their questions."""
    if not LOCOMO.is_file():
        pytest.skip(f"{LOCOMO} not available")
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    conversation = sample["conversation"]
    keep = {f"session_{n}" for n in range(1, 5)}
    for key in list(conversation):
        session = re.match(r"^(session_\d+)", key)
        if session and session.group(1) not in keep:
            del conversation[key]
    sample["qa"] = [
        qa for qa in sample["qa"] if all(int(e.split(":")[0][1:]) <= 4 for e in qa["evidence"] if e.startswith("D"))
    ]
    path = tmp_path / "locomo" / "locomo_dev5.json"
    path.parent.mkdir()
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def test_stand_in_probe_answers_with_evidence_from_the_trajectory() -> None:
    chat = ExtractiveChat(TokenCounter())
    trajectory = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
        {"role": "user", "content": "Caroline: I went to the support group on 7 May."},
        {"role": "user", "content": "[session 1 ended]"},
    ]
    probe = {"role": "user", "content": build_probe(SEARCH_RUBRIC)}
    text = "\n".join(str(m["content"]) for m in trajectory)
    assert parse_verdict(chat.complete([*trajectory, probe]).text, SEARCH_RUBRIC, text).fire
    assert not parse_verdict(chat.complete([*trajectory[:3], probe]).text, SEARCH_RUBRIC, text).fire


def test_stand_in_summary_is_extractive_cited_and_capped() -> None:
    chat = ExtractiveChat(TokenCounter())
    request = (
        "Task: t\n\nExcerpt:\n[#0a1b2c3d] user: Caroline: I moved to Boston in 2019. It was cold.\n"
        "[#ffee0011] user: Melanie: ok\n[#12345678] user: [session 1 ended]"
    )
    summary = chat.complete([{"role": "user", "content": request}], max_tokens=200).text
    assert summary == "Caroline: I moved to Boston in 2019. [#0a1b2c3d] It was cold. [#0a1b2c3d]"
    assert chat.complete([{"role": "user", "content": request}], max_tokens=3).text == ""


def test_eval_compaction_on_a_tiny_slice(conn: psycopg.Connection[Any], tiny_locomo: Path) -> None:
    corpus = load_locomo(tiny_locomo)
    report = run_compaction_eval(conn, corpus, HashingEmbedder(), CompactionEvalConfig(caps=(600,)))
    rows = {row["policy"]: row for row in report["rows"]}
    assert list(rows) == [*(label for label, _, _ in SYSTEMS), PACK_ONLY]
    for row in rows.values():
        assert set(row) == {"cap", "policy", "evidence_recall", "context_tokens"} and row["cap"] == 600
        assert 0 <= row["evidence_recall"] <= 100 and row["context_tokens"] > 0
    # The live cap holds for every policy that compacts or truncates (one message of slack).
    assert all(rows[label]["context_tokens"] <= 700 for label, _, _ in SYSTEMS), rows
    assert report["compactions"]["rubric+pgmem@600"] > 0
    archive = report["archive"]["rubric+pgmem@600"]
    assert archive["dropped"] > 0 and archive["recovered"] == archive["dropped"]
    assert rows["rubric+pgmem"]["evidence_recall"] > rows["rubric"]["evidence_recall"]
    assert report["drift"]["rubric+pgmem@600"]
    logged = conn.execute(
        "SELECT count(*) FROM pgmem.compaction_events WHERE kind = 'compaction' AND policy = 'rubric'"
    ).fetchone()
    assert (
        logged is not None
        and logged[0] == report["compactions"]["rubric@600"] + report["compactions"]["rubric+pgmem@600"]
    )


def test_eval_compaction_command(
    dsn: str, tiny_locomo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["eval-compaction", "locomo", "--data-dir", str(tiny_locomo.parent.parent), "--out", str(out)]
    argv += ["--caps", "800", "--systems", "rubric", "rubric+pgmem", "--dsn", dsn, "--embedder", "hashing"]
    assert main(argv) == 0
    rows = json.loads((out / "compaction.json").read_text(encoding="utf-8"))
    assert [r["policy"] for r in rows] == ["rubric", "rubric+pgmem"]
    assert (out / "compaction.png").stat().st_size > 0 and (out / "compaction.md").is_file()
    assert "stand-in" in capsys.readouterr().out


def test_bad_eval_configuration() -> None:
    with pytest.raises(ConfigurationError, match="caps"):
        CompactionEvalConfig(caps=(100,))
    with pytest.raises(ConfigurationError, match="systems"):
        CompactionEvalConfig(systems=("magic",))
    with pytest.raises(ConfigurationError, match="ask must be one of evidence, end"):
        CompactionEvalConfig(ask="later")
    with pytest.raises(ConfigurationError, match="limit_questions must be >= 1"):
        CompactionEvalConfig(limit_questions=0)
    with pytest.raises(ConfigurationError, match="limit_sessions must be >= 1"):
        CompactionEvalConfig(limit_sessions=0)


def test_questions_asked_at_the_end_meet_the_oldest_evidence(conn: psycopg.Connection[Any], tiny_locomo: Path) -> None:
    corpus = load_locomo(tiny_locomo)
    config = CompactionEvalConfig(caps=(600,), systems=("none", "rubric+pgmem"), ask="end")
    report = run_compaction_eval(conn, corpus, HashingEmbedder(), config)
    rows = {row["policy"]: row for row in report["rows"]}
    assert report["ask"] == "end" and report["questions"] > 0
    # Truncation to the cap drops the early sessions; the pgmem rebuild recalls them.
    assert rows["rubric+pgmem"]["evidence_recall"] > rows["none"]["evidence_recall"]
    assert "at the conversation's end" in render_compaction_markdown(report)


ANSWER_OPENING = ANSWER_PROMPT.split("{", 1)[0]


def fake_model(request: dict[str, Any]) -> str:
    """A deterministic model behind the fake server.

    Probes and summaries as the stand-in; a question is answered with the context line
    sharing most words with it.
    """
    messages = request["messages"]
    last = str(messages[-1]["content"])
    if last.startswith(ANSWER_OPENING):
        words = set(normalise_answer(last.rsplit("Question: ", 1)[1]).split())
        lines = [line for m in messages[:-1] for line in str(m["content"]).splitlines() if line.strip()]
        return max(lines, key=lambda line: len(words & set(normalise_answer(line).split())))
    return ExtractiveChat(TokenCounter()).complete(messages, max_tokens=request.get("max_tokens")).text


def test_eval_compaction_with_a_model_behind_an_openai_compatible_server(
    dsn: str, tiny_locomo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = FakeChatServer(respond=fake_model)
    monkeypatch.setenv("PGMEM_CHAT_BASE_URL", server.url)
    out = tmp_path / "out"
    argv = ["eval-compaction", "locomo", "--data-dir", str(tiny_locomo.parent.parent), "--out", str(out)]
    argv += ["--caps", "800", "--systems", "rubric+pgmem", "pack", "--limit-questions", "3", "--ask", "end"]
    argv += ["--limit-sessions", "3"]
    argv += ["--chat", "--chat-model", "fake-model", "--dsn", dsn, "--embedder", "hashing"]
    try:
        assert main(argv) == 0
    finally:
        server.close()
    rows = json.loads((out / "compaction.json").read_text(encoding="utf-8"))
    report = json.loads((out / "compaction-report.json").read_text(encoding="utf-8"))
    assert [r["policy"] for r in rows] == ["rubric+pgmem", "pack"]
    assert report["chat_model"] == "fake-model" and report["stand_in"] is None and report["questions"] == 3
    # Each system's agent answered each question once; the rows score those answers.
    asked = [r for r in server.requests if str(r["messages"][-1]["content"]).startswith(ANSWER_OPENING)]
    assert len(asked) == 6
    assert all(r["model"] == "fake-model" and r["max_tokens"] == ANSWER_MAX_TOKENS for r in asked)
    for row in rows:
        answers = report["answers"][f"{row['policy']}@800"]
        assert [a["answer"] for a in answers] == [fake_model(r) for r in asked if _system_of(r) == row["policy"]]
        containment = [contains_answer(a["answer"], a["gold"]) for a in answers]
        assert row["answer_containment"] == round(100.0 * sum(c or 0.0 for c in containment) / len(answers), 2)
        assert row["answer_f1"] == round(100.0 * sum(a["f1"] for a in answers) / len(answers), 2)
    # The model judged and summarised: probes at session ends only, cited summaries.
    probes = [r for r in server.requests if str(r["messages"][-1]["content"]).startswith(PROBE_OPENING)]
    assert probes and all(re.fullmatch(r"\[session \d+ ended\]", r["messages"][-2]["content"]) for r in probes)
    assert any("Excerpt:" in str(r["messages"][-1]["content"]) for r in server.requests)
    with psycopg.connect(dsn) as conn:
        models = conn.execute("SELECT DISTINCT model FROM pgmem.compaction_events").fetchall()
    assert models == [("fake-model",)]
    # Only the first three sessions were replayed: no turn of session 4 reached the model.
    session_4 = json.loads(tiny_locomo.read_text(encoding="utf-8"))[0]["conversation"]["session_4"]
    assert not any(turn["text"] in json.dumps(r) for r in server.requests for turn in session_4[:3])
    printed = capsys.readouterr().out
    assert "`fake-model` is rubric judge and summariser" in printed and "answer token F1" in printed


def _system_of(request: dict[str, Any]) -> str:
    """Which system asked: the pack baseline's context is system, task and its evidence."""
    return (
        "pack"
        if len(request["messages"]) == 4 and "Evidence from memory:" in request["messages"][2]["content"]
        else ("rubric+pgmem")
    )


def test_chat_without_a_server_is_refused(
    tiny_locomo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PGMEM_CHAT_BASE_URL", raising=False)
    argv = ["eval-compaction", "locomo", "--data-dir", str(tiny_locomo.parent.parent), "--out", str(tmp_path)]
    assert main([*argv, "--chat", "--chat-model", "m", "--dsn", "postgresql://nowhere.invalid/x"]) == 1
    assert "--chat needs PGMEM_CHAT_BASE_URL" in capsys.readouterr().err
