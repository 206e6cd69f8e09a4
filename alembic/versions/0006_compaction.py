"""Context compaction telemetry: pgmem.compaction_log, pgmem.compaction_events and its views.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from pgmem.db.migrate import run_sql_file

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sql_file("0006_compaction.sql")


def downgrade() -> None:
    raise NotImplementedError("pgmem migrations are forward-only")
