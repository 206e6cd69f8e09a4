"""The pgmem command, run in-process against a test database."""

from __future__ import annotations

import json
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
