"""Provenance you can trust: family write rights, per-family statistics, family alarms in logged packs.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0009_family_rights.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
