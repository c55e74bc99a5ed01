"""Create marker: ``event_targets.create_attempted``, "a create may have been sent for this target".

Revision ID: 0007
Revises: 0006

Expand-only: one new NOT NULL column with a server default of true. Every existing target, and every
target the previous release's producer inserts later (it does not know the column), reads as "a create
may have been sent", so the Exchange adapter keeps looking the item up before creating it, as the
previous release always did. Only this release's producer inserts false, for a target it has just
created. The previous release's code never reads or writes the column.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True


def upgrade() -> None:
    op.add_column("event_targets", sa.Column("create_attempted", sa.Boolean, nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("event_targets") as batch:  # SQLite rebuilds the table
        batch.drop_column("create_attempted")
