"""Stage one plans less and works less per candidate (static SQL where the planner needs no values).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0014_static_stage_one.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
