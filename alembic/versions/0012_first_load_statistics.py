"""The first write into a database analyzes what stage one plans on.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0012_first_load_statistics.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
