"""The lexical top k of large namespaces ranked from postings by key (stage_one_v1, the same rows).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0023_lexical_scale.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
