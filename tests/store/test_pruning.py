"""The housekeeping pass on both backends: what goes after its retention, what stays, and the batch bounds."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, insert, select

from calsync.core.model.change import EventFields
from calsync.core.model.payload import idempotency_key
from calsync.core.store import accounts, dead_letters, events, idempotency, intake_requests, targets
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.schema import dead_letters as dead_letters_table
from calsync.core.store.schema import event_targets, idempotency_records, operator_sessions, operators
from calsync.core.store.schema import events as events_table
from calsync.core.store.schema import intake_requests as intake_requests_table
from calsync.core.store.targets import TargetKey
from tests.support import dead_letter_of_job, plan_target

pytestmark = pytest.mark.both_databases

DAY = 86400.0
RETENTION = Retention(batch=100, max_batches=10, dead_letters=30 * DAY, cancelled_events=7 * DAY)
FIELDS = EventFields(title="x", start=dt.datetime(2026, 1, 1, 9, tzinfo=dt.UTC),
                     end=dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC))  # fmt: skip


def utcnow() -> dt.datetime:
    """Aware now."""
    return dt.datetime.now(dt.UTC)


def account(db: Database, name: str) -> str:
    """A memory account of tenant ``t``."""
    with db.write() as conn:
        return accounts.add_account(conn, tenant_id="t", provider="memory", address=f"{name}@example.com",
                                    credentials=None, options={}, account_id=name).id  # fmt: skip


def synced(db: Database, key: TargetKey, version: int, *, final: str = "synced", op: str = "create") -> None:
    """What a worker commits after a provider call: the target's result and the idempotency record."""
    with db.write() as tx:
        targets.record_synced(tx, key, version=version, external_id=f"x-{key.account_id}", etag=None,
                              final_status=final)  # type: ignore[arg-type]  # fmt: skip
        record = idempotency_key(*key, op, version)  # type: ignore[arg-type]
        idempotency.record_success(tx, record, job_id=f"job-{record}", result={}, ttl_seconds=86400)


def event(db: Database, event_id: str, accounts_: list[str]) -> list[TargetKey]:
    """An event created in ``accounts_`` and synced there at version 1."""
    keys = [TargetKey("t", event_id, a) for a in accounts_]
    with db.write() as conn:
        events.insert_event(conn, "t", event_id, FIELDS, "none")
        for key in keys:
            plan_target(conn, key, wanted="present", version=1, due_at=utcnow())
    for key in keys:
        synced(db, key, 1)
    return keys


def cancel(db: Database, keys: list[TargetKey], *, delete: list[TargetKey] | None = None) -> None:
    """Cancel the event (version 2) and record the deletes of ``delete`` (default: every target)."""
    with db.write() as conn:
        events.bump_event(conn, "t", keys[0].event_id, status="cancelled", send_updates="none")
        for key in keys:
            plan_target(conn, key, wanted="present", version=2, due_at=utcnow())
    for key in keys if delete is None else delete:
        synced(db, key, 2, final="deleted", op="delete")


def counts(db: Database) -> dict[str, int]:
    """Rows per table."""
    with db.read() as conn:
        return {table.name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
                for table in (events_table, event_targets, idempotency_records, dead_letters_table)}  # fmt: skip


def record_keys(db: Database) -> set[str]:
    """Every idempotency record's key."""
    with db.read() as conn:
        return set(conn.execute(select(idempotency_records.c.key)).scalars())


def test_a_cancelled_event_removed_everywhere_goes_after_retention_with_its_targets_and_records(db: Database) -> None:
    a, b = account(db, "a"), account(db, "b")
    gone = event(db, "e1", [a, b])
    cancel(db, gone)
    event(db, "e10", [a])  # an id that the other's key prefix would match
    with db.read() as conn:
        assert targets.all_deleted(conn, "t", "e1", lock=False)
        assert not targets.all_deleted(conn, "t", "e10", lock=False)

    early = prune(db, RETENTION, now=utcnow() + dt.timedelta(days=6))
    assert early.purged.get("events") == 0 and counts(db)["events"] == 2

    report = prune(db, RETENTION, now=utcnow() + dt.timedelta(days=7, seconds=1))
    assert (report.purged["events"], report.purged["event_targets"]) == (1, 2)
    assert counts(db)["events"] == 1 and counts(db)["event_targets"] == 1
    assert report.caught_up and record_keys(db) == set()  # a week on, every record (TTL a day) had expired


def test_records_of_a_pruned_event_go_even_before_they_expire(db: Database) -> None:
    a = account(db, "a")
    keys = event(db, "e1", [a])
    cancel(db, keys)
    event(db, "e10", [a])
    with db.write() as conn:  # the event and its target last changed 8 days ago; the records are fresh
        conn.execute(events_table.update().values(updated_at=utcnow() - dt.timedelta(days=8)))
        conn.execute(event_targets.update().values(updated_at=utcnow() - dt.timedelta(days=8)))

    report = prune(db, RETENTION)
    assert (report.purged["events"], report.purged["idempotency_records"]) == (1, 2)
    assert record_keys(db) == {idempotency_key("t", "e10", a, "create", 1)}


