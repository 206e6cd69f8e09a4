"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("${up_revision}_CHANGE_ME.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
