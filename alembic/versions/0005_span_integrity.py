"""One note per document span, offsets checked in the database, audited supersede; column-level INSERT grants.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0005_span_integrity.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
