"""One bounded housekeeping pass: delete what has outlived its retention, a batch per transaction.

What goes (docs/RUNBOOK.md §Housekeeping):

- idempotency records past their expiry (``IDEMPOTENCY_TTL`` after they were written);
- request keys past their expiry (``REQUEST_KEY_TTL``);
- dead letters replayed or discarded more than ``DEAD_LETTER_RETENTION`` seconds ago (open ones never);
- cancelled events removed everywhere, unchanged for ``CANCELLED_EVENT_RETENTION`` seconds, with their
  targets and idempotency records (core/store/cancelled_events.py);
- webhook notifications whose every delivery is finished and no open dead letter names, unchanged for
  ``WEBHOOK_RETENTION`` seconds, with their deliveries (core/store/finished_notifications.py);
- drift findings found more than ``DRIFT_FINDING_RETENTION`` seconds ago;
- console sessions ended, or idle, for more than :data:`SESSION_RETENTION` (a week: longer than the longest idle
  expiry the console allows, so no live session goes);
- accounts being removed (``accounts remove --detach``) once every target is deleted and none changed for
  ``DELETE_VERIFY_DELAY``, with their targets (core/store/account_removal.py), each in its own transaction.

Each table is deleted from in batches of ``MAINTENANCE_BATCH`` rows, each batch its own short
transaction (no long lock on the tables the jobs write), until a batch comes back short, the pass
ran ``MAINTENANCE_MAX_BATCHES`` batches of that table, or its time budget is spent. In the last two
cases the pass is *behind*: more was due than it could delete, and the next pass goes on.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Column, ColumnElement, Connection, Table, and_, delete, func, select, tuple_
from sqlalchemy.exc import IntegrityError

from calsync.core.config.housekeeping import KEEP_FOREVER, HousekeepingSettings
from calsync.core.model.vocabulary import PrunedTable
from calsync.core.store import account_removal, cancelled_events, finished_notifications
from calsync.core.store.database import Database
from calsync.core.store.schema import dead_letters as d
from calsync.core.store.schema import drift_findings as f
from calsync.core.store.schema import idempotency_records as r
from calsync.core.store.schema import intake_requests as q
from calsync.core.store.schema import operator_sessions as o

log = logging.getLogger(__name__)

SESSION_RETENTION = 8 * 86400.0  # seconds; CALSYNC_CONSOLE_SESSION_IDLE_SECONDS is at most 7 days


class Retention(BaseModel, frozen=True, populate_by_name=True):
    """How much one pass may delete, and how long resolved dead letters, cancelled events and webhooks are kept: read
    from the settings named by each field's alias (:meth:`of`)."""

    batch: int = Field(validation_alias="maintenance_batch")
    max_batches: int = Field(validation_alias="maintenance_max_batches")
    # Seconds after being resolved; 0 keeps them.
    dead_letters: float = Field(validation_alias="dead_letter_retention")
    # Seconds after the last change; 0 keeps them.
    cancelled_events: float = Field(validation_alias="cancelled_event_retention")
    # Finished notifications, seconds after the last change; 0 keeps them.
    webhooks: float = Field(KEEP_FOREVER, validation_alias="webhook_retention")
    # Seconds a removed account's targets stay unchanged before it goes.
    removal_quiet: float = Field(0, validation_alias="delete_verify_delay")
    # Seconds after being found; 0 keeps them.
    drift_findings: float = Field(KEEP_FOREVER, validation_alias="drift_finding_retention")

    @classmethod
    def of(cls, settings: HousekeepingSettings) -> Retention:
        """The retention the settings ask for."""
        return cls.model_validate(settings, from_attributes=True)


@dataclass
class PruneReport:
    """Rows one pass deleted, by table, and whether it deleted everything that was due."""

    purged: Counter[PrunedTable] = field(default_factory=Counter)
    caught_up: bool = True


# One batch of a table's pruning, ``(conn, limit, *, before)`` in the caller's transaction: the rows it deleted
# (of that table, or by table).
Batch = Callable[..., int | Mapping[PrunedTable, int]]


