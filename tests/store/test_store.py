"""The store on both backends: migrations match the schema, and the guarantees the SQL encodes."""

from __future__ import annotations

import datetime as dt

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from calsync.core.model.change import EventFields
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.store import accounts, dead_letters, events, idempotency, migrate, targets
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.store.schema import POSTGRESQL_ONLY_INDEXES, metadata
from calsync.core.store.targets import TargetKey
from tests.support import plan_target

pytestmark = pytest.mark.both_databases


def _target(db: Database) -> TargetKey:
    with db.write() as conn:
        account = accounts.add_account(conn, tenant_id="t", provider="memory", address="a@b.c", credentials=None,
                                       options={})  # fmt: skip
        fields = EventFields(title="x", start=dt.datetime(2026, 1, 1, 9, tzinfo=dt.UTC),
                             end=dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC))  # fmt: skip
        events.insert_event(conn, "t", "e1", fields, "none")
        key = TargetKey("t", "e1", account.id)
        plan_target(conn, key, wanted="present", version=1, due_at=dt.datetime.now(dt.UTC))
    return key


def _declared(_item: object, name: str | None, kind: str, _reflected: bool, _other: object) -> bool:
    return not (kind == "index" and name in POSTGRESQL_ONLY_INDEXES)


def test_migrations_create_exactly_the_declared_schema(db: Database) -> None:
    with db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": _declared})
        assert compare_metadata(context, metadata) == []
    assert migrate.current_revision(db) == migrate.known_revisions()[-1]


def test_synced_version_only_grows(db: Database) -> None:
    key = _target(db)
    with db.write() as conn:
        plan_target(conn, key, wanted="present", version=3, due_at=dt.datetime.now(dt.UTC))
    with db.write() as tx:
        assert targets.record_synced(tx, key, version=3, external_id="x3", etag="e3", final_status="synced")
        assert not targets.record_synced(tx, key, version=2, external_id="x2", etag="e2", final_status="synced")
        assert not targets.record_synced(tx, key, version=3, external_id="x3", etag="e4", final_status="synced")
    with db.read() as conn:
        row = targets.get_target(conn, key)
    assert row is not None and (row.synced_version, row.external_id, row.external_etag) == (3, "x3", "e3")
    assert row.status == "synced" and row.due_at is None


def test_a_sync_of_an_older_version_leaves_the_target_pending(db: Database) -> None:
    key = _target(db)
    with db.write() as conn:
        plan_target(conn, key, wanted="present", version=2, due_at=dt.datetime.now(dt.UTC))
    with db.write() as tx:
        assert targets.record_synced(tx, key, version=1, external_id="x1", etag="e1", final_status="synced")
    with db.read() as conn:
        row = targets.get_target(conn, key)
    assert row is not None and (row.status, row.synced_version) == ("pending", 1) and row.due_at is not None


def test_dates_come_back_as_aware_utc(db: Database) -> None:
    key = _target(db)
    with db.read() as conn:
        row = targets.get_target(conn, key)
        oldest = targets.oldest_pending_due(conn)
    assert row is not None and row.updated_at.tzinfo is not None and oldest is not None and oldest.tzinfo is not None


def test_idempotency_records_tolerate_duplicates(db: Database) -> None:
    with db.write() as tx:
        idempotency.record_success(tx, "k", job_id="a", result={"n": 1}, ttl_seconds=60)
        idempotency.record_success(tx, "k", job_id="b", result={"n": 2}, ttl_seconds=60)
    with db.read() as conn:
        assert idempotency.succeeded(conn, "k") and not idempotency.succeeded(conn, "other")


def test_dead_letters_are_one_per_job(db: Database) -> None:
    now = dt.datetime.now(dt.UTC)
    record = DeadLetterRecord(
        job_id="job_1", job_type="sync_calendar_event", message_id=None, queue=None, tenant_id=None, entity_id=None,
        account_id=None, idempotency_key=None, trace_id=None, payload={"a": 1}, attempts=1, reason="forbidden",
        error_class="Forbidden", last_error="no", error_history=[], first_failed_at=now, failed_at=now,
    )  # fmt: skip
    with db.write() as conn:
        dead_letters.insert(db, conn, record)
        dead_letters.insert(db, conn, record)  # a duplicate delivery failing again
        [stored] = dead_letters.find(conn, dead_letters.DeadLetterFilter())
        assert stored.cause is DeadLetterCause.PERMANENT and stored.job_id == record.job_id
        assert dead_letters.open_counts(conn) == {("sync_calendar_event", "forbidden"): 1}
        assert dead_letters.mark_discarded(conn, stored.id, note="n") and not dead_letters.mark_discarded(
            conn, stored.id, note="again")  # fmt: skip


def test_account_updates_and_status(db: Database) -> None:
    with db.write() as conn:
        summary = accounts.add_account(conn, tenant_id="t", provider="memory", address="a@b.c", credentials=None,
                                       options={"x": 1})  # fmt: skip
        updated = accounts.update_account(conn, summary.id, status="needs_reauth")
    assert updated.status == "needs_reauth" and updated.options == {"x": 1}
