"""The demo and the embedded default, end to end (hashing embedder: fast, no model)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console

import pgmem
from pgmem.db.connection import embedded_server
from pgmem.demo import load_corpus, run_demo


def test_demo_corpus_ships_with_offsets_and_gold_ids() -> None:
    spans, questions = load_corpus()
    assert len(spans) == 438 and len({s.family for s in spans}) == 37
    ids = {s.external_id for s in spans}
    assert all(set(q.evidence) <= ids for q in questions)
    assert sum(1 for q in questions if q.evidence) == 429


def test_demo_shows_packs_calibration_and_a_degraded_pool(conn: psycopg.Connection[Any]) -> None:
    out = io.StringIO()
    figures = run_demo(conn, Console(file=out, width=150), embedder="hashing")
    text = out.getvalue()
    for section in ("inference_query", "comparison_query", "temporal_query", "calibration at work", "degraded"):
        assert section in text
    assert "✓" in text  # gold evidence was packed and marked
    assert set(figures["recall"]) == {"calibrated", "relevance"}
    assert all(0 < value <= 100 for value in figures["recall"].values())
    assert "pool_too_small" in figures["degraded_reasons"]


def test_connect_starts_and_migrates_the_embedded_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pgmem.connect(home=home) as conn:
        text = "Embedded servers keep their data under PGMEM_HOME."
        span = pgmem.Span(document_id="d", text=text, start=0, end=len(text), family="docs")
        pgmem.ingest(conn, [span], embedder="hashing")
    with pgmem.connect(home=home) as again:
        pack = pgmem.pack(again, "Where is the data kept?", embedder="hashing")
        assert pack.items[0].text == text
    assert (home / "pgdata" / "PG_VERSION").exists()


def test_the_embedded_server_stops_when_its_last_process_exits(tmp_path: Path) -> None:
    # A fresh home is initialised, started, then restarted with the sized settings: the
    # handle must follow the new postmaster, or it stops the old one (gone) at exit and
    # leaves the running one behind (as every first run of make demo did).
    home = tmp_path / "home"
    server = embedded_server(home)
    running = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
    assert server.get_pid() == running
    # And in a process of its own, fresh or not, the server stops with the process.
    script = "import sys, pgmem; pgmem.connect(home=sys.argv[1]).close()"
    for _ in range(2):
        other = tmp_path / "other"
        subprocess.run([sys.executable, "-c", script, str(other)], check=True, timeout=120)
        assert not (other / "pgdata" / "postmaster.pid").exists()
