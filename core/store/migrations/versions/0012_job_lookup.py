"""Job lookup and target search: ``event_targets.job_id`` and three indexes (issue 32, the HTTP API's twins).

Revision ID: 0012
Revises: 0011

- ``event_targets.job_id``: the id of the target's latest job, written with the target by the intake, a DLQ replay
  and the reconciler, so ``GET /v1/jobs/{job_id}`` finds a queued, deferred or finished job through
  ``ix_event_targets_job`` (a dead-lettered one is found by ``dead_letters.job_id``, unique already).
- ``ix_event_targets_tenant_search`` on ``(tenant_id, status, updated_at, event_id, account_id)`` and
  ``ix_event_targets_account_search`` on ``(account_id, status, updated_at, event_id)``: the keyset pages of
  ``GET /v1/events``, newest first, one range per status, read in index order whatever the tenant's history.

Expand-only: one nullable column the previous release never reads (its intake leaves it NULL: such a target's job
is not found by id until its next job), three indexes. Every write of a target's ``updated_at`` or ``status`` now
updates two more index entries. Building them locks writes to ``event_targets`` for as long as it takes (about a
second per million rows on a small machine).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"  # drift-core's 0011_drift.py: this branch migrates once it is merged
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True


def upgrade() -> None:
    op.add_column("event_targets", sa.Column("job_id", sa.String(128), nullable=True))
    op.create_index("ix_event_targets_job", "event_targets", ["job_id"])
    op.create_index(
        "ix_event_targets_tenant_search",
        "event_targets",
        ["tenant_id", "status", "updated_at", "event_id", "account_id"],
    )
    op.create_index(
        "ix_event_targets_account_search", "event_targets", ["account_id", "status", "updated_at", "event_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_event_targets_account_search", table_name="event_targets")
    op.drop_index("ix_event_targets_tenant_search", table_name="event_targets")
    op.drop_index("ix_event_targets_job", table_name="event_targets")
    with op.batch_alter_table("event_targets") as batch:  # SQLite rebuilds the table
        batch.drop_column("job_id")
