"""Ingest finds a rare key's holders in a B-tree of link keys instead of the notes' GIN indexes.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0028_link_keys.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
