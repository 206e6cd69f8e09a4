"""Each note's words as 64-bit hashes, computed at write time by the database.

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
    run_sql_file("0016_word_hashes.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
