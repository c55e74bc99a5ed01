"""Filling a PostgreSQL schema migrated by calsync to a given number of events, in bulk (``benchmarks/scale.py``).

Rows are written with ``INSERT ... SELECT`` over ``generate_series`` straight into calsync's tables, in the shapes
its repositories write them; growing from one size to the next inserts only the new rows, so one schema serves
every size. What each size holds, for ``n`` events:

- 10,000 memory accounts of 100 tenants (100 each), written once;
- ``n`` events (2 % cancelled), event ``i`` of tenant ``i % 100``;
- 3 targets per event, in three different accounts of its tenant: the targets of a cancelled event deleted, of
  the others synced except among the first 10,000 events (:data:`OUTSTANDING_EVENTS`), where 1 % are pending
  (due in an hour: nothing overdue) and 0.2 % failed. The outstanding work is the same at every size: a backlog
  follows the rate of changes and the operators, not the history (docs/notes/scale.md);
- ``n / 10`` dead letters of sync jobs (at most 100,000): the first 500 open (5 in each tenant), the others
  replayed or discarded within the retention (housekeeping has nothing to delete);
- ``2 n`` idempotency records (the creates of two of each event's targets), none expired;
- a webhook endpoint per tenant, written once, and ``n / 10`` notifications dispatched an hour ago, each
  with one delivery, delivered except among the first 1,000, where 1 % are pending (due in an hour) and 0.5 %
  failed.

Every table is vacuumed and analyzed afterwards, as autovacuum would leave a table that large: planner
statistics, and a visibility map for index-only scans.
"""

from __future__ import annotations

from sqlalchemy import text

from calsync.core.store.database import Database

TENANTS = 100
ACCOUNTS_PER_TENANT = 100
MAX_DEAD_LETTERS = 100_000
TABLES = (
    "provider_accounts",
    "events",
    "event_targets",
    "dead_letters",
    "idempotency_records",
    "webhook_endpoints",
    "webhook_notifications",
    "webhook_deliveries",
)

OUTSTANDING_EVENTS = 10_000  # the events (and a tenth as many notifications) among which work is outstanding
OPEN_DEAD_LETTERS = 500  # like the outstanding targets, the same at every size

# Which target is pending, failed or synced: by its event's index i and its position k (0..2).
_PENDING = f"(i < {OUTSTANDING_EVENTS} AND (i * 3 + k) % 100 = 7)"  # 300 targets
_FAILED = f"(i < {OUTSTANDING_EVENTS} AND (i * 3 + k) % 500 = 11)"  # 60 targets
_CANCELLED = "(i % 50 = 0)"  # 2 % of events
# Target k of event i: three distinct accounts of the event's tenant.
_ACCOUNT = f"'acc-' || ((i % {TENANTS}) * {ACCOUNTS_PER_TENANT} + (i / {TENANTS} + k * 7) % {ACCOUNTS_PER_TENANT})"

# The create's idempotency key of target k of event i (core/model/payload.py; a backslash keeps text() from
# reading ':x' as a parameter).
_RECORD_KEY = rf"'calendar\:tenant-' || (i % {TENANTS}) || '\:evt-' || i || '\:' || {_ACCOUNT} || '\:create'"

_ACCOUNTS = f"""
INSERT INTO provider_accounts (id, tenant_id, provider, address, credentials, options, status, created_at,
                               updated_at, calendar_key)
SELECT 'acc-' || a, 'tenant-' || (a / {ACCOUNTS_PER_TENANT}), 'memory', 'user' || a || '@example.com', NULL,
       '{{}}'::json, 'active', now(), now(), NULL
FROM generate_series(0, {TENANTS * ACCOUNTS_PER_TENANT - 1}) AS a
"""

_EVENTS = f"""
INSERT INTO events (tenant_id, id, version, title, start_at, end_at, time_zone, all_day, location, description,
                    attendees, send_updates, status, created_at, updated_at)
SELECT 'tenant-' || (i % {TENANTS}), 'evt-' || i, 1 + (i % 3 = 0)::int, 'Meeting ' || i,
       '2026-12-01T09:00:00+00:00', '2026-12-01T10:00:00+00:00', 'UTC', false, NULL, NULL, '[]'::json, 'none',
       CASE WHEN {_CANCELLED} THEN 'cancelled' ELSE 'confirmed' END,
       now() - interval '1 day', now() - interval '1 hour'
FROM generate_series(:start, :stop - 1) AS i
"""

_TARGETS = f"""
INSERT INTO event_targets (tenant_id, event_id, account_id, wanted, wanted_version, synced_version, external_id,
                           external_etag, create_attempted, status, last_error, error_class, due_at, wait_reason,
                           updated_at)
SELECT 'tenant-' || (i % {TENANTS}), 'evt-' || i, {_ACCOUNT},
       CASE WHEN {_CANCELLED} THEN 'absent' ELSE 'present' END, 1 + (i % 3 = 0)::int,
       CASE WHEN {_PENDING} OR {_FAILED} THEN 0 ELSE 1 + (i % 3 = 0)::int END,
       'ext-' || i || '-' || k, 'etag', true, s.status,
       CASE WHEN s.status = 'failed' THEN 'permanent failure' END,
       CASE WHEN s.status = 'failed' THEN 'PermanentError' END,
       CASE WHEN s.status = 'pending' THEN now() + interval '1 hour' END, NULL, now() - interval '1 hour'
FROM generate_series(:start, :stop - 1) AS i CROSS JOIN generate_series(0, 2) AS k
CROSS JOIN LATERAL (SELECT CASE WHEN {_CANCELLED} THEN 'deleted' WHEN {_PENDING} THEN 'pending'
                                WHEN {_FAILED} THEN 'failed' ELSE 'synced' END AS status) AS s
"""

