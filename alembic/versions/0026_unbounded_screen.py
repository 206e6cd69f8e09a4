"""Stage one ranks every screened note of an unfiltered lexical search from postings, without the bound (stage_one_v1).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0026_unbounded_screen.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
