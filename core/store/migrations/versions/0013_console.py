"""The operator console (issue 32): ``operators``, ``operator_sessions`` and ``audit_log``.

Revision ID: 0013
Revises: 0012

Expand-only: three new tables the previous release never reads.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "operators",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(256), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(128), nullable=True, unique=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("revoked_at", UTC, nullable=True),
        sa.CheckConstraint("role IN ('viewer', 'operator')", name="ck_operators_role"),
    )
    op.create_table(
        "operator_sessions",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("operator_id", sa.String(64), nullable=False),
        sa.Column("csrf_token", sa.String(128), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("last_seen_at", UTC, nullable=False),
        sa.Column("ended_at", UTC, nullable=True),
        sa.ForeignKeyConstraint(
            ["operator_id"], ["operators.id"], name="fk_operator_sessions_operator", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_operator_sessions_operator", "operator_sessions", ["operator_id"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", UTC, nullable=False),
        sa.Column("actor", sa.String(256), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(1024), nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("detail", sa.JSON, nullable=True),
    )
    op.create_index("ix_audit_log_actor", "audit_log", ["actor", "id"])
    op.create_index("ix_audit_log_at", "audit_log", ["at"])


def downgrade() -> None:
    op.drop_table("audit_log")
    op.drop_table("operator_sessions")
    op.drop_table("operators")
