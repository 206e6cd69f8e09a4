"""Logged packs say which families were newcomers (pack_log_families.newcomer, family_alarms_v1).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0024_newcomer_hold.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
