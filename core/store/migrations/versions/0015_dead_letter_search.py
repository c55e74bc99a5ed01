"""The console's dead-letter search (issue 32): an index for the error's full text, and one for a target's records.

Revision ID: 0015
Revises: 0014

- ``ix_dead_letters_error_search`` (PostgreSQL only): a GIN trigram index (extension ``pg_trgm``) on
  ``lower(last_error)``, which answers ``lower(last_error) LIKE '%text%'`` (core.store.dead_letters.error_search)
  for a text of three characters or more without reading every record. ``pg_trgm`` ships with PostgreSQL and is a
  trusted extension (PostgreSQL 13+): the owner of the database may create it. Where it cannot be created, the
  migration goes on without the index (a warning says so) and the search reads the filtered records instead.
  SQLite has no such index: its LIKE reads the records the other filters leave.
- ``ix_dead_letters_target`` on ``(account_id, entity_id, id)``: one dead letter's page lists the other records of
  its target, newest first.

Expand-only: two indexes the previous release never reads; dead letters are written seldom, so keeping them costs
little. Building the trigram index takes a few seconds per 100,000 records and locks writes of dead letters.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True

log = logging.getLogger(__name__)


def _trigram_schema(conn: sa.Connection) -> str | None:
    """The schema holding pg_trgm's operator classes, creating the extension in ``public`` when absent (a test's or
    tenant's own search path must not own it: dropping that schema would drop it for every other); None if it
    cannot be created."""
    found = "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = :x"
    schema = conn.execute(sa.text(found), {"x": "pg_trgm"}).scalar()
    if schema is not None:
        return str(schema)
    try:
        with conn.begin_nested():
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public"))
    except sa.exc.DBAPIError as exc:
        log.warning("pg_trgm cannot be created (%s): the dead letters' error search runs without its index", exc)
        return None
    return "public"


def upgrade() -> None:
    op.create_index("ix_dead_letters_target", "dead_letters", ["account_id", "entity_id", "id"])
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    schema = _trigram_schema(conn)
    if schema is not None:
        quoted = conn.dialect.identifier_preparer.quote_schema(schema)
        index = f"ix_dead_letters_error_search ON dead_letters USING gin (lower(last_error) {quoted}.gin_trgm_ops)"
        op.execute(f"CREATE INDEX {index}")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_dead_letters_error_search")
    op.drop_index("ix_dead_letters_target", table_name="dead_letters")
