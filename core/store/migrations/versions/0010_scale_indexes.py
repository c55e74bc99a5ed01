"""Indexes for lookups that read a whole table once it is large (docs/notes/scale.md).

Revision ID: 0010
Revises: 0009

- ``ix_events_id`` on ``events (id)``: ``calsync events show EVT`` without ``--tenant`` finds the event's tenants
  by id alone, which the ``(tenant_id, id)`` key cannot serve.
- ``ix_dead_letters_tenant_status`` on ``dead_letters (tenant_id, status, id)``: a tenant's page of dead letters
  (``GET /v1/dead-letters``, keyset by id) read in id order, not filtered out of every open record.

Expand-only: two indexes, no column. Building them locks writes to those tables for as long as it takes (about
a second per million rows on a small machine).
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True


def upgrade() -> None:
    op.create_index("ix_events_id", "events", ["id"])
    op.create_index("ix_dead_letters_tenant_status", "dead_letters", ["tenant_id", "status", "id"])


def downgrade() -> None:
    op.drop_index("ix_dead_letters_tenant_status", table_name="dead_letters")
    op.drop_index("ix_events_id", table_name="events")
