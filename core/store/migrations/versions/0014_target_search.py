"""The console's searches across tenants and a target's history (issue 32): five indexes.

Revision ID: 0014
Revises: 0013

- ``ix_event_targets_status_search`` on ``(status, updated_at, event_id, account_id)``: the console's events page
  without a tenant or account, newest first, one range per status (core/store/job_lookup.py); the tenant's and the
  account's searches keep their indexes of migration 0012.
- ``ix_dead_letters_trace`` on ``trace_id``: a trace id's jobs, found where the database keeps a trace id (a dead
  letter's).
- ``ix_dead_letters_event`` on ``(tenant_id, entity_id, id)``, ``ix_drift_findings_event`` on ``(tenant_id, event_id,
  id)`` and ``ix_audit_log_subject`` on ``(subject, id)``: an event's dead letters, drift findings and the audit rows
  about its targets, newest first, shown on its console page (core/console/target_history.py).

Expand-only: five indexes the previous release never reads. Every write of a target's ``updated_at`` or ``status``
now updates one more index entry. Building the first locks writes to ``event_targets`` for as long as it takes (about
a second per million rows on a small machine, as migration 0012's did).
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True


def upgrade() -> None:
    op.create_index(
        "ix_event_targets_status_search", "event_targets", ["status", "updated_at", "event_id", "account_id"]
    )
    op.create_index("ix_dead_letters_trace", "dead_letters", ["trace_id"])
    op.create_index("ix_dead_letters_event", "dead_letters", ["tenant_id", "entity_id", "id"])
    op.create_index("ix_drift_findings_event", "drift_findings", ["tenant_id", "event_id", "id"])
    op.create_index("ix_audit_log_subject", "audit_log", ["subject", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_subject", table_name="audit_log")
    op.drop_index("ix_drift_findings_event", table_name="drift_findings")
    op.drop_index("ix_dead_letters_event", table_name="dead_letters")
    op.drop_index("ix_dead_letters_trace", table_name="dead_letters")
    op.drop_index("ix_event_targets_status_search", table_name="event_targets")
