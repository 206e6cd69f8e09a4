"""Security and integrity, second pass: invoker views, grants by role OID, total forget, checked writes.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0004_security.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
