"""The pgmem command, run in-process against a test database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgmem.cli import main


def test_migrate_ingest_and_pack_from_the_command_line(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text(
        "# Acme\n\nAda Lovelace founded Acme Corp in Paris.\n\n## Products\n\nAcme sells analytical engines.\n",
        encoding="utf-8",
    )
    spans = tmp_path / "turns.jsonl"
    turn = "Caroline: I went to the support group yesterday."
    spans.write_text(
        json.dumps(
            {
                "document_id": "session-1",
                "text": turn,
                "start": 0,
                "end": len(turn.encode()),
                "family": "session-1",
                "source_ts": "2023-05-08T13:56:00+00:00",
                "external_id": "D1:3",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    common = ["--dsn", dsn, "--embedder", "hashing"]
    assert main(["migrate", *common]) == 0
    assert "revision" in capsys.readouterr().out

    assert main(["ingest", str(notes), str(spans), *common]) == 0
    assert "3 spans from 2 file(s)" in capsys.readouterr().out

    assert main(["pack", "Who founded Acme?", "--json", "--budget", "2", *common]) == 0
    pack = json.loads(capsys.readouterr().out)
    assert len(pack["items"]) == 2
    top = pack["items"][0]
    assert top["text"] == "Ada Lovelace founded Acme Corp in Paris."
    assert top["context"].startswith("Acme")
    assert (
        pack["diagnostics"]["degraded_reasons"] == ["pool_too_small", "pool_one_sided"]
        or pack["diagnostics"]["degraded"]
    )

    assert main(["pack", "support group", *common]) == 0
    table = capsys.readouterr().out
    assert "D1:3" in table and "degraded" in table


def test_errors_are_reported_not_raised(dsn: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["pack", "question", "--budget", "0", "--dsn", dsn, "--embedder", "hashing"]) == 1
    assert "budget must be in [1, 1000]" in capsys.readouterr().err
    assert main(["ingest", str(tmp_path / "missing.txt"), "--dsn", dsn, "--embedder", "hashing"]) == 1
    assert "no such file" in capsys.readouterr().err


def test_eval_runs_every_dataset_and_condition_and_plots(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = []
    for i, (word, family) in enumerate([("key", "wire"), ("map", "wire"), ("lamp", "blog"), ("coat", "atlas")] * 3):
        lines.append(
            json.dumps(
                {"type": "note", "id": f"n{i}", "text": f"The {word} number {i} is kept in room {i}.", "family": family}
            )
        )
        lines.append(
            json.dumps(
                {
                    "type": "question",
                    "id": f"q{i}",
                    "question": f"Where is the {word} number {i} kept?",
                    "gold": [f"n{i}"],
                    "answers": [f"room {i}"],
                }
            )
        )
    data = tmp_path / "rooms.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["eval", str(data), "--condition", "clean", "poison-one", "--out", str(out), "--budget", "3"]
    assert main([*argv, "--dsn", dsn, "--embedder", "hashing"]) == 0
    printed = capsys.readouterr().out
    assert "| rooms | poison-one |" in printed and "beta − relevance" in printed
    for run in ("rooms-clean", "rooms-poison-one"):
        report = json.loads((out / run / "report.json").read_text())
        assert set(report["systems"]) == {"calibrated", "relevance", "raw_bonus", "beta", "dense", "lexical", "rrf"}
        assert report["feedback"]["folds"] == 2 and report["feedback"]["training_packs"] == 12
    assert (out / "recall.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| rooms | clean |" in (out / "summary.md").read_text()
    assert len(json.loads((out / "summary.json").read_text())) == 2


def test_evaluation_plots_without_the_eval_extra_say_which_extra() -> None:
    # matplotlib is an optional extra: a process without it gets the pgmem error at import.
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None\n"
        "import pgmem\n"
        "try:\n"
        "    import pgmem.eval.plots\n"
        "except pgmem.ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert "pip install 'pgmem[eval]'" in done.stdout


def test_python_dash_m_runs_the_same_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "pgmem", "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "eval-compaction" in done.stdout
