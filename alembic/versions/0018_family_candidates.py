"""Stage one puts at most family_candidates notes of a family ahead of others; returns write times, word hashes.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0018_family_candidates.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