def _rows_due(table: Table, due: Callable[[dt.datetime], ColumnElement[bool]], *order: Column[Any]) -> Batch:
    """The batch deleting up to ``limit`` rows of ``table`` due before ``before`` (``due`` of it holds), picked by
    primary key (in ``order`` when given)."""
    key = tuple(table.primary_key)

    def batch(conn: Connection, limit: int, *, before: dt.datetime) -> int:
        picked = select(*key).where(due(before)).order_by(*order).limit(limit)
        return int(conn.execute(delete(table).where(tuple_(*key).in_(picked))).rowcount)

    return batch


def _resolved(before: dt.datetime) -> ColumnElement[bool]:
    # Replayed or discarded before then: failed_at precedes the resolution, and lets the (status, failed_at) index
    # narrow the scan.
    resolved_at = func.coalesce(d.c.replayed_at, d.c.discarded_at)
    return and_(d.c.status.in_(("replayed", "discarded")), d.c.failed_at < before, resolved_at < before)


def prune(
    db: Database, retention: Retention, *, now: dt.datetime | None = None, budget_seconds: float | None = None
) -> PruneReport:
    """One housekeeping pass over every table (at most ``budget_seconds`` of batches after the first of each)."""
    now = now or dt.datetime.now(dt.UTC)
    deadline = time.monotonic() + budget_seconds if budget_seconds is not None else None
    report = PruneReport()

    def repeat(table: PrunedTable, batch: Batch, before: dt.datetime) -> None:
        # ``batch`` of the rows due before ``before`` (each one its own transaction) until one comes back short of
        # ``table``'s rows.
        for _ in range(retention.max_batches):
            with db.write() as conn:
                deleted = batch(conn, retention.batch, before=before)
            counts = deleted if isinstance(deleted, Mapping) else {table: deleted}
            for name, rows in counts.items():
                report.purged[name] += rows
            if counts[table] < retention.batch:
                return
            if deadline is not None and time.monotonic() >= deadline:
                break
        report.caught_up = False

    # Past their expiry (their TTL after being written).
    repeat("idempotency_records", _rows_due(r, lambda before: r.c.expires_at <= before), now)
    repeat("intake_requests", _rows_due(q, lambda before: q.c.expires_at <= before), now)
    aged: dict[PrunedTable, tuple[float, Batch]] = {  # retention in seconds (KEEP_FOREVER keeps them), batch
        "dead_letters": (retention.dead_letters, _rows_due(d, _resolved)),
        "events": (retention.cancelled_events, cancelled_events.prune_cancelled),
        "webhook_notifications": (retention.webhooks, finished_notifications.prune_finished),
        "drift_findings": (retention.drift_findings, _rows_due(f, lambda before: f.c.found_at < before, f.c.found_at)),
        # Last used before then, ended or not: a few per operator and day, so the table stays small and is read
        # whole without an index.
        "operator_sessions": (SESSION_RETENTION, _rows_due(o, lambda before: o.c.last_seen_at < before)),
    }
    for table, (seconds, batch) in aged.items():
        if seconds != KEEP_FOREVER:
            repeat(table, batch, now - dt.timedelta(seconds=seconds))
    report.purged["provider_accounts"] += _remove_accounts(db, retention, now, report)
    return report


def _remove_accounts(db: Database, retention: Retention, now: dt.datetime, report: PruneReport) -> int:
    # One transaction per account: a change that raced the removal fails only its own account's, until next pass.
    quiet_since = now - dt.timedelta(seconds=retention.removal_quiet)
    with db.read() as conn:
        candidates = account_removal.removable(conn, quiet_since=quiet_since, limit=retention.batch)
    removed = 0
    for account_id in candidates:
        try:
            with db.write() as conn:
                removed += account_removal.remove_if_done(conn, account_id, quiet_since=quiet_since)
        except IntegrityError:
            log.warning("account removal raced a change; the next pass tries again", extra={"fields": {
                "account_id": account_id}})  # fmt: skip
    if len(candidates) == retention.batch:
        report.caught_up = False
    return removed
