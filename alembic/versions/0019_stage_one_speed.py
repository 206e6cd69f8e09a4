"""Stage one with less work per call, the same rows: no family sort unless a family crowds the exact
dense top k; scores on narrow rows.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0019_stage_one_speed.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