def test_what_may_still_be_live_or_changed_recently_is_kept(db: Database) -> None:
    a, b = account(db, "a"), account(db, "b")
    failed = event(db, "failed", [a, b])
    cancel(db, failed, delete=[failed[0]])
    with db.write() as conn:
        targets.record_failed(conn, failed[1], version=2, error_class="ProviderUnavailable", message="down")
    event(db, "confirmed", [a])
    recent = event(db, "recent", [a])
    cancel(db, recent)
    with db.write() as conn:  # all but "recent" last changed 8 days ago
        for table, column in ((events_table, events_table.c.id), (event_targets, event_targets.c.event_id)):
            conn.execute(table.update().where(column != "recent").values(updated_at=utcnow() - dt.timedelta(days=8)))

    report = prune(db, RETENTION)
    assert report.purged["events"] == 0
    assert counts(db)["events"] == 3 and counts(db)["event_targets"] == 4


def test_an_event_cancelled_without_targets_is_pruned_too(db: Database) -> None:
    with db.write() as conn:
        events.insert_event(conn, "t", "bare", FIELDS, "none")
        events.bump_event(conn, "t", "bare", status="cancelled", send_updates="none")
        assert targets.all_deleted(conn, "t", "bare", lock=False)
    assert prune(db, RETENTION, now=utcnow() + dt.timedelta(days=8)).purged["events"] == 1


def _dead_letter(db: Database, job_id: str) -> int:
    now = utcnow()
    record = DeadLetterRecord(job_id=job_id, job_type="sync_calendar_event", message_id=None, queue="calendar",
                              tenant_id="t", entity_id="e", account_id="a", idempotency_key=None, trace_id=None,
                              payload={}, attempts=1, reason="permanent failure", error_class="X", last_error="x",
                              error_history=[], first_failed_at=now, failed_at=now)  # fmt: skip
    with db.write() as conn:
        dead_letters.insert(db, conn, record)
        found = dead_letter_of_job(conn, job_id)
    assert found is not None
    return found.id


def test_resolved_dead_letters_go_after_retention_open_ones_never(db: Database) -> None:
    replayed, discarded, still_open = (_dead_letter(db, j) for j in ("replayed", "discarded", "open"))
    with db.write() as conn:
        dead_letters.mark_replayed(conn, replayed, replay_job_id="job-2")
        dead_letters.mark_discarded(conn, discarded, note=None)

    assert prune(db, RETENTION, now=utcnow() + dt.timedelta(days=29)).purged["dead_letters"] == 0
    assert prune(db, RETENTION, now=utcnow() + dt.timedelta(days=31)).purged["dead_letters"] == 2
    with db.read() as conn:
        assert [r.id for r in dead_letters.find(conn, dead_letters.DeadLetterFilter(status=None))] == [still_open]

    keep = Retention(batch=100, max_batches=10, dead_letters=0, cancelled_events=0)
    assert "dead_letters" not in prune(db, keep, now=utcnow() + dt.timedelta(days=999)).purged


def test_a_pass_deletes_at_most_batch_times_max_batches_and_says_it_is_behind(db: Database) -> None:
    with db.write() as tx:
        for n in range(10):
            idempotency.record_success(tx, f"calendar:t:e{n}:a:create", job_id=f"j{n}", result={}, ttl_seconds=1)
    small = Retention(batch=3, max_batches=2, dead_letters=0, cancelled_events=0)
    later = utcnow() + dt.timedelta(seconds=2)

    first = prune(db, small, now=later)
    assert (first.purged["idempotency_records"], first.caught_up) == (6, False)
    second = prune(db, small, now=later)
    assert (second.purged["idempotency_records"], second.caught_up) == (4, True)
    assert counts(db)["idempotency_records"] == 0


def test_console_sessions_unused_for_longer_than_any_idle_expiry_go_live_ones_stay(db: Database) -> None:
    now = dt.datetime.now(dt.UTC)
    with db.write() as conn:
        conn.execute(insert(operators).values(id="op-1", name="ann", role="viewer", created_at=now))
        for sid, days in (("old", 9), ("ended-old", 9), ("week", 7), ("today", 0)):
            seen = now - dt.timedelta(days=days)
            ended = seen if sid.startswith("ended") else None
            row = {"operator_id": "op-1", "csrf_token": "t", "created_at": seen, "last_seen_at": seen}
            conn.execute(insert(operator_sessions).values(id=sid, ended_at=ended, **row))
    report = prune(db, RETENTION, now=now)
    with db.read() as conn:
        left = set(conn.execute(select(operator_sessions.c.id)).scalars())
    assert left == {"week", "today"}  # 7 days is the longest idle expiry the console allows
    assert report.purged["operator_sessions"] == 2


def test_expired_request_keys_go_in_batches_live_ones_stay(db: Database) -> None:
    with db.write() as conn:
        for n in range(5):
            intake_requests.claim(conn, "t", f"old-{n}", body_hash="h", entity_id=f"e{n}", version=1, ttl=1)
        intake_requests.claim(conn, "t", "live", body_hash="h", entity_id="e", version=1, ttl=86400)
    small = Retention(batch=3, max_batches=1, dead_letters=0, cancelled_events=0)
    later = utcnow() + dt.timedelta(seconds=2)

    first = prune(db, small, now=later)
    assert (first.purged["intake_requests"], first.caught_up) == (3, False)
    assert prune(db, small, now=later).purged["intake_requests"] == 2
    with db.read() as conn:
        assert intake_requests.find(conn, "t", "live") is not None
        assert conn.execute(select(func.count()).select_from(intake_requests_table)).scalar_one() == 1