# Dead letter j is about target 0 of event 10 j + (j / 10) % 10 (of every tenant in turn).
_OPEN = f"(j < {OPEN_DEAD_LETTERS})"  # 5 in each tenant (j = 10, 110, 210, 310 and 410 in tenant-1)
_DEAD_LETTERS = f"""
INSERT INTO dead_letters (job_id, job_type, message_id, queue, tenant_id, entity_id, account_id, idempotency_key,
                          trace_id, payload, attempts, reason, error_class, last_error, error_history,
                          first_failed_at, failed_at, status, replayed_at, replay_job_id, discarded_at, note, kind)
SELECT 'job-dl-' || j, 'sync_calendar_event', 'msg-' || j, 'calendar', 'tenant-' || (i % {TENANTS}), 'evt-' || i,
       {_ACCOUNT}, {_RECORD_KEY}, 'trace',
       '{{}}'::json, 5, 'permanent failure', 'PermanentError', 'the provider refused it', '[]'::json,
       now() - interval '2 hours', now() - interval '1 hour',
       CASE WHEN {_OPEN} THEN 'open' WHEN j % 2 = 0 THEN 'replayed' ELSE 'discarded' END,
       CASE WHEN NOT {_OPEN} AND j % 2 = 0 THEN now() - interval '30 minutes' END,
       CASE WHEN NOT {_OPEN} AND j % 2 = 0 THEN 'job-replay-' || j END,
       CASE WHEN NOT {_OPEN} AND j % 2 = 1 THEN now() - interval '30 minutes' END, NULL, 'job'
FROM generate_series(:start, :stop - 1) AS j CROSS JOIN LATERAL (SELECT j * 10 + (j / 10) % 10 AS i, 0 AS k) AS at
"""

_RECORDS = f"""
INSERT INTO idempotency_records (key, job_id, outcome, result, created_at, expires_at)
SELECT {_RECORD_KEY}, 'job-' || i || '-' || k,
       'success', '{{}}'::json, now() - interval '1 hour', now() + interval '1 day'
FROM generate_series(:start, :stop - 1) AS i CROSS JOIN generate_series(0, 1) AS k
"""

_ENDPOINTS = f"""
INSERT INTO webhook_endpoints (id, tenant_id, url, event_types, secrets, status, consecutive_failures, created_at,
                               updated_at)
SELECT 'whe-' || t, 'tenant-' || t, 'https://hooks.example.com/' || t, '[]'::json, decode('00', 'hex'), 'enabled', 0,
       now(), now()
FROM generate_series(0, {TENANTS - 1}) AS t
"""

_NOTIFICATIONS = f"""
INSERT INTO webhook_notifications (id, tenant_id, event_type, payload, created_at, dispatched_at)
SELECT 'whn-' || w, 'tenant-' || (w % {TENANTS}), 'sync.succeeded', '{{}}'::json, now() - interval '1 hour',
       now() - interval '1 hour'
FROM generate_series(:start, :stop - 1) AS w
"""

_DELIVERIES = f"""
INSERT INTO webhook_deliveries (notification_id, endpoint_id, status, attempts, last_status_code, last_error,
                                next_attempt_at, created_at, updated_at)
SELECT 'whn-' || w, 'whe-' || (w % {TENANTS}), s.status, 1, CASE WHEN s.status = 'delivered' THEN 200 ELSE 500 END,
       NULL, CASE WHEN s.status = 'pending' THEN now() + interval '1 hour' END, now() - interval '1 hour',
       now() - interval '1 hour'
FROM generate_series(:start, :stop - 1) AS w
CROSS JOIN LATERAL (SELECT CASE WHEN w >= {OUTSTANDING_EVENTS // 10} THEN 'delivered' WHEN w % 100 = 3 THEN 'pending'
                                WHEN w % 200 = 5 THEN 'failed' ELSE 'delivered' END AS status) AS s
"""


def dead_letters_for(events: int) -> int:
    """How many dead letters a fill of ``events`` events holds."""
    return min(events // 10, MAX_DEAD_LETTERS)


def fill(db: Database, *, have: int, want: int) -> None:
    """Grow a schema holding ``have`` events (0: empty, no accounts yet) to ``want``, then vacuum and analyze."""
    with db.write() as conn:
        if have == 0:
            conn.execute(text(_ACCOUNTS))
            conn.execute(text(_ENDPOINTS))
        span = {"start": have, "stop": want}
        conn.execute(text(_EVENTS), span)
        conn.execute(text(_TARGETS), span)
        conn.execute(text(_RECORDS), span)
        tenth = {"start": have // 10, "stop": want // 10}
        conn.execute(text(_DEAD_LETTERS), {"start": dead_letters_for(have), "stop": dead_letters_for(want)})
        conn.execute(text(_NOTIFICATIONS), tenth)
        conn.execute(text(_DELIVERIES), tenth)
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in TABLES:
            conn.execute(text(f"VACUUM ANALYZE {table}"))
