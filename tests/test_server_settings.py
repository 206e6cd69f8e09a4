"""The embedded server is sized from the machine, and ALTER SYSTEM overrides the sizing."""

from __future__ import annotations

from pathlib import Path

import pytest

import pgmem
from pgmem.db.connection import SETTINGS_FILE, server_settings, write_server_settings


def test_settings_grow_with_memory_within_bounds() -> None:
    small = server_settings(memory=512 * 1024 * 1024, cores=1)
    machine = server_settings(memory=24 * 1024**3, cores=2)
    huge = server_settings(memory=1024**4, cores=64)
    assert small["shared_buffers"] == "128MB"  # never below PostgreSQL's default
    assert small["maintenance_work_mem"] == "64MB"
    assert machine["shared_buffers"] == "3072MB"
    assert machine["maintenance_work_mem"] == "1536MB"
    assert huge["shared_buffers"] == "8192MB"
    assert huge["maintenance_work_mem"] == "2048MB"
    assert small["max_parallel_maintenance_workers"] == "1"
    assert huge["max_parallel_maintenance_workers"] == "63"
    assert machine["jit"] == "off"
    # Only settings that cannot change a plan: results stay what they were.
    assert not {"random_page_cost", "effective_cache_size", "work_mem"} & set(machine)


def test_the_include_is_written_once(tmp_path: Path) -> None:
    (tmp_path / "postgresql.conf").write_text("max_connections = 100\n", encoding="utf-8")
    write_server_settings(tmp_path)
    write_server_settings(tmp_path)
    main = (tmp_path / "postgresql.conf").read_text(encoding="utf-8")
    assert main.startswith("max_connections = 100\n")
    assert main.count(f"include_if_exists = '{SETTINGS_FILE}'") == 1
    written = (tmp_path / SETTINGS_FILE).read_text(encoding="utf-8")
    for name, value in server_settings().items():
        assert f"{name} = '{value}'" in written


def test_the_embedded_server_runs_with_them_and_alter_system_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pgserver")
    monkeypatch.delenv("PGMEM_DSN", raising=False)
    wanted = server_settings()
    with pgmem.connect(home=tmp_path, migrate=False) as conn:
        for name in ("shared_buffers", "maintenance_work_mem", "jit"):
            row = conn.execute("SELECT setting, unit FROM pg_settings WHERE name = %s", (name,)).fetchone()
            assert row is not None
            setting, unit = row
            if unit == "8kB":
                assert f"{int(setting) * 8 // 1024}MB" == wanted[name]
            elif unit == "kB":
                assert f"{int(setting) // 1024}MB" == wanted[name]
            else:
                assert setting == wanted[name]
        conn.execute("ALTER SYSTEM SET jit = on")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute("SELECT pg_sleep(0.2)")
        assert conn.execute("SHOW jit").fetchone() == ("on",)
