"""Logged packs explainable from SQL: pgmem.pack_log_items, pgmem.pack_log_rejections,
pgmem.log_pack_v2, pgmem.pack_explain_v1 and pgmem.pack_degraded_daily_v1.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0007_pack_explain.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
