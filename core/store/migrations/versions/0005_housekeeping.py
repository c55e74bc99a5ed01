"""Housekeeping: an index to find cancelled events whose retention ran out without scanning every event.

Revision ID: 0005
Revises: 0004

Expand-only: one new index on ``events`` (status, updated_at); the previous release's code never reads it.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True


def upgrade() -> None:
    op.create_index("ix_events_status_updated", "events", ["status", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_events_status_updated", table_name="events")
