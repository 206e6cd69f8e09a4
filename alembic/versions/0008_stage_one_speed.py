"""Stage one faster with the same rows: static scoring, one named-parameter candidate search, pgmem.bm25_v1.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0008_stage_one_speed.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
