"""Stage one caps any one provenance family in its dense and lexical candidate searches (pgmem.family_capped_v1).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0016_family_candidates.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
