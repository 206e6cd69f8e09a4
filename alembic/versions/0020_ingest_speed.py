"""Ingest drops foreign-key checks that can never fail; its link lookups read no GIN pending list.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0020_ingest_speed.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
