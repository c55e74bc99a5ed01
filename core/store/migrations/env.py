"""Alembic environment: always run with a connection handed over by core.store.migrate."""

from __future__ import annotations

from alembic import context

from calsync.core.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True, compare_type=True)
with context.begin_transaction():
    context.run_migrations()
