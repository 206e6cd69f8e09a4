"""Each note's words as 64-bit hashes, computed at write time by the database and returned by stage one.

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
    run_sql_file("0018_word_hashes.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
