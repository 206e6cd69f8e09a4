"""Least-privilege roles, namespace isolation by row-level security, audited forget.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0002_tenants_and_forget.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
