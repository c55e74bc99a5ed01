"""The housekeeping pass over the webhook outbox, on both backends: finished notifications go after their
retention with their deliveries; pending, dead-lettered (while open), undispatched and young ones stay."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import func, select

from calsync.core.store import dead_letters
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.schema import webhook_deliveries as deliveries_table
from calsync.core.store.schema import webhook_notifications as notifications_table
from calsync.core.webhooks import store
from tests.support import dead_letter_of_job

pytestmark = pytest.mark.both_databases

DAY = 86400.0
RETENTION = Retention(batch=100, max_batches=10, dead_letters=0, cancelled_events=0, webhooks=7 * DAY)


def utcnow() -> dt.datetime:
    """Aware now."""
    return dt.datetime.now(dt.UTC)


def later(days: float) -> dt.datetime:
    """The pass's ``now``, ``days`` from now."""
    return utcnow() + dt.timedelta(days=days)


def notification(db: Database, nid: str, endpoints: list[str] | None) -> None:
    """A recorded notification, dispatched to ``endpoints`` (None: not dispatched yet)."""
    payload: dict[str, Any] = {"type": "sync.succeeded", "data": {"tenant_id": "t"}}
    with db.write() as conn:
        store.record_notification(conn, nid, "t", "sync.succeeded", payload)
        if endpoints is not None:
            assert store.claim_dispatch(conn, nid)
            store.create_deliveries(conn, nid, endpoints)


def attempt(db: Database, nid: str, endpoint: str, status: str) -> None:
    """One attempt of a pending delivery that ended ``status``."""
    with db.write() as conn:
        assert store.record_attempt(conn, nid, endpoint, status=status, status_code=200,  # type: ignore[arg-type]
                                                 error=None, next_attempt_at=None)  # fmt: skip


def dead_letter(db: Database, nid: str, endpoint: str) -> int:
    """What the deliverer records when a delivery fails for good: the failed row and an open webhook dead letter."""
    attempt(db, nid, endpoint, "failed")
    now = utcnow()
    record = DeadLetterRecord(job_id=f"whd-{nid}-{endpoint}", job_type="deliver_webhook", message_id=None,
                              queue="webhooks", tenant_id="t", entity_id=None, account_id=None, idempotency_key=None,
                              trace_id=None, payload={"notification_id": nid, "endpoint_id": endpoint, "status": 410},
                              attempts=1, reason="webhook answer refused", error_class="HTTP", last_error="HTTP 410",
                              error_history=[], first_failed_at=now, failed_at=now, kind="webhook")  # fmt: skip
    with db.write() as conn:
        dead_letters.insert(db, conn, record)
        found = dead_letter_of_job(conn, record.job_id)
    assert found is not None
    return found.id


def left(db: Database) -> tuple[set[str], int]:
    """The notifications left, and how many deliveries."""
    with db.read() as conn:
        ids = set(conn.execute(select(notifications_table.c.id)).scalars())
        return ids, int(conn.execute(select(func.count()).select_from(deliveries_table)).scalar_one())


def test_a_finished_notification_goes_after_retention_with_its_deliveries(db: Database) -> None:
    notification(db, "done", ["e1", "e2"])
    attempt(db, "done", "e1", "delivered")
    dead_letter(db, "done", "e2")
    with db.write() as conn:  # its dead letter was discarded: nothing will replay it
        dead_letters.mark_discarded(conn, dead_letter_of_job(conn, "whd-done-e2").id, note=None)  # type: ignore[union-attr]
    notification(db, "nobody", [])  # dispatched when no endpoint wanted it

    early = prune(db, RETENTION, now=later(6.9))
    assert early.purged["webhook_notifications"] == 0 and left(db) == ({"done", "nobody"}, 2)

    report = prune(db, RETENTION, now=later(7.1))
    assert (report.purged["webhook_notifications"], report.purged["webhook_deliveries"]) == (2, 2)
    assert report.caught_up and left(db) == (set(), 0)


def test_what_may_still_be_sent_or_replayed_or_changed_recently_is_kept(db: Database) -> None:
    notification(db, "pending", ["e1", "e2"])
    attempt(db, "pending", "e1", "delivered")  # e2 is still to be delivered
    notification(db, "open", ["e1"])
    dead_letter(db, "open", "e1")  # `calsync dlq replay` makes this row pending again
    notification(db, "undispatched", None)
    notification(db, "young", ["e1"])
    notification(db, "gone", ["e1"])
    attempt(db, "gone", "e1", "delivered")
    with db.write() as conn:  # all dispatched 8 days ago; "young" finished its delivery just now
        conn.execute(notifications_table.update().values(created_at=utcnow() - dt.timedelta(days=8)))
        conn.execute(notifications_table.update().where(notifications_table.c.dispatched_at.is_not(None))
                     .values(dispatched_at=utcnow() - dt.timedelta(days=8)))  # fmt: skip
        conn.execute(deliveries_table.update().values(updated_at=utcnow() - dt.timedelta(days=8)))
    attempt(db, "young", "e1", "delivered")
    with db.write() as conn:  # a webhook dead letter naming no notification blocks nothing else
        dead_letters.insert(db, conn, DeadLetterRecord(
            job_id="odd", job_type="deliver_webhook", message_id=None, queue="webhooks", tenant_id="t",
            entity_id=None, account_id=None, idempotency_key=None, trace_id=None, payload={}, attempts=1,
            reason="x", error_class="X", last_error="x", error_history=[], first_failed_at=utcnow(),
            failed_at=utcnow(), kind="webhook"))  # fmt: skip

    report = prune(db, RETENTION)
    assert (report.purged["webhook_notifications"], report.purged["webhook_deliveries"]) == (1, 1)
    assert left(db) == ({"pending", "open", "undispatched", "young"}, 4)
    assert prune(db, RETENTION, now=later(999)).purged["webhook_notifications"] == 1  # "young" is old now
    assert left(db) == ({"pending", "open", "undispatched"}, 3)


def test_a_replayed_dead_letter_keeps_its_delivery_until_it_finishes_again(db: Database) -> None:
    notification(db, "n", ["e1"])
    record = dead_letter(db, "n", "e1")
    assert prune(db, RETENTION, now=later(8)).purged["webhook_notifications"] == 0

    with db.write() as conn:  # what `calsync dlq replay` does in one transaction
        assert dead_letters.mark_replayed(conn, record, replay_job_id="whd-2")
        assert store.reopen_delivery(conn, "n", "e1")
    assert prune(db, RETENTION, now=later(8)).purged["webhook_notifications"] == 0  # pending again

    attempt(db, "n", "e1", "delivered")
    assert prune(db, RETENTION, now=later(8)).purged["webhook_notifications"] == 1
    assert left(db) == (set(), 0)


def test_a_pass_prunes_at_most_batch_times_max_batches_notifications_and_a_retention_of_0_keeps_them(
    db: Database,
) -> None:
    for n in range(10):
        notification(db, f"n{n}", ["e1", "e2"])
        attempt(db, f"n{n}", "e1", "delivered")
        attempt(db, f"n{n}", "e2", "delivered")
    keep = Retention(batch=3, max_batches=2, dead_letters=0, cancelled_events=0)
    assert "webhook_notifications" not in prune(db, keep, now=later(999)).purged
    small = Retention(batch=3, max_batches=2, dead_letters=0, cancelled_events=0, webhooks=7 * DAY)

    for expected in ((6, 12, False), (4, 8, True)):
        got = prune(db, small, now=later(8))
        assert (got.purged["webhook_notifications"], got.purged["webhook_deliveries"], got.caught_up) == expected
    assert left(db) == (set(), 0)
