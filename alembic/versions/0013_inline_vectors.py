"""Notes keep their embeddings in their rows; stage one picks the exact dense scan by namespace size.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0013_inline_vectors.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
