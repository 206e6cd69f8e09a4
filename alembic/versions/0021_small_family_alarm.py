"""Logged packs keep the alarm's question_restatement input (pack_log_families, family_alarms_v1).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0021_small_family_alarm.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
