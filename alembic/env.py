"""Alembic environment for pgmem: replays frozen SQL migrations, no ORM models.

Run through :func:`pgmem.migrate`, which passes an open SQLAlchemy connection in
``config.attributes["connection"]``.
"""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run pgmem migrations through pgmem.migrate(conn) or `pgmem migrate`")

context.configure(
    connection=connection,
    target_metadata=None,
    version_table_schema="pgmem",
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
