"""Logged packs keep the family alarm's collusion input and decision (pack_log_families, family_alarms_v1).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0015_collusion_log.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
