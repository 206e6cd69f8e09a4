"""The initial pgmem schema.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0001_initial.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
