"""Wait reason: ``event_targets.wait_reason``, why a pending target waits (a retry, a busy lock, traffic control).

Revision ID: 0009
Revises: 0008

Expand-only: one nullable column. The previous release's code never reads or writes it; a target it syncs may
keep a reason from before, which no one reads once the target has left ``pending``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True


def upgrade() -> None:
    op.add_column("event_targets", sa.Column("wait_reason", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("event_targets") as batch:  # SQLite rebuilds the table
        batch.drop_column("wait_reason")
