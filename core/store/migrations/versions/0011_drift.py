"""Drift detection (issue 34): a policy per tenant, a sweep state per account, the findings, and per target when it
was last verified and what was found.

Revision ID: 0011
Revises: 0010

Expand-only: three new tables and two nullable columns of ``event_targets``. The previous release's code never
reads or writes them; a target it syncs keeps the ``verified_at`` and ``drift_kind`` of the last sweep, which the
next sweep overwrites.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("event_targets", sa.Column("verified_at", UTC, nullable=True))
    op.add_column("event_targets", sa.Column("drift_kind", sa.String(32), nullable=True))
    op.create_table(
        "drift_policies",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("policy", sa.String(16), nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.CheckConstraint("policy IN ('enforce', 'report', 'off')", name="ck_drift_policies_policy"),
    )
    op.create_table(
        "drift_state",
        sa.Column("account_id", sa.String(128), primary_key=True),
        sa.Column("cursor", sa.Text, nullable=True),
        sa.Column("swept_at", UTC, nullable=True),
        sa.Column("next_sweep_at", UTC, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False, server_default="0"),
        sa.ForeignKeyConstraint(
            ["account_id"], ["provider_accounts.id"], name="fk_drift_state_account", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_drift_state_next", "drift_state", ["next_sweep_at"])
    op.create_table(
        "drift_findings",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("account_id", sa.String(128), nullable=False),
        sa.Column("event_id", sa.String(128), nullable=True),
        sa.Column("external_id", sa.String(1024), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("found_at", UTC, nullable=False),
        sa.CheckConstraint(
            "kind IN ('deleted_externally', 'modified_externally', 'missing', 'unknown_item')",
            name="ck_drift_findings_kind",
        ),
        sa.CheckConstraint("action IN ('reported', 'repaired')", name="ck_drift_findings_action"),
    )
    op.create_index("ix_drift_findings_tenant", "drift_findings", ["tenant_id", "id"])
    op.create_index("ix_drift_findings_found", "drift_findings", ["found_at"])


def downgrade() -> None:
    op.drop_table("drift_findings")
    op.drop_table("drift_state")
    op.drop_table("drift_policies")
    with op.batch_alter_table("event_targets") as batch:  # SQLite rebuilds the table
        batch.drop_column("drift_kind")
        batch.drop_column("verified_at")
