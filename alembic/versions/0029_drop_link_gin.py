"""The GIN indexes on the notes' handles and entities go: nothing reads by them since 0028.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0029_drop_link_gin.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
