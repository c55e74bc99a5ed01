"""The rollback window: the oldest code revision that runs on the schema, read by every schema check.

Revision ID: 0004
Revises: 0003

Expand-only: one new table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True


def upgrade() -> None:
    op.create_table(
        "schema_window",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("revision", sa.String(32), nullable=False),
        sa.Column("oldest_code_revision", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("schema_window")
