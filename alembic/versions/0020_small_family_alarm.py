"""Logged packs keep the alarm's question_restatement input (pack_log_families, family_alarms_v1).

Revision ID: 0020
Revises: 0018
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0020"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0020_small_family_alarm.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
