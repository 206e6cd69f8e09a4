"""Ingest drops foreign-key checks that can never fail; its link lookups read no GIN pending list.

Revision ID: 0021
Revises: 0018
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0021"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0021_ingest_speed.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
