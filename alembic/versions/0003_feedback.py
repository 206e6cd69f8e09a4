"""Feedback and the per-family Beta reliability (beta mode); rare-key lookups on the GIN indexes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0003_feedback.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
