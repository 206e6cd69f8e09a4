"""Distribution by namespace: every key of a per-namespace table includes the namespace.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0010_distribution.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
