"""Webhooks: endpoints per tenant, the notification outbox, one delivery row per (notification, endpoint).

Revision ID: 0006
Revises: 0005

Expand-only: three new tables, and the ``dead_letters`` kind CHECK widened to ``webhook`` (batch mode:
SQLite rebuilds the table). A worker of the previous release never writes that kind.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True

UTC = sa.DateTime(timezone=True)
_KIND = "ck_dead_letters_kind"


def _kinds(values: tuple[str, ...]) -> None:
    with op.batch_alter_table("dead_letters") as batch:
        batch.drop_constraint(_KIND, type_="check")
        batch.create_check_constraint(_KIND, f"kind IN ({', '.join(repr(v) for v in values)})")


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("event_types", sa.JSON, nullable=False),
        sa.Column("secrets", sa.LargeBinary, nullable=False),
        sa.Column("previous_expires_at", UTC, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("disabled_by", sa.String(16), nullable=True),
        sa.Column("disabled_reason", sa.Text, nullable=True),
        sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("failing_since", UTC, nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.CheckConstraint("status IN ('enabled', 'disabled')", name="ck_webhook_endpoints_status"),
        sa.CheckConstraint(
            "disabled_by IS NULL OR disabled_by IN ('auto', 'operator')", name="ck_webhook_endpoints_by"
        ),
    )
    op.create_index("ix_webhook_endpoints_tenant", "webhook_endpoints", ["tenant_id"])
    op.create_table(
        "webhook_notifications",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("event_type", sa.String(32), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("dispatched_at", UTC, nullable=True),
    )
    op.create_index("ix_webhook_notifications_undispatched", "webhook_notifications", ["dispatched_at", "created_at"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("notification_id", sa.String(64), nullable=False),
        sa.Column("endpoint_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_status_code", sa.Integer, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("next_attempt_at", UTC, nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.PrimaryKeyConstraint("notification_id", "endpoint_id", name="pk_webhook_deliveries"),
        sa.ForeignKeyConstraint(["notification_id"], ["webhook_notifications.id"], name="fk_deliveries_notification"),
        sa.CheckConstraint("status IN ('pending', 'delivered', 'failed')", name="ck_webhook_deliveries_status"),
    )
    op.create_index("ix_webhook_deliveries_status_next", "webhook_deliveries", ["status", "next_attempt_at"])
    op.create_index("ix_webhook_deliveries_endpoint", "webhook_deliveries", ["endpoint_id"])
    _kinds(("job", "quarantined", "webhook"))


def downgrade() -> None:
    op.execute("DELETE FROM dead_letters WHERE kind = 'webhook'")  # their deliveries go with the tables below
    _kinds(("job", "quarantined"))
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_notifications")
    op.drop_table("webhook_endpoints")
