"""Initial schema: accounts, events, targets, idempotency records, dead letters.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
# The first revision: there is no earlier code to run on it.
previous_release_compatible = False

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "provider_accounts",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("address", sa.String(320), nullable=False),
        sa.Column("credentials", sa.LargeBinary, nullable=True),
        sa.Column("options", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.CheckConstraint("provider IN ('google', 'exchange', 'memory')", name="ck_provider_accounts_provider"),
        sa.CheckConstraint("status IN ('active', 'needs_reauth', 'disabled')", name="ck_provider_accounts_status"),
    )
    op.create_index("ix_provider_accounts_tenant", "provider_accounts", ["tenant_id"])

    op.create_table(
        "events",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("title", sa.String(1024), nullable=False),
        sa.Column("start_at", sa.String(40), nullable=False),
        sa.Column("end_at", sa.String(40), nullable=False),
        sa.Column("time_zone", sa.String(64), nullable=False),
        sa.Column("all_day", sa.Boolean, nullable=False),
        sa.Column("location", sa.String(1024), nullable=True),
        sa.Column("description", sa.Text, nullable=True),
        sa.Column("attendees", sa.JSON, nullable=False),
        sa.Column("send_updates", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.CheckConstraint("status IN ('confirmed', 'cancelled')", name="ck_events_status"),
        sa.CheckConstraint("version >= 1", name="ck_events_version"),
    )

    op.create_table(
        "event_targets",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("event_id", sa.String(128), primary_key=True),
        sa.Column("account_id", sa.String(128), primary_key=True),
        sa.Column("wanted", sa.String(8), nullable=False),
        sa.Column("wanted_version", sa.Integer, nullable=False),
        sa.Column("synced_version", sa.Integer, nullable=False),
        sa.Column("external_id", sa.String(1024), nullable=True),
        sa.Column("external_etag", sa.String(1024), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("error_class", sa.String(128), nullable=True),
        sa.Column("due_at", UTC, nullable=True),
        sa.Column("updated_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(["tenant_id", "event_id"], ["events.tenant_id", "events.id"], name="fk_targets_event"),
        sa.ForeignKeyConstraint(["account_id"], ["provider_accounts.id"], name="fk_targets_account"),
        sa.CheckConstraint("status IN ('pending', 'synced', 'failed', 'deleted')", name="ck_event_targets_status"),
        sa.CheckConstraint("wanted IN ('present', 'absent')", name="ck_event_targets_wanted"),
    )
    op.create_index("ix_event_targets_status_due", "event_targets", ["status", "due_at"])
    op.create_index("ix_event_targets_account", "event_targets", ["account_id"])

    op.create_table(
        "idempotency_records",
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("job_id", sa.String(128), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("result", sa.JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("expires_at", UTC, nullable=False),
    )
    op.create_index("ix_idempotency_records_expires", "idempotency_records", ["expires_at"])

    op.create_table(
        "dead_letters",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(128), nullable=False, unique=True),
        sa.Column("job_type", sa.String(64), nullable=False),
        sa.Column("message_id", sa.String(64), nullable=True),
        sa.Column("queue", sa.String(128), nullable=True),
        sa.Column("tenant_id", sa.String(128), nullable=True),
        sa.Column("entity_id", sa.String(128), nullable=True),
        sa.Column("account_id", sa.String(128), nullable=True),
        sa.Column("idempotency_key", sa.String(512), nullable=True),
        sa.Column("trace_id", sa.String(128), nullable=True),
        sa.Column("payload", sa.JSON, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("reason", sa.String(128), nullable=False),
        sa.Column("error_class", sa.String(128), nullable=False),
        sa.Column("last_error", sa.Text, nullable=False),
        sa.Column("error_history", sa.JSON, nullable=False),
        sa.Column("first_failed_at", UTC, nullable=False),
        sa.Column("failed_at", UTC, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("replayed_at", UTC, nullable=True),
        sa.Column("replay_job_id", sa.String(128), nullable=True),
        sa.Column("discarded_at", UTC, nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        sa.CheckConstraint("status IN ('open', 'replayed', 'discarded')", name="ck_dead_letters_status"),
    )
    op.create_index("ix_dead_letters_status_failed", "dead_letters", ["status", "failed_at"])
    op.create_index("ix_dead_letters_account", "dead_letters", ["account_id"])


def downgrade() -> None:
    op.drop_table("dead_letters")
    op.drop_table("idempotency_records")
    op.drop_table("event_targets")
    op.drop_table("events")
    op.drop_table("provider_accounts")
