"""Stage one ranks the lexical top k from postings once, as deep as the family cap's deepest spread (stage_one_v1).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0027_lexical_rank_once.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
