"""The relational schema (SQLAlchemy Core), identical on SQLite and PostgreSQL.

Business status (``events.status``) and sync status (``event_targets.status``) are separate columns:
an event can be confirmed while one of its targets is still pending or has failed.
Alembic migrations in ``core/store/migrations`` create exactly this (a test compares them).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final, get_args

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    true,
)

from calsync.core.model.calendar import AccountStatus, BusinessStatus, ProviderName
from calsync.core.model.drift import DRIFT_ACTIONS, DRIFT_KINDS, DRIFT_POLICIES
from calsync.core.model.vocabulary import (
    API_SCOPES,
    DEAD_LETTER_KINDS,
    OPERATOR_ROLES,
    SYNC_STATUSES,
    WEBHOOK_DELIVERY_STATUSES,
    WEBHOOK_ENDPOINT_STATUSES,
)
from calsync.core.store.column_types import UTCDateTime

metadata = MetaData()


def _one_of(column: str, values: tuple[str, ...], name: str) -> CheckConstraint:
    """A CHECK that ``column`` holds one of the vocabulary's values (the model defines them once)."""
    return CheckConstraint(f"{column} IN ({', '.join(repr(v) for v in values)})", name=name)


def json_ready(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its datetimes as ISO 8601 text (the ``as_json`` of what the repositories return)."""
    return {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in doc.items()}


provider_accounts = Table(
    "provider_accounts",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("tenant_id", String(128), nullable=False),
    Column("provider", String(16), nullable=False),
    Column("address", String(320), nullable=False),
    Column("credentials", LargeBinary, nullable=True),
    Column("options", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # The calendar the account writes into (core/model/account_rules.py calendar_key), NULL when its
    # registration cannot tell: one account per calendar and tenant, kept by the unique index (migration 0008).
    Column("calendar_key", String(1024), nullable=True),
    _one_of("provider", get_args(ProviderName), "ck_provider_accounts_provider"),
    _one_of("status", get_args(AccountStatus), "ck_provider_accounts_status"),
    Index("ix_provider_accounts_tenant", "tenant_id"),
    Index("uq_provider_accounts_calendar", "tenant_id", "calendar_key", unique=True),
)

events = Table(
    "events",
    metadata,
    Column("tenant_id", String(128), primary_key=True),
    Column("id", String(128), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("title", String(1024), nullable=False),
    Column("start_at", String(40), nullable=False),
    Column("end_at", String(40), nullable=False),
    Column("time_zone", String(64), nullable=False),
    Column("all_day", Boolean, nullable=False),
    Column("location", String(1024), nullable=True),
    Column("description", Text, nullable=True),
    Column("attendees", JSON, nullable=False),
    Column("send_updates", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    _one_of("status", get_args(BusinessStatus), "ck_events_status"),
    CheckConstraint("version >= 1", name="ck_events_version"),
    Index("ix_events_status_updated", "status", "updated_at"),  # housekeeping finds cancelled events by age
    Index("ix_events_id", "id"),  # `events show` without a tenant (migration 0010)
)

event_targets = Table(
    "event_targets",
    metadata,
    Column("tenant_id", String(128), primary_key=True),
    Column("event_id", String(128), primary_key=True),
    Column("account_id", String(128), primary_key=True),
    # present: the event must appear in this account; absent: it must be removed from it.
    Column("wanted", String(8), nullable=False),
    # The event version this target must reach; synced_version only ever grows toward it (CAS).
    Column("wanted_version", Integer, nullable=False),
    Column("synced_version", Integer, nullable=False),
    Column("external_id", String(1024), nullable=True),
    Column("external_etag", String(1024), nullable=True),
    # "A create may have been sent for this target": committed before a create for an adapter that needs it
    # (EWS), never cleared. Rows written by code that does not know the column default to true (unknown =
    # sent); the producer inserts new targets with false (migration 0007_create_marker).
    Column("create_attempted", Boolean, nullable=False, server_default=true()),
    Column("status", String(16), nullable=False),
    Column("last_error", Text, nullable=True),
    Column("error_class", String(128), nullable=True),
    # When a pending target is expected to have been processed; the reconciler re-enqueues overdue ones.
    Column("due_at", UTCDateTime, nullable=True),
    # Why a pending target waits until due_at (core.model.vocabulary.WaitReason); no CHECK, so a newer release's
    # reason never breaks an older schema. Read only while the target is pending (migration 0009_wait_reason).
    Column("wait_reason", String(32), nullable=True),
    Column("updated_at", UTCDateTime, nullable=False),
    # When a drift sweep last compared the provider's item with this target, and what it found then (a
    # core.model.drift.DriftKind; NULL: found as calsync wrote it). No CHECK, as wait_reason (migration 0011).
    Column("verified_at", UTCDateTime, nullable=True),
    Column("drift_kind", String(32), nullable=True),
    # The id of the target's latest job (the intake's, a replay's or the reconciler's), so GET /v1/jobs/{job_id}
    # finds it; NULL for targets written before migration 0012 (0012_job_lookup).
    Column("job_id", String(128), nullable=True),
    ForeignKeyConstraint(["tenant_id", "event_id"], ["events.tenant_id", "events.id"], name="fk_targets_event"),
    ForeignKeyConstraint(["account_id"], ["provider_accounts.id"], name="fk_targets_account"),
    _one_of("status", SYNC_STATUSES, "ck_event_targets_status"),
    CheckConstraint("wanted IN ('present', 'absent')", name="ck_event_targets_wanted"),
    Index("ix_event_targets_status_due", "status", "due_at"),
    Index("ix_event_targets_account", "account_id"),
    # GET /v1/jobs/{job_id}, and the keyset pages of GET /v1/events, newest first, per tenant or per account
    # (migration 0012).
    Index("ix_event_targets_job", "job_id"),
    Index("ix_event_targets_tenant_search", "tenant_id", "status", "updated_at", "event_id", "account_id"),
    Index("ix_event_targets_account_search", "account_id", "status", "updated_at", "event_id"),
    # The console's search of every tenant's targets (migration 0014).
    Index("ix_event_targets_status_search", "status", "updated_at", "event_id", "account_id"),
)

idempotency_records = Table(
    "idempotency_records",
    metadata,
    Column("key", String(512), primary_key=True),
    Column("job_id", String(128), nullable=False),
    Column("outcome", String(32), nullable=False),
    Column("result", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Index("ix_idempotency_records_expires", "expires_at"),
)

dead_letters = Table(
    "dead_letters",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # One record per failed job; a replay runs under a new job id and gets its own record if it fails.
    Column("job_id", String(128), nullable=False, unique=True),
    Column("job_type", String(64), nullable=False),
    Column("message_id", String(64), nullable=True),
    Column("queue", String(128), nullable=True),
    Column("tenant_id", String(128), nullable=True),
    Column("entity_id", String(128), nullable=True),
    Column("account_id", String(128), nullable=True),
    Column("idempotency_key", String(512), nullable=True),
    Column("trace_id", String(128), nullable=True),
    Column("payload", JSON, nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("reason", String(128), nullable=False),
    Column("error_class", String(128), nullable=False),
    Column("last_error", Text, nullable=False),
    Column("error_history", JSON, nullable=False),
    Column("first_failed_at", UTCDateTime, nullable=False),
    Column("failed_at", UTCDateTime, nullable=False),
    Column("status", String(16), nullable=False),
    Column("replayed_at", UTCDateTime, nullable=True),
    Column("replay_job_id", String(128), nullable=True),
    Column("discarded_at", UTCDateTime, nullable=True),
    Column("note", Text, nullable=True),
    # Quarantined messages (kind 'quarantined'): the raw body as received (size-capped), its size, and
    # where it arrived (broker, queue, message id).
    Column("kind", String(16), nullable=False, server_default="job"),
    Column("raw_body", LargeBinary, nullable=True),
    Column("raw_size", Integer, nullable=True),
    Column("origin", JSON, nullable=True),
    CheckConstraint("status IN ('open', 'replayed', 'discarded')", name="ck_dead_letters_status"),
    _one_of("kind", DEAD_LETTER_KINDS, "ck_dead_letters_kind"),
    Index("ix_dead_letters_status_failed", "status", "failed_at"),
    Index("ix_dead_letters_account", "account_id"),
    Index("ix_dead_letters_tenant_status", "tenant_id", "status", "id"),  # a tenant's keyset pages (migration 0010)
    Index("ix_dead_letters_trace", "trace_id"),  # the console's search by trace id (migration 0014)
    Index("ix_dead_letters_event", "tenant_id", "entity_id", "id"),  # an event's, on its console page (0014)
    Index("ix_dead_letters_target", "account_id", "entity_id", "id"),  # a target's dead letters (migration 0015)
    # On PostgreSQL only, the trigram index of the console's error search (POSTGRESQL_ONLY_INDEXES).
)

# Indexes a migration creates on PostgreSQL only, with what SQLAlchemy cannot declare for one dialect alone (an
# extension's operator class): ix_dead_letters_error_search, pg_trgm on lower(last_error) (migration 0015).
POSTGRESQL_ONLY_INDEXES: Final = frozenset({"ix_dead_letters_error_search"})

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("tenant_id", String(128), nullable=False),
    Column("scope", String(16), nullable=False),
    # SHA-256 of the key: keys are long random strings, so a fast hash is enough; the key is never stored.
    Column("key_hash", String(128), nullable=False, unique=True),
    Column("name", String(256), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_used_at", UTCDateTime, nullable=True),
    Column("revoked_at", UTCDateTime, nullable=True),
    _one_of("scope", API_SCOPES, "ck_api_keys_scope"),
    Index("ix_api_keys_tenant", "tenant_id"),
)

# One row per (tenant, Idempotency-Key or intake request id): a retried request returns the first receipt.
intake_requests = Table(
    "intake_requests",
    metadata,
    Column("tenant_id", String(128), primary_key=True),
    Column("request_key", String(255), primary_key=True),
    # SHA-256 of the canonical change: the same key with a different change is refused.
    Column("body_hash", String(64), nullable=False),
    Column("entity_id", String(128), nullable=False),
    Column("version", Integer, nullable=False),
    # The receipt once the jobs were enqueued (None while the first request is still enqueueing).
    Column("receipt", JSON, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Index("ix_intake_requests_expires", "expires_at"),
)

# One row: the oldest code revision that runs on this schema (the rollback window, core/store/migrate.py).
schema_window = Table(
    "schema_window",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("revision", String(32), nullable=False),
    Column("oldest_code_revision", String(32), nullable=False),
)

# A tenant's webhook receiver (core/webhooks/store.py). ``secrets`` is Fernet-encrypted JSON like
# credentials: the current signing secret and, during a rotation, the previous one until
# ``previous_expires_at``. The breaker counts failed attempts in a row since ``failing_since``.
webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("tenant_id", String(128), nullable=False),
    Column("url", String(2048), nullable=False),
    Column("event_types", JSON, nullable=False),
    Column("secrets", LargeBinary, nullable=False),
    Column("previous_expires_at", UTCDateTime, nullable=True),
    Column("status", String(16), nullable=False),
    Column("disabled_by", String(16), nullable=True),
    Column("disabled_reason", Text, nullable=True),
    Column("consecutive_failures", Integer, nullable=False, server_default="0"),
    Column("failing_since", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    _one_of("status", WEBHOOK_ENDPOINT_STATUSES, "ck_webhook_endpoints_status"),
    CheckConstraint("disabled_by IS NULL OR disabled_by IN ('auto', 'operator')", name="ck_webhook_endpoints_by"),
    Index("ix_webhook_endpoints_tenant", "tenant_id"),
)

# The outbox: one row per logical notification, written in the transaction of what it reports. ``id`` is the
# stable ``webhook-id``; ``dispatched_at`` is set once its deliveries exist (the reconciler takes the rest).
webhook_notifications = Table(
    "webhook_notifications",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("tenant_id", String(128), nullable=False),
    Column("event_type", String(32), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("dispatched_at", UTCDateTime, nullable=True),
    Index("ix_webhook_notifications_undispatched", "dispatched_at", "created_at"),
)

# One delivery per (notification, endpoint): its attempts, the last answer, when the next attempt is due.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("notification_id", String(64), nullable=False),
    Column("endpoint_id", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_status_code", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("next_attempt_at", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("notification_id", "endpoint_id", name="pk_webhook_deliveries"),
    ForeignKeyConstraint(["notification_id"], ["webhook_notifications.id"], name="fk_deliveries_notification"),
    _one_of("status", WEBHOOK_DELIVERY_STATUSES, "ck_webhook_deliveries_status"),
    Index("ix_webhook_deliveries_status_next", "status", "next_attempt_at"),
    Index("ix_webhook_deliveries_endpoint", "endpoint_id"),
)

# Drift detection (core/drift/, migration 0011). A tenant's policy; no row means DEFAULT_DRIFT_POLICY.
drift_policies = Table(
    "drift_policies",
    metadata,
    Column("tenant_id", String(128), primary_key=True),
    Column("policy", String(16), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    _one_of("policy", DRIFT_POLICIES, "ck_drift_policies_policy"),
)

# One row per swept account: the provider's cursor for the next read-back (NULL: the next one lists everything),
# when the last sweep succeeded, when the next one is due (moved forward when a worker claims it) and the
# failed sweeps in a row.
drift_state = Table(
    "drift_state",
    metadata,
    Column("account_id", String(128), primary_key=True),
    Column("cursor", Text, nullable=True),
    Column("swept_at", UTCDateTime, nullable=True),
    Column("next_sweep_at", UTCDateTime, nullable=False),
    Column("failures", Integer, nullable=False, server_default="0"),
    ForeignKeyConstraint(["account_id"], ["provider_accounts.id"], name="fk_drift_state_account", ondelete="CASCADE"),
    Index("ix_drift_state_next", "next_sweep_at"),
)

# Every drift a sweep found and what was done about it (history: pruned by housekeeping after its retention).
drift_findings = Table(
    "drift_findings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tenant_id", String(128), nullable=False),
    Column("account_id", String(128), nullable=False),
    Column("event_id", String(128), nullable=True),  # None for an unknown_item no target owns
    Column("external_id", String(1024), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("action", String(16), nullable=False),
    Column("found_at", UTCDateTime, nullable=False),
    _one_of("kind", DRIFT_KINDS, "ck_drift_findings_kind"),
    _one_of("action", DRIFT_ACTIONS, "ck_drift_findings_action"),
    Index("ix_drift_findings_tenant", "tenant_id", "id"),
    Index("ix_drift_findings_found", "found_at"),
    Index("ix_drift_findings_event", "tenant_id", "event_id", "id"),  # an event's, on its console page (0014)
)

# The console's operators (core/console/, migration 0013): people, not tenants. A key is stored as its SHA-256 hash
# like an API key; an operator known only through a trusted proxy has none (``key_hash`` NULL).
operators = Table(
    "operators",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(256), nullable=False, unique=True),
    Column("role", String(16), nullable=False),
    Column("key_hash", String(128), nullable=True, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime, nullable=True),
    _one_of("role", OPERATOR_ROLES, "ck_operators_role"),
)

# A signed-in browser: the cookie's SHA-256 hash, the CSRF token its forms carry, and when it was last used (a session
# idle for longer than the console's idle expiry is refused). ``ended_at`` is set by signing out or revoking.
operator_sessions = Table(
    "operator_sessions",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("operator_id", String(64), nullable=False),
    Column("csrf_token", String(128), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
    Column("ended_at", UTCDateTime, nullable=True),
    ForeignKeyConstraint(["operator_id"], ["operators.id"], name="fk_operator_sessions_operator", ondelete="CASCADE"),
    Index("ix_operator_sessions_operator", "operator_id"),
)

# Every operator action (who, when, what, on how many), newest first by id; kept like the other history tables.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    Column("actor", String(256), nullable=False),
    Column("action", String(64), nullable=False),
    Column("subject", String(1024), nullable=False),
    Column("count", Integer, nullable=False),
    Column("detail", JSON, nullable=True),
    Index("ix_audit_log_actor", "actor", "id"),
    Index("ix_audit_log_at", "at"),
    Index("ix_audit_log_subject", "subject", "id"),  # the audit rows about one target (migration 0014)
)
