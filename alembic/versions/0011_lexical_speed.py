"""Lexical candidate search from an inverted index (pgmem.lexeme_postings), same rows.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0011_lexical_speed.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
