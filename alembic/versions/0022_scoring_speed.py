"""The pack's stage-one statement as a function (pgmem.stage_one_pool_v1): planned once per session.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0022_scoring_speed.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
