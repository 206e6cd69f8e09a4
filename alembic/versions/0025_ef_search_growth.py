"""The HNSW search breadth grows with the graph above ef_search_notes notes (stage_one_v1, stage_one_pool_v1).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0025_ef_search_growth.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
