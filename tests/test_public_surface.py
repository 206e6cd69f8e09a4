"""The public surface a psycopg user expects: ``pgmem.ingest`` is the function, and the
write-path subpackage (``pgmem.ingestion``) imports in any order without hiding it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import inspect, pgmem, pgmem.ingestion, pgmem.ingestion.writer
assert inspect.isfunction(pgmem.ingest) and pgmem.ingest.__module__ == "pgmem.api", pgmem.ingest
assert inspect.ismodule(pgmem.ingestion) and inspect.ismodule(pgmem.ingestion.writer)
assert pgmem.IngestResult is pgmem.ingestion.writer.IngestResult
assert pgmem.Enricher is pgmem.ingestion.enricher.Enricher
import pgmem.aio
assert inspect.iscoroutinefunction(pgmem.aio.ingest)
print("ok")
"""

ORDERS = {
    "package first": "import pgmem",
    "a write-path module first": "import pgmem.ingestion.sources",
    "from-import of a module first": "from pgmem.ingestion import writer",
    "from-import of a name first": "from pgmem.ingestion.enricher import RuleEnricher",
    "the async driver first": "import pgmem.aio",
    "the function first": "from pgmem import ingest",
}


@pytest.mark.parametrize("first", ORDERS.values(), ids=list(ORDERS))
def test_ingest_is_the_function_and_the_subpackage_imports_in_any_order(first: str) -> None:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", f"{first}\n{CHECK}"], capture_output=True, text=True, env=environment, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_old_subpackage_name_is_not_a_module() -> None:
    """``pgmem.ingest`` names the function only; no module of that name shadows or is shadowed."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", "import pgmem.ingest.writer"],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr
