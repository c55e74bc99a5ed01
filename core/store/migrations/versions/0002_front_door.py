"""The front door: quarantined messages in the DLQ, per-tenant API keys, idempotent intake requests.

Revision ID: 0002
Revises: 0001

Expand-only: new tables and nullable (or defaulted) columns, so a worker of the previous release keeps
working against this schema.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
# Expand-only (see the docstring): the rollback window of core/store/migrate.py.
previous_release_compatible = True

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("dead_letters") as batch:
        batch.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default="job"))
        batch.add_column(sa.Column("raw_body", sa.LargeBinary, nullable=True))
        batch.add_column(sa.Column("raw_size", sa.Integer, nullable=True))
        batch.add_column(sa.Column("origin", sa.JSON, nullable=True))
        batch.create_check_constraint("ck_dead_letters_kind", "kind IN ('job', 'quarantined')")

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(128), nullable=False, unique=True),
        sa.Column("name", sa.String(256), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("last_used_at", UTC, nullable=True),
        sa.Column("revoked_at", UTC, nullable=True),
        sa.CheckConstraint("scope IN ('submit', 'read', 'admin')", name="ck_api_keys_scope"),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant_id"])

    op.create_table(
        "intake_requests",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("request_key", sa.String(255), primary_key=True),
        sa.Column("body_hash", sa.String(64), nullable=False),
        sa.Column("entity_id", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("receipt", sa.JSON, nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("expires_at", UTC, nullable=False),
    )
    op.create_index("ix_intake_requests_expires", "intake_requests", ["expires_at"])


def downgrade() -> None:
    op.drop_table("intake_requests")
    op.drop_table("api_keys")
    with op.batch_alter_table("dead_letters") as batch:
        batch.drop_constraint("ck_dead_letters_kind", type_="check")
        batch.drop_column("origin")
        batch.drop_column("raw_size")
        batch.drop_column("raw_body")
        batch.drop_column("kind")
