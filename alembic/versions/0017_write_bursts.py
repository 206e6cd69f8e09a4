"""Logged packs keep the burst gate on collusion (pack_log_families, family_alarms_v1).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0017_write_bursts.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
